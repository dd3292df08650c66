//! A clarification's open and settlement on SQLite, each one batch: `BEGIN IMMEDIATE`,
//! its statements and `COMMIT` in one hop to the writer's thread (docs/decisions/0013).
//! SQLite has no data-modifying `WITH`, so where PostgreSQL chains the statements in
//! one, here each later statement is guarded by what the earlier ones did (`changes()`,
//! `NOT EXISTS`), and the batch returns their rows in order. Each batch ends by reading
//! the session as it left it (its `pending` and `view_seq` written by the clarification
//! triggers), for the feed: in the same hop, on the writer that just wrote it.

use sqlx::FromRow;
use sqlx::sqlite::SqliteRow;

use super::sql::records::{self, Opening};
use super::sql::{self, Binds};
use super::{Conn, Db};
use crate::model::settlement::Effect;
use crate::model::{Clarification, Message, SessionRecord, Settlement, Timestamp};
use crate::store::{SettledRecord, StoreError};

/// Stores `opening` at `at`: the stored message and the session as the open left it, or
/// `None` when nothing was written (the pending id is taken: a replayed request; or no
/// such session). The message takes the session's next number and the record points at
/// it; the session's `last_event_seq` moves with it.
pub(crate) async fn open_clarification(
    db: &Db,
    opening: &Opening<'_>,
    at: Timestamp,
) -> Result<Option<(Message, Option<SessionRecord>)>, StoreError> {
    let fresh = "NOT EXISTS (SELECT 1 FROM clarifications WHERE pending_id = $11)";
    let statements = format!(
        "UPDATE sessions SET message_seq = message_seq + 1, last_event_seq = COALESCE($20, last_event_seq) \
         WHERE id = $2 AND {fresh}; \
         INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
           SELECT $1, $2, $3, message_seq, $4, $5, $6, $7, $8, $9, $9, $10 FROM sessions WHERE id = $2 AND {fresh}; \
         INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at, on_deadline) \
           SELECT $11, $12, $13, $14, $15, $16, $17, 'pending', $9, id, $18, $19 FROM messages WHERE id = $1; \
         {}\
         SELECT {} FROM messages WHERE id = $1; \
         SELECT {} FROM sessions WHERE id = $2 AND EXISTS (SELECT 1 FROM messages WHERE id = $1)",
        // Only with the record this batch wrote (its message id is new).
        if opening.notification.is_some() {
            format!(
                "INSERT INTO notifications ({}) SELECT $21, $22, $23, $24, $25, $26, $27 \
                 FROM clarifications WHERE pending_id = $11 AND message_id = $1; ",
                sql::notifications::NOTIFICATION_COLUMNS
            )
        } else {
            String::new()
        },
        sql::MESSAGE,
        sql::SESSION,
    );
    let binds = opening.binds(at)?;
    let rows = db.in_one_hop(statements, binds).await?;
    let Some(message) = rows.first() else {
        return Ok(None);
    };
    let session = rows.get(1).map(SessionRecord::from_row).transpose()?;
    Ok(Some((Message::from_row(message)?, session)))
}

/// The first conditional update of [`Settlement::effect_on`] and its message, in one
/// batch, without a transaction of the caller's.
pub(crate) async fn settle_once(
    db: &Db,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let (statements, binds) = settling(pending_id, s)?;
    settled(&db.in_one_hop(statements, binds).await?)
}

/// [`settle_once`] inside the caller's transaction.
pub(crate) async fn settle_row(
    conn: &mut Conn,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let (statements, binds) = settling(pending_id, s)?;
    let rows = sqlx::query_with(&statements, binds.into_arguments())
        .fetch_all(&mut *conn)
        .await?;
    settled(&rows)
}

/// The statements: the record's update, then its message's, which follows only when the
/// record changed (`changes()`), then the session's read.
fn settling(pending_id: &str, s: &Settlement) -> Result<(String, Binds), StoreError> {
    // The record's answer and operator are on its message already when none comes.
    let mut patch = String::from("'$.status', $2, '$.outcome', $3, '$.settled_at', $5");
    if s.answer.is_some() {
        patch.push_str(", '$.answer', json($6)");
    }
    if s.answered_by.is_some() {
        patch.push_str(", '$.answered_by', $7");
    }
    let statements = format!(
        "{}; UPDATE messages SET metadata = json_set(metadata, {patch}), updated_at = $5 \
         WHERE changes() = 1 AND id = (SELECT message_id FROM clarifications WHERE pending_id = $1) \
         RETURNING {}; \
         SELECT {} FROM sessions WHERE id = (SELECT session_id FROM clarifications WHERE pending_id = $1)",
        records::settle_update(),
        sql::MESSAGE,
        sql::SESSION,
    );
    Ok((
        statements,
        records::settle_binds(pending_id, s, Timestamp::now())?,
    ))
}

/// What [`settling`]'s batch returned: the settled record, its message and its session,
/// or `None` when the record did not change (then only the session's row came back).
fn settled(rows: &[SqliteRow]) -> Result<Option<SettledRecord>, StoreError> {
    use sqlx::Row;
    // The record's row is the only one with a `pending_id`.
    let Some(row) = rows
        .first()
        .filter(|row| row.try_column("pending_id").is_ok())
    else {
        return Ok(None);
    };
    let record = Clarification::from_row(row)?;
    let (message, session) = match (&record.message_id, rows.get(1..).unwrap_or_default()) {
        (None, [session, ..]) => (None, Some(session)),
        (Some(_), [message, session, ..]) => (Some(Message::from_row(message)?), Some(session)),
        (Some(id), _) => return Err(StoreError::Query(format!("no message `{id}`"))),
        (None, []) => (None, None),
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect: Effect::Settle,
        session: session.map(SessionRecord::from_row).transpose()?,
    }))
}
