//! One prompt turn: plays a scenario's steps against the client.
//!
//! A turn runs in a task spawned off the SDK's dispatch loop, so awaiting the
//! client's answer to an `elicitation/create` (which arrives on the same
//! connection) never blocks the loop that would deliver it.
//!
//! Requests to the client are consumed with `on_receiving_result` feeding a
//! watch channel, never held as a `SentRequest` inside the turn: dropping a
//! `SentRequest` makes the SDK send `$/cancel_request`, and a turn stopped by
//! `session/cancel` must leave its elicitations outstanding. The only
//! `$/cancel_request` this agent sends is the one a `cancel_elicitation` step asks for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::StopReason;
use agent_client_protocol::{Client, RequestCancellationHandle, UntypedMessage};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bridge_form::ask_user_question_params;
use crate::capability::capability_present;
use crate::catalog::{Catalog, CatalogError};
use crate::scenario::{Step, substitute_session_id};
use crate::wire::{BARRIER_METHOD, Wire};

/// The turn could not talk to the client any more.
#[derive(Debug, thiserror::Error)]
#[error("cannot send {method} to the client: {source}")]
pub struct TurnError {
    method: &'static str,
    source: agent_client_protocol::Error,
}

/// What the client answered, as JSON: the result, or `{"error": <JSON-RPC error>}`.
type Outcome = watch::Receiver<Option<Value>>;

/// An `elicitation/create` this turn sent.
struct SentElicitation {
    outcome: Outcome,
    cancel: RequestCancellationHandle,
}

enum Flow {
    Continue,
    Stop(StopReason),
}

/// One turn of one session.
pub struct Turn {
    cx: ConnectionTo<Client>,
    wire: Arc<Wire>,
    session_id: String,
    /// Cancelled when the client cancels the turn; pending delayed cancels stop with it.
    stopped: CancellationToken,
    elicitations: HashMap<String, SentElicitation>,
    /// `mcpServers` from `session/new`, for `ask_user_question`.
    mcp_servers: Arc<Vec<Value>>,
    /// `ask_user_question` calls of this turn, by scenario id.
    tool_calls: HashMap<String, Outcome>,
}

impl Turn {
    /// A turn of `session_id` on connection `cx`.
    pub fn new(
        cx: ConnectionTo<Client>,
        wire: Arc<Wire>,
        session_id: String,
        stopped: CancellationToken,
        mcp_servers: Arc<Vec<Value>>,
    ) -> Self {
        Self {
            cx,
            wire,
            session_id,
            stopped,
            elicitations: HashMap::new(),
            mcp_servers,
            tool_calls: HashMap::new(),
        }
    }

    /// Play the scenario called `name`; an unknown or broken scenario is reported
    /// to the client as text and ends the turn normally.
    pub async fn play_scenario(
        &mut self,
        catalog: &Catalog,
        name: &str,
    ) -> Result<StopReason, TurnError> {
        let scenario = match catalog.load(name) {
            Ok(scenario) => scenario,
            Err(error) => {
                if !matches!(error, CatalogError::Unknown(_)) {
                    tracing::warn!(%error, "scenario does not load");
                }
                self.say(&error.to_string())?;
                return Ok(StopReason::EndTurn);
            }
        };
        tracing::info!(steps = scenario.steps.len(), "playing scenario");
        match self.run(&scenario.steps).await? {
            Flow::Stop(reason) => Ok(reason),
            Flow::Continue => Ok(StopReason::EndTurn),
        }
    }

