//! Session rows, and the session as the API returns it.

use serde::Serialize;
use serde_json::Value;
use sqlx::FromRow;

use crate::db::{Db, now};
use crate::sessions::state::{SessionState, pending_action};

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct SessionRow {
    /// UUID; also agentctl's `session_id`.
    pub id: String,
    /// Its task.
    pub task_id: String,
    /// Agent id from the configuration.
    pub agent: String,
    /// A [`SessionState`] name.
    pub state: String,
    /// The ACP session id agentctl reported.
    pub acp_session_id: Option<String>,
    /// JSON text: the exact `clientCapabilities` sent in `initialize`.
    pub client_capabilities: Option<String>,
    /// JSON text: the flag snapshot sent in `agent.session.start`.
    pub flags: Option<String>,
    /// Why the session failed.
    pub error: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// The last agent event (agentctl's sequence number) applied; see
    /// [`set_last_event_seq`].
    pub last_event_seq: Option<i64>,
}

impl SessionRow {
    /// [`SessionRow::last_event_seq`] as the `after_seq` of an attach.
    pub fn after_seq(&self) -> Option<u64> {
        self.last_event_seq.and_then(|seq| u64::try_from(seq).ok())
    }

    /// The parsed state; an unknown stored name reads as `FAILED`.
    pub fn state(&self) -> SessionState {
        self.state.parse().unwrap_or(SessionState::Failed)
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
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl Session {
    /// Builds the view from a row and its count of pending clarifications.
    pub fn from_row(row: SessionRow, pending: usize) -> Self {
        // The view derives "waiting" from the pending count in both directions, so state and
        // pending_action never contradict each other while the runtime catches up: a record
        // inserted a moment before the runtime wrote WAITING_FOR_INPUT already means waiting,
        // and a stored WAITING_FOR_INPUT whose last clarification just settled means the turn
        // goes on (clarifications only exist inside a turn), i.e. RUNNING.
        let state = match row.state() {
            live if !live.is_terminal() && pending > 0 => SessionState::WaitingForInput,
            SessionState::WaitingForInput => SessionState::Running,
            other => other,
        };
        let json = |text: Option<String>| {
            text.and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null)
        };
        Self {
            pending_action: pending_action(state, pending),
            state,
            client_capabilities: json(row.client_capabilities),
            flags: json(row.flags),
            id: row.id,
            task_id: row.task_id,
            agent: row.agent,
            acp_session_id: row.acp_session_id,
            error: row.error,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

const COLUMNS: &str = "id, task_id, agent, state, acp_session_id, client_capabilities, flags, error, created_at, updated_at, last_event_seq";

/// Stores a new session in `CREATED`.
pub async fn insert(db: &Db, task_id: &str, agent: &str) -> Result<SessionRow, sqlx::Error> {
    let id = uuid::Uuid::new_v4().to_string();
    let at = now();
    sqlx::query(
        "INSERT INTO sessions (id, task_id, agent, state, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
    )
    .bind(&id)
    .bind(task_id)
    .bind(agent)
    .bind(SessionState::Created.as_str())
    .bind(&at)
    .execute(db)
    .await?;
    get(db, &id).await?.ok_or(sqlx::Error::RowNotFound)
}

/// One session row.
pub async fn get(db: &Db, id: &str) -> Result<Option<SessionRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM sessions WHERE id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await
}

/// A task's sessions, oldest first.
pub async fn list_for_task(db: &Db, task_id: &str) -> Result<Vec<SessionRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sessions WHERE task_id = $1 ORDER BY created_at, id"
    ))
    .bind(task_id)
    .fetch_all(db)
    .await
}

/// Sessions in a non-terminal state (left over by a previous process at start-up).
pub async fn list_live(db: &Db) -> Result<Vec<SessionRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sessions WHERE state NOT IN ($1, $2, $3)"
    ))
    .bind(SessionState::Completed.as_str())
    .bind(SessionState::Failed.as_str())
    .bind(SessionState::Cancelled.as_str())
    .fetch_all(db)
    .await
}

/// Sets the state (and the error, when given).
pub async fn set_state(
    db: &Db,
    id: &str,
    state: SessionState,
    error: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE sessions SET state = $2, error = COALESCE($3, error), updated_at = $4 WHERE id = $1")
        .bind(id)
        .bind(state.as_str())
        .bind(error)
        .bind(now())
        .execute(db)
        .await?;
    Ok(())
}

/// Records that every agent event up to `seq` has been applied to session `id` (a
/// restart re-attaches after it). Not a change the operator sees: `updated_at` stays.
pub async fn set_last_event_seq(db: &Db, id: &str, seq: u64) -> Result<(), sqlx::Error> {
    let seq = i64::try_from(seq).unwrap_or(i64::MAX);
    sqlx::query("UPDATE sessions SET last_event_seq = $2 WHERE id = $1")
        .bind(id)
        .bind(seq)
        .execute(db)
        .await?;
    Ok(())
}

