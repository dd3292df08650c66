//! `/api/v1/mcp`: MCP over streamable HTTP for orchestrator agents (docs/architecture.md
//! §4.4). An agent that runs other agents lists their pending questions and answers,
//! skips or cancels them, exactly as an operator does through the API.
//!
//! The endpoint sits behind the same gate as every `/api/*` route (`guard`: Host and
//! Origin checks, then an operator token when auth is on), so the operator the token
//! names is the `answered_by` of what the orchestrator settles. Every verb goes through
//! the one answer path ([`crate::clarifications::Clarifications::respond`] and
//! `::cancel`, forward-first, D5), or to the owning replica the way the operator API
//! forwards it: an orchestrator that loses a race gets agentctl's verdict, as an
//! operator does. A refusal (invalid answer, unknown record, agentctl's `NOT_FOUND`)
//! is a tool error whose text is the API's error body with its HTTP status.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use kandev_elicitation::OperatorAnswer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::auth::Operator;
use crate::http::error::AppError;
use crate::model::ClarificationStatus;
use crate::state::AppState;
use crate::store::ClarificationFilter;

/// The path of the endpoint under `/api/v1`.
pub const MCP_PATH: &str = "/mcp";

/// Lists the pending questions.
pub const LIST_TOOL: &str = "list_pending_questions";
/// Answers one pending question.
pub const ANSWER_TOOL: &str = "answer_question";
/// Skips one pending question (the agent gets `decline`).
pub const SKIP_TOOL: &str = "skip_question";
/// Cancels one pending question (the agent gets `cancel`).
pub const CANCEL_TOOL: &str = "cancel_question";

