//! [`ClarificationStore`] on PostgreSQL: records and their settlement. The settlement
//! rule ([`Settlement::effect_on`]) is the `WHERE` of two conditional updates, as on
//! SQLite; PostgreSQL re-checks it on the row version it locks, so of two settlements
//! racing from two processes exactly one wins. The `ask_user_question_kandev` calls are
//! in `questions`.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, Value, json};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::{PostgresDb, json, json_opt, name, name_opt, time, time_opt};
use crate::model::clarification::{Effect, Standing};
use crate::model::{
    Clarification, ClarificationStatus, Message, NewClarification, NewMessage, Outcome, SettledBy,
    Settlement, Source, Timestamp,
};
use crate::store::{ClarificationFilter, ClarificationStore, SettledRecord, StoreError};

pub(super) const COLUMNS: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, outcome, settled_by, answer, answered_by, created_at, settled_at";

pub(super) fn clarification(row: &PgRow) -> Result<Clarification, StoreError> {
    Ok(Clarification {
        pending_id: row.try_get("pending_id")?,
        source: name(row, "source", Source::parse)?,
        task_id: row.try_get("task_id")?,
        session_id: row.try_get("session_id")?,
        message_id: row.try_get("message_id")?,
        tool_call_id: row.try_get("tool_call_id")?,
        message: row.try_get("message")?,
        questions: json(row, "questions")?,
        status: name(row, "status", ClarificationStatus::parse)?,
        outcome: name_opt(row, "outcome", Outcome::parse)?,
        settled_by: name_opt(row, "settled_by", SettledBy::parse)?,
        answer: json_opt(row, "answer")?,
        answered_by: row.try_get("answered_by")?,
        created_at: time(row, "created_at")?,
        settled_at: time_opt(row, "settled_at")?,
    })
}

/// Inserts a pending record inside the caller's transaction.
pub(super) async fn insert(
    conn: &mut PgConnection,
    new: &NewClarification,
    message_id: &str,
) -> Result<Clarification, StoreError> {
    insert_if_new(conn, new, message_id).await?.ok_or_else(|| {
        StoreError::Query(format!("clarification `{}` exists already", new.pending_id))
    })
}

