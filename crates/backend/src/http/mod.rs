//! The operator API (docs/architecture.md §4.4): one router, one module per domain, behind
//! the `guard` (Host/Origin checks, operator auth; docs/architecture.md §10).

mod agents;
mod answer_links;
mod clarifications;
pub mod error;
pub mod forward;
pub mod guard;
mod health;
mod login;
mod mcp;
pub mod metrics;
mod notifications;
mod runtime_flags;
mod sessions;
mod slack;
mod tasks;
pub mod web;
mod webhooks;
mod ws;

#[cfg(test)]
mod tests;

use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::http::error::AppError;
use crate::state::AppState;

/// Largest request body accepted on any route; larger ones get 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body whose rejections render as [`AppError`] (400, or 413 when too large).
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(AppError))]
pub struct ApiJson<T>(pub T);

impl<T: serde::Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}

impl From<JsonRejection> for AppError {
    fn from(rejection: JsonRejection) -> Self {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            return Self::PayloadTooLarge { limit: BODY_LIMIT };
        }
        Self::BadRequest(rejection.body_text())
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::routes())
        .merge(metrics::routes())
        .nest(
            "/api/v1",
            Router::new()
                .merge(login::routes())
                .merge(agents::routes())
                .merge(runtime_flags::routes())
                .merge(tasks::routes())
                .merge(sessions::routes())
                .merge(clarifications::routes())
                .merge(notifications::routes())
                .merge(webhooks::routes())
                .merge(answer_links::routes())
                .merge(slack::routes())
                .merge(ws::routes())
                .nest_service(mcp::MCP_PATH, mcp::service(state.clone())),
        )
        .fallback(fallback)
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        // Innermost: the body is bounded and the operator known before a verb for a
        // session another replica owns is forwarded there.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::to_owner,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(limit_body))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::screen,
        ))
        // Outermost, so refusals by the guard are counted too.
        .layer(axum::middleware::from_fn(metrics::count))
        .with_state(state)
}

/// Answers 413 for a body past [`BODY_LIMIT`] before any handler runs. `DefaultBodyLimit`
/// only applies where a handler extracts the body, and routes such as `/cancel` and `/stop`
/// take none: without this an oversized request would still act.
async fn limit_body(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = AppError::PayloadTooLarge { limit: BODY_LIMIT };
    match declared {
        Some(len) if len > BODY_LIMIT as u64 => {
            drain(request.into_body()).await;
            return too_large.into_response();
        }
        Some(_) => return next.run(request).await,
        None => {}
    }
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    // No declared length (a chunked body): read it within the limit before going on.
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return too_large.into_response();
        };
        if bytes.len() + chunk.len() > BODY_LIMIT {
            drain(axum::body::Body::from_stream(stream)).await;
            return too_large.into_response();
        }
        bytes.extend_from_slice(&chunk);
    }
    let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    next.run(request).await
}

/// How much of a refused body is read and dropped before the 413, at most.
const DRAIN_LIMIT: usize = 8 * BODY_LIMIT;
/// How long reading a refused body may take, at most.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and drops what the client is still sending, within bounds, before the 413 goes
/// out: a connection closed on unread data is reset, and a client still writing its body
/// then sees a broken pipe instead of the answer.
async fn drain(body: axum::body::Body) {
    let deadline = tokio::time::Instant::now() + DRAIN_TIME;
    let mut stream = body.into_data_stream();
    let mut read = 0usize;
    while read <= DRAIN_LIMIT {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => read += chunk.len(),
            _ => return,
        }
    }
}

/// Unknown API routes get a JSON 404; any other `GET`/`HEAD` is a file of the embedded web UI.
async fn fallback(method: Method, uri: Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") || (method != Method::GET && method != Method::HEAD) {
        return AppError::not_found(format!("no route for {method} {path}")).into_response();
    }
    let response = web::asset(path);
    if response.status() == axum::http::StatusCode::NOT_FOUND {
        return AppError::not_found(format!("no file {path}")).into_response();
    }
    response
}
