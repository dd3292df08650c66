//! `elicitation/create` params → questions (spec rules 1–5, D1, D2, D10, ARCHITECTURE §7).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::question::Question;

/// An `elicitation/create` request that maps to at least one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MappedElicitation {
    /// The ACP session id the request is scoped to.
    pub session_id: String,
    /// The tool call that raised it (present for the Claude bridge's AskUserQuestion).
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The request's human-readable message.
    pub message: String,
    /// The questions, in D1 order.
    pub questions: Vec<Question>,
}

impl MappedElicitation {
    /// The question with this id (its verbatim schema key), if any.
    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }
}

/// Why a request was declined without reaching the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    /// `mode` is not `"form"` (for example `"url"`).
    NotFormMode,
    /// The request is scoped by `requestId` rather than `sessionId`.
    RequestScope,
    /// Neither a `sessionId` nor a `requestId`.
    MissingSessionId,
    /// The params are not the shape of an elicitation request.
    Malformed,
    /// The schema maps to zero questions.
    NoQuestions,
    /// Past a limit of [`crate::limits`].
    TooLarge,
}

/// A decline decision with a human-readable detail for logs and debugging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("declined ({reason:?}): {detail}")]
pub struct Decline {
    /// The category.
    pub reason: DeclineReason,
    /// What exactly was wrong.
    pub detail: String,
}

/// Maps raw `elicitation/create` params. Never panics.
pub fn map_request(params: &Value) -> Result<MappedElicitation, Decline> {
    todo!("{params}")
}
