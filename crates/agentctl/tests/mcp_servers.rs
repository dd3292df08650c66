//! The agent's own MCP servers (`agent.mcp_servers` of `agent.session.start`) reach the
//! real mock agent in `session/new`, after kandev's own server and in ACP's shapes: a
//! stdio server with its program resolved on the agent's `PATH`, its arguments and env;
//! an HTTP server with its headers. An HTTP server for an agent without HTTP MCP support
//! fails the start with the server's name.

use std::path::PathBuf;

use kandev_testkit::FrameLog;
use kandev_testkit::agentctl::{AgentCtl, start_payload};
use serde_json::{Value, json};

fn own_servers() -> Value {
    json!({
        "deploy": {"type": "stdio", "command": ["deploy-mcp", "--stage", "qa"],
                   "env": {"DEPLOY_TOKEN": "t-1", "STAGE": "qa"}},
        "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                 "headers": {"Authorization": "Bearer d-1", "X-Team": "core"}},
    })
}

/// An `agent.session.start` of `demo` (flag on) sent to a fresh agentctl.
struct Start {
    agentctl: AgentCtl,
    log: FrameLog,
    /// The executable `deploy-mcp` in the agent's `PATH`.
    program: PathBuf,
    /// agentctl's answer frame.
    answer: Value,
    _dir: tempfile::TempDir,
}

/// Starts `demo` for an agent whose `PATH` is a directory holding an executable
/// `deploy-mcp`, with its own MCP `servers` and `env` added to the agent's environment.
async fn start(servers: Value, env: &[(&str, &str)]) -> Start {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = dir.path().join("deploy-mcp");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let agentctl = AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let log = FrameLog::in_temp_dir();
    let mut payload = start_payload("s-1", "demo", true, &log);
    payload["agent"]["env"]["PATH"] = json!(dir.path());
    payload["agent"]["mcp_servers"] = servers;
    for (key, value) in env {
        payload["agent"]["env"][*key] = json!(value);
    }
    let answer = stream.request("agent.session.start", payload).await;
    Start {
        agentctl,
        log,
        program,
        answer,
        _dir: dir,
    }
}

/// The error message of a start agentctl refused.
fn refusal(start: &Start) -> &str {
    assert_eq!(start.answer["type"], "error", "{}", start.answer);
    start.answer["payload"]["message"]
        .as_str()
        .expect("message")
}

#[tokio::test]
async fn session_new_lists_kandevs_server_then_the_agents_own() {
    let start = start(own_servers(), &[]).await;
    assert_eq!(start.answer["type"], "response", "{}", start.answer);
    let new = start.log.wait_for_received("session/new").await;
    let servers = new["params"]["mcpServers"].as_array().expect("mcpServers");
    assert_eq!(servers.len(), 3, "{servers:?}");
    assert_eq!(servers[0]["name"], "kandev");
    assert_eq!(
        servers[1],
        json!({"name": "deploy", "command": start.program, "args": ["--stage", "qa"],
               "env": [{"name": "DEPLOY_TOKEN", "value": "t-1"}, {"name": "STAGE", "value": "qa"}]})
    );
    assert_eq!(
        servers[2],
        json!({"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp",
               "headers": [{"name": "Authorization", "value": "Bearer d-1"}, {"name": "X-Team", "value": "core"}]})
    );
    // The tokens are the operator's secrets: never in agentctl's log.
    let stderr = start.agentctl.stderr();
    assert!(
        stderr.contains("deploy") && stderr.contains("docs"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("t-1") && !stderr.contains("d-1"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_http_server_for_an_agent_without_http_mcp_fails_the_start() {
    let start = start(own_servers(), &[("MOCK_AGENT_NO_HTTP_MCP", "1")]).await;
    let message = refusal(&start);
    assert!(
        message.contains("mcp_servers.docs") && message.contains("mcpCapabilities.http"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stdio_program_missing_from_path_fails_the_start_with_its_name() {
    let servers = json!({"tools": {"type": "stdio", "command": ["no-such-mcp-server"]}});
    let start = start(servers, &[]).await;
    let message = refusal(&start);
    assert!(
        message.contains("mcp_servers.tools") && message.contains("no-such-mcp-server"),
        "{message}"
    );
}
