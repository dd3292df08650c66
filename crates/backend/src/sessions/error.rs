//! [`SessionError`]: why a verb on a session did not go through. The HTTP layer maps
//! each to its status and code (docs/architecture.md §4.4).

use crate::agent_link::LinkError;
use crate::model::SessionState;
use crate::store::StoreError;

/// Why a start, prompt, cancel or stop was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The start names an agent the configuration does not have.
    #[error("unknown agent `{agent}`; configured agents: {known}")]
    UnknownAgent {
        /// The agent asked for.
        agent: String,
        /// The configured ones, comma-separated.
        known: String,
    },
    /// No such session.
    #[error("no session `{0}`")]
    NotFound(String),
    /// The session has ended.
    #[error("session `{id}` has ended ({state})")]
    Ended {
        /// The session.
        id: String,
        /// How it ended.
        state: SessionState,
    },
    /// A turn is running (one turn at a time).
    #[error("a turn is already running; wait for it or cancel it")]
    TurnInProgress,
    /// The session has not started yet.
    #[error("session `{id}` is {state}; try again when it has started")]
    NotReady {
        /// The session.
        id: String,
        /// Where its start is.
        state: SessionState,
    },
    /// The agent link failed or agentctl refused.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Something that cannot happen did.
    #[error("{0}")]
    Internal(String),
}

impl SessionError {
    /// Why session `id`, standing as `state`, takes no prompt.
    pub fn refusal(id: &str, state: SessionState) -> Self {
        if state.is_terminal() {
            Self::Ended {
                id: id.to_owned(),
                state,
            }
        } else if matches!(state, SessionState::Running | SessionState::WaitingForInput) {
            Self::TurnInProgress
        } else {
            Self::NotReady {
                id: id.to_owned(),
                state,
            }
        }
    }
}
