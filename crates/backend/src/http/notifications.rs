//! `GET /api/v1/notifications`.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::http::error::AppError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/notifications", get(list))
}

async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let all = state.stores.notifications.notifications().await?;
    Ok(Json(json!({ "notifications": all })))
}
