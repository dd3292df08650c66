//! A session of the real mock agent on agentctl, and the helpers its tests read it with.

use std::path::Path;

use serde_json::{Value, json};

use crate::bins;
use crate::frames::FrameLog;

use super::process::{AgentCtl, scenario_dir};
use super::stream::Stream;

/// An `agent.session.start` payload for the mock agent (agent id `mock`) playing
/// `scenario` from [`scenario_dir`], with the elicitation flag set to `elicitation` and its
/// wire logged to `log`.
pub fn start_payload(session_id: &str, scenario: &str, elicitation: bool, log: &FrameLog) -> Value {
    start_payload_in(
        "mock",
        session_id,
        scenario,
        &scenario_dir(),
        elicitation,
        log,
    )
}

/// Like [`start_payload`], with agent id `agent_id` (client capabilities are scoped by it)
/// and extra scenarios loaded from `dir`.
pub fn start_payload_in(
    agent_id: &str,
    session_id: &str,
    scenario: &str,
    dir: &Path,
    elicitation: bool,
    log: &FrameLog,
) -> Value {
    json!({
        "session_id": session_id,
        "agent": {
            "id": agent_id,
            "command": [
                bins::mock_agent(), "--scenario", scenario,
                "--scenario-dir", dir,
            ],
            "env": {"MOCK_AGENT_LOG": log.path(), "RUST_LOG": "warn"},
        },
        "flags": {"features.acpElicitation": elicitation},
    })
}

/// A started session `s-1`: agentctl, the stream that started it, the mock agent's wire.
#[derive(Debug)]
pub struct Harness {
    /// agentctl.
    pub agentctl: AgentCtl,
    /// The stream that started the session.
    pub stream: Stream,
    /// The mock agent's wire log.
    pub log: FrameLog,
    /// The `agent.session.start` response payload.
    pub started: Value,
}

impl Harness {
    /// agentctl + a session playing `scenario` with the flag set to `elicitation`.
    pub async fn start(scenario: &str, elicitation: bool) -> Self {
        Self::start_env(scenario, elicitation, &[]).await
    }

    /// Like [`Harness::start`], with agentctl's environment extended by `env`.
    pub async fn start_env(scenario: &str, elicitation: bool, env: &[(&str, &str)]) -> Self {
        Self::start_on(AgentCtl::start(env), scenario, elicitation, |_| {}).await
    }

    /// A session on `agentctl` playing `scenario`, its [`start_payload`] changed by `edit`
    /// before it is sent (the agent's command, env, permission policy, MCP servers).
    ///
    /// # Panics
    /// When the start fails.
    pub async fn start_on(
        agentctl: AgentCtl,
        scenario: &str,
        elicitation: bool,
        edit: impl FnOnce(&mut Value),
    ) -> Self {
        let stream = agentctl.connect().await;
        let log = FrameLog::in_temp_dir();
        let mut payload = start_payload("s-1", scenario, elicitation, &log);
        edit(&mut payload);
        let started = stream.ok("agent.session.start", payload).await;
        Self {
            agentctl,
            stream,
            log,
            started,
        }
    }

    /// agentctl + the mock agent's `two-identical` scenario (flag on), prompted until both
    /// its elicitations are pending; returns the two `elicitation_requested` payloads.
    pub async fn two_identical() -> (Self, Value, Value) {
        let mut h = Self::start("two-identical", true).await;
        h.prompt("go").await;
        let first = h.stream.event("elicitation_requested").await;
        let second = h.stream.event("elicitation_requested").await;
        (h, first, second)
    }

    /// Sends `agent.prompt` and checks it was accepted at once.
    pub async fn prompt(&self, text: &str) {
        let accepted = self.stream.ok("agent.prompt", json!({"text": text})).await;
        assert_eq!(accepted, json!({"accepted": true}));
    }

    /// Prompts and waits for the first `elicitation_requested`; returns its payload.
    pub async fn prompt_until_elicitation(&mut self, text: &str) -> Value {
        self.prompt(text).await;
        self.stream.event("elicitation_requested").await
    }

    /// Prompts `go` and waits for the first `elicitation_requested`; returns its pending id.
    pub async fn elicit(&mut self) -> String {
        pending_id(&self.prompt_until_elicitation("go").await)
    }

    /// `agent.elicitations.respond` with `answers`; returns the whole answer frame.
    pub async fn respond(&self, pending_id: &str, answers: Value, rejected: bool) -> Value {
        self.stream
            .request(
                "agent.elicitations.respond",
                json!({"pending_id": pending_id, "answers": answers, "rejected": rejected, "reject_reason": ""}),
            )
            .await
    }
}

/// The `pending_id` of an `elicitation_requested` payload.
pub fn pending_id(requested: &Value) -> String {
    requested["pending_id"]
        .as_str()
        .expect("pending_id")
        .to_owned()
}

/// The `answers` of an `agent.elicitations.respond` choosing `option` for `question_0`
/// (the question of the mock agent's single-question scenarios).
pub fn choose(option: &str) -> Value {
    json!([{"question_id": "question_0", "selected_options": [option]}])
}

/// The text of every `agent_message_chunk` in `events` (whole frames).
pub fn message_texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|f| f["payload"]["event"] == "session_update")
        .filter(|f| f["payload"]["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| {
            f["payload"]["update"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}
