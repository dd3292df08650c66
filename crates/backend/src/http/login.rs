//! Browser sign-in (docs/architecture.md §10): `POST /api/v1/auth/login {token}` exchanges an
//! operator token for the HttpOnly, SameSite=Strict session cookie; `POST
//! /api/v1/auth/logout` drops it; `GET /api/v1/auth/me` says who is signed in.
//!
//! Sign-in and sign-out need no credentials (`guard::OPEN_API_PATHS`); as POSTs they
//! still pass the Origin check, so another site cannot sign a browser in or out.

use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::ApiJson;
use super::guard::ClientIp;
use crate::auth::{Operator, SESSION_TTL};
use crate::http::error::AppError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/auth/me", get(me))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

async fn login(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Response, AppError> {
    let auth = &state.auth;
    if !auth.required() {
        return Ok(
            Json(json!({"operator": Operator::LOCAL, "auth_required": false})).into_response(),
        );
    }
    if let Err(wait) = auth.check_limit(ip) {
        tracing::warn!(peer = ?ip, "sign-in refused: too many failed attempts");
        return Err(AppError::TooManyAttempts {
            retry_after_secs: wait.as_secs().max(1),
        });
    }
    let Some(operator) = auth.verify_token(body.token.trim()) else {
        auth.record_failure(ip);
        tracing::warn!(peer = ?ip, "sign-in failed: unknown token");
        return Err(AppError::Unauthorized {
            code: "INVALID_TOKEN",
            message: "that is not an operator token".into(),
        });
    };
    let value = auth
        .issue_session(&operator, SystemTime::now())
        .ok_or_else(|| AppError::Internal("the operator has no session key".into()))?;
    let cookie = HeaderValue::from_str(&auth.set_cookie(&value))
        .map_err(|_| AppError::Internal("the session cookie is not a header value".into()))?;
    tracing::info!(operator = %operator.name, peer = ?ip, "operator signed in");
    let mut response = Json(json!({
        "operator": operator.name,
        "auth_required": true,
        "expires_in_secs": SESSION_TTL.as_secs(),
    }))
    .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

async fn logout(State(state): State<AppState>) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(cookie) = HeaderValue::from_str(&state.auth.clear_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn me(State(state): State<AppState>, operator: Operator) -> Json<serde_json::Value> {
    Json(json!({"operator": operator.name, "auth_required": state.auth.required()}))
}
