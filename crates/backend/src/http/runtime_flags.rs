//! `GET /api/v1/runtime-flags`, `PATCH /api/v1/runtime-flags/{key}`.

use axum::extract::{Path, State};
use axum::routing::{get, patch};
use axum::{Json, Router};
use kandev_flags::{FlagError, ResolvedFlag};
use serde_json::{Value, json};

use crate::events::Change;
use crate::http::ApiJson;
use crate::http::error::AppError;
use crate::state::AppState;
use crate::store::StoreError;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/runtime-flags", get(list))
        .route("/runtime-flags/{key}", patch(set_override))
}

fn flag_error(err: FlagError<StoreError>) -> AppError {
    match err {
        FlagError::UnknownKey { .. } => AppError::not_found(err.to_string()),
        FlagError::EnvLocked { .. } => AppError::Conflict {
            code: "FLAG_LOCKED",
            message: err.to_string(),
        },
        FlagError::Immutable { .. } => AppError::Conflict {
            code: "FLAG_IMMUTABLE",
            message: err.to_string(),
        },
        FlagError::Store(db) => AppError::Store(db),
        FlagError::Env(_) => AppError::Internal(err.to_string()),
    }
}

async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let flags = state.flags.resolve_all().await.map_err(flag_error)?;
    Ok(Json(json!({ "flags": flags })))
}

/// Reads `{"override": true|false|null}`; anything else is a 400 naming the problem.
fn parse_override(body: &Value) -> Result<Option<bool>, AppError> {
    let Some(fields) = body.as_object() else {
        return Err(AppError::BadRequest(
            "body must be {\"override\": true|false|null}".into(),
        ));
    };
    if let Some(extra) = fields.keys().find(|k| k.as_str() != "override") {
        return Err(AppError::BadRequest(format!(
            "unknown field `{extra}`; body must be {{\"override\": true|false|null}}"
        )));
    }
    match fields.get("override") {
        None => Err(AppError::BadRequest(
            "missing field `override` (true, false, or null to clear)".into(),
        )),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::Null) => Ok(None),
        Some(other) => Err(AppError::BadRequest(format!(
            "`override` must be true, false or null, not {other}"
        ))),
    }
}

async fn set_override(
    State(state): State<AppState>,
    Path(key): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<ResolvedFlag>, AppError> {
    // An unknown key or a locked flag wins over a bad body: the resource decides first.
    state.flags.check_patch(&key).map_err(flag_error)?;
    let value = parse_override(&body)?;
    let flag = state
        .flags
        .set_override(&key, value)
        .await
        .map_err(flag_error)?;
    tracing::info!(key = %key, override_value = ?value, "runtime flag override changed");
    state.publisher.publish(Change::FlagChanged(
        serde_json::to_value(&flag).unwrap_or(Value::Null),
    ));
    Ok(Json(flag))
}
