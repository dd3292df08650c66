//! What a scenario is made of: its steps, and the questions an AskUserQuestion step asks.

use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use serde::Deserialize;
use serde_json::{Map, Value};

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `session/update` `agent_message_chunk` with this text.
    Text(String),
    /// `chunks` text chunks sent back to back (a streamed answer): chunk `i` (from 1) is
    /// `"{i}:{text}"`; `agent_thought_chunk`s when `thought`.
    Stream {
        /// How many chunks.
        chunks: usize,
        /// Each chunk's text after its number.
        text: String,
        /// Thought chunks rather than message chunks.
        thought: bool,
    },
    /// `session/update` `tool_call` with these ACP fields (validated, sent verbatim).
    ToolCall(Map<String, Value>),
    /// `session/update` `tool_call_update` with these ACP fields (validated, sent verbatim).
    ToolCallUpdate(Map<String, Value>),
    /// `elicitation/create` with literal params (`$SESSION_ID` substituted). Does not wait.
    Elicit {
        /// Scenario-local name of the request, for `await` and `cancel_elicitation`.
        id: String,
        /// The params, before substitution.
        params: Value,
    },
    /// `elicitation/create` built the way the Claude bridge builds its AskUserQuestion form.
    ElicitQuestions {
        /// Scenario-local name of the request.
        id: String,
        /// The `toolCallId` to carry, if any.
        tool_call_id: Option<String>,
        /// The AskUserQuestion tool input.
        questions: Vec<AskQuestion>,
    },
    /// `elicitation/create` with exactly these params, whatever JSON they are.
    ElicitRaw {
        /// Scenario-local name of the request.
        id: String,
        /// The params, sent untouched (no substitution).
        params: Value,
    },
    /// After a delay, `$/cancel_request` for an outstanding elicitation. Does not block.
    CancelElicitation {
        /// Scenario-local name of the request to cancel.
        id: String,
        /// How long to wait before cancelling.
        after: Duration,
    },
    /// Wait for the response to an elicitation and report it as text.
    Await {
        /// Scenario-local name of the request.
        id: String,
    },
    /// Say in prose what the operator chose for one question of an awaited
    /// elicitation ("You picked Red.", "You skipped the question."). An addition
    /// to the format note, used by `demo`.
    SayChoice {
        /// Scenario-local name of the request; waits for it like `await`.
        id: String,
        /// The schema property key of the question (`question_0`).
        question: String,
    },
    /// Call the client's `ask_user_question_kandev` MCP tool (from `session/new`'s
    /// `mcpServers`) with these arguments (`$SESSION_ID` substituted). Does not wait.
    AskUserQuestion {
        /// Scenario-local name of the call, for `await_tool`.
        id: String,
        /// The tool arguments `{questions, context}`.
        arguments: Map<String, Value>,
    },
    /// Wait for an `ask_user_question` call to return and report it as text.
    AwaitTool {
        /// Scenario-local name of the call.
        id: String,
    },
    /// `session/request_permission` and wait; report the outcome as text.
    RequestPermission {
        /// The `toolCall` fields (at least `toolCallId`).
        tool_call: Map<String, Value>,
        /// The permission options, as ACP shapes them.
        options: Vec<Value>,
    },
    /// Pause.
    Sleep(Duration),
    /// Branch on a dotted path being present (non-null) in the client capabilities.
    IfCapability {
        /// Dotted path into `clientCapabilities`, e.g. `elicitation.form`.
        path: String,
        /// Steps when present.
        then: Vec<Step>,
        /// Steps when absent.
        otherwise: Vec<Step>,
    },
    /// Return the prompt with this stop reason.
    EndTurn(StopReason),
    /// Exit the process with this code at once.
    Exit(i32),
}

/// One question of an AskUserQuestion tool call, as the tool receives it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskQuestion {
    /// The full question text.
    pub question: String,
    /// Short label shown as the field title.
    #[serde(default)]
    pub header: Option<String>,
    /// The choices, in order.
    pub options: Vec<AskOption>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multi_select: bool,
}

/// One option of an [`AskQuestion`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskOption {
    /// The label, which is also the answer value.
    pub label: String,
    /// Secondary text.
    #[serde(default)]
    pub description: Option<String>,
    /// Preview shown on focus, forwarded under `_meta`.
    #[serde(default)]
    pub preview: Option<String>,
}