/// Inserts a pending record inside the caller's transaction, or nothing (`None`) when its
/// pending id is taken: the key decides, in the same statement.
async fn insert_if_new(
    conn: &mut PgConnection,
    new: &NewClarification,
    message_id: &str,
) -> Result<Option<Clarification>, StoreError> {
    let questions =
        serde_json::to_value(&new.questions).map_err(|err| StoreError::Query(err.to_string()))?;
    let row = sqlx::query(&format!(
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) \
         ON CONFLICT (pending_id) DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind(&new.pending_id)
    .bind(new.source.as_str())
    .bind(&new.task_id)
    .bind(&new.session_id)
    .bind(&new.tool_call_id)
    .bind(&new.message)
    .bind(questions)
    .bind(Timestamp::now().instant())
    .bind(message_id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(clarification).transpose()
}

pub(super) async fn exists(conn: &mut PgConnection, pending_id: &str) -> Result<bool, StoreError> {
    let found: Option<(String,)> =
        sqlx::query_as("SELECT pending_id FROM clarifications WHERE pending_id = $1")
            .bind(pending_id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(found.is_some())
}

/// A record's [`Standing`], as last committed.
async fn standing(pool: &sqlx::PgPool, pending_id: &str) -> Result<Option<Standing>, StoreError> {
    let row = sqlx::query(
        "SELECT status, outcome, settled_by, answered_by IS NOT NULL AS has_operator \
         FROM clarifications WHERE pending_id = $1",
    )
    .bind(pending_id)
    .fetch_optional(pool)
    .await?;
    row.map(|row| {
        Ok(Standing {
            status: name(&row, "status", ClarificationStatus::parse)?,
            outcome: name_opt(&row, "outcome", Outcome::parse)?,
            settled_by: name_opt(&row, "settled_by", SettledBy::parse)?,
            has_operator: row.try_get("has_operator")?,
        })
    })
    .transpose()
}

/// What the record's message carries about its settlement.
fn message_patch(record: &Clarification, effect: Effect) -> Map<String, Value> {
    let mut patch = Map::new();
    if effect == Effect::Settle {
        patch.insert("status".into(), json!(record.status));
        patch.insert("outcome".into(), json!(record.outcome));
        patch.insert("settled_at".into(), json!(record.settled_at));
    }
    if let Some(answer) = &record.answer {
        patch.insert("answer".into(), json!(answer));
    }
    if let Some(who) = &record.answered_by {
        patch.insert("answered_by".into(), json!(who));
    }
    patch
}

/// Applies `s` to record `pending_id` inside the caller's transaction: the two
/// conditional updates of [`Settlement::effect_on`], then the message.
pub(super) async fn settle_in(
    conn: &mut PgConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_value(a).map_err(|err| StoreError::Query(err.to_string())))
        .transpose()?;
    let settled = sqlx::query(&format!(
        "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, settled_at = $5, \
         answer = COALESCE($6, answer), answered_by = COALESCE($7, answered_by), claim = NULL, claimed_at = NULL \
         WHERE pending_id = $1 AND (status = 'pending' \
           OR ($4 IN ('agentctl', 'operator') AND settled_by = 'backend' AND (status <> $2 OR outcome IS DISTINCT FROM $3))) \
         AND {fence} RETURNING {COLUMNS}",
        fence = super::fenced("clarifications.session_id", "$8")
    ))
    .bind(pending_id)
    .bind(s.status.as_str())
    .bind(s.outcome.as_str())
    .bind(s.by.as_str())
    .bind(Timestamp::now().instant())
    .bind(&answer)
    .bind(&s.answered_by)
    .bind(s.fence.bind())
    .fetch_optional(&mut *conn)
    .await?;
    let (row, effect) = match settled {
        Some(row) => (row, Effect::Settle),
        None => {
            let recorded = sqlx::query(&format!(
                "UPDATE clarifications SET answer = COALESCE($4, answer), answered_by = $5 \
                 WHERE pending_id = $1 AND $2 = 'operator' AND settled_by = 'agentctl' \
                   AND status = $3 AND answered_by IS NULL AND {fence} \
                 RETURNING {COLUMNS}",
                fence = super::fenced("clarifications.session_id", "$6")
            ))
            .bind(pending_id)
            .bind(s.by.as_str())
            .bind(s.status.as_str())
            .bind(&answer)
            .bind(&s.answered_by)
            .bind(s.fence.bind())
            .fetch_optional(&mut *conn)
            .await?;
            match recorded {
                Some(row) => (row, Effect::RecordAnswer),
                None => return Ok(None),
            }
        }
    };
    let record = clarification(&row)?;
    let message = match &record.message_id {
        Some(id) => {
            Some(super::messages::merge(conn, id, &message_patch(&record, effect), None).await?)
        }
        None => None,
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect,
    }))
}

#[async_trait]
impl ClarificationStore for PostgresDb {
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<Option<(Clarification, Message)>, StoreError> {
        let mut tx = self.begin().await?;
        let message = super::messages::insert(&mut tx, message).await?;
        // A replayed request finds its pending id taken: undo the message too.
        let Some(record) = insert_if_new(&mut tx, record, &message.id).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        tx.commit().await?;
        Ok(Some((record, message)))
    }

