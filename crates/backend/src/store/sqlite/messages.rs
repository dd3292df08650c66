//! [`MessageStore`] on SQLite. A message's `seq` comes from its session row's
//! `message_seq` counter, bumped in the inserting transaction; `UNIQUE (session_id, seq)`
//! backs it up.

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

/// Merges `patch` into message `id`'s metadata inside the caller's transaction.
pub(super) async fn merge(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Task, author};
    use crate::store::sqlite::tests_support::seeded;
    use crate::store::{SessionStore, TaskStore};
    use serde_json::json;

    fn text(session: &str, task: &str, content: &str) -> NewMessage {
        NewMessage::new(session, task, MessageKind::Message, author::AGENT, content)
    }

    #[tokio::test]
    async fn messages_are_numbered_per_session_and_grow_in_place() {
        let (db, task, session) = seeded().await;
        let a = db
            .insert_message(&text(&session, &task, "Hel"))
            .await
            .expect("a");
        let b = db
            .insert_message(&text(&session, &task, "second"))
            .await
            .expect("b");
        assert_eq!((a.seq, b.seq), (1, 2));
        let a2 = db.append_content(&a.id, "lo").await.expect("append");
        assert_eq!(a2.content, "Hello");
        let all = db.messages(&session).await.expect("list");
        assert_eq!(
            all.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            [a.id.as_str(), b.id.as_str()]
        );
        assert_eq!(
            serde_json::to_value(&all[0]).expect("json")["type"],
            "message"
        );
        assert!(db.insert_message(&text("nope", &task, "x")).await.is_err());
    }

    #[tokio::test]
    async fn the_same_seq_twice_in_a_session_is_refused_by_the_database() {
        let (db, task, session) = seeded().await;
        let a = db
            .insert_message(&text(&session, &task, "a"))
            .await
            .expect("a");
        let dup = sqlx::query(
            "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, metadata, created_at, updated_at) \
             VALUES ('x', $1, $2, $3, 'message', 'agent', 'dup', '{}', '', '')",
        )
        .bind(&session)
        .bind(&task)
        .bind(a.seq)
        .execute(db.pool())
        .await;
        assert!(dup.is_err(), "UNIQUE (session_id, seq)");
    }

    #[tokio::test]
    async fn concurrent_writers_on_one_file_never_share_a_seq() {
        let (db, _dir, url) = crate::store::sqlite::tests_support::file_db().await;
        let task = Task::new("T", "");
        db.create_task(&task).await.expect("task");
        let session = db.insert_session(&task.id, "mock").await.expect("session");
        let other = SqliteDb::open(&url).await.expect("second handle");
        let writes = (0..40).map(|i| {
            let store = if i % 2 == 0 {
                db.clone()
            } else {
                other.clone()
            };
            let new = text(&session.id, &task.id, &i.to_string());
            async move { store.insert_message(&new).await.expect("insert").seq }
        });
        let mut seqs = futures::future::join_all(writes).await;
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=40).collect::<Vec<i64>>());
    }

    #[tokio::test]
    async fn metadata_merges_and_tool_calls_are_found_by_id() {
        let (db, task, session) = seeded().await;
        let meta = json!({"tool_call_id": "t1", "status": "pending"});
        let tool = db
            .insert_message(
                &NewMessage::new(
                    &session,
                    &task,
                    MessageKind::ToolCall,
                    author::AGENT,
                    "Read file",
                )
                .with_metadata(meta.as_object().cloned().expect("object")),
            )
            .await
            .expect("insert");
        let found = db
            .latest_tool_call(&session, "t1")
            .await
            .expect("find")
            .expect("some");
        assert_eq!(found.id, tool.id);
        assert!(
            db.latest_tool_call(&session, "t2")
                .await
                .expect("find")
                .is_none()
        );
        let patch = json!({"status": "completed"});
        let updated = db
            .merge_metadata(&tool.id, patch.as_object().expect("obj"), Some("Read a.rs"))
            .await
            .expect("merge");
        assert_eq!(
            updated.metadata,
            json!({"tool_call_id": "t1", "status": "completed"})
        );
        assert_eq!(updated.content, "Read a.rs");
        assert_eq!(db.message(&tool.id).await.expect("get"), Some(updated));
    }
}
