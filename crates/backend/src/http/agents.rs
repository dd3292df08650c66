//! `GET /api/v1/agents`: the configured agent ids, for the UI's session form.
//! Commands and environments stay private: they may hold secrets.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/agents", get(list))
}

async fn list(State(state): State<AppState>) -> Json<Value> {
    let agents: Vec<Value> = state
        .config
        .agents
        .keys()
        .map(|id| json!({ "id": id }))
        .collect();
    Json(json!({ "agents": agents }))
}
