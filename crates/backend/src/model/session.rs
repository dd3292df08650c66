//! Sessions: the state machine, the stored record, and the session as the API returns it.
//!
//! `CREATED → STARTING → IDLE ⇄ RUNNING`, then one of the terminal `COMPLETED` (stopped
//! by the operator), `FAILED` (the agent or agentctl died, or the start failed) and
//! `CANCELLED` (ended by the backend itself, e.g. at shutdown). `WAITING_FOR_INPUT` is
//! never stored: a live session shows it while any of its clarifications is pending
//! (clarifications are asked inside a turn), so state and `pending_action` can never
//! disagree. The stores enforce [`SessionState::can_become`] in the update itself.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::time::Timestamp;

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
    /// Shown, never stored: a clarification of the live session is pending.
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

    /// Whether the machine allows storing `next` over `self`. `WAITING_FOR_INPUT` is
    /// derived, so nothing becomes it; a stored one (written by an older kandev) moves on
    /// like `RUNNING`.
    pub fn can_become(self, next: SessionState) -> bool {
        use SessionState::*;
        if next == WaitingForInput {
            return false;
        }
        match self {
            Created => matches!(next, Starting | Failed | Cancelled | Completed),
            Starting => matches!(next, Idle | Running | Failed | Cancelled | Completed),
            Idle => matches!(next, Running | Completed | Failed | Cancelled),
            Running | WaitingForInput => {
                matches!(next, Idle | Completed | Failed | Cancelled)
            }
            Completed | Failed | Cancelled => false,
        }
    }

    /// The stored states `next` may replace: what a conditional update matches on.
    pub fn predecessors(next: SessionState) -> Vec<SessionState> {
        Self::ALL
            .into_iter()
            .filter(|from| from.can_become(next))
            .collect()
    }

    /// The state shown for a stored state with `pending` clarifications.
    pub fn shown(self, pending: usize) -> Self {
        match self {
            live if !live.is_terminal() && pending > 0 => Self::WaitingForInput,
            // A settled last clarification means the turn goes on.
            Self::WaitingForInput => Self::Running,
            other => other,
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

/// A stored session, with the count of its pending clarifications.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// UUID; also agentctl's `session_id`.
    pub id: String,
    /// Its task.
    pub task_id: String,
    /// Agent id from the configuration.
    pub agent: String,
    /// The stored state.
    pub state: SessionState,
    /// The ACP session id agentctl reported.
    pub acp_session_id: Option<String>,
    /// The exact `clientCapabilities` sent in `initialize`.
    pub client_capabilities: Option<Value>,
    /// The flag snapshot sent in `agent.session.start`.
    pub flags: Option<Value>,
    /// The agent's ACP `agentInfo` (`name`, `title`, `version`), when it sent one.
    pub agent_info: Option<Value>,
    /// Why the session failed.
    pub error: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its state or start facts last changed.
    pub updated_at: Timestamp,
    /// The last agent event (agentctl's sequence number) applied; a re-attach after a
    /// restart replays what follows it.
    pub last_event_seq: Option<u64>,
    /// How many of its clarifications are pending.
    pub pending: usize,
    /// Raised by every write that changes the session's view (its state, start facts,
    /// error or pending count), so of two views of it the later is known.
    pub view_seq: u64,
}

/// A session row with its `pending` count; the counters are `BIGINT` in the database.
impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for SessionRecord
where
    &'r str: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Value: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    SessionState: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Timestamp: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let last: Option<i64> = row.try_get("last_event_seq")?;
        let pending: i64 = row.try_get("pending")?;
        let view_seq: i64 = row.try_get("view_seq")?;
        Ok(Self {
            id: row.try_get("id")?,
            task_id: row.try_get("task_id")?,
            agent: row.try_get("agent")?,
            state: row.try_get("state")?,
            acp_session_id: row.try_get("acp_session_id")?,
            client_capabilities: row.try_get("client_capabilities")?,
            flags: row.try_get("flags")?,
            agent_info: row.try_get("agent_info")?,
            error: row.try_get("error")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            last_event_seq: last.and_then(|seq| u64::try_from(seq).ok()),
            pending: usize::try_from(pending).unwrap_or(0),
            view_seq: u64::try_from(view_seq).unwrap_or(0),
        })
    }
}

