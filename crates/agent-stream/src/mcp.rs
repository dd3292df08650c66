//! The agent's own MCP servers (`agents.<id>.mcp_servers` in `kandev.toml`), carried in the
//! agent spec of `agent.session.start` and listed by agentctl in `session/new` beside kandev's
//! own server.
//!
//! One type serves the configuration file and the wire, so what the backend validated is
//! exactly what agentctl receives: a map from server name to [`McpServer`], tagged by
//! `type` like ACP's own `McpServer` (`"stdio"` or `"http"`). Values are checked while
//! they are read, so a bad entry stops kandev at start-up with the key that is wrong.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The name of kandev's own server in `session/new` (`ask_user_question_kandev`); an
/// agent's own server may not take it.
pub const RESERVED_NAME: &str = "kandev";

/// One MCP server the agent is configured with.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    try_from = "RawMcpServer",
    into = "RawMcpServer"
)]
pub enum McpServer {
    /// A program the agent starts and speaks MCP with over its stdio.
    Stdio {
        /// Program and arguments; agentctl resolves a bare program name on its `PATH`.
        command: Vec<String>,
        /// Environment of the server process.
        env: BTreeMap<String, String>,
    },
    /// A streamable-HTTP MCP endpoint (the agent must advertise `mcpCapabilities.http`).
    Http {
        /// `http://` or `https://` URL of the endpoint.
        url: String,
        /// HTTP headers sent with every request (`Authorization`, …).
        headers: BTreeMap<String, String>,
    },
}

/// The serde shape of [`McpServer`]; [`McpServer`] is this after [`McpServer::try_from`]'s checks.
#[derive(Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RawMcpServer {
    Stdio {
        command: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

impl TryFrom<RawMcpServer> for McpServer {
    type Error = String;

    fn try_from(raw: RawMcpServer) -> Result<Self, String> {
        match raw {
            RawMcpServer::Stdio { command, env } => {
                if command.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err("`command` must name a program, e.g. command = \
                                [\"/usr/local/bin/my-mcp-server\", \"--stdio\"]"
                        .to_owned());
                }
                if let Some(name) = env.keys().find(|k| k.is_empty() || k.contains('=')) {
                    return Err(format!("`env` has an invalid variable name `{name}`"));
                }
                Ok(Self::Stdio { command, env })
            }
            RawMcpServer::Http { url, headers } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` `{url}` must start with http:// or https://"));
                }
                if let Some(name) = headers.keys().find(|k| !is_header_name(k)) {
                    return Err(format!("`headers` has an invalid header name `{name}`"));
                }
                Ok(Self::Http { url, headers })
            }
        }
    }
}

impl From<McpServer> for RawMcpServer {
    fn from(server: McpServer) -> Self {
        match server {
            McpServer::Stdio { command, env } => Self::Stdio { command, env },
            McpServer::Http { url, headers } => Self::Http { url, headers },
        }
    }
}

/// An RFC 9110 token: what a header name may be.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Values of `env` and `headers` carry secrets (tokens); only their names are shown.
impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio { command, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// The agent's own MCP servers by name (sorted, so `session/new` lists them in a stable
/// order). Names are checked when read: not empty, not [`RESERVED_NAME`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, McpServer>",
    into = "BTreeMap<String, McpServer>"
)]
pub struct McpServers(BTreeMap<String, McpServer>);

impl McpServers {
    /// Whether none is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The servers, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &McpServer)> {
        self.0.iter().map(|(name, server)| (name.as_str(), server))
    }

    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<&McpServer> {
        self.0.get(name)
    }
}

impl TryFrom<BTreeMap<String, McpServer>> for McpServers {
    type Error = String;

    fn try_from(servers: BTreeMap<String, McpServer>) -> Result<Self, String> {
        for name in servers.keys() {
            if name.trim().is_empty() {
                return Err("an MCP server name must not be empty".to_owned());
            }
            if name == RESERVED_NAME {
                return Err(format!(
                    "the name `{RESERVED_NAME}` is reserved for kandev's own server \
                     (ask_user_question_kandev); pick another"
                ));
            }
        }
        Ok(Self(servers))
    }
}

impl From<McpServers> for BTreeMap<String, McpServer> {
    fn from(servers: McpServers) -> Self {
        servers.0
    }
}

impl<const N: usize> TryFrom<[(&str, McpServer); N]> for McpServers {
    type Error = String;

    fn try_from(servers: [(&str, McpServer); N]) -> Result<Self, String> {
        Self::try_from(
            servers
                .into_iter()
                .map(|(name, server)| (name.to_owned(), server))
                .collect::<BTreeMap<_, _>>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(value: Value) -> Result<McpServers, String> {
        serde_json::from_value(value).map_err(|err| err.to_string())
    }

    #[test]
    fn stdio_and_http_servers_round_trip() {
        let wire = json!({
            "deploy": {"type": "stdio", "command": ["deploy-mcp", "--stdio"], "env": {"STAGE": "qa"}},
            "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer t"}},
            "plain": {"type": "stdio", "command": ["/bin/plain"]},
        });
        let servers = parse(wire.clone()).expect("valid");
        assert_eq!(
            servers.get("deploy"),
            Some(&McpServer::Stdio {
                command: vec!["deploy-mcp".into(), "--stdio".into()],
                env: BTreeMap::from([("STAGE".into(), "qa".into())]),
            })
        );
        assert_eq!(
            servers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["deploy", "docs", "plain"]
        );
        assert_eq!(serde_json::to_value(&servers).expect("encode"), wire);
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let cases = [
            (
                json!({"x": {"type": "stdio", "command": []}}),
                "must name a program",
            ),
            (
                json!({"x": {"type": "stdio", "command": ["  "]}}),
                "must name a program",
            ),
            (
                json!({"x": {"type": "http", "url": "ftp://h/mcp"}}),
                "must start with http:// or https://",
            ),
            (
                json!({"x": {"type": "http", "url": "http://h", "headers": {"Bad Name": "v"}}}),
                "invalid header name `Bad Name`",
            ),
            (
                json!({"x": {"type": "stdio", "command": ["a"], "env": {"A=B": "v"}}}),
                "invalid variable name `A=B`",
            ),
            (
                json!({"x": {"type": "sse", "url": "http://h"}}),
                "unknown variant `sse`",
            ),
            (json!({"x": {"command": ["a"]}}), "missing field `type`"),
            (
                json!({"x": {"type": "stdio", "command": ["a"], "headers": {}}}),
                "unknown field `headers`",
            ),
            (
                json!({"kandev": {"type": "stdio", "command": ["a"]}}),
                "reserved for kandev's own server",
            ),
            (
                json!({"": {"type": "stdio", "command": ["a"]}}),
                "must not be empty",
            ),
        ];
        for (value, needle) in cases {
            let err = parse(value.clone()).expect_err("invalid");
            assert!(err.contains(needle), "{value}: {err}");
        }
    }

    #[test]
    fn debug_never_shows_env_or_header_values() {
        let servers = parse(json!({
            "a": {"type": "stdio", "command": ["a"], "env": {"TOKEN": "s3cret-env"}},
            "b": {"type": "http", "url": "http://h", "headers": {"Authorization": "Bearer s3cret-hdr"}},
        }))
        .expect("valid");
        let debug = format!("{servers:?}");
        assert!(
            debug.contains("TOKEN") && debug.contains("Authorization"),
            "{debug}"
        );
        assert!(!debug.contains("s3cret"), "{debug}");
    }
}
