//! The per-session MCP server exposing `ask_user_question_kandev`, and the stdio bridge.
//!
//! Each session gets its own streamable-HTTP MCP server on a loopback port
//! ([`McpEndpoint`]), protected by a fresh bearer token. agentctl lists it in
//! `session/new`'s `mcpServers`: as an `http` server when the agent advertises
//! `mcpCapabilities.http`, else as a stdio server running `agentctl mcp-stdio`, which
//! relays stdio MCP to the HTTP one ([`run_stdio_bridge`]). The tool call itself is
//! handled by whoever the endpoint serves, a [`QuestionAsker`] (the session: it owns
//! the endpoint, so this module knows it only through the trait).

use std::sync::{Arc, Weak};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::questions::{self, AskInput, QuestionVerdict, TOOL_NAME};

/// The path of the MCP endpoint on its port.
pub const MCP_PATH: &str = "/mcp";
/// The name agentctl gives the server in `mcpServers`.
pub const SERVER_NAME: &str = "kandev";
/// Env var of the bridge's upstream URL (`agentctl mcp-stdio`).
pub const URL_ENV: &str = "KANDEV_MCP_URL";
/// Env var of the bridge's upstream bearer token (`agentctl mcp-stdio`).
pub const TOKEN_ENV: &str = "KANDEV_MCP_TOKEN";

/// What answers the tool's calls: the session the endpoint belongs to.
pub trait QuestionAsker: Send + Sync + 'static {
    /// Puts `input` to the operator and resolves with the verdict the tool returns;
    /// `cancelled` fires when the agent abandons the call.
    fn ask(
        &self,
        input: AskInput,
        cancelled: CancellationToken,
    ) -> impl std::future::Future<Output = QuestionVerdict> + Send;
}

/// One session's running MCP server. Dropping it stops the server.
#[derive(Debug)]
pub struct McpEndpoint {
    url: String,
    token: String,
    stop: CancellationToken,
}

impl McpEndpoint {
    /// Binds `127.0.0.1:0` and serves the tool of `session` there.
    pub async fn start<A: QuestionAsker>(session: Weak<A>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let stop = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stop.child_token();
        let service = StreamableHttpService::new(
            move || {
                Ok(AskServer {
                    session: session.clone(),
                })
            },
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let router =
            Router::new()
                .nest_service(MCP_PATH, service)
                .layer(middleware::from_fn_with_state(
                    Arc::new(token.clone()),
                    require_bearer,
                ));
        let shutdown = stop.clone();
        tokio::spawn(async move {
            // TCP_NODELAY: a tool call's answer is one small write that must not wait for
            // Nagle's algorithm to meet the client's delayed ACK.
            let listener = listener.tap_io(|tcp| {
                if let Err(err) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %err, "cannot set TCP_NODELAY");
                }
            });
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
            if let Err(err) = served {
                tracing::warn!(error = %err, "MCP server failed");
            }
        });
        Ok(Self {
            url: format!("http://{addr}{MCP_PATH}"),
            token,
            stop,
        })
    }

    /// The endpoint's URL, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bearer token the endpoint requires.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The `mcpServers` entry for `session/new`: `http` when the agent accepts HTTP MCP
    /// servers, else a stdio server running `bridge` (`agentctl mcp-stdio`).
    pub fn acp_server(&self, http: bool, bridge: &str) -> Value {
        if http {
            json!({
                "type": "http",
                "name": SERVER_NAME,
                "url": self.url,
                "headers": [{"name": "Authorization", "value": format!("Bearer {}", self.token)}],
            })
        } else {
            json!({
                "name": SERVER_NAME,
                "command": bridge,
                "args": ["mcp-stdio"],
                "env": [
                    {"name": URL_ENV, "value": self.url},
                    {"name": TOKEN_ENV, "value": self.token},
                ],
            })
        }
    }

    /// Stops the server (idempotent).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for McpEndpoint {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn require_bearer(
    State(token): State<Arc<String>>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response()
    }
}

/// The tool as `tools/list` shows it.
pub fn tool() -> Tool {
    Tool::new(
        TOOL_NAME,
        questions::TOOL_DESCRIPTION,
        Arc::new(questions::input_schema()),
    )
}

