//! [`MessageStore`] on PostgreSQL. A message's `seq` comes from its session row's
//! `message_seq` counter: the `UPDATE … RETURNING` locks that row until the inserting
//! transaction ends, so writers of one session take numbers one at a time.

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::{PostgresDb, name, time};
use crate::model::{Message, MessageKind, NewMessage, Timestamp};
use crate::store::{MessageStore, StoreError};

pub(super) const COLUMNS: &str = "id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at";

pub(super) fn message(row: &PgRow) -> Result<Message, StoreError> {
    prefixed(row, "")
}

/// A message whose columns are named `{prefix}id`, `{prefix}seq`, … (one joined to
/// another row).
pub(super) fn prefixed(row: &PgRow, prefix: &str) -> Result<Message, StoreError> {
    let col = |name: &str| format!("{prefix}{name}");
    Ok(Message {
        id: row.try_get(col("id").as_str())?,
        session_id: row.try_get(col("session_id").as_str())?,
        task_id: row.try_get(col("task_id").as_str())?,
        seq: row.try_get(col("seq").as_str())?,
        kind: name(row, &col("type"), MessageKind::parse)?,
        author_type: row.try_get(col("author_type").as_str())?,
        content: row.try_get(col("content").as_str())?,
        requests_input: row.try_get(col("requests_input").as_str())?,
        metadata: row.try_get(col("metadata").as_str())?,
        created_at: time(row, &col("created_at"))?,
        updated_at: time(row, &col("updated_at"))?,
    })
}

/// Inserts `new` at the end of its session inside the caller's transaction.
pub(super) async fn insert(
    conn: &mut PgConnection,
    new: &NewMessage,
) -> Result<Message, StoreError> {
    let seq: Option<(i64,)> = sqlx::query_as(
        "UPDATE sessions SET message_seq = message_seq + 1 WHERE id = $1 RETURNING message_seq",
    )
    .bind(&new.session_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((seq,)) = seq else {
        return Err(StoreError::Query(format!(
            "no session `{}` to add a message to",
            new.session_id
        )));
    };
    let at = Timestamp::now();
    let row = sqlx::query(&format!(
        "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11) RETURNING {COLUMNS}"
    ))
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&new.session_id)
    .bind(&new.task_id)
    .bind(seq)
    .bind(new.kind.as_str())
    .bind(new.author_type)
    .bind(&new.content)
    .bind(new.requests_input)
    .bind(Value::Object(new.metadata.clone()))
    .bind(at.instant())
    .bind(new.tool_call_id())
    .fetch_one(&mut *conn)
    .await?;
    message(&row)
}

/// Merges `patch` into message `id`'s metadata (a shallow `||`, in SQL).
pub(super) async fn merge(
    conn: &mut PgConnection,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    let row = sqlx::query(&format!(
        "UPDATE messages SET metadata = metadata || $2, content = COALESCE($3, content), updated_at = $4 \
         WHERE id = $1 RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(Value::Object(patch.clone()))
    .bind(content)
    .bind(Timestamp::now().instant())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))?;
    message(&row)
}

#[async_trait]
impl MessageStore for PostgresDb {
    async fn insert_message(&self, new: &NewMessage) -> Result<Message, StoreError> {
        let mut tx = self.begin().await?;
        let message = insert(&mut tx, new).await?;
        tx.commit().await?;
        Ok(message)
    }

    async fn message(&self, id: &str) -> Result<Option<Message>, StoreError> {
        sqlx::query(&format!("SELECT {COLUMNS} FROM messages WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(message)
            .transpose()
    }

    async fn messages(&self, session_id: &str) -> Result<Vec<Message>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM messages WHERE session_id = $1 ORDER BY seq"
        ))
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(message)
        .collect()
    }

    async fn append_content(&self, id: &str, text: &str) -> Result<Message, StoreError> {
        let row = sqlx::query(&format!(
            "UPDATE messages SET content = content || $2, updated_at = $3 WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .bind(id)
        .bind(text)
        .bind(Timestamp::now().instant())
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))?;
        message(&row)
    }

    async fn merge_metadata(
        &self,
        id: &str,
        patch: &Map<String, Value>,
        content: Option<&str>,
    ) -> Result<Message, StoreError> {
        let mut conn = self.pool.acquire().await?;
        merge(&mut conn, id, patch, content).await
    }

    async fn latest_tool_call(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM messages WHERE session_id = $1 AND tool_call_id = $2 \
             ORDER BY seq DESC LIMIT 1"
        ))
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(message)
        .transpose()
    }
}
