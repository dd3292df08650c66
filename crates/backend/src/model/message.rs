//! Chat messages of a session: user prompts, agent text (aggregated per message), tool
//! calls, clarification requests and status lines.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::time::Timestamp;

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Plain text (a prompt, or agent text).
    Message,
    /// An agent thought.
    Thought,
    /// A tool call, updated in place by `tool_call_update`.
    ToolCall,
    /// The message that carries a clarification (AC-08).
    ClarificationRequest,
    /// A status line written by the backend (agent exited, turn failed).
    Status,
}

impl MessageKind {
    /// Every kind.
    pub const ALL: [MessageKind; 5] = [
        Self::Message,
        Self::Thought,
        Self::ToolCall,
        Self::ClarificationRequest,
        Self::Status,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Thought => "thought",
            Self::ToolCall => "tool_call",
            Self::ClarificationRequest => "clarification_request",
            Self::Status => "status",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Who wrote a message.
pub mod author {
    /// The operator.
    pub const USER: &str = "user";
    /// The agent.
    pub const AGENT: &str = "agent";
    /// The backend itself.
    pub const SYSTEM: &str = "system";
}

/// A stored message, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Message {
    /// UUID.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// Position in the session, from 1; unique per session.
    pub seq: i64,
    /// What it is.
    #[serde(rename = "type")]
    #[sqlx(rename = "type")]
    pub kind: MessageKind,
    /// See [`author`].
    pub author_type: String,
    /// The text.
    pub content: String,
    /// Whether the message asks the operator for input.
    pub requests_input: bool,
    /// Kind-specific details (`pending_id`, `questions`, `status`, `tool_call_id`, …).
    pub metadata: Value,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// What a new message needs.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// What it is.
    pub kind: MessageKind,
    /// See [`author`].
    pub author_type: &'static str,
    /// The text.
    pub content: String,
    /// Whether it asks for input.
    pub requests_input: bool,
    /// A JSON object.
    pub metadata: Map<String, Value>,
}

impl NewMessage {
    /// A message of `kind` by `author_type` with no metadata.
    pub fn new(
        session_id: &str,
        task_id: &str,
        kind: MessageKind,
        author_type: &'static str,
        content: &str,
    ) -> Self {
        Self {
            session_id: session_id.to_owned(),
            task_id: task_id.to_owned(),
            kind,
            author_type,
            content: content.to_owned(),
            requests_input: false,
            metadata: Map::new(),
        }
    }

    /// The same message with `metadata`.
    pub fn with_metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.metadata = metadata;
        self
    }

    /// The tool call a `tool_call` message belongs to (kept in its own column, so an
    /// update finds its message by index).
    pub fn tool_call_id(&self) -> Option<&str> {
        match self.kind {
            MessageKind::ToolCall => self.metadata.get("tool_call_id").and_then(Value::as_str),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_only_tool_calls_have_a_tool_call_id() {
        for kind in MessageKind::ALL {
            assert_eq!(MessageKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).expect("json"),
                serde_json::json!(kind.as_str())
            );
        }
        let meta = serde_json::json!({"tool_call_id": "t1"})
            .as_object()
            .cloned()
            .expect("object");
        let tool = NewMessage::new("s", "t", MessageKind::ToolCall, author::AGENT, "Read")
            .with_metadata(meta.clone());
        assert_eq!(tool.tool_call_id(), Some("t1"));
        let text =
            NewMessage::new("s", "t", MessageKind::Message, author::AGENT, "x").with_metadata(meta);
        assert_eq!(text.tool_call_id(), None);
    }
}