    fn run<'a>(&'a mut self, steps: &'a [Step]) -> BoxFuture<'a, Result<Flow, TurnError>> {
        Box::pin(async move {
            for step in steps {
                if let Flow::Stop(reason) = self.step(step).await? {
                    return Ok(Flow::Stop(reason));
                }
            }
            Ok(Flow::Continue)
        })
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, TurnError> {
        match step {
            Step::Text(text) => {
                let text = self.substituted(&Value::String(text.clone()));
                self.say(text.as_str().unwrap_or_default())?;
            }
            Step::Stream {
                chunks,
                text,
                thought,
            } => {
                let kind = if *thought {
                    "agent_thought_chunk"
                } else {
                    "agent_message_chunk"
                };
                for i in 1..=*chunks {
                    self.chunk(kind, &format!("{i}:{text}"))?;
                }
            }
            Step::ToolCall(fields) => self.update("tool_call", fields)?,
            Step::ToolCallUpdate(fields) => self.update("tool_call_update", fields)?,
            Step::Elicit { id, params } => {
                let params = self.substituted(params);
                self.elicit(id, params)?;
            }
            Step::ElicitQuestions {
                id,
                tool_call_id,
                questions,
            } => {
                let params =
                    ask_user_question_params(questions, &self.session_id, tool_call_id.as_deref());
                self.elicit(id, params)?;
            }
            Step::ElicitRaw { id, params } => self.elicit(id, params.clone())?,
            Step::CancelElicitation { id, after } => self.cancel_later(id, *after)?,
            Step::Await { id } => {
                let text = match self.outcome(id).await {
                    Ok(outcome) => format!("elicitation {id} result: {outcome}"),
                    Err(problem) => problem,
                };
                self.say(&text)?;
            }
            Step::SayChoice { id, question } => {
                let text = match self.outcome(id).await {
                    Ok(outcome) => describe_choice(&outcome, question),
                    Err(problem) => problem,
                };
                self.say(&text)?;
            }
            Step::AskUserQuestion { id, arguments } => {
                let arguments = match self.substituted(&Value::Object(arguments.clone())) {
                    Value::Object(arguments) => arguments,
                    _ => Map::new(),
                };
                self.ask_user_question(id, arguments);
            }
            Step::AwaitTool { id } => {
                let text = match self.tool_calls.get(id) {
                    Some(outcome) => match wait(outcome.clone()).await {
                        Some(result) => format!("ask_user_question {id} result: {result}"),
                        None => format!("ask_user_question {id} got no result"),
                    },
                    None => format!("ask_user_question {id} was not called in this turn"),
                };
                self.say(&text)?;
            }
            Step::RequestPermission { tool_call, options } => {
                self.request_permission(tool_call, options).await?;
            }
            Step::Sleep(duration) => tokio::time::sleep(*duration).await,
            Step::IfCapability {
                path,
                then,
                otherwise,
            } => {
                let present = capability_present(&self.wire.client_capabilities(), path);
                tracing::debug!(path, present, "if_capability");
                return self.run(if present { then } else { otherwise }).await;
            }
            Step::EndTurn(reason) => return Ok(Flow::Stop(*reason)),
            Step::Exit(code) => {
                tracing::info!(code, "exiting as the scenario says");
                self.drain().await;
                self.wire.exit(*code).await;
            }
        }
        Ok(Flow::Continue)
    }

    fn substituted(&self, value: &Value) -> Value {
        substitute_session_id(value, &self.session_id)
    }

    fn notify(&self, method: &'static str, params: Value) -> Result<(), TurnError> {
        self.cx
            .send_notification(UntypedMessage {
                method: method.to_owned(),
                params,
            })
            .map_err(|source| TurnError { method, source })
    }

    /// An `agent_message_chunk` with `text`.
    fn say(&self, text: &str) -> Result<(), TurnError> {
        self.chunk("agent_message_chunk", text)
    }

    /// A text chunk of `kind` (`agent_message_chunk`, `agent_thought_chunk`).
    fn chunk(&self, kind: &str, text: &str) -> Result<(), TurnError> {
        self.notify(
            "session/update",
            json!({
                "sessionId": self.session_id,
                "update": {
                    "sessionUpdate": kind,
                    "content": { "type": "text", "text": text }
                }
            }),
        )
    }

    /// A `tool_call` or `tool_call_update` with the scenario's fields verbatim.
    fn update(&self, kind: &str, fields: &Map<String, Value>) -> Result<(), TurnError> {
        let mut update = Map::new();
        update.insert("sessionUpdate".into(), json!(kind));
        if let Value::Object(fields) = self.substituted(&Value::Object(fields.clone())) {
            update.extend(fields);
        }
        self.notify(
            "session/update",
            json!({ "sessionId": self.session_id, "update": update }),
        )
    }

    /// Send a request whose answer lands in the returned watch channel.
    fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<(Outcome, RequestCancellationHandle, Value), TurnError> {
        // The SDK sends only object or array params; anything else rides in a
        // placeholder that the wire swaps back on the way out.
        let params = if params.is_object() || params.is_array() {
            params
        } else {
            self.wire.raw_params_placeholder(params)
        };
        let sent = self.cx.send_request(UntypedMessage {
            method: method.to_owned(),
            params,
        });
        let cancel = sent.cancellation_handle();
        let rpc_id = serde_json::to_value(sent.raw_id()).unwrap_or(Value::Null);
        let (answer, outcome) = watch::channel(None);
        sent.on_receiving_result(async move |result| {
            let value = match result {
                Ok(value) => value,
                Err(error) => json!({ "error": error }),
            };
            // Nobody listening any more (turn over) is fine: the answer is still logged.
            let _ = answer.send(Some(value));
            Ok(())
        })
        .map_err(|source| TurnError { method, source })?;
        Ok((outcome, cancel, rpc_id))
    }

    fn elicit(&mut self, id: &str, params: Value) -> Result<(), TurnError> {
        let (outcome, cancel, rpc_id) = self.request("elicitation/create", params)?;
        tracing::info!(elicitation = id, rpc_id = %rpc_id, "elicitation/create sent");
        self.elicitations
            .insert(id.to_owned(), SentElicitation { outcome, cancel });
        Ok(())
    }

    /// Calls `ask_user_question_kandev` in a task of its own (the step does not wait);
    /// the result lands in the call's watch channel for `await_tool`.
    fn ask_user_question(&mut self, id: &str, arguments: Map<String, Value>) {
        let (answer, outcome) = watch::channel(None);
        let servers = Arc::clone(&self.mcp_servers);
        tracing::info!(call = id, "ask_user_question_kandev called");
        tokio::spawn(
            async move {
                let result = crate::mcp_client::ask_user_question(&servers, arguments).await;
                let _ = answer.send(Some(result));
            }
            .in_current_span(),
        );
        self.tool_calls.insert(id.to_owned(), outcome);
    }

    fn cancel_later(&self, id: &str, after: Duration) -> Result<(), TurnError> {
        let Some(sent) = self.elicitations.get(id) else {
            return self.say(&not_sent(id));
        };
        let cancel = sent.cancel.clone();
        let stopped = self.stopped.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(after) => {
                    // A no-op when the client already answered.
                    match cancel.cancel() {
                        Ok(()) => tracing::info!(elicitation = %id, "$/cancel_request sent"),
                        Err(error) => tracing::warn!(elicitation = %id, %error, "cannot send $/cancel_request"),
                    }
                }
                () = stopped.cancelled() => {}
            }
        }.in_current_span());
        Ok(())
    }

    async fn outcome(&self, id: &str) -> Result<Value, String> {
        let Some(sent) = self.elicitations.get(id) else {
            return Err(not_sent(id));
        };
        wait(sent.outcome.clone())
            .await
            .ok_or_else(|| format!("elicitation {id} got no response: the connection closed"))
    }

    async fn request_permission(
        &self,
        tool_call: &Map<String, Value>,
        options: &[Value],
    ) -> Result<(), TurnError> {
        let tool_call = self.substituted(&Value::Object(tool_call.clone()));
        let tool_call_id = tool_call
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": options,
        });
        let (outcome, _cancel, _) = self.request("session/request_permission", params)?;
        let text = match wait(outcome).await {
            Some(outcome) => format!("permission {tool_call_id} result: {outcome}"),
            None => format!("permission {tool_call_id} got no response: the connection closed"),
        };
        self.say(&text)
    }

    /// Wait until every frame queued so far has been written (bounded, so a
    /// wedged stdout cannot stop an `exit`).
    async fn drain(&self) {
        let (params, written) = self.wire.barrier();
        if self.notify(BARRIER_METHOD, params).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), written).await;
        }
    }
}

