//! Request payloads, backend → agentctl.

use std::collections::BTreeMap;

use kandev_elicitation::OperatorAnswer;
use serde::{Deserialize, Serialize};

use crate::mcp::McpServers;

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

/// What agentctl answers when a pending elicitation's deadline passes
/// (`agents.<id>.on_deadline`; the deadline itself is agentctl's, F13a).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadline {
    /// `decline` (AC-64).
    #[default]
    Decline,
    /// `accept` with the schema's defaults when every required field has one, else
    /// `decline`.
    Defaults,
    /// `cancel`.
    Cancel,
}

impl OnDeadline {
    /// Whether this is the default, [`OnDeadline::Decline`].
    pub fn is_decline(&self) -> bool {
        *self == Self::Decline
    }

    /// The wire and stored name (`decline`, `defaults`, `cancel`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Decline => "decline",
            Self::Defaults => "defaults",
            Self::Cancel => "cancel",
        }
    }
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
    /// The agent's own MCP servers, listed in `session/new` beside kandev's server.
    /// Absent from the wire when empty, so older peers see the shape they know.
    #[serde(default, skip_serializing_if = "McpServers::is_empty")]
    pub mcp_servers: McpServers,
    /// Names of agentctl's own environment variables the agent also gets, beyond the
    /// allowlist of the `agent_env` module (`agents.<id>.inherit_env`, e.g. an API key).
    /// Absent on the wire when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
    /// What the answer deadline of a pending elicitation does. Absent on the wire when
    /// it is the default (`decline`).
    #[serde(default, skip_serializing_if = "OnDeadline::is_decline")]
    pub on_deadline: OnDeadline,
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

/// `agent.elicitations.respond`: the operator's answer to one pending elicitation, on the
/// wire as the answer's fields beside `pending_id`:
/// `{"pending_id", "answers", "rejected", "reject_reason", "answered_by"?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElicitationsRespond {
    /// agentctl's pending id.
    pub pending_id: String,
    /// The answer.
    pub answer: OperatorAnswer,
    /// Who answered (an operator, `rule:<name>`, `mcp:<client>`): agentctl echoes it in
    /// `elicitation_settled`, so the backend records the answer from that one event.
    pub answered_by: Option<String>,
}

impl Serialize for ElicitationsRespond {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = match serde_json::to_value(&self.answer) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => serde_json::Map::new(),
            Err(err) => return Err(serde::ser::Error::custom(err)),
        };
        fields.insert("pending_id".into(), self.pending_id.clone().into());
        if let Some(by) = &self.answered_by {
            fields.insert("answered_by".into(), by.clone().into());
        }
        fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ElicitationsRespond {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let pending_id = match fields.remove("pending_id") {
            Some(serde_json::Value::String(id)) => id,
            Some(_) => return Err(D::Error::custom("`pending_id` must be a string")),
            None => return Err(D::Error::missing_field("pending_id")),
        };
        let answered_by = match fields.remove("answered_by") {
            Some(serde_json::Value::String(by)) => Some(by),
            Some(serde_json::Value::Null) | None => None,
            Some(_) => return Err(D::Error::custom("`answered_by` must be a string")),
        };
        let answer = OperatorAnswer::deserialize(serde_json::Value::Object(fields))
            .map_err(D::Error::custom)?;
        Ok(Self {
            pending_id,
            answer,
            answered_by,
        })
    }
}

/// `agent.elicitations.cancel`: the operator aborts one pending elicitation; the agent
/// gets `{"action": "cancel"}` (docs/architecture.md §13).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElicitationsCancel {
    /// agentctl's pending id.
    pub pending_id: String,
    /// Who cancelled; echoed in `elicitation_settled` as `answered_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
}

/// `agent.questions.respond`: the operator's answer to one clarification record of the
/// `ask_user_question_kandev` tool, already checked against the path's rules, for every
/// call waiting on it (D4 folds identical calls into one record). agentctl returns every
/// listed call it still holds, at once, and echoes the answer and who gave it in each
/// call's `ask_user_question_settled`: the backend writes the record from those events
/// alone. `NOT_FOUND` when it holds none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionsRespond {
    /// agentctl's request ids from `ask_user_question_requested`, one per waiting call.
    pub request_ids: Vec<String>,
    /// The operator's answer, or `rejected: true`.
    pub result: OperatorAnswer,
    /// Who answered; echoed in `ask_user_question_settled` as `answered_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

