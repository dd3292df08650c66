//! The frame every message travels in, and the error payload.

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameType {
    /// backend → agentctl, expects a `response` or an `error` with the same id.
    Request,
    /// The successful answer to a request.
    Response,
    /// The failed answer to a request; payload is an [`ErrorPayload`].
    Error,
    /// agentctl → backend, no answer expected.
    Notification,
}

/// One JSON text frame: `{"id", "type", "action", "payload"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Correlates a response with its request; for notifications, the event's
    /// sequence number within its session.
    pub id: String,
    /// What the frame is.
    #[serde(rename = "type")]
    pub frame_type: FrameType,
    /// The action name (see [`crate::action`]).
    pub action: String,
    /// Action-specific body.
    #[serde(default)]
    pub payload: Value,
}

impl Envelope {
    /// A request frame.
    pub fn request(id: impl Into<String>, action: &str, payload: &impl Serialize) -> Self {
        Self::new(id.into(), FrameType::Request, action, payload)
    }

    /// The response to `request`.
    pub fn response_to(request: &Envelope, payload: &impl Serialize) -> Self {
        Self::new(
            request.id.clone(),
            FrameType::Response,
            &request.action,
            payload,
        )
    }

    /// The error answer to `request`.
    pub fn error_to(request: &Envelope, code: ErrorCode, message: impl Into<String>) -> Self {
        let payload = ErrorPayload {
            code,
            message: message.into(),
        };
        Self::new(
            request.id.clone(),
            FrameType::Error,
            &request.action,
            &payload,
        )
    }

    /// A notification frame.
    pub fn notification(id: impl Into<String>, action: &str, payload: &impl Serialize) -> Self {
        Self::new(id.into(), FrameType::Notification, action, payload)
    }

    fn new(id: String, frame_type: FrameType, action: &str, payload: &impl Serialize) -> Self {
        // Our payload types are plain data; serialization cannot fail for them.
        let payload = serde_json::to_value(payload).unwrap_or(Value::Null);
        Self {
            id,
            frame_type,
            action: action.to_owned(),
            payload,
        }
    }

    /// Decodes the payload as `T`, mapping a mismatch to a `BAD_REQUEST` error payload.
    pub fn decode_payload<T: DeserializeOwned>(&self) -> Result<T, ErrorPayload> {
        // A missing payload means "no fields", so requests without a body still decode.
        let payload = if self.payload.is_null() {
            Value::Object(Default::default())
        } else {
            self.payload.clone()
        };
        serde_json::from_value(payload).map_err(|err| ErrorPayload {
            code: ErrorCode::BadRequest,
            message: format!("invalid `{}` payload: {err}", self.action),
        })
    }

    /// Encodes the frame as a JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Error codes of an `error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// Unknown or already-settled pending id, or no such session.
    NotFound,
    /// The payload does not decode, or the request is not valid now.
    BadRequest,
    /// An elicitation answer that does not fit its questions; the pending stays open.
    InvalidAnswer,
    /// The action is not one agentctl serves.
    UnknownAction,
    /// Anything else went wrong inside agentctl.
    Internal,
}

/// The payload of an `error` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ErrorPayload {
    /// The category.
    pub code: ErrorCode,
    /// What went wrong, for a human.
    pub message: String,
}

impl ErrorPayload {
    /// Builds an error payload.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
