//! Response payloads, agentctl → backend.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{AskUserQuestionRequested, ElicitationRequested};

/// Answer to `agent.session.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStarted {
    /// The ACP session id from `session/new`.
    pub acp_session_id: String,
    /// The exact `clientCapabilities` JSON sent in `initialize`.
    pub client_capabilities: Value,
    /// The agent's `agentInfo` from its `initialize` result (`name`, `title`, `version`),
    /// when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_info: Option<Value>,
}

/// Answer to `agent.session.attach`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionAttached {
    /// The ACP session id.
    pub acp_session_id: String,
    /// Elicitations still waiting for an answer.
    pub pending: Vec<ElicitationRequested>,
}

/// Answer to `agent.prompt`: the prompt was handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptAccepted {
    /// Always true.
    pub accepted: bool,
}

/// `{success: true}`, the answer to `agent.elicitations.respond`, `agent.cancel`, `agent.shutdown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Success {
    /// Always true.
    pub success: bool,
}

impl Success {
    /// `{success: true}`.
    pub const OK: Success = Success { success: true };
}

/// Answer to `agent.elicitations.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingList {
    /// Elicitations still waiting for an answer, oldest first.
    pub pending: Vec<ElicitationRequested>,
}

/// Answer to `agent.questions.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionList {
    /// `ask_user_question_kandev` calls still waiting, oldest first.
    pub pending: Vec<AskUserQuestionRequested>,
}
