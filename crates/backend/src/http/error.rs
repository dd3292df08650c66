//! [`AppError`]: every way an API call fails, rendered as
//! `{"error": {"code", "message"}}` with its HTTP status (docs/architecture.md §4.4).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kandev_agent_stream::ErrorCode;
use serde_json::json;

use crate::agent_link::LinkError;
use crate::clarifications::ClarificationError;
pub use crate::clarifications::Origin;
use crate::drain::Draining;
use crate::sessions::SessionError;
use crate::store::StoreError;

/// An API error: the HTTP side of every module's error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 404 `NOT_FOUND`.
    #[error("{message}")]
    NotFound {
        /// What was not found.
        message: String,
        /// Set on clarification responds, where it matters who adjudicated.
        origin: Option<Origin>,
    },
    /// 400 `BAD_REQUEST`: the body or a parameter is not acceptable.
    #[error("{0}")]
    BadRequest(String),
    /// 400 `INVALID_ANSWER`: agentctl refused the answer; the pending stays open.
    #[error("{0}")]
    InvalidAnswer(String),
    /// 409: the request conflicts with the resource's state.
    #[error("{message}")]
    Conflict {
        /// `FLAG_LOCKED`, `FLAG_IMMUTABLE`, `SESSION_ENDED`, …
        code: &'static str,
        /// Why.
        message: String,
    },
    /// 401: missing, wrong or expired credentials (`AUTH_REQUIRED`, `INVALID_TOKEN`,
    /// `INVALID_SESSION`, `SESSION_EXPIRED`).
    #[error("{message}")]
    Unauthorized {
        /// Which of the above.
        code: &'static str,
        /// What to do about it.
        message: String,
    },
    /// 403: refused whoever asks (`HOST_NOT_ALLOWED`, `ORIGIN_NOT_ALLOWED`).
    #[error("{message}")]
    Forbidden {
        /// Which check refused it.
        code: &'static str,
        /// Why.
        message: String,
    },
    /// 429 `TOO_MANY_ATTEMPTS`: this address failed to authenticate too often; a
    /// `Retry-After` header says for how long.
    #[error("too many failed sign-in attempts from this address; retry in {retry_after_secs} s")]
    TooManyAttempts {
        /// Seconds until attempts are accepted again.
        retry_after_secs: u64,
    },
    /// 405 `METHOD_NOT_ALLOWED`: the route exists, not with this method.
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// 413 `PAYLOAD_TOO_LARGE`.
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// 503 `AGENT_STREAM_NOT_CONNECTED`: nothing was sent to the agent.
    #[error("{0}")]
    AgentStreamNotConnected(String),
    /// 503 with its own code: a replica the request needs cannot serve it now
    /// (`OWNER_UNREACHABLE`, `CLUSTER_NOT_CONFIGURED`); nothing was done.
    #[error("{message}")]
    Unavailable {
        /// Which.
        code: &'static str,
        /// Why, and what happens next.
        message: String,
    },
    /// 503 `DRAINING`: this process is shutting down and takes no new sessions.
    #[error("{0}")]
    Draining(String),
    /// 502 `AGENTCTL_ERROR`: agentctl failed or answered something unexpected.
    #[error("{0}")]
    Agentctl(String),
    /// 504 `AGENTCTL_TIMEOUT`: agentctl did not answer in time.
    #[error("{0}")]
    AgentctlTimeout(String),
    /// 500 `INTERNAL` (503 `DATABASE_UNAVAILABLE` when it cannot be reached): the
    /// database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// 500 `INTERNAL`.
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    /// A 404 from the backend's own store.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound {
            message: message.into(),
            origin: None,
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::BadRequest(_) | Self::InvalidAnswer(_) => StatusCode::BAD_REQUEST,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::AgentStreamNotConnected(_) | Self::Unavailable { .. } | Self::Draining(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Agentctl(_) => StatusCode::BAD_GATEWAY,
            Self::AgentctlTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Store(StoreError::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Store(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "NOT_FOUND",
            Self::BadRequest(_) => "BAD_REQUEST",
            Self::InvalidAnswer(_) => "INVALID_ANSWER",
            Self::Conflict { code, .. } => code,
            Self::Unauthorized { code, .. }
            | Self::Forbidden { code, .. }
            | Self::Unavailable { code, .. } => code,
            Self::TooManyAttempts { .. } => "TOO_MANY_ATTEMPTS",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::PayloadTooLarge { .. } => "PAYLOAD_TOO_LARGE",
            Self::AgentStreamNotConnected(_) => "AGENT_STREAM_NOT_CONNECTED",
            Self::Draining(_) => "DRAINING",
            Self::Agentctl(_) => "AGENTCTL_ERROR",
            Self::AgentctlTimeout(_) => "AGENTCTL_TIMEOUT",
            Self::Store(StoreError::Unavailable(_)) => "DATABASE_UNAVAILABLE",
            Self::Store(_) | Self::Internal(_) => "INTERNAL",
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            // Database details are for the log, not the client.
            Self::Store(err) => {
                tracing::error!(error = %err, "database error");
                "internal database error".to_owned()
            }
            Self::Internal(msg) => {
                tracing::error!(error = %msg, "internal error");
                msg.clone()
            }
            other => other.to_string(),
        };
        let mut error = json!({"code": self.code(), "message": message});
        if let Self::NotFound {
            origin: Some(origin),
            ..
        } = &self
        {
            error["origin"] = json!(origin.as_str());
        }
        let mut response = (status, Json(json!({ "error": error }))).into_response();
        if let Self::TooManyAttempts { retry_after_secs } = &self {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(*retry_after_secs),
            );
        }
        response
    }
}

