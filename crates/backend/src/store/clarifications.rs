//! [`ClarificationStore`]: clarification records, their `clarification_request`
//! messages, and the `ask_user_question_kandev` calls waiting on them.

use async_trait::async_trait;
use kandev_elicitation::OperatorAnswer;

use crate::model::settlement::Effect;
use crate::model::{
    Clarification, ClarificationStatus, Message, NewClarification, NewMessage, Notification,
    SessionRecord, Settlement, Source,
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
    /// The record's session as the settlement left it, when the engine reads it in the
    /// same hop (SQLite); else `None`, and the feed reads it back.
    pub session: Option<SessionRecord>,
}

/// What [`ClarificationStore::open_clarification`] stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The pending record.
    pub record: Clarification,
    /// Its `clarification_request` message.
    pub message: Message,
    /// Its session as the open left it, when the engine returns it with the write;
    /// else `None`, and the feed reads it back.
    pub session: Option<SessionRecord>,
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

/// Whether a returned `ask_user_question_kandev` call settles its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSettles {
    /// The operator's answer or cancel returned it: the record takes that settlement at
    /// once, whatever other calls still wait (they are sent the same verb).
    Record,
    /// The call ended on its own (deadline, turn cancel, shutdown): the record takes the
    /// settlement only when no other call waits on it.
    IfLast,
}

/// What one returned call did to its record.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReturned {
    /// The record the call waited on.
    pub pending_id: String,
    /// The record's settlement, when this call made it.
    pub settled: Option<SettledRecord>,
    /// The calls still waiting on the record, oldest first.
    pub waiting: Vec<String>,
}

/// Where clarification records are kept.
#[async_trait]
pub trait ClarificationStore: Send + Sync {
    /// Stores a pending record, its message, the notification that announces it and the
    /// session's `applied_seq` (how far its events are applied once this commits: its
    /// consumer's stream position), each when given, in one transaction (one commit on
    /// the agent's path). `None` (nothing stored) when a record with this id exists: the
    /// same event delivered twice.
    async fn open_clarification(
        &self,
        record: &NewClarification,
        message: &NewMessage,
        notification: Option<&Notification>,
        applied_seq: Option<u64>,
    ) -> Result<Option<Opened>, StoreError>;

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
    /// transaction: `dedup_key` names the normalised questions. The notification, when
    /// given, is stored with a record opened, never with a call that joined one; the
    /// session's `applied_seq`, when given, with either (as [`Self::open_clarification`]).
    async fn open_question(
        &self,
        request_id: &str,
        dedup_key: &str,
        record: &NewClarification,
        message: &NewMessage,
        notification: Option<&Notification>,
        applied_seq: Option<u64>,
    ) -> Result<QuestionOpened, StoreError>;

    /// The calls waiting on record `pending_id`, oldest first: the ones an operator's
    /// verb is sent to.
    async fn waiting_calls(&self, pending_id: &str) -> Result<Vec<String>, StoreError>;

    /// A call returned on agentctl's side (its `ask_user_question_settled`): marks it
    /// returned with `outcome` and applies `settlement` to its record as `settles` says,
    /// in one transaction. `None` when the call was not waiting (a replayed event).
    async fn call_returned(
        &self,
        request_id: &str,
        outcome: &str,
        settlement: &Settlement,
        settles: CallSettles,
    ) -> Result<Option<CallReturned>, StoreError>;

    /// The calls of a session still waiting, oldest first.
    async fn waiting_calls_of_session(&self, session_id: &str) -> Result<Vec<String>, StoreError>;
}
