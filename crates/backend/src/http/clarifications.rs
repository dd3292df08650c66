//! `GET /api/v1/clarifications?session_id=&status=`, `GET /api/v1/clarifications/{pending_id}`,
//! `POST /api/v1/clarifications/{pending_id}/respond`.

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::clarifications::store::{self, Clarification, ClarificationStatus};
use crate::clarifications::{RespondBody, respond};
use crate::error::{AppError, Origin};
use crate::http::ApiJson;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/clarifications", get(list))
        .route("/clarifications/{pending_id}", get(get_one))
        .route("/clarifications/{pending_id}/respond", post(respond_route))
}

#[derive(Debug, Deserialize)]
struct Filter {
    session_id: Option<String>,
    status: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    query: Result<Query<Filter>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, AppError> {
    let Query(filter) = query?;
    let status = match filter.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(ClarificationStatus::parse(s).ok_or_else(|| {
            AppError::BadRequest(format!(
                "unknown status `{s}`; use pending, answered, declined, cancelled, expired or agent_disconnected"
            ))
        })?),
    };
    let session_id = filter.session_id.as_deref().filter(|s| !s.is_empty());
    let rows = store::list(&state.db, session_id, status).await?;
    let records: Vec<Clarification> = rows.into_iter().map(Clarification::from).collect();
    Ok(Json(json!({ "clarifications": records })))
}

async fn get_one(
    State(state): State<AppState>,
    Path(pending_id): Path<String>,
) -> Result<Json<Clarification>, AppError> {
    store::get(&state.db, &pending_id)
        .await?
        .map(|row| Json(Clarification::from(row)))
        .ok_or_else(|| AppError::NotFound {
            message: format!("no clarification `{pending_id}`"),
            origin: Some(Origin::Backend),
        })
}

async fn respond_route(
    State(state): State<AppState>,
    Path(pending_id): Path<String>,
    ApiJson(body): ApiJson<RespondBody>,
) -> Result<Json<Value>, AppError> {
    let status = respond(&state.runtime, &pending_id, body).await?;
    Ok(Json(json!({ "status": status })))
}