fn text_result(value: &Value, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(value.to_string())];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// The MCP server of one session.
struct AskServer<A> {
    session: Weak<A>,
}

impl<A> Clone for AskServer<A> {
    fn clone(&self) -> Self {
        Self {
            session: self.session.clone(),
        }
    }
}

impl<A: QuestionAsker> ServerHandler for AskServer<A> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Kandev: ask the supervising operator with ask_user_question_kandev when you need a decision.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; this server has {TOOL_NAME}",
                    request.name
                ),
                None,
            ));
        }
        let input = match questions::parse_input(request.arguments.as_ref()) {
            Ok(input) => input,
            Err(message) => {
                tracing::info!(%message, "ask_user_question_kandev refused");
                return Ok(text_result(&json!({"error": message}), true).into());
            }
        };
        let Some(session) = self.session.upgrade() else {
            return Ok(text_result(&json!({"error": "the session has ended"}), true).into());
        };
        let asked = input.questions.clone();
        let verdict = session.ask(input, context.ct.clone()).await;
        let (value, is_error) = questions::tool_result(&asked, &verdict);
        Ok(text_result(&value, is_error).into())
    }
}

/// Why the stdio bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The URL or token is missing.
    #[error("{0}")]
    Config(String),
    /// The HTTP MCP server could not be reached or initialised.
    #[error("cannot reach the MCP server at {url}: {message}")]
    Upstream {
        /// The URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// Serving stdio failed.
    #[error("stdio MCP failed: {0}")]
    Stdio(String),
}

/// Relays `tools/list` and `tools/call` to the upstream HTTP server.
#[derive(Clone)]
struct StdioBridge {
    upstream: rmcp::Peer<RoleClient>,
}

impl ServerHandler for StdioBridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(|err| ErrorData::internal_error(err.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tokio::select! {
            result = self.upstream.call_tool(request) => result
                .map(Into::into)
                .map_err(|err| ErrorData::internal_error(err.to_string(), None)),
            // The agent cancelled: dropping the upstream call cancels it there too.
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
        }
    }
}

/// `agentctl mcp-stdio`: serves MCP on stdin/stdout, relaying to `url` with `token`,
/// until stdin closes.
pub async fn run_stdio_bridge(url: String, token: String) -> Result<(), BridgeError> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token),
    );
    let upstream =
        ().serve(transport)
            .await
            .map_err(|err| BridgeError::Upstream {
                url: url.clone(),
                message: err.to_string(),
            })?;
    let bridge = StdioBridge {
        upstream: upstream.peer().clone(),
    };
    let server = bridge
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|err| BridgeError::Stdio(err.to_string()))?;
    let ended = server.waiting().await;
    let _ = upstream.cancel().await;
    ended
        .map(|_| ())
        .map_err(|err| BridgeError::Stdio(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_declares_its_input_rules() {
        let tool = tool();
        assert_eq!(tool.name, TOOL_NAME);
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["properties"]["questions"]["maxItems"], 4);
        assert_eq!(
            schema["properties"]["questions"]["items"]["properties"]["options"]["minItems"],
            2
        );
    }

    #[tokio::test]
    async fn acp_entries_carry_the_token() {
        struct Nobody;
        impl QuestionAsker for Nobody {
            async fn ask(&self, _: AskInput, _: CancellationToken) -> QuestionVerdict {
                unreachable!("no call is made")
            }
        }
        let endpoint = McpEndpoint::start(Weak::<Nobody>::new())
            .await
            .expect("binds");
        let http = endpoint.acp_server(true, "agentctl");
        assert_eq!(http["type"], "http");
        assert_eq!(http["url"], endpoint.url());
        assert_eq!(
            http["headers"][0]["value"],
            format!("Bearer {}", endpoint.token())
        );
        let stdio = endpoint.acp_server(false, "/bin/agentctl");
        assert_eq!(stdio["command"], "/bin/agentctl");
        assert_eq!(stdio["args"], json!(["mcp-stdio"]));
        assert_eq!(stdio["env"][1]["value"], endpoint.token());
        assert!(stdio.get("type").is_none());
    }
}
