//! `POST /api/v1/tasks`, `GET /api/v1/tasks`, `GET /api/v1/tasks/{id}`,
//! `POST /api/v1/tasks/{id}/sessions`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::events::Change;
use crate::http::ApiJson;
use crate::http::error::AppError;
use crate::model::{Session, Task, TaskView};
use crate::state::AppState;

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
    let task = Task::new(title, &body.description);
    state.stores.tasks.create_task(&task).await?;
    state.publisher.publish(Change::TaskCreated {
        task_id: task.id.clone(),
    });
    Ok((StatusCode::CREATED, Json(TaskView::new(task, Vec::new()))))
}

/// The board, in a constant number of queries however many tasks and sessions.
async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let views = state.stores.board().await?;
    Ok(Json(json!({ "tasks": views })))
}

async fn task(state: &AppState, id: &str) -> Result<Task, AppError> {
    state
        .stores
        .tasks
        .task(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("no task `{id}`")))
}

async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, AppError> {
    state
        .stores
        .task_view(&id)
        .await?
        .map(Json)
        .ok_or_else(|| AppError::not_found(format!("no task `{id}`")))
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
    state.drain.admit_new_session()?;
    let task = task(&state, &id).await?;
    let session = state
        .sessions
        .start(&task, &body.agent, body.prompt)
        .await?;
    Ok((StatusCode::CREATED, Json(session)))
}
