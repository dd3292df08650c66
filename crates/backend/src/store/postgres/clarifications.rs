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
use crate::store::clarifications::{answer_patch, record_answer_sql};
use crate::store::{ClarificationFilter, ClarificationStore, SettledRecord, StoreError};

pub(super) const COLUMNS: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, outcome, settled_by, answer, answered_by, created_at, settled_at, expires_at";

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
        expires_at: time_opt(row, "expires_at")?,
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
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10) \
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
    .bind(new.expires_at.map(Timestamp::instant))
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(clarification).transpose()
}

/// The record and its chat message in one statement: one round trip and one commit on
/// the agent's path (docs/decisions/0013). The message takes the session's next number
/// and the record points at it. A replayed request (its pending id taken) writes
/// nothing: the guard sees a committed record, the key one racing it (the statement then
/// fails whole, message included).
async fn open(
    pool: &sqlx::PgPool,
    new: &NewClarification,
    message: &NewMessage,
) -> Result<Option<(Clarification, Message)>, StoreError> {
    let questions =
        serde_json::to_value(&new.questions).map_err(|err| StoreError::Query(err.to_string()))?;
    let at = Timestamp::now();
    let opened = sqlx::query(&format!(
        "WITH seq AS ( \
           UPDATE sessions SET message_seq = message_seq + 1 \
           WHERE id = $2 AND NOT EXISTS (SELECT 1 FROM clarifications WHERE pending_id = $11) \
           RETURNING message_seq \
         ), msg AS ( \
           INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
           SELECT $1, $2, $3, seq.message_seq, $4, $5, $6, $7, $8, $9, $9, $10 FROM seq \
           RETURNING {messages} \
         ), record AS ( \
           INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at) \
           SELECT $11, $12, $13, $14, $15, $16, $17, 'pending', $9, msg.id, $18 FROM msg \
         ) \
         SELECT * FROM msg",
        messages = super::messages::COLUMNS
    ))
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&message.session_id)
    .bind(&message.task_id)
    .bind(message.kind.as_str())
    .bind(message.author_type)
    .bind(&message.content)
    .bind(message.requests_input)
    .bind(Value::Object(message.metadata.clone()))
    .bind(at.instant())
    .bind(message.tool_call_id())
    .bind(&new.pending_id)
    .bind(new.source.as_str())
    .bind(&new.task_id)
    .bind(&new.session_id)
    .bind(&new.tool_call_id)
    .bind(&new.message)
    .bind(questions)
    .bind(new.expires_at.map(Timestamp::instant))
    .fetch_optional(pool)
    .await;
    let row = match opened {
        Ok(Some(row)) => row,
        Ok(None) => {
            // Nothing written: the pending id is taken, or there is no such session.
            let mut conn = pool.acquire().await?;
            if exists(&mut conn, &new.pending_id).await? {
                return Ok(None);
            }
            return Err(StoreError::Query(format!(
                "no session `{}` to add a message to",
                message.session_id
            )));
        }
        Err(sqlx::Error::Database(err)) if err.constraint() == Some("clarifications_pkey") => {
            return Ok(None);
        }
        Err(err) => return Err(err.into()),
    };
    let message = super::messages::message(&row)?;
    let record = new.pending_at(&message.id, at);
    Ok(Some((record, message)))
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

/// What a settlement writes into its record's message (the record's answer and operator
/// are on the message already when the settlement brings none).
fn settle_patch(s: &Settlement, at: Timestamp) -> Map<String, Value> {
    let mut patch = Map::new();
    patch.insert("status".into(), json!(s.status));
    patch.insert("outcome".into(), json!(s.outcome));
    patch.insert("settled_at".into(), json!(at));
    if let Some(answer) = &s.answer {
        patch.insert("answer".into(), json!(answer));
    }
    if let Some(who) = &s.answered_by {
        patch.insert("answered_by".into(), json!(who));
    }
    patch
}

