//! The bench agent's MCP client: `ask_user_question_kandev` on the server `session/new`
//! named `kandev`, over streamable HTTP with the bearer token agentctl gave.

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};

/// A connected MCP client.
pub type Client = RunningService<RoleClient, ()>;

/// The tool.
const TOOL: &str = "ask_user_question_kandev";

/// Connects to the `kandev` HTTP server of `servers` and initialises.
pub async fn connect(servers: &[Value]) -> Result<Client, String> {
    let server = servers
        .iter()
        .find(|s| s["name"] == "kandev" && s["type"] == "http")
        .ok_or("no http MCP server named kandev in session/new")?;
    let url = server["url"]
        .as_str()
        .ok_or("the kandev MCP server has no url")?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    let token = server["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| {
            h["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("authorization"))
        })
        .find_map(|h| h["value"].as_str()?.strip_prefix("Bearer "));
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|err| format!("MCP initialize at {url}: {err}"))
}

/// The arguments of one call: one two-option question, `context` naming it.
pub fn arguments(context: &str) -> serde_json::Map<String, Value> {
    let value = json!({"context": context, "questions": [{"title": "Answer",
        "prompt": "Go on?", "options": [{"label": "Yes"}, {"label": "No"}]}]});
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// Calls the tool once; `Ok` when it returned an answer.
pub async fn ask(client: &Client, context: &str) -> Result<(), String> {
    let params = CallToolRequestParams::new(TOOL).with_arguments(arguments(context));
    let result = client
        .call_tool(params)
        .await
        .map_err(|err| format!("tools/call: {err}"))?;
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match body["status"].as_str() {
        Some("answered") => Ok(()),
        _ => Err(format!("the tool returned {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_kandev_http_server_there_is_nothing_to_connect_to() {
        let stdio = [json!({"name": "kandev", "type": "stdio", "command": "agentctl"})];
        assert!(connect(&stdio).await.is_err());
        assert_eq!(arguments("t/1")["context"], "t/1");
    }
}
