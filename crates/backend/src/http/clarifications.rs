//! `GET /api/v1/clarifications?session_id=&status=`, `GET /api/v1/clarifications/{pending_id}`,
//! `POST /api/v1/clarifications/{pending_id}/respond`, `POST .../cancel`.

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use kandev_elicitation::OperatorAnswer;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Operator;
use crate::http::ApiJson;
use crate::http::error::{AppError, Origin};
use crate::model::{Clarification, ClarificationStatus};
use crate::state::AppState;
use crate::store::ClarificationFilter;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/clarifications", get(list))
        .route("/clarifications/{pending_id}", get(get_one))
        .route("/clarifications/{pending_id}/respond", post(respond))
        .route("/clarifications/{pending_id}/cancel", post(cancel))
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
    let filter = ClarificationFilter {
        session_id: filter.session_id.filter(|s| !s.is_empty()),
        status,
    };
    let records = state.stores.clarifications.clarifications(&filter).await?;
    Ok(Json(json!({ "clarifications": records })))
}

async fn get_one(
    State(state): State<AppState>,
    Path(pending_id): Path<String>,
) -> Result<Json<Clarification>, AppError> {
    state
        .stores
        .clarifications
        .clarification(&pending_id)
        .await?
        .map(Json)
        .ok_or_else(|| AppError::NotFound {
            message: format!("no clarification `{pending_id}`"),
            origin: Some(Origin::Backend),
        })
}

/// Answered by the signed-in operator (`"local"` without auth): the record, its message
/// and the history say who.
async fn respond(
    State(state): State<AppState>,
    operator: Operator,
    Path(pending_id): Path<String>,
    ApiJson(answer): ApiJson<OperatorAnswer>,
) -> Result<Json<Value>, AppError> {
    let status = state
        .clarifications
        .respond(&*state.sessions, &pending_id, answer, &operator.name)
        .await?;
    Ok(Json(json!({ "status": status })))
}

async fn cancel(
    State(state): State<AppState>,
    operator: Operator,
    Path(pending_id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let status = state
        .clarifications
        .cancel(&*state.sessions, &pending_id, &operator.name)
        .await?;
    Ok(Json(json!({ "status": status })))
}
