//! The session state machine (ARCHITECTURE §4.4):
//! `CREATED → STARTING → RUNNING ⇄ IDLE`, `WAITING_FOR_INPUT` while a clarification is
//! pending, and the terminal `COMPLETED` (stopped by the operator), `FAILED` (the agent
//! or agentctl died, or the start failed) and `CANCELLED` (ended by the backend itself,
//! e.g. at shutdown, while still live).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionState {
    /// Stored, nothing started yet.
    Created,
    /// agentctl and the agent are being started.
    Starting,
    /// A prompt is in flight.
    Running,
    /// Ready for a prompt.
    Idle,
    /// A clarification of the session is pending.
    WaitingForInput,
    /// Stopped by the operator.
    Completed,
    /// The agent or agentctl died, or the start failed.
    Failed,
    /// Ended by the backend (shutdown) while still live.
    Cancelled,
}

impl SessionState {
    /// Every state.
    pub const ALL: [SessionState; 8] = [
        Self::Created,
        Self::Starting,
        Self::Running,
        Self::Idle,
        Self::WaitingForInput,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "CREATED",
            Self::Starting => "STARTING",
            Self::Running => "RUNNING",
            Self::Idle => "IDLE",
            Self::WaitingForInput => "WAITING_FOR_INPUT",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
        }
    }

    /// Whether the session has ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The state of a started, live session: waiting while anything is pending,
    /// else running while a turn is in flight, else idle.
    pub fn live(turn_active: bool, pending_clarifications: usize) -> Self {
        if pending_clarifications > 0 {
            Self::WaitingForInput
        } else if turn_active {
            Self::Running
        } else {
            Self::Idle
        }
    }

    /// Whether the machine allows going from `self` to `next`.
    pub fn can_become(self, next: SessionState) -> bool {
        use SessionState::*;
        if self == next {
            return true;
        }
        match self {
            Created => matches!(next, Starting | Failed | Cancelled | Completed),
            Starting => matches!(
                next,
                Running | Idle | WaitingForInput | Failed | Cancelled | Completed
            ),
            Running | Idle | WaitingForInput => !matches!(next, Created | Starting),
            Completed | Failed | Cancelled => false,
        }
    }
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored state name that is not a [`SessionState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown session state `{0}`")]
pub struct UnknownState(pub String);

impl FromStr for SessionState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// The `pending_action` of a session: `"clarification"` while the session is live
/// and any clarification of it is pending, else none.
pub fn pending_action(state: SessionState, pending_clarifications: usize) -> Option<&'static str> {
    (!state.is_terminal() && pending_clarifications > 0).then_some("clarification")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip() {
        for st in SessionState::ALL {
            assert_eq!(st.as_str().parse::<SessionState>(), Ok(st));
            assert_eq!(
                serde_json::to_value(st).expect("json"),
                serde_json::json!(st.as_str())
            );
        }
        assert!("RUNNINGish".parse::<SessionState>().is_err());
    }

    #[test]
    fn live_state_prefers_waiting_then_running_then_idle() {
        assert_eq!(SessionState::live(true, 1), SessionState::WaitingForInput);
        assert_eq!(SessionState::live(false, 2), SessionState::WaitingForInput);
        assert_eq!(SessionState::live(true, 0), SessionState::Running);
        assert_eq!(SessionState::live(false, 0), SessionState::Idle);
    }

    #[test]
    fn terminal_states_go_nowhere() {
        for end in [
            SessionState::Completed,
            SessionState::Failed,
            SessionState::Cancelled,
        ] {
            assert!(end.is_terminal());
            for next in SessionState::ALL {
                assert_eq!(end.can_become(next), end == next, "{end} -> {next}");
            }
        }
        assert!(SessionState::Created.can_become(SessionState::Starting));
        assert!(!SessionState::Created.can_become(SessionState::Running));
        assert!(SessionState::Starting.can_become(SessionState::Idle));
        assert!(SessionState::Idle.can_become(SessionState::Running));
        assert!(SessionState::Running.can_become(SessionState::WaitingForInput));
        assert!(!SessionState::Idle.can_become(SessionState::Starting));
    }

    #[test]
    fn pending_action_needs_a_live_session_and_a_pending() {
        assert_eq!(
            pending_action(SessionState::WaitingForInput, 1),
            Some("clarification")
        );
        assert_eq!(pending_action(SessionState::Running, 0), None);
        assert_eq!(pending_action(SessionState::Failed, 1), None);
        assert_eq!(pending_action(SessionState::Completed, 3), None);
    }

    proptest! {
        #[test]
        fn live_states_are_never_terminal_and_match_pending_action(turn in any::<bool>(), pending in 0usize..5) {
            let st = SessionState::live(turn, pending);
            prop_assert!(!st.is_terminal());
            prop_assert_eq!(pending_action(st, pending).is_some(), st == SessionState::WaitingForInput);
            for from in [SessionState::Running, SessionState::Idle, SessionState::WaitingForInput, SessionState::Starting] {
                prop_assert!(from.can_become(st));
            }
        }
    }
}
