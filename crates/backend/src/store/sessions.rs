//! [`SessionStore`]: sessions, their state machine and their turn.

use async_trait::async_trait;
use serde_json::Value;

use crate::model::{Fence, Message, NewMessage, SessionRecord, SessionState};
use crate::store::StoreError;

/// What agentctl reported when a session started.
#[derive(Debug, Clone, PartialEq)]
pub struct StartFacts {
    /// The ACP session id from `session/new`.
    pub acp_session_id: String,
    /// The exact `clientCapabilities` sent in `initialize`.
    pub client_capabilities: Value,
    /// The flag snapshot the session started with.
    pub flags: Value,
    /// The agent's ACP `agentInfo`, when it sent one.
    pub agent_info: Option<Value>,
}

/// What [`SessionStore::begin_turn`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnStart {
    /// The turn is this caller's; the prompt is stored as this message.
    Started(Box<Message>),
    /// No turn can start: the session stands as this (running, not started yet, ended).
    Refused(SessionState),
    /// No such session.
    Missing,
}

/// Where sessions are kept.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session of `agent` on `task_id`, in `CREATED`.
    async fn insert_session(&self, task_id: &str, agent: &str)
    -> Result<SessionRecord, StoreError>;

    /// One session.
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// The sessions of the given tasks, each task's oldest first; one query however many.
    async fn sessions_of_tasks(
        &self,
        task_ids: &[String],
    ) -> Result<Vec<SessionRecord>, StoreError>;

    /// Sessions in a non-terminal state.
    async fn live_sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;

    /// Moves session `id` to `next` if the state machine allows it from its stored state
    /// (checked in the update itself) and its lease still has `fence`'s generation;
    /// records `error` when given. Whether it moved.
    async fn transition(
        &self,
        id: &str,
        next: SessionState,
        error: Option<&str>,
        fence: Fence,
    ) -> Result<bool, StoreError>;

    /// Records what agentctl reported at start.
    async fn record_start(&self, id: &str, facts: &StartFacts) -> Result<(), StoreError>;

    /// Records that every agent event up to `seq` has been applied (a restart re-attaches
    /// after it). Not a change the operator sees: `updated_at` stays.
    async fn set_last_event_seq(&self, id: &str, seq: u64) -> Result<(), StoreError>;

    /// Claims the session's turn (`IDLE → RUNNING`, or the first prompt right after the
    /// start) and stores `prompt` as its first message, in one transaction: two prompts
    /// racing, from any process, start one turn. Fenced like [`SessionStore::transition`]
    /// (a fenced-out claim is refused with the stored state).
    async fn begin_turn(
        &self,
        id: &str,
        prompt: &NewMessage,
        fence: Fence,
    ) -> Result<TurnStart, StoreError>;

    /// Undoes [`SessionStore::begin_turn`] when agentctl never took the prompt: the prompt
    /// message goes and the session is `IDLE` again.
    async fn abandon_turn(&self, id: &str, prompt_message_id: &str) -> Result<(), StoreError>;

    /// Ends the turn (`RUNNING → IDLE`), fenced like [`SessionStore::transition`].
    /// Whether it was running.
    async fn end_turn(&self, id: &str, fence: Fence) -> Result<bool, StoreError>;
}
