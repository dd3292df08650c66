//! [`MessageStore`] on SQLite. A message's `seq` comes from its session row's
//! `message_seq` counter, bumped in the inserting transaction; `UNIQUE (session_id, seq)`
//! backs it up.

use std::fmt::Write as _;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::{SqliteDb, json, name, time};
use crate::model::{Message, MessageKind, NewMessage, Timestamp};
use crate::store::{MessageStore, StoreError};

pub(super) const COLUMNS: &str = "id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at";

pub(super) fn message(row: &SqliteRow) -> Result<Message, StoreError> {
    Ok(Message {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        task_id: row.try_get("task_id")?,
        seq: row.try_get("seq")?,
        kind: name(row, "type", MessageKind::parse)?,
        author_type: row.try_get("author_type")?,
        content: row.try_get("content")?,
        requests_input: row.try_get("requests_input")?,
        metadata: json(row, "metadata")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

/// Inserts `new` at the end of its session inside the caller's transaction.
pub(super) async fn insert(
    conn: &mut SqliteConnection,
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
    let message = Message {
        id: uuid::Uuid::new_v4().to_string(),
        session_id: new.session_id.clone(),
        task_id: new.task_id.clone(),
        seq,
        kind: new.kind,
        author_type: new.author_type.to_owned(),
        content: new.content.clone(),
        requests_input: new.requests_input,
        metadata: Value::Object(new.metadata.clone()),
        created_at: at,
        updated_at: at,
    };
    sqlx::query(
        "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
    )
    .bind(&message.id)
    .bind(&message.session_id)
    .bind(&message.task_id)
    .bind(seq)
    .bind(message.kind.as_str())
    .bind(&message.author_type)
    .bind(&message.content)
    .bind(message.requests_input)
    .bind(message.metadata.to_string())
    .bind(at.to_rfc3339())
    .bind(new.tool_call_id())
    .execute(&mut *conn)
    .await?;
    Ok(message)
}

/// Merges `patch` into message `id`'s metadata inside the caller's transaction: each key
/// replaced in place or appended (key order kept), in one statement (`json_set`, paths and
/// values bound) when every key is a plain name.
pub(super) async fn merge(
    conn: &mut SqliteConnection,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    let plain = |key: &String| {
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if !patch.keys().all(plain) {
        return merge_by_rewrite(conn, id, patch, content).await;
    }
    let mut metadata = String::from("metadata");
    if !patch.is_empty() {
        metadata = String::from("json_set(metadata");
        for n in 0..patch.len() {
            let _ = write!(metadata, ", ${}, json(${})", 4 + 2 * n, 5 + 2 * n);
        }
        metadata.push(')');
    }
    let sql = format!(
        "UPDATE messages SET metadata = {metadata}, content = COALESCE($2, content), updated_at = $3 \
         WHERE id = $1 RETURNING {COLUMNS}"
    );
    let mut query = sqlx::query(&sql)
        .bind(id)
        .bind(content)
        .bind(Timestamp::now().to_rfc3339());
    for (key, value) in patch {
        query = query.bind(format!("$.\"{key}\"")).bind(value.to_string());
    }
    let row = query
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))?;
    message(&row)
}

/// [`merge`] by reading the row and writing it back: for keys a JSON path cannot name
/// plainly (a tool call's fields come from the agent).
async fn merge_by_rewrite(
    conn: &mut SqliteConnection,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM messages WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))?;
    let mut current = message(&row)?;
    let mut metadata = match current.metadata {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    metadata.extend(patch.iter().map(|(k, v)| (k.clone(), v.clone())));
    current.metadata = Value::Object(metadata);
    if let Some(content) = content {
        current.content = content.to_owned();
    }
    current.updated_at = Timestamp::now();
    sqlx::query("UPDATE messages SET metadata = $2, content = $3, updated_at = $4 WHERE id = $1")
        .bind(id)
        .bind(current.metadata.to_string())
        .bind(&current.content)
        .bind(current.updated_at.to_rfc3339())
        .execute(&mut *conn)
        .await?;
    Ok(current)
}

#[async_trait]
impl MessageStore for SqliteDb {
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
        .bind(Timestamp::now().to_rfc3339())
        .fetch_optional(&self.writer)
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
        let mut tx = self.begin().await?;
        let message = merge(&mut tx, id, patch, content).await?;
        tx.commit().await?;
        Ok(message)
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
