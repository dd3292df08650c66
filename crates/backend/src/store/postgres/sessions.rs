//! [`SessionStore`] on PostgreSQL. State changes are conditional updates on the stored
//! state ([`SessionState::predecessors`]).

use async_trait::async_trait;
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{PostgresDb, name, time};
use crate::model::{Fence, NewMessage, SessionRecord, SessionState, Timestamp};
use crate::store::{SessionStore, StartFacts, StoreError, TurnStart};

const SELECT: &str = "SELECT s.id, s.task_id, s.agent, s.state, s.acp_session_id, s.client_capabilities, \
     s.flags, s.agent_info, s.error, s.created_at, s.updated_at, s.last_event_seq, \
     (SELECT COUNT(*) FROM clarifications c WHERE c.session_id = s.id AND c.status = 'pending') AS pending \
     FROM sessions s";

fn record(row: &PgRow) -> Result<SessionRecord, StoreError> {
    let last: Option<i64> = row.try_get("last_event_seq")?;
    let pending: i64 = row.try_get("pending")?;
    Ok(SessionRecord {
        id: row.try_get("id")?,
        task_id: row.try_get("task_id")?,
        agent: row.try_get("agent")?,
        state: name(row, "state", |s| s.parse().ok())?,
        acp_session_id: row.try_get("acp_session_id")?,
        client_capabilities: row.try_get::<Option<Value>, _>("client_capabilities")?,
        flags: row.try_get::<Option<Value>, _>("flags")?,
        agent_info: row.try_get::<Option<Value>, _>("agent_info")?,
        error: row.try_get("error")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        last_event_seq: last.and_then(|seq| u64::try_from(seq).ok()),
        pending: usize::try_from(pending).unwrap_or(0),
    })
}

/// The stored states `next` may replace, as a text array for `state = ANY(…)`.
fn from_states(next: SessionState) -> Vec<String> {
    SessionState::predecessors(next)
        .into_iter()
        .map(|s| s.as_str().to_owned())
        .collect()
}

impl PostgresDb {
    async fn stored_state(&self, id: &str) -> Result<Option<SessionState>, StoreError> {
        let row: Option<(String,)> = sqlx::query_as("SELECT state FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|(s,)| {
            s.parse()
                .map_err(|err: crate::model::session::UnknownState| {
                    StoreError::Corrupt(err.to_string())
                })
        })
        .transpose()
    }
}

#[async_trait]
impl SessionStore for PostgresDb {
    async fn insert_session(
        &self,
        task_id: &str,
        agent: &str,
    ) -> Result<SessionRecord, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let at = Timestamp::now();
        sqlx::query(
            "INSERT INTO sessions (id, task_id, agent, state, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .bind(&id)
        .bind(task_id)
        .bind(agent)
        .bind(SessionState::Created.as_str())
        .bind(at.instant())
        .execute(&self.pool)
        .await?;
        Ok(SessionRecord {
            id,
            task_id: task_id.to_owned(),
            agent: agent.to_owned(),
            state: SessionState::Created,
            acp_session_id: None,
            client_capabilities: None,
            flags: None,
            agent_info: None,
            error: None,
            created_at: at,
            updated_at: at,
            last_event_seq: None,
            pending: 0,
        })
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        sqlx::query(&format!("{SELECT} WHERE s.id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(record)
            .transpose()
    }

    async fn sessions_of_tasks(
        &self,
        task_ids: &[String],
    ) -> Result<Vec<SessionRecord>, StoreError> {
        sqlx::query(&format!(
            "{SELECT} WHERE s.task_id = ANY($1) ORDER BY s.created_at, s.id"
        ))
        .bind(task_ids)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(record)
        .collect()
    }

    async fn live_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        sqlx::query(&format!(
            "{SELECT} WHERE s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY s.created_at, s.id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(record)
        .collect()
    }

    async fn transition(
        &self,
        id: &str,
        next: SessionState,
        error: Option<&str>,
        fence: Fence,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE sessions SET state = $2, error = COALESCE($3, error), updated_at = $4 \
             WHERE id = $1 AND state = ANY($5) AND {}",
            super::fenced("sessions.id", "$6")
        ))
        .bind(id)
        .bind(next.as_str())
        .bind(error)
        .bind(Timestamp::now().instant())
        .bind(from_states(next))
        .bind(fence.bind())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn record_start(&self, id: &str, facts: &StartFacts) -> Result<(), StoreError> {
        sqlx::query(
            // Bound as text into JSON columns: these documents are kept as exchanged, key
            // order included (AC-02 compares them byte for byte); a JSONB parameter would
            // reorder the keys before the column ever saw them.
            "UPDATE sessions SET acp_session_id = $2, client_capabilities = $3::text::json, \
             flags = $4::text::json, agent_info = $5::text::json, updated_at = $6 WHERE id = $1",
        )
        .bind(id)
        .bind(&facts.acp_session_id)
        .bind(facts.client_capabilities.to_string())
        .bind(facts.flags.to_string())
        .bind(facts.agent_info.as_ref().map(Value::to_string))
        .bind(Timestamp::now().instant())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn set_last_event_seq(&self, id: &str, seq: u64) -> Result<(), StoreError> {
        // How far events are applied only spares a replay after a restart (events are
        // idempotent, a lost update replays a few more), so this commit alone does not wait
        // for the WAL to reach the disk: `set_config(…, true)` is local to the statement's
        // own transaction (docs/decisions/0013). Every record and answer still commits
        // synchronously.
        sqlx::query(
            "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)) \
             UPDATE sessions SET last_event_seq = $2 FROM relaxed WHERE id = $1",
        )
        .bind(id)
        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn begin_turn(
        &self,
        id: &str,
        prompt: &NewMessage,
        fence: Fence,
    ) -> Result<TurnStart, StoreError> {
        let mut tx = self.begin().await?;
        let claimed = sqlx::query(&format!(
            "UPDATE sessions SET state = 'RUNNING', updated_at = $2 WHERE id = $1 AND state = 'IDLE' AND {}",
            super::fenced("sessions.id", "$3")
        ))
        .bind(id)
        .bind(Timestamp::now().instant())
        .bind(fence.bind())
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(match self.stored_state(id).await? {
                Some(state) => TurnStart::Refused(state),
                None => TurnStart::Missing,
            });
        }
        let message = super::messages::insert(&mut tx, prompt).await?;
        tx.commit().await?;
        Ok(TurnStart::Started(Box::new(message)))
    }

    async fn abandon_turn(&self, id: &str, prompt_message_id: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM messages WHERE id = $1 AND session_id = $2")
            .bind(prompt_message_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE sessions SET state = 'IDLE', updated_at = $2 WHERE id = $1 AND state = 'RUNNING'",
        )
        .bind(id)
        .bind(Timestamp::now().instant())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn end_turn(&self, id: &str, fence: Fence) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE sessions SET state = 'IDLE', updated_at = $2 WHERE id = $1 AND state IN ('RUNNING', 'WAITING_FOR_INPUT') AND {}",
            super::fenced("sessions.id", "$3")
        ))
        .bind(id)
        .bind(Timestamp::now().instant())
        .bind(fence.bind())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
