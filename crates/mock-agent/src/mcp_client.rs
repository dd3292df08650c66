//! The MCP client side of the `ask_user_question` step: calls the client's
//! `ask_user_question_kandev` tool on an MCP server from `session/new`'s `mcpServers`
//! (an `http` server over streamable HTTP, or a stdio server this agent spawns).

use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Map, Value, json};

/// The tool the step calls.
pub const TOOL: &str = "ask_user_question_kandev";
/// The server name agentctl uses; any other server is a fallback.
pub const SERVER_NAME: &str = "kandev";

/// Calls the tool with `arguments` and returns what to report: the tool result's text
/// as JSON (`{"status": "answered", …}`, `{"error": …}` for a refused input), or
/// `{"error": "…"}` when the server could not be reached.
pub async fn ask_user_question(servers: &[Value], arguments: Map<String, Value>) -> Value {
    match call(servers, arguments).await {
        Ok(result) => result_json(&result),
        Err(message) => json!({ "error": message }),
    }
}

/// The server to use: the one named `kandev`, else the first.
pub fn pick_server(servers: &[Value]) -> Option<&Value> {
    servers
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(SERVER_NAME))
        .or_else(|| servers.first())
}

async fn call(servers: &[Value], arguments: Map<String, Value>) -> Result<CallToolResult, String> {
    let server = pick_server(servers).ok_or("no MCP server was given in session/new")?;
    let params = CallToolRequestParams::new(TOOL).with_arguments(arguments);
    if server.get("type").and_then(Value::as_str) == Some("http") {
        let service = connect_http(server).await?;
        let result = service
            .call_tool(params)
            .await
            .map_err(|err| format!("tools/call failed: {err}"));
        let _ = service.cancel().await;
        result
    } else {
        let mut child = spawn_stdio(server)?;
        let stdin = child.stdin.take().ok_or("the MCP server has no stdin")?;
        let stdout = child.stdout.take().ok_or("the MCP server has no stdout")?;
        let service: RunningService<RoleClient, ()> = ()
            .serve((stdout, stdin))
            .await
            .map_err(|err| format!("MCP initialize over stdio failed: {err}"))?;
        let result = service
            .call_tool(params)
            .await
            .map_err(|err| format!("tools/call failed: {err}"));
        // Closing its stdin ends the server; kill_on_drop covers one that does not exit.
        let _ = service.cancel().await;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
        result
    }
}

async fn connect_http(server: &Value) -> Result<RunningService<RoleClient, ()>, String> {
    let url = server
        .get("url")
        .and_then(Value::as_str)
        .ok_or("the http MCP server has no url")?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    let bearer = server
        .get("headers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|h| {
            h.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case("authorization"))
        })
        .find_map(|h| h.get("value").and_then(Value::as_str))
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer {
        config = config.auth_header(token.to_owned());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|err| format!("MCP initialize at {url} failed: {err}"))
}

fn spawn_stdio(server: &Value) -> Result<tokio::process::Child, String> {
    let command = server
        .get("command")
        .and_then(Value::as_str)
        .ok_or("the stdio MCP server has no command")?;
    let args: Vec<&str> = server
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let env = server
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e.get("name")?.as_str()?, e.get("value")?.as_str()?)));
    tokio::process::Command::new(command)
        .args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot start the MCP server `{command}`: {err}"))
}

/// The tool result as the step reports it: its first text block parsed as JSON (kept as
/// a string when it is not JSON), plus `is_error` when the tool said so.
pub fn result_json(result: &CallToolResult) -> Value {
    let text = serde_json::to_value(result.content.first())
        .ok()
        .and_then(|block| block.get("text").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let mut value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if result.is_error == Some(true)
        && let Value::Object(fields) = &mut value
    {
        fields.insert("is_error".to_owned(), Value::Bool(true));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn kandev_is_preferred_and_the_first_is_the_fallback() {
        let servers = vec![json!({"name": "other"}), json!({"name": "kandev"})];
        assert_eq!(pick_server(&servers), Some(&servers[1]));
        let servers = vec![json!({"name": "other"})];
        assert_eq!(pick_server(&servers), Some(&servers[0]));
        assert_eq!(pick_server(&[]), None);
    }

    #[test]
    fn results_are_reported_as_json_with_tool_errors_marked() {
        let ok = CallToolResult::success(vec![ContentBlock::text(r#"{"status":"answered"}"#)]);
        assert_eq!(result_json(&ok), json!({"status": "answered"}));
        let refused = CallToolResult::error(vec![ContentBlock::text(r#"{"error":"bad"}"#)]);
        assert_eq!(
            result_json(&refused),
            json!({"error": "bad", "is_error": true})
        );
        let prose = CallToolResult::success(vec![ContentBlock::text("plain words")]);
        assert_eq!(result_json(&prose), json!("plain words"));
    }

    #[tokio::test]
    async fn no_server_is_reported_not_panicked() {
        assert_eq!(
            ask_user_question(&[], Map::new()).await,
            json!({"error": "no MCP server was given in session/new"})
        );
    }
}
