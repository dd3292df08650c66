//! [`ClarificationStore`] on SQLite: records and their settlement. The settlement rule
//! ([`Settlement::effect_on`]) is written once more here as the `WHERE` of two
//! conditional updates, run with the message update in one transaction; the tests pin
//! the SQL to the rule. The `ask_user_question_kandev` calls are in `questions`.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, Value, json};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::batch::Binds;
use super::{SqliteDb, json, json_opt, name, name_opt, time, time_opt};
use crate::model::clarification::{Effect, Standing};
use crate::model::{
    Clarification, ClarificationStatus, Message, NewClarification, NewMessage, Outcome, SettledBy,
    Settlement, Source, Timestamp,
};
use crate::store::clarifications::{answer_patch, record_answer_sql};
use crate::store::{ClarificationFilter, ClarificationStore, SettledRecord, StoreError};

pub(super) const COLUMNS: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, outcome, settled_by, answer, answered_by, created_at, settled_at, expires_at";

pub(super) fn clarification(row: &SqliteRow) -> Result<Clarification, StoreError> {
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
    conn: &mut SqliteConnection,
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
    conn: &mut SqliteConnection,
    new: &NewClarification,
    message_id: &str,
) -> Result<Option<Clarification>, StoreError> {
    let questions =
        serde_json::to_string(&new.questions).map_err(|err| StoreError::Query(err.to_string()))?;
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
    .bind(Timestamp::now().to_rfc3339())
    .bind(message_id)
    .bind(new.expires_at.map(Timestamp::to_rfc3339))
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(clarification).transpose()
}

/// The record and its chat message, as one write transaction in one hop
/// ([`SqliteDb::in_one_hop`]). The message takes the session's next number and the
/// record points at it. A replayed request (its pending id taken) writes nothing: `None`.
async fn open(
    db: &SqliteDb,
    new: &NewClarification,
    message: &NewMessage,
) -> Result<Option<(Clarification, Message)>, StoreError> {
    let questions =
        serde_json::to_string(&new.questions).map_err(|err| StoreError::Query(err.to_string()))?;
    let at = Timestamp::now();
    let mut stored = Message {
        id: uuid::Uuid::new_v4().to_string(),
        session_id: message.session_id.clone(),
        task_id: message.task_id.clone(),
        seq: 0,
        kind: message.kind,
        author_type: message.author_type.to_owned(),
        content: message.content.clone(),
        requests_input: message.requests_input,
        metadata: Value::Object(message.metadata.clone()),
        created_at: at,
        updated_at: at,
    };
    let fresh = "NOT EXISTS (SELECT 1 FROM clarifications WHERE pending_id = $11)";
    let statements = format!(
        "UPDATE sessions SET message_seq = message_seq + 1 WHERE id = $2 AND {fresh}; \
         INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
           SELECT $1, $2, $3, message_seq, $4, $5, $6, $7, $8, $9, $9, $10 FROM sessions WHERE id = $2 AND {fresh}; \
         INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at) \
           SELECT $11, $12, $13, $14, $15, $16, $17, 'pending', $9, id, $18 FROM messages WHERE id = $1; \
         SELECT seq FROM messages WHERE id = $1"
    );
    let binds = Binds::default()
        .and(stored.id.clone())?
        .and(stored.session_id.clone())?
        .and(stored.task_id.clone())?
        .and(stored.kind.as_str())?
        .and(message.author_type)?
        .and(stored.content.clone())?
        .and(stored.requests_input)?
        .and(stored.metadata.to_string())?
        .and(at.to_rfc3339())?
        .and(message.tool_call_id().map(str::to_owned))?
        .and(new.pending_id.clone())?
        .and(new.source.as_str())?
        .and(new.task_id.clone())?
        .and(new.session_id.clone())?
        .and(new.tool_call_id.clone())?
        .and(new.message.clone())?
        .and(questions)?
        .and(new.expires_at.map(Timestamp::to_rfc3339))?;
    let rows = db.in_one_hop(statements, binds).await?;
    let Some(row) = rows.first() else {
        // Nothing written: the pending id is taken, or there is no such session.
        if exists(&mut *db.pool.acquire().await?, &new.pending_id).await? {
            return Ok(None);
        }
        return Err(StoreError::Query(format!(
            "no session `{}` to add a message to",
            message.session_id
        )));
    };
    stored.seq = row.try_get("seq")?;
    Ok(Some((new.pending_at(&stored.id, at), stored)))
}

