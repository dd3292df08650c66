//! `GET /api/v1/notifications/webhooks`: each configured hook (never its secret) and its
//! latest delivery, for the Settings page.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::http::error::AppError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/notifications/webhooks", get(list))
}

async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let latest = state.stores.outbox.last_deliveries().await?;
    let hooks: Vec<Value> = state
        .config
        .notifications
        .webhooks
        .iter()
        .map(|hook| {
            let last = latest.iter().find(|d| d.hook == hook.name);
            json!({
                "name": hook.name,
                "events": hook.events,
                "format": hook.format,
                "include_question": hook.include_question,
                "last_delivery": last,
            })
        })
        .collect();
    Ok(Json(json!({ "webhooks": hooks })))
}
