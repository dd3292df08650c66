//! Operator answer + mapped elicitation → ACP `elicitation/create` response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::answer::OperatorAnswer;
use crate::request::MappedElicitation;

/// The ACP response to `elicitation/create`: `{"action": "accept", "content": {…}}`,
/// `{"action": "decline"}` or `{"action": "cancel"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum ElicitationResponse {
    /// The operator submitted; content is sparse and keyed by verbatim schema keys.
    Accept {
        /// Answered keys only; an unanswered question contributes no key.
        content: Map<String, Value>,
    },
    /// The operator skipped, the deadline passed, or the request was not acceptable.
    Decline,
    /// The turn was cancelled or the session torn down.
    Cancel,
}

impl ElicitationResponse {
    /// The response as JSON, ready to send.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::json!({"action": "decline"}))
    }
}

/// Why an operator answer does not fit the questions (F10). The pending stays open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AnswerError {
    /// `question_id` names no question of this elicitation.
    #[error("unknown question id `{question_id}`")]
    UnknownQuestion {
        /// The offending id.
        question_id: String,
    },
    /// The same question is answered twice in one submission.
    #[error("question `{question_id}` is answered more than once")]
    DuplicateAnswer {
        /// The offending id.
        question_id: String,
    },
    /// More than one option for a single-select question.
    #[error("question `{question_id}` takes one choice, got {count}")]
    TooManyChoices {
        /// The offending id.
        question_id: String,
        /// How many were sent.
        count: usize,
    },
    /// An option that the question does not declare.
    #[error("question `{question_id}` has no option `{option}`")]
    UndeclaredOption {
        /// The offending id.
        question_id: String,
        /// The option sent.
        option: String,
    },
    /// Text that does not parse as the question's type.
    #[error("question `{question_id}` expects {expected}, got `{value}`")]
    UnparseableValue {
        /// The offending id.
        question_id: String,
        /// The type expected (`a boolean`, `a number`, `an integer`).
        expected: String,
        /// The text sent.
        value: String,
    },
    /// A value outside a constraint of the schema.
    #[error("question `{question_id}`: {detail}")]
    ConstraintViolated {
        /// The offending id.
        question_id: String,
        /// The constraint (`minLength`, `maximum`, …).
        constraint: String,
        /// What is wrong, for the operator.
        detail: String,
    },
    /// A `required` question left unanswered on submit.
    #[error("question `{question_id}` is required")]
    RequiredUnanswered {
        /// The offending id.
        question_id: String,
    },
    /// Answers sent together with `rejected: true`.
    #[error("a rejected submission carries no answers")]
    AnswersWithReject,
}

impl AnswerError {
    /// The question the error is about, if it is about one.
    pub fn question_id(&self) -> Option<&str> {
        match self {
            Self::UnknownQuestion { question_id }
            | Self::DuplicateAnswer { question_id }
            | Self::TooManyChoices { question_id, .. }
            | Self::UndeclaredOption { question_id, .. }
            | Self::UnparseableValue { question_id, .. }
            | Self::ConstraintViolated { question_id, .. }
            | Self::RequiredUnanswered { question_id } => Some(question_id),
            Self::AnswersWithReject => None,
        }
    }
}

/// Validates `answer` against `elicitation` and builds the ACP response:
/// `rejected` → decline; otherwise accept with sparse content.
pub fn build_response(
    elicitation: &MappedElicitation,
    answer: &OperatorAnswer,
) -> Result<ElicitationResponse, AnswerError> {
    todo!("{elicitation:?} {answer:?}")
}
