//! The full stack with the real bridge: a fake Anthropic API, one `kandev` (local
//! executor → `agentctl`) whose agent `claude-acp` runs the real claude-agent-acp — and
//! through it the real Claude Code CLI — behind `acp-tap`, which logs the bridge's ACP
//! wire in the mock agent's frame format.
//!
//! Everything the bridge needs is set in `agents.claude-acp.env`; the variables of the
//! runner's environment that would change the CLI (`IS_SANDBOX`, `ANTHROPIC_*`, …) are
//! removed from kandev's, so nothing reaches the agent by inheritance.

use std::collections::BTreeMap;

use serde_json::Value;

use super::bridge::{AgentHome, Bridge, agent_env, foreign_env_names, node};
use super::fake_api::FakeAnthropic;
use super::model::Script;
use crate::bins;
use crate::frames::FrameLog;
use crate::kandev::{Kandev, KandevOptions};

/// The agent id of the real bridge in the stack's `kandev.toml`.
pub const AGENT: &str = "claude-acp";

/// A TOML basic string (a JSON string is one).
fn toml_str(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

fn toml_inline(map: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v)))
        .collect();
    format!("{{ {} }}", pairs.join(", "))
}

/// What to start.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    flag: bool,
    script: Script,
    elicit_mcp: Option<BTreeMap<String, String>>,
}

impl StackOptions {
    /// `features.acpElicitation` forced to `flag` (env), the model playing `script`.
    pub fn new(flag: bool, script: Script) -> Self {
        Self {
            flag,
            script,
            elicit_mcp: None,
        }
    }

    /// Configures the agent with the `elicit-mcp` server as `mcp_servers.deploy` (stdio)
    /// with `env`; the CLI names its tool `mcp__deploy__confirm_deploy`.
    pub fn with_deploy_server(mut self, env: &[(&str, &str)]) -> Self {
        self.elicit_mcp = Some(
            env.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        self
    }
}

/// A running stack; dropping it stops everything (printing the model's requests and the
/// bridge's last frames when the test is failing).
#[derive(Debug)]
pub struct ClaudeStack {
    /// The bridge under test.
    pub bridge: Bridge,
    /// The fake model.
    pub api: FakeAnthropic,
    /// kandev (and through it agentctl and the bridge).
    pub kandev: Kandev,
    /// The bridge's ACP wire (`acp-tap`).
    pub frames: FrameLog,
    /// The agent's `HOME`.
    pub home: AgentHome,
}

impl ClaudeStack {
    /// Starts the stack on bridge `version`.
    ///
    /// # Panics
    /// When a part cannot start, or the bridge cannot be installed ([`Bridge::for_test`]).
    pub async fn start(version: &str, options: StackOptions) -> Self {
        let bridge = Bridge::for_test(version);
        let node = node().unwrap_or_else(|err| panic!("the bridge needs node: {err}"));
        let api = FakeAnthropic::start(options.script).await;
        let home = AgentHome::new();
        let frames = FrameLog::new(home.home().join("acp-frames.jsonl"));
        let env = agent_env(&api.base_url(), &home, &node);
        let command = [
            bins::binary("acp-tap").display().to_string(),
            "--log".to_owned(),
            frames.path().display().to_string(),
            "--".to_owned(),
            node.display().to_string(),
            bridge.entry().display().to_string(),
        ];
        let mut toml = format!(
            "[agents.{AGENT}]\ncommand = [{}]\ncwd = {}\nenv = {}\n",
            command.map(|c| toml_str(&c)).join(", "),
            toml_str(&home.work().display().to_string()),
            toml_inline(&env),
        );
        if let Some(server_env) = &options.elicit_mcp {
            toml.push_str(&format!(
                "\n[agents.{AGENT}.mcp_servers.deploy]\ntype = \"stdio\"\ncommand = [{}]\nenv = {}\n",
                toml_str(&bins::binary("elicit-mcp").display().to_string()),
                toml_inline(server_env),
            ));
        }
        let mut kandev_options = KandevOptions::new().flag_env(options.flag).toml(&toml);
        for name in foreign_env_names() {
            kandev_options = kandev_options.unset_env(&name);
        }
        let kandev = Kandev::start(kandev_options).await;
        Self {
            bridge,
            api,
            kandev,
            frames,
            home,
        }
    }

    /// Starts a session of the bridge on `prompt` in a new task; returns the session id.
    pub async fn session(&self, prompt: &str) -> String {
        let (_, session) = self.kandev.task_with_session(AGENT, prompt).await;
        session["id"].as_str().expect("session id").to_owned()
    }

    /// Prints what the model was asked and the bridge's last frames.
    pub fn dump(&self) {
        eprintln!(
            "===== claude-agent-acp {} ({}) =====",
            self.bridge.version,
            self.bridge.dir.display()
        );
        eprintln!("===== model requests =====\n{}", self.api.summary());
        eprintln!(
            "===== bridge frames (last 40, {}) =====\n{}",
            self.frames.path().display(),
            self.frames.tail(40)
        );
    }
}

impl Drop for ClaudeStack {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump();
        }
    }
}
