//! The operator API (ARCHITECTURE §4.4): one router, one module per domain.

mod agents;
mod clarifications;
mod health;
mod notifications;
mod runtime_flags;
mod sessions;
mod tasks;
pub mod web;
mod ws;

#[cfg(test)]
mod tests;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};

use crate::error::AppError;
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

/// The whole API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::routes())
        .nest(
            "/api/v1",
            Router::new()
                .merge(agents::routes())
                .merge(runtime_flags::routes())
                .merge(tasks::routes())
                .merge(sessions::routes())
                .merge(clarifications::routes())
                .merge(notifications::routes())
                .merge(ws::routes()),
        )
        .fallback(fallback)
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
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
