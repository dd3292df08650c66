//! [`ClarificationStore`]: clarification records, their `clarification_request`
//! messages, and the `ask_user_question_kandev` calls waiting on them.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;

use crate::model::clarification::Effect;
use crate::model::{
    Clarification, ClarificationStatus, Message, NewClarification, NewMessage, Settlement, Source,
};
use crate::store::StoreError;

/// Which records to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClarificationFilter {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only those in this status.
    pub status: Option<ClarificationStatus>,
}

/// A record a settlement changed, with its message as updated in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledRecord {
    /// The record after the change.
    pub record: Clarification,
    /// Its `clarification_request` message after the change, when it has one.
    pub message: Option<Message>,
    /// What the settlement did ([`Effect::Settle`] or [`Effect::RecordAnswer`]).
    pub effect: Effect,
}

/// What [`ClarificationStore::open_question`] did with a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionOpened {
    /// The call is known already (its event was replayed): nothing changed.
    Duplicate,
    /// A pending record of the session asks the same questions: the call waits on it (D4).
    Joined {
        /// That record.
        pending_id: String,
    },
    /// A new record and its message.
    Opened {
        /// The record.
        record: Box<Clarification>,
        /// Its message.
        message: Box<Message>,
    },
}

/// What [`ClarificationStore::claim`] found: only the holder of a claim delivers an
/// answer to an `ask_user_question_kandev` record, so the first answer wins across
/// processes.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The record is this caller's to answer; these calls wait on it, oldest first.
    Claimed {
        /// Its waiting calls' request ids.
        calls: Vec<String>,
    },
    /// The record is settled already.
    NotActive(ClarificationStatus),
    /// Another answer is being delivered right now.
    Busy,
    /// No such record.
    Missing,
}

/// Where clarification records are kept.
#[async_trait]
pub trait ClarificationStore: Send + Sync {
    /// Stores a pending record and its message in one transaction. `None` (nothing
    /// stored) when a record with this id exists: the same event delivered twice.
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<Option<(Clarification, Message)>, StoreError>;

    /// One record.
    async fn clarification(&self, pending_id: &str) -> Result<Option<Clarification>, StoreError>;

    /// Records, oldest first.
    async fn clarifications(
        &self,
        filter: &ClarificationFilter,
    ) -> Result<Vec<Clarification>, StoreError>;

    /// Applies `settlement` to a record by [`Settlement::effect_on`], as one conditional
    /// update, and updates its message in the same transaction. `None` when nothing
    /// changed (another settlement won) or there is no such record.
    async fn settle(
        &self,
        pending_id: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError>;

    /// Settles every pending record of a session (of `source`, when given), except those
    /// in `keep`, in one transaction.
    async fn settle_pending(
        &self,
        session_id: &str,
        source: Option<Source>,
        keep: &[String],
        settlement: &Settlement,
    ) -> Result<Vec<SettledRecord>, StoreError>;

    /// Writes the operator's answer on a record's message without delivering it (the
    /// agent is gone: `not_delivered`).
    async fn note_undelivered(
        &self,
        pending_id: &str,
        answer: &OperatorAnswer,
    ) -> Result<Option<Message>, StoreError>;

    /// Opens (or joins, D4) the record of an `ask_user_question_kandev` call in one
    /// transaction: `dedup_key` names the normalised questions.
    async fn open_question(
        &self,
        request_id: &str,
        dedup_key: &str,
        record: &NewClarification,
        message: &NewMessage,
    ) -> Result<QuestionOpened, StoreError>;

    /// Claims a pending `ask_user_question` record for delivering an answer, under
    /// `claim` (a fresh token). A claim older than two minutes is stale (its holder died
    /// mid-delivery) and may be taken over.
    async fn claim(&self, pending_id: &str, claim: &str) -> Result<Claim, StoreError>;

    /// Gives a claim up (the answer could not be delivered; the record stays pending).
    async fn release_claim(&self, pending_id: &str, claim: &str) -> Result<(), StoreError>;

    /// Applies `settlement` to a record this caller has claimed, and clears the claim.
    async fn settle_claimed(
        &self,
        pending_id: &str,
        claim: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError>;

    /// Marks a waiting call returned with `outcome`. The record it waited on, when this
    /// call changed it.
    async fn mark_call_returned(
        &self,
        request_id: &str,
        outcome: &str,
    ) -> Result<Option<String>, StoreError>;

    /// A call returned on agentctl's side: marks it, and when no other call waits on its
    /// record, applies `if_last` to the record — one transaction.
    async fn call_returned(
        &self,
        request_id: &str,
        outcome: &str,
        if_last: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError>;

    /// The calls of a session still waiting, oldest first.
    async fn waiting_calls_of_session(&self, session_id: &str) -> Result<Vec<String>, StoreError>;
}