/// The message columns a settlement returns beside its record, prefixed `m_`.
const MESSAGE_AS_M: &str = "messages.id AS m_id, messages.session_id AS m_session_id, messages.task_id AS m_task_id, \
    messages.seq AS m_seq, messages.type AS m_type, messages.author_type AS m_author_type, messages.content AS m_content, \
    messages.requests_input AS m_requests_input, messages.metadata AS m_metadata, messages.created_at AS m_created_at, \
    messages.updated_at AS m_updated_at";

/// The first conditional update of [`Settlement::effect_on`] and its message, in one
/// statement (one round trip, no transaction of its own needed; docs/decisions/0013).
async fn settle_row(
    conn: &mut PgConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_value(a).map_err(|err| StoreError::Query(err.to_string())))
        .transpose()?;
    let at = Timestamp::now();
    let row = sqlx::query(&format!(
        "WITH settled AS ( \
           UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, settled_at = $5, \
           answer = COALESCE($6, answer), answered_by = COALESCE($7, answered_by), claim = NULL, claimed_at = NULL \
           WHERE pending_id = $1 AND (status = 'pending' \
             OR ($4 IN ('agentctl', 'operator') AND settled_by = 'backend' AND (status <> $2 OR outcome IS DISTINCT FROM $3))) \
           AND {fence} RETURNING {COLUMNS} \
         ), msg AS ( \
           UPDATE messages SET metadata = metadata || $9, updated_at = $5 \
           FROM settled WHERE messages.id = settled.message_id RETURNING {MESSAGE_AS_M} \
         ) \
         SELECT settled.*, msg.* FROM settled LEFT JOIN msg ON true",
        fence = super::fenced("clarifications.session_id", "$8")
    ))
    .bind(pending_id)
    .bind(s.status.as_str())
    .bind(s.outcome.as_str())
    .bind(s.by.as_str())
    .bind(at.instant())
    .bind(&answer)
    .bind(&s.answered_by)
    .bind(s.fence.bind())
    .bind(Value::Object(settle_patch(s, at)))
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let record = clarification(&row)?;
    let message = match &record.message_id {
        Some(_) => Some(super::messages::prefixed(&row, "m_")?),
        None => None,
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect: Effect::Settle,
    }))
}

/// The second conditional update of [`Settlement::effect_on`] inside the caller's
/// transaction: an operator's answer noted on a record agentctl settled first.
async fn record_answer(
    conn: &mut PgConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    if s.by != SettledBy::Operator {
        return Ok(None);
    }
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_value(a).map_err(|err| StoreError::Query(err.to_string())))
        .transpose()?;
    let recorded = sqlx::query(&record_answer_sql(
        &super::fenced("clarifications.session_id", "$6"),
        COLUMNS,
    ))
    .bind(pending_id)
    .bind(s.by.as_str())
    .bind(s.status.as_str())
    .bind(&answer)
    .bind(&s.answered_by)
    .bind(s.fence.bind())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = recorded else {
        return Ok(None);
    };
    let record = clarification(&row)?;
    let message = match &record.message_id {
        Some(id) => Some(super::messages::merge(conn, id, &answer_patch(&record), None).await?),
        None => None,
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect: Effect::RecordAnswer,
    }))
}

/// Applies `s` to record `pending_id` inside the caller's transaction: the two
/// conditional updates of [`Settlement::effect_on`], each with the message.
pub(super) async fn settle_in(
    conn: &mut PgConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    match settle_row(conn, pending_id, s).await? {
        Some(done) => Ok(Some(done)),
        None => record_answer(conn, pending_id, s).await,
    }
}

#[async_trait]
impl ClarificationStore for PostgresDb {
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<Option<(Clarification, Message)>, StoreError> {
        open(&self.pool, record, message).await
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
        // The settlement itself is one statement: no transaction around it. Only an
        // operator's answer after agentctl's settlement takes the second, in one.
        let mut conn = self.pool.acquire().await?;
        if let Some(done) = settle_row(&mut conn, pending_id, settlement).await? {
            return Ok(Some(done));
        }
        if settlement.by != SettledBy::Operator {
            return Ok(None);
        }
        drop(conn);
        let mut tx = self.begin().await?;
        let noted = record_answer(&mut tx, pending_id, settlement).await?;
        tx.commit().await?;
        Ok(noted)
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
