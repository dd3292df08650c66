//! [`ClarificationStore`]: records and their settlement. The settlement rule
//! ([`Settlement::effect_on`]) is written once more here as the `WHERE` of two
//! conditional updates, run with the message update in one transaction; the database
//! re-checks it on the row it changes, so of two settlements racing from two processes
//! exactly one wins. The first update and the open are one hop each (`engine::…`); the
//! writes on one record are in `records`, the `ask_user_question_kandev` calls in
//! `questions`.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, json};

use super::records::{self, exists, record_answer, settle_in};
use super::{CLARIFICATION, engine};
use crate::model::settlement::{Effect, Standing};
use crate::model::{
    Clarification, Message, NewClarification, NewMessage, Notification, SettledBy, Settlement,
    Source, Timestamp,
};
use crate::store::{
    CallReturned, CallSettles, ClarificationFilter, ClarificationStore, Opened, SettledRecord,
    StoreError,
};

use engine::Db;

#[async_trait]
impl ClarificationStore for Db {
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
        notification: Option<&Notification>,
        applied_seq: Option<u64>,
    ) -> Result<Option<Opened>, StoreError> {
        let at = Timestamp::now();
        let opening = records::Opening {
            record,
            message,
            notification,
            applied_seq,
        };
        if let Some((message, session)) = engine::open_clarification(self, &opening, at).await? {
            return Ok(Some(Opened {
                record: record.pending_at(&message.id, at),
                message,
                session,
            }));
        }
        // Nothing written: the pending id is taken, or there is no such session.
        if exists(&mut *self.pool().acquire().await?, &record.pending_id).await? {
            return Ok(None);
        }
        Err(StoreError::Query(format!(
            "no session `{}` to add a message to",
            message.session_id
        )))
    }

    async fn clarification(&self, pending_id: &str) -> Result<Option<Clarification>, StoreError> {
        let sql = format!("SELECT {CLARIFICATION} FROM clarifications WHERE pending_id = $1");
        let record = sqlx::query_as(&sql)
            .bind(pending_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(record)
    }

    async fn clarifications(
        &self,
        filter: &ClarificationFilter,
    ) -> Result<Vec<Clarification>, StoreError> {
        let records = sqlx::query_as(&format!(
            "SELECT {CLARIFICATION} FROM clarifications \
             WHERE ($1 IS NULL OR session_id = $1) AND ($2 IS NULL OR status = $2) \
             ORDER BY created_at, pending_id"
        ))
        .bind(&filter.session_id)
        .bind(filter.status)
        .fetch_all(self.pool())
        .await?;
        Ok(records)
    }

    async fn settle(
        &self,
        pending_id: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError> {
        // agentctl's event after the operator's answer finds the record settled: what of
        // agentctl's does nothing to a committed record never will
        // (`nothing_is_final_for_agentctl`), so a read outside the transaction spares the
        // writer one.
        if settlement.by == SettledBy::Agentctl {
            let standing: Option<Standing> = sqlx::query_as(
                "SELECT status, outcome, settled_by, answered_by IS NOT NULL AS has_operator \
                 FROM clarifications WHERE pending_id = $1",
            )
            .bind(pending_id)
            .fetch_optional(self.pool())
            .await?;
            if standing.is_some_and(|current| settlement.effect_on(current) == Effect::Nothing) {
                return Ok(None);
            }
        }
        // The settlement itself is one hop, with no transaction of ours around it. Only an
        // operator's answer after agentctl's settlement takes the second, in one.
        if let Some(done) = engine::settle_once(self, pending_id, settlement).await? {
            return Ok(Some(done));
        }
        if settlement.by != SettledBy::Operator {
            return Ok(None);
        }
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
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
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT pending_id FROM clarifications WHERE session_id = $1 AND status = 'pending' \
             AND ($2 IS NULL OR source = $2) ORDER BY created_at, pending_id",
        )
        .bind(session_id)
        .bind(source)
        .fetch_all(&mut *tx)
        .await?;
        let mut settled = Vec::new();
        for id in ids.iter().filter(|id| !keep.contains(id)) {
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
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        let message_id: Option<Option<String>> =
            sqlx::query_scalar("SELECT message_id FROM clarifications WHERE pending_id = $1")
                .bind(pending_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(Some(message_id)) = message_id else {
            tx.rollback().await?;
            return Ok(None);
        };
        let mut patch = Map::new();
        patch.insert("undelivered_answer".into(), json!(answer));
        let message = engine::merge(&mut tx, &message_id, &patch, None).await?;
        tx.commit().await?;
        Ok(Some(message))
    }

    async fn open_question(
        &self,
        request_id: &str,
        dedup_key: &str,
        record: &NewClarification,
        message: &NewMessage,
        notification: Option<&Notification>,
        applied_seq: Option<u64>,
    ) -> Result<crate::store::QuestionOpened, StoreError> {
        let opening = records::Opening {
            record,
            message,
            notification,
            applied_seq,
        };
        super::questions::open(self, request_id, dedup_key, &opening).await
    }

    async fn waiting_calls(&self, pending_id: &str) -> Result<Vec<String>, StoreError> {
        super::questions::waiting_calls(&mut *self.pool().acquire().await?, pending_id).await
    }

    async fn call_returned(
        &self,
        request_id: &str,
        outcome: &str,
        settlement: &Settlement,
        settles: CallSettles,
    ) -> Result<Option<CallReturned>, StoreError> {
        super::questions::call_returned(self, request_id, outcome, settlement, settles).await
    }

    async fn waiting_calls_of_session(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let calls = sqlx::query_scalar(
            "SELECT request_id FROM ask_user_question_calls WHERE session_id = $1 AND status = 'waiting' \
             ORDER BY created_at, request_id",
        )
        .bind(session_id)
        .fetch_all(self.pool())
        .await?;
        Ok(calls)
    }
}
