//! Writes on one clarification record inside the caller's transaction, shared by the
//! records' own store methods and the `ask_user_question_kandev` calls.

use serde_json::{Map, Value, json};
use sqlx::types::Json;

use super::{Binds, CLARIFICATION, engine};
use crate::model::settlement::Effect;
use crate::model::{
    Clarification, NewClarification, NewMessage, Notification, SettledBy, Settlement, Timestamp,
    new_record_id,
};
use crate::store::{SettledRecord, StoreError};

use engine::Conn;

/// Inserts a pending record pointing at message `message_id` inside the caller's
/// transaction.
pub(super) async fn insert(
    conn: &mut Conn,
    new: &NewClarification,
    message_id: &str,
) -> Result<Clarification, StoreError> {
    let record = sqlx::query_as(&format!(
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at, on_deadline) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $11) \
         ON CONFLICT (pending_id) DO NOTHING RETURNING {CLARIFICATION}"
    ))
    .bind(&new.pending_id)
    .bind(new.source)
    .bind(&new.task_id)
    .bind(&new.session_id)
    .bind(&new.tool_call_id)
    .bind(&new.message)
    .bind(Json(&new.questions))
    .bind(Timestamp::now())
    .bind(message_id)
    .bind(new.expires_at)
    .bind(&new.on_deadline)
    .fetch_optional(&mut *conn)
    .await?;
    record.ok_or_else(|| {
        StoreError::Query(format!("clarification `{}` exists already", new.pending_id))
    })
}

/// Whether a record with this pending id exists.
pub(super) async fn exists(conn: &mut Conn, pending_id: &str) -> Result<bool, StoreError> {
    let found: Option<String> =
        sqlx::query_scalar("SELECT pending_id FROM clarifications WHERE pending_id = $1")
            .bind(pending_id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(found.is_some())
}

/// The second conditional update of [`Settlement::effect_on`] inside the caller's
/// transaction: an operator's answer noted on a record agentctl settled first.
pub(super) async fn record_answer(
    conn: &mut Conn,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    if s.by != SettledBy::Operator {
        return Ok(None);
    }
    let recorded: Option<Clarification> = sqlx::query_as(&format!(
        "UPDATE clarifications SET answer = COALESCE($4, answer), answered_by = $5 \
         WHERE pending_id = $1 AND $2 = 'operator' AND settled_by = 'agentctl' \
           AND status = $3 AND answered_by IS NULL AND {} \
         RETURNING {CLARIFICATION}",
        engine::fenced("clarifications.session_id", "$6"),
    ))
    .bind(pending_id)
    .bind(s.by)
    .bind(s.status)
    .bind(s.answer.as_ref().map(Json))
    .bind(&s.answered_by)
    .bind(s.fence.bind())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(record) = recorded else {
        return Ok(None);
    };
    let message = match &record.message_id {
        Some(id) => Some(engine::merge(conn, id, &answer_patch(&record), None).await?),
        None => None,
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect: Effect::RecordAnswer,
        // Recording an answer changes nothing its session shows.
        session: None,
    }))
}

/// What an operator's answer noted after agentctl's settlement writes into the record's
/// message.
fn answer_patch(record: &Clarification) -> Map<String, Value> {
    let mut patch = Map::new();
    if let Some(answer) = &record.answer {
        patch.insert("answer".into(), json!(answer));
    }
    if let Some(who) = &record.answered_by {
        patch.insert("answered_by".into(), json!(who));
    }
    patch
}

/// Applies `s` to record `pending_id` inside the caller's transaction: the two
/// conditional updates of [`Settlement::effect_on`], each with the message.
pub(super) async fn settle_in(
    conn: &mut Conn,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    match engine::settle_row(conn, pending_id, s).await? {
        Some(done) => Ok(Some(done)),
        None => record_answer(conn, pending_id, s).await,
    }
}

