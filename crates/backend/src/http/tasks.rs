//! `POST /api/v1/tasks`, `GET /api/v1/tasks`, `GET /api/v1/tasks/{id}`,
//! `POST /api/v1/tasks/{id}/sessions`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::AppError;
use crate::events::TASK_CREATED;
use crate::http::ApiJson;
use crate::sessions::Session;
use crate::state::AppState;
use crate::tasks::{self, TaskView};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/tasks", post(create).get(list))
        .route("/tasks/{id}", get(get_one))
        .route("/tasks/{id}/sessions", post(start_session))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTask {
    title: String,
    #[serde(default)]
    description: String,
}

async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewTask>,
) -> Result<(StatusCode, Json<TaskView>), AppError> {
    let title = body.title.trim();
    if title.is_empty() {
        return Err(AppError::BadRequest("`title` must not be empty".into()));
    }
    let task = tasks::create(&state.db, title, &body.description).await?;
    let view = tasks::view(&state.db, task).await?;
    state.hub.publish(TASK_CREATED, &view);
    Ok((StatusCode::CREATED, Json(view)))
}

async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let mut views = Vec::new();
    for task in tasks::list(&state.db).await? {
        views.push(tasks::view(&state.db, task).await?);
    }
    Ok(Json(json!({ "tasks": views })))
}

async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, AppError> {
    let task = tasks::get(&state.db, &id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("no task `{id}`")))?;
    Ok(Json(tasks::view(&state.db, task).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSession {
    agent: String,
    #[serde(default)]
    prompt: Option<String>,
}

async fn start_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NewSession>,
) -> Result<(StatusCode, Json<Session>), AppError> {
    let task = tasks::get(&state.db, &id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("no task `{id}`")))?;
    let session = state
        .runtime
        .start_session(&task, &body.agent, body.prompt)
        .await?;
    Ok((StatusCode::CREATED, Json(session)))
}
