//! [`SessionStore`]. State changes are conditional updates on the stored state
//! ([`SessionState::predecessors`]), so the state machine holds whoever writes. Each
//! write that changes what the session shows raises its `view_seq` (the clarification
//! triggers raise it with `pending`), and those the feed shows return the row.

use async_trait::async_trait;
use sqlx::types::Json;

use super::{SESSION, bigint, engine};
use crate::model::{Fence, NewMessage, SessionRecord, SessionState, Timestamp, new_record_id};
use crate::store::{SessionStore, StartFacts, StoreError, TurnStart};

use engine::Db;

/// `state IN (…)` over the states `next` may replace (closed names, safe to inline).
fn from_states(next: SessionState) -> String {
    let names: Vec<String> = SessionState::predecessors(next)
        .into_iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    if names.is_empty() {
        "FALSE".to_owned()
    } else {
        format!("state IN ({})", names.join(", "))
    }
}

impl Db {
    async fn stored_state(&self, id: &str) -> Result<Option<SessionState>, StoreError> {
        let state = sqlx::query_scalar("SELECT state FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(state)
    }
}

#[async_trait]
impl SessionStore for Db {
    async fn insert_session(
        &self,
        task_id: &str,
        agent: &str,
    ) -> Result<SessionRecord, StoreError> {
        let record = sqlx::query_as(&format!(
            "INSERT INTO sessions (id, task_id, agent, state, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) \
             RETURNING {SESSION}"
        ))
        .bind(new_record_id())
        .bind(task_id)
        .bind(agent)
        .bind(SessionState::Created)
        .bind(Timestamp::now())
        .fetch_one(&mut *self.writer().await?)
        .await?;
        Ok(record)
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let sql = format!("SELECT {SESSION} FROM sessions WHERE id = $1");
        let record = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(record)
    }

    async fn sessions_of_tasks(
        &self,
        task_ids: &[String],
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let sql = format!(
            "SELECT {SESSION} FROM sessions WHERE task_id IN ({}) ORDER BY created_at, id",
            engine::each_text("$1")
        );
        let records = sqlx::query_as(&sql)
            .bind(Json(task_ids))
            .fetch_all(self.pool())
            .await?;
        Ok(records)
    }

    async fn live_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let sql = format!(
            "SELECT {SESSION} FROM sessions WHERE state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY created_at, id"
        );
        Ok(sqlx::query_as(&sql).fetch_all(self.pool()).await?)
    }

    async fn transition(
        &self,
        id: &str,
        next: SessionState,
        error: Option<&str>,
        fence: Fence,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE sessions SET state = $2, error = COALESCE($3, error), updated_at = $4, view_seq = view_seq + 1 \
             WHERE id = $1 AND {} AND {}",
            from_states(next),
            engine::fenced("sessions.id", "$5")
        ))
        .bind(id)
        .bind(next)
        .bind(error)
        .bind(Timestamp::now())
        .bind(fence.bind())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn record_start(&self, id: &str, facts: &StartFacts) -> Result<(), StoreError> {
        // The documents go as the text agentctl sent, into columns that keep it as is.
        sqlx::query(&format!(
            "UPDATE sessions SET acp_session_id = $2, client_capabilities = {}, flags = {}, \
             agent_info = {}, updated_at = $6, view_seq = view_seq + 1 WHERE id = $1",
            engine::json_as_sent("$3"),
            engine::json_as_sent("$4"),
            engine::json_as_sent("$5"),
        ))
        .bind(id)
        .bind(&facts.acp_session_id)
        .bind(facts.client_capabilities.to_string())
        .bind(facts.flags.to_string())
        .bind(facts.agent_info.as_ref().map(ToString::to_string))
        .bind(Timestamp::now())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    async fn set_last_event_seq(&self, id: &str, seq: u64) -> Result<(), StoreError> {
        sqlx::query(engine::SET_LAST_EVENT_SEQ)
            .bind(id)
            .bind(bigint(seq))
            .execute(&mut *self.writer().await?)
            .await?;
        Ok(())
    }

    async fn begin_turn(
        &self,
        id: &str,
        prompt: &NewMessage,
        fence: Fence,
    ) -> Result<TurnStart, StoreError> {
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        let claimed = sqlx::query(&format!(
            "UPDATE sessions SET state = 'RUNNING', updated_at = $2, view_seq = view_seq + 1 WHERE id = $1 AND state = 'IDLE' AND {}",
            engine::fenced("sessions.id", "$3")
        ))
        .bind(id)
        .bind(Timestamp::now())
        .bind(fence.bind())
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() == 0 {
            tx.rollback().await?;
            // The read below is a reader's (on an in-memory database, the writer's own).
            drop(writer);
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
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        sqlx::query("DELETE FROM messages WHERE id = $1 AND session_id = $2")
            .bind(prompt_message_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE sessions SET state = 'IDLE', updated_at = $2, view_seq = view_seq + 1 WHERE id = $1 AND state = 'RUNNING'",
        )
        .bind(id)
        .bind(Timestamp::now())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn end_turn(&self, id: &str, fence: Fence) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE sessions SET state = 'IDLE', updated_at = $2, view_seq = view_seq + 1 WHERE id = $1 AND state IN ('RUNNING', 'WAITING_FOR_INPUT') AND {}",
            engine::fenced("sessions.id", "$3")
        ))
        .bind(id)
        .bind(Timestamp::now())
        .bind(fence.bind())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
