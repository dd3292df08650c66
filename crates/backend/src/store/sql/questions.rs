//! The `ask_user_question_kandev` calls (table `ask_user_question_calls`): each tool call
//! agentctl holds is a row waiting on one record, several calls with the same normalised
//! questions on a session share a record (D4). The session's consumer is the only writer:
//! it applies each call's `ask_user_question_settled` ([`call_returned`]).

use super::records::{Opening, applied, exists, insert, settle_in};
use super::{engine, messages, notifications};
use crate::model::{Notification, Settlement, Timestamp};
use crate::store::{CallReturned, CallSettles, QuestionOpened, StoreError};

use engine::{Conn, Db};

async fn insert_call(
    conn: &mut Conn,
    request_id: &str,
    pending_id: &str,
    session_id: &str,
    key: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ask_user_question_calls (request_id, clarification_id, session_id, dedup_key, status, created_at) \
         VALUES ($1, $2, $3, $4, 'waiting', $5)",
    )
    .bind(request_id)
    .bind(pending_id)
    .bind(session_id)
    .bind(key)
    .bind(Timestamp::now())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// [`crate::store::ClarificationStore::open_question`].
pub(super) async fn open(
    db: &Db,
    request_id: &str,
    key: &str,
    opening: &Opening<'_>,
) -> Result<QuestionOpened, StoreError> {
    let Opening {
        record,
        message,
        notification,
        applied_seq,
    } = *opening;
    let mut writer = db.writer().await?;
    let mut tx = engine::begin(&mut writer).await?;
    let known: Option<String> =
        sqlx::query_scalar("SELECT request_id FROM ask_user_question_calls WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(&mut *tx)
            .await?;
    if known.is_some() || exists(&mut tx, &record.pending_id).await? {
        tx.rollback().await?;
        return Ok(QuestionOpened::Duplicate);
    }
    let joined: Option<String> = sqlx::query_scalar(
        "SELECT c.clarification_id FROM ask_user_question_calls c \
         JOIN clarifications r ON r.pending_id = c.clarification_id \
         WHERE c.session_id = $1 AND c.dedup_key = $2 AND r.status = 'pending' AND r.source = 'ask_user_question' \
         ORDER BY r.created_at LIMIT 1",
    )
    .bind(&record.session_id)
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(pending_id) = joined {
        insert_call(&mut tx, request_id, &pending_id, &record.session_id, key).await?;
        applied(&mut tx, &record.session_id, applied_seq).await?;
        tx.commit().await?;
        return Ok(QuestionOpened::Joined { pending_id });
    }
    let message = messages::insert(&mut tx, message).await?;
    let stored = insert(&mut tx, record, &message.id).await?;
    insert_call(
        &mut tx,
        request_id,
        &stored.pending_id,
        &record.session_id,
        key,
    )
    .await?;
    if let Some(n) = notification {
        // At the record's own time, as the open of an elicitation stores it.
        let n = Notification {
            created_at: stored.created_at,
            ..n.clone()
        };
        notifications::insert(&mut tx, &n).await?;
    }
    applied(&mut tx, &record.session_id, applied_seq).await?;
    tx.commit().await?;
    Ok(QuestionOpened::Opened {
        record: Box::new(stored),
        message: Box::new(message),
    })
}

/// The calls waiting on record `pending_id`, oldest first.
pub(super) async fn waiting_calls(
    conn: &mut Conn,
    pending_id: &str,
) -> Result<Vec<String>, StoreError> {
    let calls = sqlx::query_scalar(
        "SELECT request_id FROM ask_user_question_calls WHERE clarification_id = $1 AND status = 'waiting' \
         ORDER BY created_at, request_id",
    )
    .bind(pending_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(calls)
}

/// Marks a waiting call returned; its record id when this call changed it.
async fn mark_returned(
    conn: &mut Conn,
    request_id: &str,
    outcome: &str,
) -> Result<Option<String>, StoreError> {
    let record = sqlx::query_scalar(
        "UPDATE ask_user_question_calls SET status = 'returned', outcome = $2 \
         WHERE request_id = $1 AND status = 'waiting' RETURNING clarification_id",
    )
    .bind(request_id)
    .bind(outcome)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(record)
}

/// [`crate::store::ClarificationStore::call_returned`].
pub(super) async fn call_returned(
    db: &Db,
    request_id: &str,
    outcome: &str,
    settlement: &Settlement,
    settles: CallSettles,
) -> Result<Option<CallReturned>, StoreError> {
    let mut writer = db.writer().await?;
    let mut tx = engine::begin(&mut writer).await?;
    let Some(pending_id) = mark_returned(&mut tx, request_id, outcome).await? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let waiting = waiting_calls(&mut tx, &pending_id).await?;
    let settled = if settles == CallSettles::Record || waiting.is_empty() {
        settle_in(&mut tx, &pending_id, settlement).await?
    } else {
        None
    };
    tx.commit().await?;
    Ok(Some(CallReturned {
        pending_id,
        settled,
        waiting,
    }))
}