/// The MCP service, mounted at `/api/v1/mcp`. Stateless (every POST stands alone) and
/// answering in plain JSON, so any replica serves any call.
pub(super) fn service(
    state: AppState,
) -> StreamableHttpService<Orchestrators, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        // The guard in front checks Host and Origin with kandev's own settings.
        .disable_allowed_hosts()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    StreamableHttpService::new(
        move || {
            Ok(Orchestrators {
                state: state.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The tools' server: one per call, sharing the application state.
#[derive(Clone)]
pub struct Orchestrators {
    state: AppState,
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The four tools as `tools/list` shows them.
pub fn tools() -> Vec<Tool> {
    let pending_id = json!({"type": "string", "description": "The question's pending_id, from list_pending_questions."});
    vec![
        Tool::new(
            LIST_TOOL,
            "List the questions agents are waiting on, oldest first: each with its questions (kind, options, default, constraints), its session and task, and expires_at when the record has a deadline. Filter by task_id or session_id.",
            schema(json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string"},
                    "session_id": {"type": "string"},
                },
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            ANSWER_TOOL,
            "Answer a pending question, in the operator API's shape: answers = [{question_id, selected_options: [option id…], custom_text}]. The answer is validated as an operator's is; a refusal comes back as a tool error with the reason.",
            schema(json!({
                "type": "object",
                "properties": {
                    "pending_id": pending_id,
                    "answers": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "question_id": {"type": "string"},
                            "selected_options": {"type": "array", "items": {"type": "string"}},
                            "custom_text": {"type": "string"},
                        },
                        "required": ["question_id"],
                        "additionalProperties": false,
                    }},
                },
                "required": ["pending_id", "answers"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            SKIP_TOOL,
            "Skip a pending question: the agent gets `decline` and carries on without an answer.",
            schema(json!({
                "type": "object",
                "properties": {"pending_id": pending_id, "reason": {"type": "string"}},
                "required": ["pending_id"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            CANCEL_TOOL,
            "Cancel a pending question: the agent gets `cancel` and its tool call is aborted.",
            schema(json!({
                "type": "object",
                "properties": {"pending_id": pending_id},
                "required": ["pending_id"],
                "additionalProperties": false,
            })),
        ),
    ]
}

/// A tool's JSON result; `is_error` makes it a tool error the calling model reads.
fn result(value: &Value, is_error: bool) -> CallToolResponse {
    let content = vec![ContentBlock::text(value.to_string())];
    let result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.into()
}

/// A refusal as the API would send it: `{"http_status", "error": {code, message, origin?}}`.
async fn refusal(response: Response) -> CallToolResponse {
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), super::BODY_LIMIT)
        .await
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .unwrap_or(Value::Null);
    let mut value = json!({"http_status": status});
    if let Some(error) = body.get("error") {
        value["error"] = error.clone();
    }
    result(&value, true)
}

/// An API answer (a verb's status, or a forwarded call's response) as a tool result.
async fn api_answer(response: Response) -> CallToolResponse {
    if !response.status().is_success() {
        return refusal(response).await;
    }
    let body = axum::body::to_bytes(response.into_body(), super::BODY_LIMIT)
        .await
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .unwrap_or(Value::Null);
    result(&body, false)
}

fn bad_request(message: impl Into<String>) -> Response {
    AppError::BadRequest(message.into()).into_response()
}

/// One tool call's arguments, as the tool's input schema has them.
fn arguments(request: &CallToolRequestParams) -> JsonObject {
    request.arguments.clone().unwrap_or_default()
}

/// The call's `pending_id`, or why there is none (an `AppError`, small to carry; it
/// becomes the tool error's response at the call site).
fn pending_id_of(args: &JsonObject) -> Result<String, AppError> {
    match args.get("pending_id") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        _ => Err(AppError::BadRequest(
            "`pending_id` (a string) is required".into(),
        )),
    }
}

impl Orchestrators {
    async fn list(&self, args: &JsonObject) -> Result<Value, Response> {
        let text = |key: &str| match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(AppError::BadRequest(format!("`{key}` must be a string"))),
        };
        let task_id = text("task_id").map_err(IntoResponse::into_response)?;
        let filter = ClarificationFilter {
            session_id: text("session_id").map_err(IntoResponse::into_response)?,
            status: Some(ClarificationStatus::Pending),
        };
        let records = self
            .state
            .stores
            .clarifications
            .clarifications(&filter)
            .await
            .map_err(|err| AppError::from(err).into_response())?;
        let questions: Vec<Value> = records
            .into_iter()
            .filter(|r| task_id.as_ref().is_none_or(|t| *t == r.task_id))
            .map(|record| {
                let full = serde_json::to_value(&record).unwrap_or(Value::Null);
                json!({
                    "pending_id": record.pending_id,
                    "source": record.source,
                    "task_id": record.task_id,
                    "session_id": record.session_id,
                    "tool_call_id": record.tool_call_id,
                    "message": record.message,
                    "questions": record.questions,
                    "created_at": full.get("created_at").cloned().unwrap_or(Value::Null),
                    // The answer deadline, on records that carry one.
                    "expires_at": full.get("expires_at").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        Ok(json!({ "pending_questions": questions }))
    }

    /// `POST /api/v1/clarifications/{pending_id}/respond` with `answer`, by `operator`:
    /// here when the session is live here, else at its owner.
    async fn respond(
        &self,
        operator: &Operator,
        pending_id: &str,
        answer: OperatorAnswer,
    ) -> Response {
        let state = &self.state;
        match super::forward::clarification_owner(state, pending_id).await {
            Err(err) => return err.into_response(),
            Ok(Some(owner)) => {
                let body = serde_json::to_value(&answer).unwrap_or(Value::Null);
                let path = format!("/api/v1/clarifications/{pending_id}/respond");
                return super::forward::forward_verb(state, &owner, operator, &path, &body).await;
            }
            Ok(None) => {}
        }
        match state
            .clarifications
            .respond(&*state.sessions, pending_id, answer, &operator.name)
            .await
        {
            Ok(status) => axum::Json(json!({ "status": status })).into_response(),
            Err(err) => AppError::from(err).into_response(),
        }
    }

    async fn cancel(&self, operator: &Operator, pending_id: &str) -> Response {
        let state = &self.state;
        match super::forward::clarification_owner(state, pending_id).await {
            Err(err) => return err.into_response(),
            Ok(Some(owner)) => {
                let path = format!("/api/v1/clarifications/{pending_id}/cancel");
                return super::forward::forward_verb(state, &owner, operator, &path, &json!({}))
                    .await;
            }
            Ok(None) => {}
        }
        match state
            .clarifications
            .cancel(&*state.sessions, pending_id, &operator.name)
            .await
        {
            Ok(status) => axum::Json(json!({ "status": status })).into_response(),
            Err(err) => AppError::from(err).into_response(),
        }
    }

    async fn call(&self, operator: &Operator, name: &str, args: &JsonObject) -> Response {
        match name {
            LIST_TOOL => match self.list(args).await {
                Ok(value) => axum::Json(value).into_response(),
                Err(refused) => refused,
            },
            ANSWER_TOOL => {
                let pending_id = match pending_id_of(args) {
                    Ok(id) => id,
                    Err(refused) => return refused.into_response(),
                };
                let answers = args.get("answers").cloned().unwrap_or(json!([]));
                let answer: OperatorAnswer =
                    match serde_json::from_value(json!({"answers": answers})) {
                        Ok(answer) => answer,
                        Err(err) => return bad_request(format!("`answers`: {err}")),
                    };
                self.respond(operator, &pending_id, answer).await
            }
            SKIP_TOOL => {
                let pending_id = match pending_id_of(args) {
                    Ok(id) => id,
                    Err(refused) => return refused.into_response(),
                };
                let reason = args
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let answer = OperatorAnswer {
                    answers: Vec::new(),
                    rejected: true,
                    reject_reason: reason.to_owned(),
                };
                self.respond(operator, &pending_id, answer).await
            }
            CANCEL_TOOL => match pending_id_of(args) {
                Ok(pending_id) => self.cancel(operator, &pending_id).await,
                Err(refused) => refused.into_response(),
            },
            other => bad_request(format!(
                "unknown tool `{other}`; this server has {LIST_TOOL}, {ANSWER_TOOL}, {SKIP_TOOL}, {CANCEL_TOOL}"
            )),
        }
    }
}

/// The operator the gate put on the HTTP request that carried this call.
fn operator_of(context: &RequestContext<RoleServer>) -> Option<Operator> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Operator>())
        .cloned()
}

impl ServerHandler for Orchestrators {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Kandev: list the questions the agents you run are waiting on, and answer, skip or cancel them.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(operator) = operator_of(&context) else {
            // The gate puts one on every request it lets through; without it, refuse.
            return Err(ErrorData::internal_error(
                "no operator on this request",
                None,
            ));
        };
        let span = tracing::info_span!("mcp_tool", tool = %request.name, operator = %operator.name);
        let args = arguments(&request);
        let response = self
            .call(&operator, &request.name, &args)
            .instrument(span)
            .await;
        Ok(api_answer(response).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_declares_an_object_schema_with_its_required_fields() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
        assert_eq!(names, [LIST_TOOL, ANSWER_TOOL, SKIP_TOOL, CANCEL_TOOL]);
        for tool in &tools {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        }
        assert_eq!(
            tools[1].input_schema.get("required"),
            Some(&json!(["pending_id", "answers"]))
        );
    }
}