#[cfg(test)]
impl SessionRecord {
    /// A session of task `t` for tests: agent `mock`, nothing started, nothing pending.
    pub(crate) fn sample(id: &str, state: SessionState, at: Timestamp, view_seq: u64) -> Self {
        Self {
            id: id.into(),
            task_id: "t".into(),
            agent: "mock".into(),
            state,
            acp_session_id: None,
            client_capabilities: None,
            flags: None,
            agent_info: None,
            error: None,
            created_at: at,
            updated_at: at,
            last_event_seq: None,
            pending: 0,
            view_seq,
        }
    }
}

/// A session as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    /// UUID.
    pub id: String,
    /// Its task.
    pub task_id: String,
    /// Agent id.
    pub agent: String,
    /// The agent's ACP `agentInfo`, null until started or when it sent none.
    pub agent_info: Value,
    /// The state.
    pub state: SessionState,
    /// `"clarification"` while a clarification is pending, else null.
    pub pending_action: Option<&'static str>,
    /// The `clientCapabilities` agentctl sent in `initialize`, null until started.
    pub client_capabilities: Value,
    /// The flag snapshot the session started with, null until started.
    pub flags: Value,
    /// The ACP session id.
    pub acp_session_id: Option<String>,
    /// Why the session failed.
    pub error: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl From<SessionRecord> for Session {
    fn from(rec: SessionRecord) -> Self {
        let state = rec.state.shown(rec.pending);
        Self {
            pending_action: pending_action(state, rec.pending),
            state,
            agent_info: rec.agent_info.unwrap_or(Value::Null),
            client_capabilities: rec.client_capabilities.unwrap_or(Value::Null),
            flags: rec.flags.unwrap_or(Value::Null),
            id: rec.id,
            task_id: rec.task_id,
            agent: rec.agent,
            acp_session_id: rec.acp_session_id,
            error: rec.error,
            created_at: rec.created_at,
            updated_at: rec.updated_at,
        }
    }
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
    fn terminal_states_go_nowhere_and_waiting_is_never_stored() {
        for end in [
            SessionState::Completed,
            SessionState::Failed,
            SessionState::Cancelled,
        ] {
            assert!(end.is_terminal());
            assert!(SessionState::predecessors(end).contains(&SessionState::Running));
            for next in SessionState::ALL {
                assert!(!end.can_become(next), "{end} -> {next}");
            }
        }
        assert!(SessionState::predecessors(SessionState::WaitingForInput).is_empty());
        assert!(SessionState::Created.can_become(SessionState::Starting));
        assert!(!SessionState::Created.can_become(SessionState::Running));
        assert!(SessionState::Starting.can_become(SessionState::Idle));
        assert!(SessionState::Idle.can_become(SessionState::Running));
        assert!(!SessionState::Idle.can_become(SessionState::Idle));
        assert!(!SessionState::Idle.can_become(SessionState::Starting));
        assert_eq!(
            SessionState::predecessors(SessionState::Running),
            [SessionState::Starting, SessionState::Idle]
        );
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
        /// The shown state says WAITING_FOR_INPUT exactly when there is a pending action,
        /// for every stored state and pending count.
        #[test]
        fn shown_state_and_pending_action_agree(stored in 0usize..8, pending in 0usize..4) {
            let stored = SessionState::ALL[stored];
            let shown = stored.shown(pending);
            prop_assert_eq!(
                shown == SessionState::WaitingForInput,
                pending_action(shown, pending).is_some()
            );
            prop_assert_eq!(shown.is_terminal(), stored.is_terminal());
        }
    }
}