/// Records what agentctl reported at start and the flags the session started with.
pub async fn set_started(
    db: &Db,
    id: &str,
    acp_session_id: &str,
    client_capabilities: &Value,
    flags: &Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE sessions SET acp_session_id = $2, client_capabilities = $3, flags = $4, updated_at = $5 WHERE id = $1",
    )
    .bind(id)
    .bind(acp_session_id)
    .bind(client_capabilities.to_string())
    .bind(flags.to_string())
    .bind(now())
    .execute(db)
    .await?;
    Ok(())
}

/// The session as the API returns it, with its `pending_action`.
pub async fn view(db: &Db, id: &str) -> Result<Option<Session>, sqlx::Error> {
    let Some(row) = get(db, id).await? else {
        return Ok(None);
    };
    let pending = crate::clarifications::store::count_pending(db, id).await?;
    Ok(Some(Session::from_row(row, pending)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn lifecycle_of_a_row() {
        let db = crate::db::memory().await;
        let task = crate::tasks::create(&db, "T", "").await.expect("task");
        let row = insert(&db, &task.id, "mock").await.expect("insert");
        assert_eq!(row.state(), SessionState::Created);
        let v = view(&db, &row.id).await.expect("view").expect("some");
        assert_eq!(v.client_capabilities, Value::Null);
        assert_eq!(v.pending_action, None);

        set_state(&db, &row.id, SessionState::Starting, None)
            .await
            .expect("state");
        assert_eq!(list_live(&db).await.expect("live").len(), 1);
        let caps = json!({"elicitation": {"form": {}}});
        set_started(
            &db,
            &row.id,
            "acp-1",
            &caps,
            &json!({"features.acpElicitation": true}),
        )
        .await
        .expect("started");
        set_state(&db, &row.id, SessionState::Failed, Some("agent exited"))
            .await
            .expect("state");
        let v = view(&db, &row.id).await.expect("view").expect("some");
        assert_eq!(v.state, SessionState::Failed);
        assert_eq!(v.client_capabilities, caps);
        assert_eq!(v.error.as_deref(), Some("agent exited"));
        assert_eq!(v.acp_session_id.as_deref(), Some("acp-1"));
        assert!(list_live(&db).await.expect("live").is_empty());
        assert_eq!(list_for_task(&db, &task.id).await.expect("list").len(), 1);
        assert!(view(&db, "nope").await.expect("view").is_none());

        let live = insert(&db, &task.id, "mock").await.expect("insert");
        set_state(&db, &live.id, SessionState::Running, None)
            .await
            .expect("state");
        let waiting = Session::from_row(get(&db, &live.id).await.expect("get").expect("row"), 1);
        assert_eq!(
            (waiting.state, waiting.pending_action),
            (SessionState::WaitingForInput, Some("clarification"))
        );
        let failed = Session::from_row(get(&db, &row.id).await.expect("get").expect("row"), 1);
        assert_eq!(
            (failed.state, failed.pending_action),
            (SessionState::Failed, None)
        );
    }

    #[tokio::test]
    async fn the_last_applied_event_is_stored_without_touching_updated_at() {
        let db = crate::db::memory().await;
        let task = crate::tasks::create(&db, "T", "").await.expect("task");
        let row = insert(&db, &task.id, "mock").await.expect("insert");
        assert_eq!((row.last_event_seq, row.after_seq()), (None, None));
        set_last_event_seq(&db, &row.id, 41).await.expect("seq");
        let after = get(&db, &row.id).await.expect("get").expect("row");
        assert_eq!(after.after_seq(), Some(41));
        assert_eq!(after.updated_at, row.updated_at);
    }

    /// The view never says WAITING_FOR_INPUT without a pending action, nor the reverse, for
    /// every stored state and pending count — also while the runtime has not yet written the
    /// state that follows a settlement.
    #[tokio::test]
    async fn state_and_pending_action_agree_for_every_stored_state() {
        let db = crate::db::memory().await;
        let task = crate::tasks::create(&db, "T", "").await.expect("task");
        let row = insert(&db, &task.id, "mock").await.expect("insert");
        for stored in SessionState::ALL {
            set_state(&db, &row.id, stored, None).await.expect("state");
            for pending in 0..3 {
                let v =
                    Session::from_row(get(&db, &row.id).await.expect("get").expect("row"), pending);
                assert_eq!(
                    v.state == SessionState::WaitingForInput,
                    v.pending_action.is_some(),
                    "stored {stored} with {pending} pending gave {:?}/{:?}",
                    v.state,
                    v.pending_action
                );
            }
        }
        set_state(&db, &row.id, SessionState::WaitingForInput, None)
            .await
            .expect("state");
        let settled = Session::from_row(get(&db, &row.id).await.expect("get").expect("row"), 0);
        assert_eq!(
            settled.state,
            SessionState::Running,
            "the turn goes on after a settlement"
        );
    }
}
