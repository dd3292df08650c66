//! One configured agent, `[agents.<id>]`: what kandev starts and how agentctl treats it.

use std::collections::BTreeMap;

use kandev_agent_stream::mcp::McpServers;
use kandev_agent_stream::request::{AgentSpec, OnDeadline, PermissionPolicy};
use serde::{Deserialize, Serialize};

use super::AutoAnswerConfig;

/// One configured agent, `[agents.<id>]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment for the agent process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the agent process.
    #[serde(default)]
    pub cwd: Option<String>,
    /// How agentctl answers the agent's permission requests.
    #[serde(default)]
    pub permission_policy: PermissionPolicy,
    /// The agent's own MCP servers by name (`[agents.<id>.mcp_servers.<name>]`, `type =
    /// "stdio"` with `command`/`env` or `"http"` with `url`/`headers`), listed in
    /// `session/new` beside kandev's own server.
    #[serde(default, skip_serializing_if = "McpServers::is_empty")]
    pub mcp_servers: McpServers,
    /// Names of agentctl's environment variables the agent also gets (an API key, …),
    /// beyond the allowlist (`PATH`, `HOME`, `USER`, `LANG`, `LC_*`, `TERM`, `TMPDIR`,
    /// `SHELL`). With the local executor they come from kandev's environment.
    #[serde(default)]
    pub inherit_env: Vec<String>,
    /// What a pending elicitation's answer deadline sends: `decline` (the default,
    /// AC-64), `defaults` (the schema's defaults when every required field has one, else
    /// `decline`) or `cancel`. agentctl applies it (F13a).
    #[serde(default, skip_serializing_if = "OnDeadline::is_decline")]
    pub on_deadline: OnDeadline,
    /// Rules that answer routine questions of an unattended run
    /// (`[[agents.<id>.auto_answers]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_answers: Vec<AutoAnswerConfig>,
}

impl AgentConfig {
    /// The default agent: the mock agent beside kandev, playing its demo scenario.
    pub(super) fn demo() -> Self {
        Self {
            command: vec![
                super::sibling_binary("mock-agent").display().to_string(),
                "--scenario".to_owned(),
                "demo".to_owned(),
            ],
            env: BTreeMap::new(),
            cwd: None,
            permission_policy: PermissionPolicy::default(),
            mcp_servers: McpServers::default(),
            inherit_env: Vec::new(),
            on_deadline: OnDeadline::default(),
            auto_answers: Vec::new(),
        }
    }

    /// The agent as `agent.session.start` carries it.
    pub fn spec(&self, id: &str) -> AgentSpec {
        AgentSpec {
            id: id.to_owned(),
            command: self.command.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            permission_policy: self.permission_policy,
            mcp_servers: self.mcp_servers.clone(),
            inherit_env: self.inherit_env.clone(),
            on_deadline: self.on_deadline,
        }
    }
}