/// What one open of a record commits: the record, its message and, when given, the
/// notification announcing it and how far the session's events are applied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opening<'a> {
    /// The record.
    pub record: &'a NewClarification,
    /// Its chat message.
    pub message: &'a NewMessage,
    /// The notification announcing it.
    pub notification: Option<&'a Notification>,
    /// The session's `last_event_seq` once the open commits.
    pub applied_seq: Option<u64>,
}

impl Opening<'_> {
    /// The values as both dialects' one-hop open binds them: `$1` message id, `$2`…`$8`
    /// the message (session, task, type, author, content, requests input, metadata), `$9`
    /// when, `$10` its tool call, `$11`…`$19` the record (pending id, source, task,
    /// session, tool call, message, questions, deadline and what it answers), `$20` the
    /// applied sequence number (or `NULL`), and, when a notification announces the
    /// record, its columns (`$21`…`$27`, in `notifications` column order), created at
    /// the record's own time (the board calls a notification resolved when no open
    /// question was asked at or before it).
    pub(in super::super) fn binds(&self, at: Timestamp) -> Result<Binds, StoreError> {
        let (new, message) = (self.record, self.message);
        let binds = Binds::default()
            .and(new_record_id())?
            .and(message.session_id.clone())?
            .and(message.task_id.clone())?
            .and(message.kind)?
            .and(message.author_type)?
            .and(message.content.clone())?
            .and(message.requests_input)?
            .and(Json(message.metadata.clone()))?
            .and(at)?
            .and(message.tool_call_id().map(str::to_owned))?
            .and(new.pending_id.clone())?
            .and(new.source)?
            .and(new.task_id.clone())?
            .and(new.session_id.clone())?
            .and(new.tool_call_id.clone())?
            .and(new.message.clone())?
            .and(Json(new.questions.clone()))?
            .and(new.expires_at)?
            .and(new.on_deadline.clone())?
            .and(self.applied_seq.map(super::bigint))?;
        let Some(n) = self.notification else {
            return Ok(binds);
        };
        binds
            .and(n.id.clone())?
            .and(n.event.clone())?
            .and(n.task_id.clone())?
            .and(n.session_id.clone())?
            .and(n.title.clone())?
            .and(n.body.clone())?
            .and(at)
    }
}

/// Sets the session's `last_event_seq` to `applied_seq`, when given, inside the caller's
/// transaction (an open that is not one hop).
pub(super) async fn applied(
    conn: &mut Conn,
    session_id: &str,
    applied_seq: Option<u64>,
) -> Result<(), StoreError> {
    if let Some(seq) = applied_seq {
        sqlx::query("UPDATE sessions SET last_event_seq = $2 WHERE id = $1")
            .bind(session_id)
            .bind(super::bigint(seq))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// The first conditional update of [`Settlement::effect_on`]: a pending record settles,
/// or agentctl's or an operator's settlement corrects the backend's. Binds
/// [`settle_binds`]; each dialect runs it with its message's update in one hop.
pub(crate) fn settle_update() -> String {
    format!(
        "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, settled_at = $5, \
         answer = COALESCE($6, answer), answered_by = COALESCE($7, answered_by) \
         WHERE pending_id = $1 AND (status = 'pending' \
           OR ($4 IN ('agentctl', 'operator') AND settled_by = 'backend' AND (status <> $2 OR outcome IS DISTINCT FROM $3))) \
         AND {} RETURNING {CLARIFICATION}",
        engine::fenced("clarifications.session_id", "$8")
    )
}

/// [`settle_update`]'s values: `$1` pending id, `$2` status, `$3` outcome, `$4` settled by,
/// `$5` when, `$6` answer, `$7` operator, `$8` fence.
pub(crate) fn settle_binds(
    pending_id: &str,
    s: &Settlement,
    at: Timestamp,
) -> Result<Binds, StoreError> {
    Binds::default()
        .and(pending_id.to_owned())?
        .and(s.status)?
        .and(s.outcome)?
        .and(s.by)?
        .and(at)?
        .and(s.answer.clone().map(Json))?
        .and(s.answered_by.clone())?
        .and(s.fence.bind())
}
