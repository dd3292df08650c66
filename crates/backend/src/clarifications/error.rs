//! [`ClarificationError`]: why an operator's verb on a clarification did not go through.
//! The HTTP layer maps each to its status and code (docs/architecture.md §4.4).

use crate::agent_link::LinkError;
use crate::store::StoreError;

/// Who said "not found": the backend's own records, or agentctl (a forwarded verb).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The backend does not know the id, or its agent is gone.
    Backend,
    /// agentctl answered `NOT_FOUND` (unknown or already-settled pending, D5).
    Agentctl,
}

impl Origin {
    /// The name the API gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Backend => "backend",
            Origin::Agentctl => "agentctl",
        }
    }
}

/// Why a respond or cancel did not go through. The record is left as it was, except
/// where a variant says otherwise.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClarificationError {
    /// Nothing to deliver the verb to: no such record, its agent is gone, or the call
    /// behind it already returned. `origin` says who said so, when it is known.
    #[error("{message}")]
    NotFound {
        /// What was not found.
        message: String,
        /// Who said so.
        origin: Option<Origin>,
    },
    /// The record takes no more answers, or another operator is answering it.
    #[error("{0}")]
    NotActive(String),
    /// The answer does not fit the record's questions.
    #[error("{0}")]
    InvalidAnswer(String),
    /// The agent link failed or agentctl refused the verb.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClarificationError {
    /// Not found, as the backend says.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound {
            message: message.into(),
            origin: Some(Origin::Backend),
        }
    }
}
