//! Clarifications (docs/architecture.md §4.3): the operator-facing record of a question an
//! agent asked, its status, and who settled it. The rules by which it is settled exactly
//! once are in `settlement.rs`, beside this file.

use kandev_elicitation::{OperatorAnswer, Question};
use serde::{Deserialize, Serialize};

use crate::model::time::Timestamp;

/// Where a clarification came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// ACP `elicitation/create`; the id is agentctl's `pending_id`.
    Elicitation,
    /// The `ask_user_question_kandev` MCP tool; the id is minted by the backend.
    AskUserQuestion,
}

impl Source {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::AskUserQuestion => "ask_user_question",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Elicitation, Self::AskUserQuestion]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Where a record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClarificationStatus {
    /// Waiting for the operator.
    Pending,
    /// The operator's answer was delivered.
    Answered,
    /// The operator skipped.
    Declined,
    /// The operator, the agent or the turn withdrew it, or agentctl shut down.
    Cancelled,
    /// The answer deadline passed; agentctl answered as `agents.<id>.on_deadline` says
    /// (`decline` unless configured; `answered_by` names any other choice).
    Expired,
    /// agentctl or the agent is gone; it can no longer be answered.
    AgentDisconnected,
}

impl ClarificationStatus {
    /// Every status.
    pub const ALL: [ClarificationStatus; 6] = [
        Self::Pending,
        Self::Answered,
        Self::Declined,
        Self::Cancelled,
        Self::Expired,
        Self::AgentDisconnected,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Answered => "answered",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::AgentDisconnected => "agent_disconnected",
        }
    }

    /// Parses a stored or query-string name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// What became of a settled question, as the history shows it (finer than the status:
/// it tells an operator's cancel from the agent's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The operator's answer reached the agent.
    Answered,
    /// The operator skipped it (`decline`).
    Skipped,
    /// The operator cancelled it (`cancel`: the tool call is aborted).
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// The agent withdrew it, or its turn was cancelled.
    AgentCancelled,
    /// The session ended or its agent went away before an answer.
    Withdrawn,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 6] = [
        Self::Answered,
        Self::Skipped,
        Self::Cancelled,
        Self::TimedOut,
        Self::AgentCancelled,
        Self::Withdrawn,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::AgentCancelled => "agent_cancelled",
            Self::Withdrawn => "withdrawn",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// `answered_by` values that name no operator (operator names never contain `:`).
pub mod answered_by {
    /// The deadline passed and `on_deadline = "defaults"` sent the schema's defaults.
    pub const DEADLINE_DEFAULTS: &str = "deadline:defaults";
    /// The deadline passed and `on_deadline = "cancel"` sent `cancel`.
    pub const DEADLINE_CANCEL: &str = "deadline:cancel";
    /// The prefix of an auto-answer rule's name (`rule:<name>`).
    pub const RULE_PREFIX: &str = "rule:";
}

/// Who settled a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SettledBy {
    /// agentctl's settled event: authoritative.
    Agentctl,
    /// An operator request agentctl accepted.
    Operator,
    /// The backend on its own (link lost, agentctl said NOT_FOUND, session stopped).
    Backend,
}

impl SettledBy {
    /// Every settler.
    pub const ALL: [SettledBy; 3] = [Self::Agentctl, Self::Operator, Self::Backend];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agentctl => "agentctl",
            Self::Operator => "operator",
            Self::Backend => "backend",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// A new pending record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewClarification {
    /// agentctl's pending id (elicitation) or a fresh UUID (ask_user_question).
    pub pending_id: String,
    /// Where it came from.
    pub source: Source,
    /// Its task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
    /// The tool call that raised it, when known.
    pub tool_call_id: Option<String>,
    /// The request's message.
    pub message: String,
    /// The mapped questions (§4.3).
    pub questions: Vec<Question>,
    /// agentctl's answer deadline, when it sent one.
    pub expires_at: Option<Timestamp>,
    /// What that deadline answers (`decline`, `defaults`, `cancel`), when agentctl said.
    pub on_deadline: Option<String>,
}

impl NewClarification {
    /// The record as stored when opened at `at`, its message `message_id` (what a store
    /// that wrote it in one statement returns without reading it back).
    pub fn pending_at(&self, message_id: &str, at: Timestamp) -> Clarification {
        Clarification {
            pending_id: self.pending_id.clone(),
            source: self.source,
            task_id: self.task_id.clone(),
            session_id: self.session_id.clone(),
            message_id: Some(message_id.to_owned()),
            tool_call_id: self.tool_call_id.clone(),
            message: self.message.clone(),
            questions: self.questions.clone(),
            status: ClarificationStatus::Pending,
            outcome: None,
            settled_by: None,
            answer: None,
            answered_by: None,
            created_at: at,
            settled_at: None,
            expires_at: self.expires_at,
            on_deadline: self.on_deadline.clone(),
        }
    }
}

/// A stored record, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Clarification {
    /// agentctl's pending id, or the backend's for ask_user_question.
    pub pending_id: String,
    /// Where it came from.
    pub source: Source,
    /// Its task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
    /// The `clarification_request` message.
    pub message_id: Option<String>,
    /// The tool call that raised it.
    pub tool_call_id: Option<String>,
    /// The request's message.
    pub message: String,
    /// The mapped questions (§4.3).
    #[sqlx(json)]
    pub questions: Vec<Question>,
    /// The status.
    pub status: ClarificationStatus,
    /// What became of it, once settled.
    pub outcome: Option<Outcome>,
    /// The operator's answer `{answers, rejected, reject_reason}`, once given.
    #[sqlx(json(nullable))]
    pub answer: Option<OperatorAnswer>,
    /// The operator who answered, skipped or cancelled it (`"local"` without auth).
    pub answered_by: Option<String>,
    /// Who settled it.
    #[serde(skip)]
    pub settled_by: Option<SettledBy>,
    /// When it was asked.
    pub created_at: Timestamp,
    /// When it was settled.
    pub settled_at: Option<Timestamp>,
    /// When agentctl gives it up unanswered (its answer deadline), when known: the card
    /// counts down to it and the board orders waiting tasks by it.
    pub expires_at: Option<Timestamp>,
    /// What an elicitation's deadline answers (`decline`, `defaults`, `cancel`; the agent's
    /// `on_deadline`), when agentctl said: the card and the webhooks name it.
    pub on_deadline: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back() {
        for s in ClarificationStatus::ALL {
            assert_eq!(ClarificationStatus::parse(s.as_str()), Some(s));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        for b in SettledBy::ALL {
            assert_eq!(SettledBy::parse(b.as_str()), Some(b));
        }
        assert_eq!(
            Source::parse("ask_user_question"),
            Some(Source::AskUserQuestion)
        );
    }
}