    async fn clarification(&self, pending_id: &str) -> Result<Option<Clarification>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM clarifications WHERE pending_id = $1"
        ))
        .bind(pending_id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(clarification)
        .transpose()
    }

    async fn clarifications(
        &self,
        filter: &ClarificationFilter,
    ) -> Result<Vec<Clarification>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM clarifications \
             WHERE ($1 IS NULL OR session_id = $1) AND ($2 IS NULL OR status = $2) \
             ORDER BY created_at, pending_id"
        ))
        .bind(&filter.session_id)
        .bind(filter.status.map(ClarificationStatus::as_str))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(clarification)
        .collect()
    }

    async fn settle(
        &self,
        pending_id: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError> {
        // agentctl's event after the operator's answer finds the record settled: what does
        // nothing to a committed record never will (`nothing_is_final`), so a read outside
        // the transaction spares the writer one.
        if settlement.by == SettledBy::Agentctl
            && let Some(current) = standing(&self.pool, pending_id).await?
            && settlement.effect_on(current) == Effect::Nothing
        {
            return Ok(None);
        }
        let mut tx = self.begin().await?;
        let settled = settle_in(&mut tx, pending_id, settlement).await?;
        tx.commit().await?;
        Ok(settled)
    }

    async fn settle_pending(
        &self,
        session_id: &str,
        source: Option<Source>,
        keep: &[String],
        settlement: &Settlement,
    ) -> Result<Vec<SettledRecord>, StoreError> {
        let mut tx = self.begin().await?;
        let ids: Vec<(String,)> = sqlx::query_as(
            "SELECT pending_id FROM clarifications WHERE session_id = $1 AND status = 'pending' \
             AND ($2 IS NULL OR source = $2) ORDER BY created_at, pending_id",
        )
        .bind(session_id)
        .bind(source.map(Source::as_str))
        .fetch_all(&mut *tx)
        .await?;
        let mut settled = Vec::new();
        for (id,) in ids.iter().filter(|(id,)| !keep.contains(id)) {
            if let Some(done) = settle_in(&mut tx, id, settlement).await? {
                settled.push(done);
            }
        }
        tx.commit().await?;
        Ok(settled)
    }

    async fn note_undelivered(
        &self,
        pending_id: &str,
        answer: &OperatorAnswer,
    ) -> Result<Option<Message>, StoreError> {
        let mut tx = self.begin().await?;
        let message_id: Option<(Option<String>,)> =
            sqlx::query_as("SELECT message_id FROM clarifications WHERE pending_id = $1")
                .bind(pending_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((Some(message_id),)) = message_id else {
            tx.rollback().await?;
            return Ok(None);
        };
        let mut patch = Map::new();
        patch.insert("undelivered_answer".into(), json!(answer));
        let message = super::messages::merge(&mut tx, &message_id, &patch, None).await?;
        tx.commit().await?;
        Ok(Some(message))
    }

    async fn open_question(
        &self,
        request_id: &str,
        dedup_key: &str,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<crate::store::QuestionOpened, StoreError> {
        super::questions::open(self, request_id, dedup_key, record, message).await
    }

    async fn claim(
        &self,
        pending_id: &str,
        claim: &str,
    ) -> Result<crate::store::Claim, StoreError> {
        super::questions::claim(self, pending_id, claim).await
    }

    async fn release_claim(&self, pending_id: &str, claim: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE clarifications SET claim = NULL, claimed_at = NULL WHERE pending_id = $1 AND claim = $2",
        )
        .bind(pending_id)
        .bind(claim)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn settle_claimed(
        &self,
        pending_id: &str,
        claim: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError> {
        let mut tx = self.begin().await?;
        let settled = settle_in(&mut tx, pending_id, settlement).await?;
        sqlx::query(
            "UPDATE clarifications SET claim = NULL, claimed_at = NULL WHERE pending_id = $1 AND claim = $2",
        )
        .bind(pending_id)
        .bind(claim)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(settled)
    }

    async fn mark_call_returned(
        &self,
        request_id: &str,
        outcome: &str,
    ) -> Result<Option<String>, StoreError> {
        let mut tx = self.begin().await?;
        let record = super::questions::mark_returned(&mut tx, request_id, outcome).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn call_returned(
        &self,
        request_id: &str,
        outcome: &str,
        if_last: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError> {
        super::questions::call_returned(self, request_id, outcome, if_last).await
    }

    async fn waiting_calls_of_session(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT request_id FROM ask_user_question_calls WHERE session_id = $1 AND status = 'waiting' \
             ORDER BY created_at, request_id",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }
}
