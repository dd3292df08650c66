//! `agents.<id>.mcp_servers` in `kandev.toml`: read, validated with the key at fault, and
//! carried unchanged in the agent spec of `agent.session.start`.

use std::collections::BTreeMap;

use kandev_agent_stream::mcp::McpServer;
use kandev_backend::config::Config;

fn load(toml: &str) -> Result<Config, kandev_backend::config::ConfigError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("kandev.toml");
    std::fs::write(&file, toml).expect("write");
    Config::load(Some(&file), Vec::<(String, String)>::new())
}

#[test]
fn stdio_and_http_servers_reach_the_agent_spec() {
    let config = load(
        r#"
        [agents.claude]
        command = ["claude-agent-acp"]

        [agents.claude.mcp_servers.deploy]
        type = "stdio"
        command = ["deploy-mcp", "--stdio"]
        env = { STAGE = "qa" }

        [agents.claude.mcp_servers.docs]
        type = "http"
        url = "https://docs.example/mcp"
        headers = { Authorization = "Bearer t" }
        "#,
    )
    .expect("loads");
    let spec = config.agents["claude"].spec("claude");
    assert_eq!(
        spec.mcp_servers.get("deploy"),
        Some(&McpServer::Stdio {
            command: vec!["deploy-mcp".into(), "--stdio".into()],
            env: BTreeMap::from([("STAGE".into(), "qa".into())]),
        })
    );
    assert_eq!(
        spec.mcp_servers.get("docs"),
        Some(&McpServer::Http {
            url: "https://docs.example/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer t".into())]),
        })
    );
    assert!(config.agents["mock"].mcp_servers.is_empty());
}

#[test]
fn a_bad_server_stops_start_up_naming_its_key() {
    let err = load(
        r#"
        [agents.claude]
        command = ["claude-agent-acp"]
        [agents.claude.mcp_servers.docs]
        type = "http"
        url = "docs.example/mcp"
        "#,
    )
    .expect_err("a URL without a scheme");
    assert!(
        err.key.starts_with("agents.claude.mcp_servers"),
        "{}",
        err.key
    );
    assert!(err.to_string().contains("http:// or https://"), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");

    let err = load(
        r#"
        [agents.claude]
        command = ["claude-agent-acp"]
        [agents.claude.mcp_servers.kandev]
        type = "stdio"
        command = ["x"]
        "#,
    )
    .expect_err("the reserved name");
    assert!(err.to_string().contains("reserved"), "{err}");
}