async fn wait(mut outcome: Outcome) -> Option<Value> {
    outcome
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|value| value.clone())
}

fn not_sent(id: &str) -> String {
    format!("elicitation {id} was not sent in this turn")
}

/// Prose for what the operator chose for `question`, read the way the bridge
/// 0.65.0 folds an answer back: trimmed custom text wins over a selection, and
/// decline or an empty accept both mean the question was skipped.
fn describe_choice(outcome: &Value, question: &str) -> String {
    if let Some(error) = outcome.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error");
        return format!("The question failed: {message}.");
    }
    match outcome.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = outcome.get("content");
            let field = |key: &str| content.and_then(|content| content.get(key));
            let custom = field(&format!("{question}_custom"))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|text| !text.is_empty());
            if let Some(custom) = custom {
                return format!("You answered: {custom}.");
            }
            let picked = match field(question) {
                Some(Value::String(label)) if !label.is_empty() => label.clone(),
                Some(Value::Array(labels)) if !labels.is_empty() => labels
                    .iter()
                    .map(|label| {
                        label
                            .as_str()
                            .map_or_else(|| label.to_string(), str::to_owned)
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => return "You skipped the question.".to_owned(),
            };
            format!("You picked {picked}.")
        }
        Some("decline") => "You skipped the question.".to_owned(),
        _ => "The question was cancelled.".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::describe_choice;
    use serde_json::json;

    #[test]
    fn describes_choices_the_way_the_bridge_folds_them() {
        let q = "question_0";
        let cases = [
            (
                json!({"action": "accept", "content": {"question_0": "Red"}}),
                "You picked Red.",
            ),
            (
                json!({"action": "accept", "content": {"question_0": ["dev", "prod"]}}),
                "You picked dev, prod.",
            ),
            (
                json!({"action": "accept", "content": {"question_0": "Red", "question_0_custom": "  Teal "}}),
                "You answered: Teal.",
            ),
            (
                json!({"action": "accept", "content": {"question_0_custom": "   "}}),
                "You skipped the question.",
            ),
            (
                json!({"action": "accept", "content": {}}),
                "You skipped the question.",
            ),
            (json!({"action": "accept"}), "You skipped the question."),
            (json!({"action": "decline"}), "You skipped the question."),
            (json!({"action": "cancel"}), "The question was cancelled."),
            (
                json!({"action": "something-new"}),
                "The question was cancelled.",
            ),
            (
                json!({"error": {"code": -32603, "message": "boom"}}),
                "The question failed: boom.",
            ),
        ];
        for (outcome, expected) in cases {
            assert_eq!(describe_choice(&outcome, q), expected, "{outcome}");
        }
    }
}
