//! The agent's own MCP servers (`agent.mcp_servers` of `agent.session.start`) reach the
//! real mock agent in `session/new`, after kandev's own server and in ACP's shapes: a
//! stdio server with its program resolved on the agent's `PATH`, its arguments and env;
//! an HTTP server with its headers. An HTTP server for an agent without HTTP MCP support
//! fails the start with the server's name.

mod support;

use serde_json::{Value, json};
use support::{AgentCtl, MockLog, start_payload};

/// A directory holding an executable `deploy-mcp`, for the agent's `PATH`.
fn bin_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = dir.path().join("deploy-mcp");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    (dir, program)
}

fn with_servers(mut payload: Value, path: &str, servers: Value) -> Value {
    payload["agent"]["env"]["PATH"] = json!(path);
    payload["agent"]["mcp_servers"] = servers;
    payload
}

fn own_servers() -> Value {
    json!({
        "deploy": {"type": "stdio", "command": ["deploy-mcp", "--stage", "qa"],
                   "env": {"DEPLOY_TOKEN": "t-1", "STAGE": "qa"}},
        "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                 "headers": {"Authorization": "Bearer d-1", "X-Team": "core"}},
    })
}

#[tokio::test]
async fn session_new_lists_kandevs_server_then_the_agents_own() {
    let (dir, program) = bin_dir();
    let agentctl = AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let log = MockLog::new();
    let path = dir.path().display().to_string();
    stream
        .ok(
            "agent.session.start",
            with_servers(
                start_payload("s-1", "demo", true, &log),
                &path,
                own_servers(),
            ),
        )
        .await;
    log.wait_until("session/new", |log| {
        !log.received_requests("session/new").is_empty()
    })
    .await;
    let new = &log.received_requests("session/new")[0];
    let servers = new["params"]["mcpServers"].as_array().expect("mcpServers");
    assert_eq!(servers.len(), 3, "{servers:?}");
    assert_eq!(servers[0]["name"], "kandev");
    assert_eq!(
        servers[1],
        json!({"name": "deploy", "command": program, "args": ["--stage", "qa"],
               "env": [{"name": "DEPLOY_TOKEN", "value": "t-1"}, {"name": "STAGE", "value": "qa"}]})
    );
    assert_eq!(
        servers[2],
        json!({"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp",
               "headers": [{"name": "Authorization", "value": "Bearer d-1"}, {"name": "X-Team", "value": "core"}]})
    );
    // The tokens are the operator's secrets: never in agentctl's log.
    let stderr = agentctl.stderr();
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
    let (dir, _) = bin_dir();
    let agentctl = AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let log = MockLog::new();
    let mut payload = with_servers(
        start_payload("s-1", "demo", true, &log),
        &dir.path().display().to_string(),
        own_servers(),
    );
    payload["agent"]["env"]["MOCK_AGENT_NO_HTTP_MCP"] = json!("1");
    let err = stream.err("agent.session.start", payload).await;
    let message = err["message"].as_str().expect("message");
    assert!(
        message.contains("mcp_servers.docs") && message.contains("mcpCapabilities.http"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stdio_program_missing_from_path_fails_the_start_with_its_name() {
    let (dir, _) = bin_dir();
    let agentctl = AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let log = MockLog::new();
    let payload = with_servers(
        start_payload("s-1", "demo", true, &log),
        &dir.path().display().to_string(),
        json!({"tools": {"type": "stdio", "command": ["no-such-mcp-server"]}}),
    );
    let err = stream.err("agent.session.start", payload).await;
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("mcp_servers.tools") && m.contains("no-such-mcp-server")),
        "{err}"
    );
}