/// A failed request over the agent stream, as the API reports it.
impl From<LinkError> for AppError {
    fn from(err: LinkError) -> Self {
        match err {
            LinkError::NotConnected => AppError::AgentStreamNotConnected(
                "the agent stream is not connected; nothing was sent to the agent".into(),
            ),
            LinkError::Interrupted => AppError::AgentStreamNotConnected(
                "the agent stream dropped before agentctl answered; the request may have reached \
                 the agent, and its outcome arrives once the stream is back"
                    .into(),
            ),
            LinkError::Unreachable(msg) => {
                AppError::AgentStreamNotConnected(format!("agentctl cannot be reached: {msg}"))
            }
            LinkError::Remote(payload) => match payload.code {
                ErrorCode::NotFound => AppError::NotFound {
                    message: payload.message,
                    origin: Some(Origin::Agentctl),
                },
                ErrorCode::InvalidAnswer => AppError::InvalidAnswer(payload.message),
                ErrorCode::BadRequest => AppError::BadRequest(payload.message),
                ErrorCode::UnknownAction | ErrorCode::Internal => {
                    AppError::Agentctl(format!("agentctl: {}", payload.message))
                }
            },
            LinkError::Timeout(d) => {
                AppError::AgentctlTimeout(format!("agentctl did not answer within {d:?}"))
            }
            LinkError::Protocol(msg) => AppError::Agentctl(msg),
        }
    }
}

impl From<ClarificationError> for AppError {
    fn from(err: ClarificationError) -> Self {
        match err {
            ClarificationError::NotFound { message, origin } => Self::NotFound { message, origin },
            ClarificationError::NotActive(message) => Self::Conflict {
                code: "NOT_ACTIVE",
                message,
            },
            ClarificationError::InvalidAnswer(message) => Self::InvalidAnswer(message),
            ClarificationError::Link(err) => err.into(),
            ClarificationError::Store(err) => Self::Store(err),
        }
    }
}

impl From<SessionError> for AppError {
    fn from(err: SessionError) -> Self {
        let message = err.to_string();
        match err {
            SessionError::UnknownAgent { .. } => Self::BadRequest(message),
            SessionError::NotFound(_) => Self::not_found(message),
            SessionError::Ended { .. } => Self::Conflict {
                code: "SESSION_ENDED",
                message,
            },
            SessionError::TurnInProgress => Self::Conflict {
                code: "TURN_IN_PROGRESS",
                message,
            },
            SessionError::NotReady { .. } => Self::Conflict {
                code: "SESSION_NOT_READY",
                message,
            },
            SessionError::Link(err) => err.into(),
            SessionError::Store(err) => Self::Store(err),
            SessionError::Internal(_) => Self::Internal(message),
        }
    }
}

impl From<Draining> for AppError {
    fn from(err: Draining) -> Self {
        Self::Draining(err.to_string())
    }
}

