//! Request payloads, backend → agentctl.

use std::collections::BTreeMap;

use kandev_elicitation::Answer;
use serde::{Deserialize, Serialize};

/// How agentctl answers the agent's `session/request_permission`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionPolicy {
    /// Pick the agent's `allow_once` option (else `allow_always`).
    #[default]
    AllowOnce,
    /// Pick the agent's `allow_always` option (else `allow_once`).
    AllowAlways,
    /// Pick the agent's `reject_once` option (else `reject_always`).
    RejectOnce,
    /// Answer `cancelled`.
    Cancel,
}

/// The agent to run for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// The agent id from the backend's configuration (`mock`, `claude-acp`, `cursor-acp`, …);
    /// client capabilities are scoped by it.
    pub id: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment for the agent process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory; agentctl's own when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Answer to permission requests.
    #[serde(default)]
    pub permission_policy: PermissionPolicy,
    /// Names of agentctl's own environment variables the agent also gets, beyond the
    /// allowlist of the `agent_env` module (`agents.<id>.inherit_env`, e.g. an API key).
    /// Absent on the wire when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
}

/// `agent.session.start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStart {
    /// The backend's session id.
    pub session_id: String,
    /// What to run.
    pub agent: AgentSpec,
    /// The runtime-flag snapshot resolved by the backend at session start
    /// (`{"features.acpElicitation": true}`); agentctl reads no flag itself.
    #[serde(default)]
    pub flags: BTreeMap<String, bool>,
}

/// `agent.session.attach`: bind this stream to a running session and flush its buffered events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAttach {
    /// The backend's session id.
    pub session_id: String,
    /// The last event sequence number (a notification envelope's `id`) the backend has
    /// taken in. With it, agentctl replays every event it still keeps after that number,
    /// including those handed to a stream that died before they arrived; without it,
    /// only the events no stream was given are flushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

/// `agent.prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The prompt text.
    pub text: String,
}

/// `agent.elicitations.respond`: the operator's answer to one pending elicitation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElicitationsRespond {
    /// agentctl's pending id.
    pub pending_id: String,
    /// Per-question answers.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// Skip: decline the whole bundle.
    #[serde(default)]
    pub rejected: bool,
    /// Why, for the record.
    #[serde(default)]
    pub reject_reason: String,
}

impl ElicitationsRespond {
    /// The answer part, as the mapping crate takes it.
    pub fn operator_answer(&self) -> kandev_elicitation::OperatorAnswer {
        kandev_elicitation::OperatorAnswer {
            answers: self.answers.clone(),
            rejected: self.rejected,
            reject_reason: self.reject_reason.clone(),
        }
    }
}

/// `agent.questions.respond`: the backend's verdict for one `ask_user_question_kandev`
/// call, already validated and settled in the backend's own store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionsRespond {
    /// agentctl's request id from `ask_user_question_requested`.
    pub request_id: String,
    /// The operator's answer, or `rejected: true`.
    pub result: kandev_elicitation::OperatorAnswer,
}

/// A request with no fields (`agent.cancel`, `agent.elicitations.list`, `agent.shutdown`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attach_without_after_seq_keeps_the_old_wire_shape() {
        let attach = SessionAttach {
            session_id: "s-1".into(),
            after_seq: None,
        };
        assert_eq!(
            serde_json::to_value(&attach).expect("encode"),
            json!({"session_id": "s-1"})
        );
        let old: SessionAttach =
            serde_json::from_value(json!({"session_id": "s-1"})).expect("decode");
        assert_eq!(old, attach);
    }

    #[test]
    fn attach_with_after_seq_round_trips() {
        let attach = SessionAttach {
            session_id: "s-1".into(),
            after_seq: Some(41),
        };
        let wire = serde_json::to_value(&attach).expect("encode");
        assert_eq!(wire, json!({"session_id": "s-1", "after_seq": 41}));
        assert_eq!(
            serde_json::from_value::<SessionAttach>(wire).expect("decode"),
            attach
        );
    }
}
