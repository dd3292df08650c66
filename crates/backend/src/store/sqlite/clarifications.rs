//! [`ClarificationStore`] on SQLite: records and their settlement. The settlement rule
//! ([`Settlement::effect_on`]) is written once more here as the `WHERE` of two
//! conditional updates, run with the message update in one transaction; the tests pin
//! the SQL to the rule. The `ask_user_question_kandev` calls are in `questions`.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, Value, json};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::{SqliteDb, json, json_opt, name, name_opt, time, time_opt};
use crate::model::clarification::Effect;
use crate::model::{
    Clarification, ClarificationStatus, Message, NewClarification, NewMessage, Outcome, SettledBy,
    Settlement, Source, Timestamp,
};
use crate::store::{ClarificationFilter, ClarificationStore, SettledRecord, StoreError};

pub(super) const COLUMNS: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, outcome, settled_by, answer, answered_by, created_at, settled_at";

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
    })
}

/// Inserts a pending record inside the caller's transaction.
pub(super) async fn insert(
    conn: &mut SqliteConnection,
    new: &NewClarification,
    message_id: &str,
) -> Result<Clarification, StoreError> {
    let questions =
        serde_json::to_string(&new.questions).map_err(|err| StoreError::Query(err.to_string()))?;
    let row = sqlx::query(&format!(
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) RETURNING {COLUMNS}"
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
    .fetch_one(&mut *conn)
    .await?;
    clarification(&row)
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
    conn: &mut SqliteConnection,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let answer = s
        .answer
        .as_ref()
        .map(|a| serde_json::to_string(a).map_err(|err| StoreError::Query(err.to_string())))
        .transpose()?;
    let settled = sqlx::query(&format!(
        "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, settled_at = $5, \
         answer = COALESCE($6, answer), answered_by = COALESCE($7, answered_by), claim = NULL, claimed_at = NULL \
         WHERE pending_id = $1 AND (status = 'pending' \
           OR ($4 = 'agentctl' AND settled_by = 'backend' AND (status <> $2 OR outcome IS NOT $3))) \
         RETURNING {COLUMNS}"
    ))
    .bind(pending_id)
    .bind(s.status.as_str())
    .bind(s.outcome.as_str())
    .bind(s.by.as_str())
    .bind(Timestamp::now().to_rfc3339())
    .bind(&answer)
    .bind(&s.answered_by)
    .fetch_optional(&mut *conn)
    .await?;
    let (row, effect) = match settled {
        Some(row) => (row, Effect::Settle),
        None => {
            let recorded = sqlx::query(&format!(
                "UPDATE clarifications SET answer = COALESCE($4, answer), answered_by = $5 \
                 WHERE pending_id = $1 AND $2 = 'operator' AND settled_by = 'agentctl' \
                   AND status = $3 AND answered_by IS NULL \
                 RETURNING {COLUMNS}"
            ))
            .bind(pending_id)
            .bind(s.by.as_str())
            .bind(s.status.as_str())
            .bind(&answer)
            .bind(&s.answered_by)
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
impl ClarificationStore for SqliteDb {
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<Option<(Clarification, Message)>, StoreError> {
        let mut tx = self.begin().await?;
        if exists(&mut tx, &record.pending_id).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        let message = super::messages::insert(&mut tx, message).await?;
        let record = insert(&mut tx, record, &message.id).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MessageKind, author};
    use crate::store::{Claim, MessageStore, QuestionOpened, SessionStore, TaskStore};
    use kandev_agent_stream::SettleOutcome;
    use kandev_elicitation::{Constraints, Question, QuestionKind, QuestionOption};
    use proptest::prelude::*;

    fn question(prompt: &str) -> Question {
        Question {
            id: "question_0".into(),
            kind: QuestionKind::SingleSelect,
            title: Some("Colour".into()),
            prompt: prompt.into(),
            options: vec![QuestionOption {
                id: "Red".into(),
                label: "Red".into(),
                description: None,
            }],
            custom_answer: None,
            required: false,
            default: None,
            constraints: Constraints::default(),
        }
    }

    fn new_record(id: &str, session: &str, task: &str, source: Source) -> NewClarification {
        NewClarification {
            pending_id: id.into(),
            source,
            task_id: task.into(),
            session_id: session.into(),
            tool_call_id: Some("tool-1".into()),
            message: "Pick a colour".into(),
            questions: vec![question("Pick a colour")],
        }
    }

    fn new_message(session: &str, task: &str, id: &str) -> NewMessage {
        NewMessage {
            requests_input: true,
            ..NewMessage::new(
                session,
                task,
                MessageKind::ClarificationRequest,
                author::AGENT,
                "Pick a colour",
            )
            .with_metadata(
                json!({"pending_id": id, "status": "pending"})
                    .as_object()
                    .cloned()
                    .expect("object"),
            )
        }
    }

    async fn open(db: &SqliteDb, id: &str, session: &str, task: &str) -> (Clarification, Message) {
        db.open_clarification(
            &new_record(id, session, task, Source::Elicitation),
            &new_message(session, task, id),
        )
        .await
        .expect("open")
        .expect("new")
    }

    fn answer() -> OperatorAnswer {
        OperatorAnswer {
            answers: vec![kandev_elicitation::Answer {
                question_id: "question_0".into(),
                selected_options: vec!["Red".into()],
                custom_text: String::new(),
            }],
            ..OperatorAnswer::default()
        }
    }

    #[tokio::test]
    async fn identical_questions_make_two_records_under_their_ids_and_a_replay_makes_none() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        let (a, message) = open(&db, "6f1c0a52-0000-4000-8000-000000000001", &session, &task).await;
        assert_eq!(a.message_id.as_deref(), Some(message.id.as_str()));
        assert_eq!(message.metadata["pending_id"], a.pending_id);
        open(&db, "6f1c0a52-0000-4000-8000-000000000002", &session, &task).await;
        let replay = db
            .open_clarification(
                &new_record(&a.pending_id, &session, &task, Source::Elicitation),
                &new_message(&session, &task, &a.pending_id),
            )
            .await
            .expect("replay");
        assert!(replay.is_none());
        assert_eq!(
            db.messages(&session).await.expect("messages").len(),
            2,
            "no message for the replay"
        );
        let all = db
            .clarifications(&ClarificationFilter {
                session_id: Some(session.clone()),
                status: Some(ClarificationStatus::Pending),
            })
            .await
            .expect("list");
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].pending_id, a.pending_id);
        assert_eq!(
            db.session(&session).await.expect("s").expect("row").pending,
            2
        );
        let view = serde_json::to_value(&all[0]).expect("json");
        assert_eq!(view["source"], "elicitation");
        assert_eq!(view["questions"][0]["id"], "question_0");
        assert_eq!(view["answer"], Value::Null);
    }

    #[tokio::test]
    async fn settlement_happens_once_its_message_follows_and_agentctl_corrects_the_backend() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        open(&db, "p-1", &session, &task).await;
        let won = db
            .settle("p-1", &Settlement::answered(answer(), "alice"))
            .await
            .expect("settle")
            .expect("won");
        assert_eq!(won.effect, Effect::Settle);
        assert_eq!(won.record.status, ClarificationStatus::Answered);
        assert_eq!(won.record.answered_by.as_deref(), Some("alice"));
        let message = won.message.expect("message");
        assert_eq!(message.metadata["status"], "answered");
        assert_eq!(message.metadata["outcome"], "answered");
        assert_eq!(message.metadata["answered_by"], "alice");
        assert_eq!(
            message.metadata["answer"]["answers"][0]["selected_options"],
            json!(["Red"])
        );
        assert!(
            db.settle("p-1", &Settlement::from_agentctl(SettleOutcome::Answered))
                .await
                .expect("event")
                .is_none(),
            "agentctl's event arriving second changes nothing"
        );

        open(&db, "p-2", &session, &task).await;
        let provisional =
            Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn);
        db.settle("p-2", &provisional)
            .await
            .expect("provisional")
            .expect("changed");
        assert!(
            db.settle("p-2", &Settlement::answered(answer(), "bob"))
                .await
                .expect("op")
                .is_none(),
            "only agentctl overwrites a provisional status"
        );
        let fixed = db
            .settle("p-2", &Settlement::from_agentctl(SettleOutcome::TimedOut))
            .await
            .expect("fix")
            .expect("changed");
        assert_eq!(fixed.record.status, ClarificationStatus::Expired);
        assert_eq!(fixed.record.outcome, Some(Outcome::TimedOut));
        assert!(
            db.settle("p-2", &Settlement::from_agentctl(SettleOutcome::Answered))
                .await
                .expect("again")
                .is_none()
        );
    }

    #[tokio::test]
    async fn an_answer_arriving_after_agentctls_settlement_is_still_recorded() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        open(&db, "p-1", &session, &task).await;
        db.settle("p-1", &Settlement::from_agentctl(SettleOutcome::Answered))
            .await
            .expect("event")
            .expect("changed");
        let late = db
            .settle("p-1", &Settlement::answered(answer(), "alice"))
            .await
            .expect("respond")
            .expect("recorded");
        assert_eq!(late.effect, Effect::RecordAnswer);
        assert_eq!(late.record.status, ClarificationStatus::Answered);
        assert_eq!(late.record.answer, Some(answer()));
        assert_eq!(
            late.message.expect("message").metadata["answered_by"],
            "alice"
        );
        assert!(
            db.settle("p-1", &Settlement::answered(answer(), "bob"))
                .await
                .expect("again")
                .is_none(),
            "the first recorded answer stays"
        );
    }

    /// The check: two independent handles on one database file settle the same
    /// record at once, again and again; exactly one wins each time.
    #[tokio::test]
    async fn two_store_handles_on_one_file_settle_one_record_and_exactly_one_wins() {
        let (db, _dir, url) = crate::store::sqlite::tests_support::file_db().await;
        let other = SqliteDb::open(&url).await.expect("second handle");
        let task = crate::model::Task::new("T", "");
        db.create_task(&task).await.expect("task");
        let session = db.insert_session(&task.id, "mock").await.expect("session");
        for round in 0..20 {
            let id = format!("p-{round}");
            open(&db, &id, &session.id, &task.id).await;
            let a = Settlement::answered(answer(), "alice");
            let b = Settlement::answered(
                OperatorAnswer {
                    rejected: true,
                    ..OperatorAnswer::default()
                },
                "bob",
            );
            let (x, y) = tokio::join!(db.settle(&id, &a), other.settle(&id, &b));
            let wins = [x.expect("x"), y.expect("y")]
                .into_iter()
                .flatten()
                .filter(|s| s.effect == Effect::Settle)
                .count();
            assert_eq!(wins, 1, "round {round}");
        }
    }

    #[tokio::test]
    async fn settle_pending_keeps_what_it_is_told_to_and_filters_by_source() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        open(&db, "a", &session, &task).await;
        open(&db, "b", &session, &task).await;
        db.open_question(
            "r1",
            "k",
            &new_record("q", &session, &task, Source::AskUserQuestion),
            &new_message(&session, &task, "q"),
        )
        .await
        .expect("question");
        let gone = db
            .settle_pending(
                &session,
                Some(Source::Elicitation),
                &["b".to_owned()],
                &Settlement::disconnected(),
            )
            .await
            .expect("settle");
        assert_eq!(
            gone.iter()
                .map(|s| s.record.pending_id.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        let all = db
            .settle_pending(&session, None, &[], &Settlement::disconnected())
            .await
            .expect("settle all");
        assert_eq!(all.len(), 2);
        assert_eq!(
            db.session(&session).await.expect("s").expect("row").pending,
            0
        );
    }

    #[tokio::test]
    async fn a_question_call_opens_joins_or_repeats_and_its_record_settles_with_its_last_call() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        let rec = new_record("q1", &session, &task, Source::AskUserQuestion);
        let first = db
            .open_question("r1", "key", &rec, &new_message(&session, &task, "q1"))
            .await
            .expect("r1");
        assert!(matches!(first, QuestionOpened::Opened { .. }));
        let other = new_record("q2", &session, &task, Source::AskUserQuestion);
        assert_eq!(
            db.open_question("r2", "key", &other, &new_message(&session, &task, "q2"))
                .await
                .expect("r2"),
            QuestionOpened::Joined {
                pending_id: "q1".into()
            }
        );
        assert_eq!(
            db.open_question("r1", "key", &rec, &new_message(&session, &task, "q1"))
                .await
                .expect("again"),
            QuestionOpened::Duplicate
        );
        let cancelled = Settlement::from_agentctl(SettleOutcome::AgentCancelled);
        assert!(
            db.call_returned("r1", "agent_cancelled", &cancelled)
                .await
                .expect("r1")
                .is_none(),
            "r2 still waits"
        );
        let done = db
            .call_returned(
                "r2",
                "timed_out",
                &Settlement::from_agentctl(SettleOutcome::TimedOut),
            )
            .await
            .expect("r2")
            .expect("settled");
        assert_eq!(done.record.status, ClarificationStatus::Expired);
        assert!(
            db.call_returned("r2", "timed_out", &cancelled)
                .await
                .expect("again")
                .is_none()
        );
        assert!(
            db.waiting_calls_of_session(&session)
                .await
                .expect("calls")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn one_claim_at_a_time_and_a_settled_record_takes_none() {
        let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
        let rec = new_record("q1", &session, &task, Source::AskUserQuestion);
        db.open_question("r1", "key", &rec, &new_message(&session, &task, "q1"))
            .await
            .expect("open");
        let Claim::Claimed { calls, .. } = db.claim("q1", "t1").await.expect("claim") else {
            panic!("first claim wins");
        };
        assert_eq!(calls, ["r1"]);
        assert_eq!(db.claim("q1", "t2").await.expect("claim"), Claim::Busy);
        db.release_claim("q1", "t1").await.expect("release");
        assert!(matches!(
            db.claim("q1", "t2").await.expect("claim"),
            Claim::Claimed { .. }
        ));
        // A claim whose holder died is taken over once stale.
        sqlx::query("UPDATE clarifications SET claimed_at = '2000-01-01T00:00:00.000000Z' WHERE pending_id = 'q1'")
            .execute(db.pool())
            .await
            .expect("age");
        assert!(matches!(
            db.claim("q1", "t3").await.expect("claim"),
            Claim::Claimed { .. }
        ));
        db.mark_call_returned("r1", "answered")
            .await
            .expect("returned");
        let won = db
            .settle_claimed("q1", "t3", &Settlement::answered(answer(), "alice"))
            .await
            .expect("settle")
            .expect("won");
        assert_eq!(won.record.status, ClarificationStatus::Answered);
        assert_eq!(
            db.claim("q1", "t4").await.expect("claim"),
            Claim::NotActive(ClarificationStatus::Answered)
        );
        assert_eq!(db.claim("nope", "t4").await.expect("claim"), Claim::Missing);
        open(&db, "e1", &session, &task).await;
        assert_eq!(
            db.claim("e1", "t5").await.expect("claim"),
            Claim::Busy,
            "elicitations are never claimed"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The SQL does exactly what [`Settlement::effect_on`] says, from any standing.
        #[test]
        fn the_sql_follows_the_settlement_rule(
            status in 0usize..6, outcome in 0usize..6, by in 0usize..3, has_op in any::<bool>(),
            new_status in 1usize..6, new_outcome in 0usize..6, new_by in 0usize..3,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
            rt.block_on(async {
                let (db, task, session) = crate::store::sqlite::tests_support::seeded().await;
                open(&db, "p", &session, &task).await;
                let st = ClarificationStatus::ALL[status];
                if st != ClarificationStatus::Pending {
                    sqlx::query("UPDATE clarifications SET status = $1, outcome = $2, settled_by = $3, answered_by = $4 WHERE pending_id = 'p'")
                        .bind(st.as_str())
                        .bind(Outcome::ALL[outcome].as_str())
                        .bind(SettledBy::ALL[by].as_str())
                        .bind(has_op.then_some("someone"))
                        .execute(db.pool())
                        .await
                        .expect("stand");
                }
                let before = db.clarification("p").await.expect("get").expect("row");
                let s = Settlement {
                    status: ClarificationStatus::ALL[new_status],
                    outcome: Outcome::ALL[new_outcome],
                    by: SettledBy::ALL[new_by],
                    answer: None,
                    answered_by: (SettledBy::ALL[new_by] == SettledBy::Operator).then(|| "op".to_owned()),
                };
                let expected = s.effect_on(before.standing());
                let got = db.settle("p", &s).await.expect("settle").map(|r| r.effect).unwrap_or(Effect::Nothing);
                assert_eq!(got, expected, "{before:?} with {s:?}");
            });
        }
    }
}