impl From<QueryRejection> for AppError {
    fn from(rejection: QueryRejection) -> Self {
        Self::BadRequest(rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(err: AppError) -> (StatusCode, serde_json::Value) {
        let resp = err.into_response();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .expect("body");
        (status, serde_json::from_slice(&bytes).expect("json"))
    }

    #[tokio::test]
    async fn renders_code_message_and_origin() {
        let (status, v) = body(AppError::NotFound {
            message: "no such pending".into(),
            origin: Some(Origin::Agentctl),
        })
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            v,
            json!({"error": {"code": "NOT_FOUND", "message": "no such pending", "origin": "agentctl"}})
        );
        let (status, v) = body(AppError::not_found("no task")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(v["error"].get("origin").is_none());
    }

    #[tokio::test]
    async fn every_variant_has_its_status() {
        let cases = [
            (AppError::BadRequest("x".into()), 400, "BAD_REQUEST"),
            (AppError::InvalidAnswer("x".into()), 400, "INVALID_ANSWER"),
            (
                AppError::Conflict {
                    code: "FLAG_LOCKED",
                    message: "x".into(),
                },
                409,
                "FLAG_LOCKED",
            ),
            (
                AppError::PayloadTooLarge { limit: 1 },
                413,
                "PAYLOAD_TOO_LARGE",
            ),
            (
                AppError::AgentStreamNotConnected("x".into()),
                503,
                "AGENT_STREAM_NOT_CONNECTED",
            ),
            (AppError::Agentctl("x".into()), 502, "AGENTCTL_ERROR"),
            (
                AppError::Unauthorized {
                    code: "AUTH_REQUIRED",
                    message: "x".into(),
                },
                401,
                "AUTH_REQUIRED",
            ),
            (
                AppError::Forbidden {
                    code: "ORIGIN_NOT_ALLOWED",
                    message: "x".into(),
                },
                403,
                "ORIGIN_NOT_ALLOWED",
            ),
            (
                AppError::TooManyAttempts {
                    retry_after_secs: 3,
                },
                429,
                "TOO_MANY_ATTEMPTS",
            ),
            (
                AppError::AgentctlTimeout("x".into()),
                504,
                "AGENTCTL_TIMEOUT",
            ),
            (
                AppError::Store(StoreError::Query("x".into())),
                500,
                "INTERNAL",
            ),
            (
                AppError::Store(StoreError::Unavailable("x".into())),
                503,
                "DATABASE_UNAVAILABLE",
            ),
        ];
        for (err, status, code) in cases {
            let (s, v) = body(err).await;
            assert_eq!(s.as_u16(), status);
            assert_eq!(v["error"]["code"], code);
        }
    }

    #[test]
    fn the_modules_errors_keep_their_status_and_code() {
        use crate::model::SessionState;
        let cases: [(AppError, u16, &str); 9] = [
            (Draining.into(), 503, "DRAINING"),
            (SessionError::NotFound("s".into()).into(), 404, "NOT_FOUND"),
            (
                SessionError::refusal("s", SessionState::Completed).into(),
                409,
                "SESSION_ENDED",
            ),
            (
                SessionError::refusal("s", SessionState::Running).into(),
                409,
                "TURN_IN_PROGRESS",
            ),
            (
                SessionError::refusal("s", SessionState::Starting).into(),
                409,
                "SESSION_NOT_READY",
            ),
            (
                SessionError::UnknownAgent {
                    agent: "x".into(),
                    known: "mock".into(),
                }
                .into(),
                400,
                "BAD_REQUEST",
            ),
            (
                ClarificationError::NotActive("x".into()).into(),
                409,
                "NOT_ACTIVE",
            ),
            (
                ClarificationError::InvalidAnswer("x".into()).into(),
                400,
                "INVALID_ANSWER",
            ),
            (
                ClarificationError::Link(LinkError::NotConnected).into(),
                503,
                "AGENT_STREAM_NOT_CONNECTED",
            ),
        ];
        for (err, status, code) in cases {
            assert_eq!((err.status().as_u16(), err.code()), (status, code), "{err}");
        }
    }

    #[tokio::test]
    async fn too_many_attempts_says_when_to_retry() {
        let resp = AppError::TooManyAttempts {
            retry_after_secs: 42,
        }
        .into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            resp.headers().get(axum::http::header::RETRY_AFTER),
            Some(&axum::http::HeaderValue::from(42u64))
        );
    }

    #[tokio::test]
    async fn database_details_stay_out_of_the_body() {
        let (_, v) = body(AppError::Store(StoreError::Query("secret detail".into()))).await;
        assert_eq!(v["error"]["message"], "internal database error");
    }
}
