//! The operator's answer as it travels from the answer surface (docs/architecture.md §4.2): the
//! one type of the HTTP body, the agent-stream payloads and the mapping. Unknown fields
//! are refused, so a misspelt key is an error rather than an empty answer.

use serde::{Deserialize, Serialize};

/// The answer to one question.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The [`crate::Question::id`] it answers.
    pub question_id: String,
    /// Chosen option ids; any order (multi-select is re-ordered to declaration order).
    #[serde(default)]
    pub selected_options: Vec<String>,
    /// Free text; boolean and number answers travel here as text (`"true"`, `"42"`).
    #[serde(default)]
    pub custom_text: String,
}

/// An operator's submission for one pending elicitation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorAnswer {
    /// Per-question answers; unanswered questions may be absent.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// Skip: the operator rejected the whole bundle (becomes `decline`).
    #[serde(default)]
    pub rejected: bool,
    /// Free-form reason for a reject, for the record only.
    #[serde(default)]
    pub reject_reason: String,
}
