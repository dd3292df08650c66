//! The ACP agent side: `initialize`, `session/new`, `session/prompt`, `session/cancel`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, McpCapabilities, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::Catalog;
use crate::turn::Turn;
use crate::wire::Wire;

/// The agent's state across sessions.
#[derive(Debug)]
pub struct MockAgent {
    wire: Arc<Wire>,
    catalog: Catalog,
    default_scenario: String,
    /// The running turn of each session (turn number, stop token), to stop on `session/cancel`.
    turns: Mutex<HashMap<String, (u64, CancellationToken)>>,
    /// `mcpServers` of each session, as `session/new` gave them.
    mcp_servers: Mutex<HashMap<String, Arc<Vec<serde_json::Value>>>>,
    /// Whether `initialize` advertises `mcpCapabilities.http`.
    http_mcp: bool,
    next_session: AtomicU64,
    next_turn: AtomicU64,
}

impl MockAgent {
    /// An agent playing `default_scenario` unless a prompt names another.
    /// `http_mcp`: advertise `mcpCapabilities.http` (else the client must offer stdio servers).
    pub fn new(
        wire: Arc<Wire>,
        catalog: Catalog,
        default_scenario: String,
        http_mcp: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            wire,
            catalog,
            default_scenario,
            turns: Mutex::new(HashMap::new()),
            mcp_servers: Mutex::new(HashMap::new()),
            http_mcp,
            next_session: AtomicU64::new(1),
            next_turn: AtomicU64::new(1),
        })
    }

    /// Serve ACP on stdio until the client closes stdin.
    pub async fn serve(self: Arc<Self>) -> Result<(), agent_client_protocol::Error> {
        let transport = self.wire.transport();
        let on_new = Arc::clone(&self);
        let on_initialize = Arc::clone(&self);
        let on_prompt = Arc::clone(&self);
        let on_cancel = Arc::clone(&self);
        Agent
            .v1()
            .name("mock-agent")
            .on_receive_request(
                async move |_request: InitializeRequest, responder, _cx| {
                    // The capabilities themselves were captured from the wire line.
                    responder.respond(initialize_response(on_initialize.http_mcp))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: NewSessionRequest, responder, _cx| {
                    let number = on_new.next_session.fetch_add(1, Ordering::Relaxed);
                    let session_id = format!("mock-session-{number}");
                    let servers = match serde_json::to_value(&request.mcp_servers) {
                        Ok(serde_json::Value::Array(servers)) => servers,
                        _ => Vec::new(),
                    };
                    tracing::info!(session_id, mcp_servers = servers.len(), "session created");
                    lock(&on_new.mcp_servers).insert(session_id.clone(), Arc::new(servers));
                    responder.respond(NewSessionResponse::new(session_id))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: PromptRequest, responder, cx| {
                    Arc::clone(&on_prompt).start_turn(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |cancel: CancelNotification, _cx| {
                    on_cancel.cancel_turn(&cancel.session_id.to_string());
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_to(transport)
            .await
    }

    /// Run the prompt's scenario in a task of its own and return at once, so the
    /// dispatch loop keeps delivering the client's answers to our requests.
    fn start_turn(
        self: Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let session_id = request.session_id.to_string();
        let text = prompt_text(&request.prompt);
        let scenario = scenario_name(&text)
            .unwrap_or(&self.default_scenario)
            .to_owned();
        let stopped = CancellationToken::new();
        let number = self.next_turn.fetch_add(1, Ordering::Relaxed);
        lock(&self.turns).insert(session_id.clone(), (number, stopped.clone()));
        let prompt_cancelled = responder.cancellation();
        let span = tracing::info_span!("turn", session_id = %session_id, scenario = %scenario);
        let turn_cx = cx.clone();
        let task = async move {
            let servers = lock(&self.mcp_servers)
                .get(&session_id)
                .cloned()
                .unwrap_or_default();
            let mut turn = Turn::new(
                turn_cx,
                Arc::clone(&self.wire),
                session_id.clone(),
                stopped.clone(),
                servers,
            );
            let outcome = tokio::select! {
                outcome = turn.play_scenario(&self.catalog, &scenario) => outcome,
                () = stopped.cancelled() => Ok(StopReason::Cancelled),
                () = prompt_cancelled.cancelled() => {
                    stopped.cancel();
                    Ok(StopReason::Cancelled)
                }
            };
            drop(turn);
            self.finish_turn(&session_id, number);
            let sent = match outcome {
                Ok(reason) => {
                    tracing::info!(stop_reason = ?reason, "turn ended");
                    responder.respond(PromptResponse::new(reason))
                }
                Err(error) => {
                    tracing::warn!(%error, "turn failed");
                    responder.respond_with_error(
                        agent_client_protocol::Error::internal_error().data(error.to_string()),
                    )
                }
            };
            if let Err(error) = sent {
                tracing::warn!(%error, "cannot answer session/prompt");
            }
            Ok(())
        };
        cx.spawn(task.instrument(span))
    }

    fn cancel_turn(&self, session_id: &str) {
        match lock(&self.turns).get(session_id) {
            Some((_, stopped)) => {
                tracing::info!(session_id, "session/cancel: stopping the turn");
                stopped.cancel();
            }
            None => tracing::info!(session_id, "session/cancel with no running turn"),
        }
    }

    fn finish_turn(&self, session_id: &str, number: u64) {
        let mut turns = lock(&self.turns);
        // A newer prompt on the same session may have replaced our entry.
        if turns
            .get(session_id)
            .is_some_and(|(current, _)| *current == number)
        {
            turns.remove(session_id);
        }
    }
}

/// What `initialize` answers: protocol v1, `mock-agent`, HTTP MCP servers accepted
/// unless `http_mcp` is false.
pub fn initialize_response(http_mcp: bool) -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new().mcp_capabilities(McpCapabilities::new().http(http_mcp)),
        )
        .agent_info(Implementation::new("mock-agent", env!("CARGO_PKG_VERSION")))
}

/// The prompt's text blocks, joined by newlines.
fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `NAME` of a prompt starting with `/e2e:NAME`; the rest of the prompt is ignored.
fn scenario_name(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix("/e2e:")?;
    Some(rest.split_whitespace().next().unwrap_or_default())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_is_chosen_by_the_e2e_prefix() {
        assert_eq!(scenario_name("/e2e:single"), Some("single"));
        assert_eq!(scenario_name("  /e2e:multi please ask"), Some("multi"));
        assert_eq!(
            scenario_name("/e2e:two-identical\nmore"),
            Some("two-identical")
        );
        assert_eq!(scenario_name("/e2e:"), Some(""));
        assert_eq!(scenario_name("please /e2e:single"), None);
        assert_eq!(scenario_name("hello"), None);
    }

    #[test]
    fn initialize_answers_v1_as_mock_agent_with_http_mcp() {
        let value = serde_json::to_value(initialize_response(true)).expect("serializes");
        assert_eq!(value["protocolVersion"], 1);
        assert_eq!(value["agentInfo"]["name"], "mock-agent");
        assert_eq!(value["agentCapabilities"]["mcpCapabilities"]["http"], true);
        let value = serde_json::to_value(initialize_response(false)).expect("serializes");
        assert_ne!(value["agentCapabilities"]["mcpCapabilities"]["http"], true);
    }
}
