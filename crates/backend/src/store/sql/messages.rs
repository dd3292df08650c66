//! [`MessageStore`]. A message's `seq` comes from its session row's `message_seq`
//! counter, bumped in the inserting transaction: the `UPDATE … RETURNING` holds that row
//! (SQLite: the write lock) until the transaction ends, so writers of one session take
//! numbers one at a time; `UNIQUE (session_id, seq)` backs it up.

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::{Binds, MESSAGE, engine};
use crate::model::{Message, NewMessage, Timestamp, new_record_id};
use crate::store::{MessageStore, StoreError};

use engine::{Conn, Db};

/// Inserts `new` at the end of its session inside the caller's transaction.
pub(super) async fn insert(conn: &mut Conn, new: &NewMessage) -> Result<Message, StoreError> {
    let seq: Option<i64> = sqlx::query_scalar(
        "UPDATE sessions SET message_seq = message_seq + 1 WHERE id = $1 RETURNING message_seq",
    )
    .bind(&new.session_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(seq) = seq else {
        return Err(StoreError::Query(format!(
            "no session `{}` to add a message to",
            new.session_id
        )));
    };
    let message = sqlx::query_as(&format!(
        "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11) RETURNING {MESSAGE}"
    ))
    .bind(new_record_id())
    .bind(&new.session_id)
    .bind(&new.task_id)
    .bind(seq)
    .bind(new.kind)
    .bind(new.author_type)
    .bind(&new.content)
    .bind(new.requests_input)
    .bind(Json(&new.metadata))
    .bind(Timestamp::now())
    .bind(new.tool_call_id())
    .fetch_one(&mut *conn)
    .await?;
    Ok(message)
}

#[async_trait]
impl MessageStore for Db {
    async fn insert_message(&self, new: &NewMessage) -> Result<Message, StoreError> {
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        let message = insert(&mut tx, new).await?;
        tx.commit().await?;
        Ok(message)
    }

    async fn message(&self, id: &str) -> Result<Option<Message>, StoreError> {
        let sql = format!("SELECT {MESSAGE} FROM messages WHERE id = $1");
        let message = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(message)
    }

    async fn messages(&self, session_id: &str) -> Result<Vec<Message>, StoreError> {
        let sql = format!("SELECT {MESSAGE} FROM messages WHERE session_id = $1 ORDER BY seq");
        let messages = sqlx::query_as(&sql)
            .bind(session_id)
            .fetch_all(self.pool())
            .await?;
        Ok(messages)
    }

    async fn append_content(
        &self,
        id: &str,
        text: &str,
        position: Option<u64>,
    ) -> Result<Message, StoreError> {
        let mut statement = format!(
            "UPDATE messages SET content = content || $2, updated_at = $3 WHERE id = $1 RETURNING {MESSAGE}"
        );
        let mut binds = Binds::default()
            .and(id.to_owned())?
            .and(text.to_owned())?
            .and(Timestamp::now())?;
        if let Some(seq) = position {
            statement = engine::with_position(&statement);
            binds = binds.and(super::bigint(seq))?;
        }
        engine::write_returning(self, statement, binds)
            .await?
            .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))
    }

    async fn merge_metadata(
        &self,
        id: &str,
        patch: &Map<String, Value>,
        content: Option<&str>,
    ) -> Result<Message, StoreError> {
        engine::merge_alone(self, id, patch, content).await
    }

    async fn latest_tool_call(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        let message = sqlx::query_as(&format!(
            "SELECT {MESSAGE} FROM messages WHERE session_id = $1 AND tool_call_id = $2 \
             ORDER BY seq DESC LIMIT 1"
        ))
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(message)
    }
}
