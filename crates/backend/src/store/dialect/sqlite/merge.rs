//! The JSON merge of a message's metadata on SQLite: `json_set` with each key's path and
//! value bound, which replaces each key in place or appends it (key order kept). SQLite
//! has no object-merge operator, and a path names only plain keys: any other key (a tool
//! call's fields come from the agent) takes a read and a write-back instead.

use std::fmt::Write as _;

use serde_json::{Map, Value};
use sqlx::types::Json;

use super::{Conn, Db, sql};
use crate::model::{Message, Timestamp};
use crate::store::StoreError;

/// [`merge`] in a transaction of its own (the read-back needs one).
pub(crate) async fn merge_alone(
    db: &Db,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    let mut writer = db.writer().await?;
    let mut tx = super::begin(&mut writer).await?;
    let message = merge(&mut tx, id, patch, content).await?;
    tx.commit().await?;
    Ok(message)
}

/// Merges `patch` into message `id`'s metadata (and replaces its content when given)
/// inside the caller's transaction.
pub(crate) async fn merge(
    conn: &mut Conn,
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
         WHERE id = $1 RETURNING {}",
        sql::MESSAGE
    );
    let mut query = sqlx::query_as(&sql)
        .bind(id)
        .bind(content)
        .bind(Timestamp::now());
    for (key, value) in patch {
        query = query.bind(format!("$.\"{key}\"")).bind(Json(value));
    }
    query
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))
}

/// [`merge`] by reading the row and writing it back.
async fn merge_by_rewrite(
    conn: &mut Conn,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    let mut current: Message = sqlx::query_as(&format!(
        "SELECT {} FROM messages WHERE id = $1",
        sql::MESSAGE
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))?;
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
        .bind(Json(&current.metadata))
        .bind(&current.content)
        .bind(current.updated_at)
        .execute(&mut *conn)
        .await?;
    Ok(current)
}
