//! Chat messages of a session: user prompts, agent text (aggregated per message),
//! tool calls, clarification requests and status lines.

use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::FromRow;

use crate::db::{Db, now};

/// `type` of a plain text message.
pub const TYPE_MESSAGE: &str = "message";
/// `type` of an agent thought.
pub const TYPE_THOUGHT: &str = "thought";
/// `type` of a tool call, updated in place by `tool_call_update`.
pub const TYPE_TOOL_CALL: &str = "tool_call";
/// `type` of the message that carries a clarification (AC-08).
pub const TYPE_CLARIFICATION_REQUEST: &str = "clarification_request";
/// `type` of a status line written by the backend (agent exited, turn failed).
pub const TYPE_STATUS: &str = "status";

/// Who wrote a message.
pub mod author {
    /// The operator.
    pub const USER: &str = "user";
    /// The agent.
    pub const AGENT: &str = "agent";
    /// The backend itself.
    pub const SYSTEM: &str = "system";
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct MessageRow {
    /// UUID.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// Position in the session, from 1.
    pub seq: i64,
    /// See the `TYPE_*` constants.
    #[sqlx(rename = "type")]
    pub message_type: String,
    /// See [`author`].
    pub author_type: String,
    /// The text.
    pub content: String,
    /// Whether the message asks the operator for input.
    pub requests_input: bool,
    /// JSON object text.
    pub metadata: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A message as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// UUID.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// `message`, `thought`, `tool_call`, `clarification_request`, `status`.
    #[serde(rename = "type")]
    pub message_type: String,
    /// `user`, `agent`, `system`.
    pub author_type: String,
    /// The text.
    pub content: String,
    /// Whether the message asks the operator for input.
    pub requests_input: bool,
    /// Type-specific details (`pending_id`, `questions`, `status`, `tool_call_id`, …).
    pub metadata: Value,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl From<MessageRow> for Message {
    fn from(row: MessageRow) -> Self {
        Self {
            metadata: serde_json::from_str(&row.metadata)
                .unwrap_or_else(|_| Value::Object(Map::new())),
            id: row.id,
            session_id: row.session_id,
            task_id: row.task_id,
            message_type: row.message_type,
            author_type: row.author_type,
            content: row.content,
            requests_input: row.requests_input,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// What a new message needs.
#[derive(Debug, Clone)]
pub struct NewMessage<'a> {
    /// Its session.
    pub session_id: &'a str,
    /// Its task.
    pub task_id: &'a str,
    /// See the `TYPE_*` constants.
    pub message_type: &'a str,
    /// See [`author`].
    pub author_type: &'a str,
    /// The text.
    pub content: &'a str,
    /// Whether it asks for input.
    pub requests_input: bool,
    /// A JSON object.
    pub metadata: Value,
}

const COLUMNS: &str = "id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at";

/// Stores a message at the end of its session.
pub async fn insert(db: &Db, new: NewMessage<'_>) -> Result<Message, sqlx::Error> {
    let id = uuid::Uuid::new_v4().to_string();
    let at = now();
    // One statement, so concurrent writers of a session never share a `seq`
    // (SQLite serializes writes; PostgreSQL would need a sequence here).
    sqlx::query(
        "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at) \
         SELECT $1, $2, $3, COALESCE(MAX(seq), 0) + 1, $4, $5, $6, $7, $8, $9, $9 FROM messages WHERE session_id = $2",
    )
    .bind(&id)
    .bind(new.session_id)
    .bind(new.task_id)
    .bind(new.message_type)
    .bind(new.author_type)
    .bind(new.content)
    .bind(new.requests_input)
    .bind(new.metadata.to_string())
    .bind(&at)
    .execute(db)
    .await?;
    get(db, &id).await?.ok_or(sqlx::Error::RowNotFound)
}

/// One message.
pub async fn get(db: &Db, id: &str) -> Result<Option<Message>, sqlx::Error> {
    let row: Option<MessageRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM messages WHERE id = $1"))
            .bind(id)
            .fetch_optional(db)
            .await?;
    Ok(row.map(Message::from))
}

/// A session's messages in order.
pub async fn list(db: &Db, session_id: &str) -> Result<Vec<Message>, sqlx::Error> {
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM messages WHERE session_id = $1 ORDER BY seq"
    ))
    .bind(session_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Message::from).collect())
}

/// Appends text to a message (agent chunks of one message).
pub async fn append_content(db: &Db, id: &str, text: &str) -> Result<Message, sqlx::Error> {
    sqlx::query("UPDATE messages SET content = content || $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(text)
        .bind(now())
        .execute(db)
        .await?;
    get(db, id).await?.ok_or(sqlx::Error::RowNotFound)
}

/// Merges `patch`'s keys into a message's metadata (and replaces its content when given).
pub async fn merge_metadata(
    db: &Db,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, sqlx::Error> {
    let current = get(db, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    let mut metadata = match current.metadata {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for (k, v) in patch {
        metadata.insert(k.clone(), v.clone());
    }
    sqlx::query("UPDATE messages SET metadata = $2, content = $3, updated_at = $4 WHERE id = $1")
        .bind(id)
        .bind(Value::Object(metadata).to_string())
        .bind(content.unwrap_or(&current.content))
        .bind(now())
        .execute(db)
        .await?;
    get(db, id).await?.ok_or(sqlx::Error::RowNotFound)
}

/// The tool-call message of `tool_call_id` in a session, if any.
pub async fn find_tool_call(
    db: &Db,
    session_id: &str,
    tool_call_id: &str,
) -> Result<Option<Message>, sqlx::Error> {
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM messages WHERE session_id = $1 AND type = $2 ORDER BY seq DESC"
    ))
    .bind(session_id)
    .bind(TYPE_TOOL_CALL)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(Message::from)
        .find(|m| m.metadata.get("tool_call_id").and_then(Value::as_str) == Some(tool_call_id)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A task and a session row to hang messages on.
    pub(crate) async fn seeded() -> (Db, String, String) {
        let db = crate::db::memory().await;
        let task = crate::tasks::create(&db, "T", "").await.expect("task");
        let session = crate::sessions::store::insert(&db, &task.id, "mock")
            .await
            .expect("session");
        (db, task.id, session.id)
    }

    fn text<'a>(session: &'a str, task: &'a str, content: &'a str) -> NewMessage<'a> {
        NewMessage {
            session_id: session,
            task_id: task,
            message_type: TYPE_MESSAGE,
            author_type: author::AGENT,
            content,
            requests_input: false,
            metadata: json!({}),
        }
    }

    #[tokio::test]
    async fn messages_keep_their_order_and_grow_in_place() {
        let (db, task, session) = seeded().await;
        let a = insert(&db, text(&session, &task, "Hel"))
            .await
            .expect("insert");
        let b = insert(&db, text(&session, &task, "second"))
            .await
            .expect("insert");
        let a2 = append_content(&db, &a.id, "lo").await.expect("append");
        assert_eq!(a2.content, "Hello");
        let all = list(&db, &session).await.expect("list");
        assert_eq!(
            all.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            [a.id.as_str(), b.id.as_str()]
        );
        assert_eq!(all[0].message_type, "message");
        assert_eq!(
            serde_json::to_value(&all[0]).expect("json")["type"],
            "message"
        );
    }

    #[tokio::test]
    async fn metadata_merges_and_tool_calls_are_found_by_id() {
        let (db, task, session) = seeded().await;
        let tool = insert(
            &db,
            NewMessage {
                message_type: TYPE_TOOL_CALL,
                metadata: json!({"tool_call_id": "t1", "status": "pending"}),
                ..text(&session, &task, "Read file")
            },
        )
        .await
        .expect("insert");
        let found = find_tool_call(&db, &session, "t1")
            .await
            .expect("find")
            .expect("some");
        assert_eq!(found.id, tool.id);
        assert!(
            find_tool_call(&db, &session, "t2")
                .await
                .expect("find")
                .is_none()
        );
        let patch = json!({"status": "completed"});
        let updated = merge_metadata(
            &db,
            &tool.id,
            patch.as_object().expect("obj"),
            Some("Read a.rs"),
        )
        .await
        .expect("merge");
        assert_eq!(
            updated.metadata,
            json!({"tool_call_id": "t1", "status": "completed"})
        );
        assert_eq!(updated.content, "Read a.rs");
    }
}
