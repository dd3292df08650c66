//! `GET /api/v1/sessions/{id}`, `POST .../prompt` · `/cancel` · `/stop`, `GET .../messages`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::ApiJson;
use crate::http::error::AppError;
use crate::model::Session;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sessions/{id}", get(get_one))
        .route("/sessions/{id}/prompt", post(prompt))
        .route("/sessions/{id}/cancel", post(cancel))
        .route("/sessions/{id}/stop", post(stop))
        .route("/sessions/{id}/messages", get(list_messages))
}

async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Session>, AppError> {
    state
        .stores
        .session_view(&id)
        .await?
        .map(Json)
        .ok_or_else(|| AppError::not_found(format!("no session `{id}`")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptBody {
    text: String,
}

fn accepted() -> (StatusCode, Json<Value>) {
    (StatusCode::ACCEPTED, Json(json!({"status": "accepted"})))
}

async fn prompt(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PromptBody>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    if body.text.trim().is_empty() {
        return Err(AppError::BadRequest("`text` must not be empty".into()));
    }
    state.sessions.prompt(&id, &body.text).await?;
    Ok(accepted())
}

async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    state.sessions.cancel(&id).await?;
    Ok(accepted())
}

async fn stop(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    state.sessions.stop(&id).await?;
    Ok(accepted())
}

async fn list_messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    if state.stores.sessions.session(&id).await?.is_none() {
        return Err(AppError::not_found(format!("no session `{id}`")));
    }
    let all = state.stores.messages.messages(&id).await?;
    Ok(Json(json!({ "messages": all })))
}