pub(super) async fn exists(
    conn: &mut SqliteConnection,
    pending_id: &str,
) -> Result<bool, StoreError> {
    let found: Option<(String,)> =
        sqlx::query_as("SELECT pending_id FROM clarifications WHERE pending_id = $1")
            .bind(pending_id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(found.is_some())
}

/// A record's [`Standing`], as last committed.
async fn standing(
    pool: &sqlx::SqlitePool,
    pending_id: &str,
) -> Result<Option<Standing>, StoreError> {
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

/// The first conditional update of [`Settlement::effect_on`] and its message, as one
/// batch: the message follows only when the record changed (`changes()`). Read back by
/// [`settled`].
fn settling(pending_id: &str, s: &Settlement) -> Result<(String, Binds), StoreError> {
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_string(a).map_err(|err| StoreError::Query(err.to_string())))
        .transpose()?;
    // The record's answer and operator are on its message already when none comes.
    let mut patch = String::from("'$.status', $2, '$.outcome', $3, '$.settled_at', $5");
    if answer.is_some() {
        patch.push_str(", '$.answer', json($6)");
    }
    if s.answered_by.is_some() {
        patch.push_str(", '$.answered_by', $7");
    }
    let statements = format!(
        "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, settled_at = $5, \
         answer = COALESCE($6, answer), answered_by = COALESCE($7, answered_by), claim = NULL, claimed_at = NULL \
         WHERE pending_id = $1 AND (status = 'pending' \
           OR ($4 IN ('agentctl', 'operator') AND settled_by = 'backend' AND (status <> $2 OR outcome IS NOT $3))) \
         AND {fence} RETURNING {COLUMNS}; \
         UPDATE messages SET metadata = json_set(metadata, {patch}), updated_at = $5 \
         WHERE changes() = 1 AND id = (SELECT message_id FROM clarifications WHERE pending_id = $1) \
         RETURNING {messages}",
        fence = super::fenced("clarifications.session_id", "$8"),
        messages = super::messages::COLUMNS
    );
    let binds = Binds::default()
        .and(pending_id.to_owned())?
        .and(s.status.as_str())?
        .and(s.outcome.as_str())?
        .and(s.by.as_str())?
        .and(Timestamp::now().to_rfc3339())?
        .and(answer)?
        .and(s.answered_by.clone())?
        .and(s.fence.bind())?;
    Ok((statements, binds))
}

/// What [`settling`]'s batch returned: the settled record and its message, or `None`.
fn settled(rows: &[SqliteRow]) -> Result<Option<SettledRecord>, StoreError> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let record = clarification(row)?;
    let message = match (&record.message_id, rows.get(1)) {
        (None, _) => None,
        (Some(_), Some(row)) => Some(super::messages::message(row)?),
        (Some(id), None) => return Err(StoreError::Query(format!("no message `{id}`"))),
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
    conn: &mut SqliteConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    if s.by != SettledBy::Operator {
        return Ok(None);
    }
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_string(a).map_err(|err| StoreError::Query(err.to_string())))
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
    conn: &mut SqliteConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let (statements, binds) = settling(pending_id, s)?;
    let rows = sqlx::query_with(&statements, binds.into_arguments())
        .fetch_all(&mut *conn)
        .await?;
    match settled(&rows)? {
        Some(done) => Ok(Some(done)),
        None => record_answer(conn, pending_id, s).await,
    }
}

#[async_trait]
impl ClarificationStore for SqliteDb {
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<Option<(Clarification, Message)>, StoreError> {
        open(self, record, message).await
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
        let (statements, binds) = settling(pending_id, settlement)?;
        if let Some(done) = settled(&self.in_one_hop(statements, binds).await?)? {
            return Ok(Some(done));
        }
        if settlement.by != SettledBy::Operator {
            return Ok(None);
        }
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
        .execute(&self.writer)
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
