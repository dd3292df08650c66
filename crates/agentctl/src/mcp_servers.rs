//! The agent's own MCP servers (`agents.<id>.mcp_servers`) as ACP `McpServer` entries of
//! `session/new`, listed after kandev's own server.
//!
//! ACP's shapes: a stdio server is `{name, command, args, env: [{name, value}]}` with no
//! `type` (its `command` an absolute path), an HTTP server `{type: "http", name, url,
//! headers: [{name, value}]}`. A bare program name is looked up on the agent's `PATH` here,
//! because the agent is entitled to an absolute path. An HTTP server for an agent that
//! does not advertise `mcpCapabilities.http` fails the session start: dropping it
//! silently would leave the agent without tools the operator configured.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use kandev_agent_stream::mcp::{McpServer, McpServers};
use serde_json::{Value, json};

/// Why the agent's own servers cannot be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpServersError {
    /// An HTTP server, and the agent only takes stdio ones.
    #[error(
        "mcp_servers.{name}: the agent does not accept HTTP MCP servers \
         (no mcpCapabilities.http in its initialize answer); configure it as type = \"stdio\""
    )]
    HttpUnsupported {
        /// The server's name.
        name: String,
    },
    /// A stdio server's program is not on the `PATH`.
    #[error("mcp_servers.{name}: program `{program}` not found on PATH")]
    ProgramNotFound {
        /// The server's name.
        name: String,
        /// The program as configured.
        program: String,
    },
}

/// The `mcpServers` entries for `servers`. `http`: the agent advertised
/// `mcpCapabilities.http`; `cwd`: the session's working directory (relative programs are
/// resolved against it); `path`: the `PATH` the agent runs with.
pub fn acp_entries(
    servers: &McpServers,
    http: bool,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<Vec<Value>, McpServersError> {
    servers
        .iter()
        .map(|(name, server)| match server {
            McpServer::Stdio { command, env } => {
                let (program, args) = command
                    .split_first()
                    .map(|(p, a)| (p.as_str(), a))
                    .unwrap_or(("", &[]));
                let resolved = resolve_program(program, cwd, path).ok_or_else(|| {
                    McpServersError::ProgramNotFound {
                        name: name.to_owned(),
                        program: program.to_owned(),
                    }
                })?;
                Ok(json!({
                    "name": name,
                    "command": resolved,
                    "args": args,
                    "env": name_values(env),
                }))
            }
            McpServer::Http { url, headers } => {
                if !http {
                    return Err(McpServersError::HttpUnsupported {
                        name: name.to_owned(),
                    });
                }
                Ok(json!({
                    "type": "http",
                    "name": name,
                    "url": url,
                    "headers": name_values(headers),
                }))
            }
        })
        .collect()
}

fn name_values(map: &std::collections::BTreeMap<String, String>) -> Vec<Value> {
    map.iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

/// An absolute path for `program`: kept when absolute, joined to `cwd` when it has a
/// slash, else the first executable file of that name on `path`.
fn resolve_program(program: &str, cwd: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    let given = Path::new(program);
    if given.is_absolute() {
        return Some(given.to_path_buf());
    }
    if program.contains('/') {
        return Some(cwd.join(given));
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::McpServer as AcpMcpServer;
    use std::collections::BTreeMap;

    fn servers(pairs: Vec<(&str, McpServer)>) -> McpServers {
        McpServers::try_from(
            pairs
                .into_iter()
                .map(|(n, s)| (n.to_owned(), s))
                .collect::<BTreeMap<_, _>>(),
        )
        .expect("valid names")
    }

    fn stdio(command: &[&str], env: &[(&str, &str)]) -> McpServer {
        McpServer::Stdio {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn http(url: &str, headers: &[(&str, &str)]) -> McpServer {
        McpServer::Http {
            url: url.to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn stdio_and_http_map_to_acps_shapes() {
        let list = servers(vec![
            (
                "deploy",
                stdio(&["/opt/deploy-mcp", "--stdio"], &[("STAGE", "qa")]),
            ),
            (
                "docs",
                http("https://docs.example/mcp", &[("Authorization", "Bearer t")]),
            ),
        ]);
        let entries = acp_entries(&list, true, Path::new("/work"), None).expect("maps");
        assert_eq!(
            entries,
            vec![
                json!({"name": "deploy", "command": "/opt/deploy-mcp", "args": ["--stdio"],
                       "env": [{"name": "STAGE", "value": "qa"}]}),
                json!({"type": "http", "name": "docs", "url": "https://docs.example/mcp",
                       "headers": [{"name": "Authorization", "value": "Bearer t"}]}),
            ]
        );
        // The SDK's own schema reads them as the variants they are meant to be.
        let parsed: Vec<AcpMcpServer> =
            serde_json::from_value(Value::Array(entries)).expect("ACP McpServer shapes");
        match &parsed[0] {
            AcpMcpServer::Stdio(s) => {
                assert_eq!(s.command, PathBuf::from("/opt/deploy-mcp"));
                assert_eq!(s.args, ["--stdio"]);
                assert_eq!(
                    (s.env[0].name.as_str(), s.env[0].value.as_str()),
                    ("STAGE", "qa")
                );
            }
            other => panic!("not stdio: {other:?}"),
        }
        match &parsed[1] {
            AcpMcpServer::Http(h) => {
                assert_eq!(h.url, "https://docs.example/mcp");
                assert_eq!(h.headers[0].name, "Authorization");
            }
            other => panic!("not http: {other:?}"),
        }
    }

    #[test]
    fn an_http_server_for_a_stdio_only_agent_fails_the_start() {
        let list = servers(vec![("docs", http("http://h/mcp", &[]))]);
        assert_eq!(
            acp_entries(&list, false, Path::new("/"), None),
            Err(McpServersError::HttpUnsupported {
                name: "docs".into()
            })
        );
    }

    #[test]
    fn programs_are_resolved_to_absolute_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        let tool = bin.join("my-mcp");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        let not_executable = bin.join("plain-file");
        std::fs::write(&not_executable, "").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let path = std::env::join_paths(["relative/dir".into(), bin.clone()]).expect("PATH");
        let cwd = Path::new("/work/tree");
        assert_eq!(resolve_program("my-mcp", cwd, Some(&path)), Some(tool));
        assert_eq!(resolve_program("plain-file", cwd, Some(&path)), None);
        assert_eq!(resolve_program("missing", cwd, Some(&path)), None);
        assert_eq!(resolve_program("my-mcp", cwd, None), None);
        assert_eq!(
            resolve_program("/usr/bin/x", cwd, None),
            Some(PathBuf::from("/usr/bin/x"))
        );
        assert_eq!(
            resolve_program("tools/x", cwd, None),
            Some(PathBuf::from("/work/tree/tools/x"))
        );
        let list = servers(vec![("gone", stdio(&["missing"], &[]))]);
        assert_eq!(
            acp_entries(&list, true, cwd, Some(&path)),
            Err(McpServersError::ProgramNotFound {
                name: "gone".into(),
                program: "missing".into()
            })
        );
    }
}