/// `agent.questions.cancel`: the operator aborts one record's `ask_user_question_kandev`
/// calls; each returns as cancelled. `NOT_FOUND` when agentctl holds none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionsCancel {
    /// agentctl's request ids from `ask_user_question_requested`.
    pub request_ids: Vec<String>,
    /// Who cancelled; echoed in `ask_user_question_settled` as `answered_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
}

/// `agent.cancel`: cancel the current turn. On the wire `{}`: a struct with no fields,
/// not a unit struct, which would encode as `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancel {}

/// `agent.elicitations.list`: the elicitations still waiting for an answer (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElicitationsList {}

/// `agent.questions.list`: the `ask_user_question_kandev` calls still waiting (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionsList {}

/// `agent.shutdown`: stop the agent (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shutdown {}

/// A payload with no fields, for sending a raw action by name (tests, probes); typed
/// requests use their own types ([`Cancel`], [`Shutdown`], …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elicitations_respond_is_the_answer_beside_its_pending_id() {
        let wire = json!({"pending_id": "p-1", "answers": [{"question_id": "q", "selected_options": ["A"], "custom_text": ""}], "rejected": false, "reject_reason": ""});
        let respond: ElicitationsRespond = serde_json::from_value(wire.clone()).expect("decode");
        assert_eq!(respond.pending_id, "p-1");
        assert_eq!(respond.answer.answers[0].selected_options, ["A"]);
        assert_eq!(serde_json::to_value(&respond).expect("encode"), wire);
        let sparse: ElicitationsRespond =
            serde_json::from_value(json!({"pending_id": "p-2", "rejected": true})).expect("sparse");
        assert!(sparse.answer.rejected);
        for bad in [
            json!({"answers": []}),
            json!({"pending_id": 7}),
            json!({"pending_id": "p", "answer": []}),
        ] {
            assert!(
                serde_json::from_value::<ElicitationsRespond>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

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

    #[test]
    fn agent_spec_without_mcp_servers_keeps_the_old_wire_shape() {
        let old = json!({"id": "claude", "command": ["claude-agent-acp"]});
        let spec: AgentSpec = serde_json::from_value(old).expect("decode");
        assert!(spec.mcp_servers.is_empty());
        let wire = serde_json::to_value(&spec).expect("encode");
        assert!(wire.get("mcp_servers").is_none(), "{wire}");
    }

    #[test]
    fn on_deadline_is_on_the_wire_only_when_not_decline() {
        let spec: AgentSpec =
            serde_json::from_value(json!({"id": "a", "command": ["x"]})).expect("decode");
        assert_eq!(spec.on_deadline, OnDeadline::Decline);
        let wire = serde_json::to_value(&spec).expect("encode");
        assert!(wire.get("on_deadline").is_none(), "{wire}");
        for (value, expected) in [
            ("defaults", OnDeadline::Defaults),
            ("cancel", OnDeadline::Cancel),
        ] {
            let spec: AgentSpec =
                serde_json::from_value(json!({"id": "a", "command": ["x"], "on_deadline": value}))
                    .expect("decode");
            assert_eq!(spec.on_deadline, expected);
            assert_eq!(
                serde_json::to_value(&spec).expect("encode")["on_deadline"],
                value
            );
        }
    }

    #[test]
    fn agent_spec_carries_its_mcp_servers() {
        let wire = json!({"id": "claude", "command": ["claude-agent-acp"], "env": {}, "cwd": null,
            "permission_policy": "allow_once",
            "mcp_servers": {"deploy": {"type": "stdio", "command": ["deploy-mcp"]}}});
        let spec: AgentSpec = serde_json::from_value(wire.clone()).expect("decode");
        assert!(matches!(
            spec.mcp_servers.get("deploy"),
            Some(crate::mcp::McpServer::Stdio { .. })
        ));
        assert_eq!(serde_json::to_value(&spec).expect("encode"), wire);
    }
}
