//! Why a scenario file could not be used: each error names the step and where it is.

/// Every step kind the parser accepts, for error messages.
const STEP_KINDS: &str = "text, stream, tool_call, tool_call_update, elicit, elicit_questions, elicit_raw, \
     cancel_elicitation, await, say_choice, ask_user_question, await_tool, request_permission, sleep_ms, \
     if_capability, end_turn, exit";

/// Why a scenario file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Not JSON at all.
    #[error("scenario is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but not `{"name", "steps": [...]}`.
    #[error("scenario must be an object with a string `name` and a `steps` array: {0}")]
    Shape(String),
    /// A step whose key is not a known step kind.
    #[error("{at}: unknown step `{kind}` (known steps: {STEP_KINDS})")]
    UnknownStep {
        /// Where the step is, e.g. `steps[2]`.
        at: String,
        /// The unknown key.
        kind: String,
    },
    /// A step that is not an object with exactly one key.
    #[error("{at}: a step must be an object with exactly one key, found {found}")]
    StepShape {
        /// Where the step is.
        at: String,
        /// What was found instead.
        found: String,
    },
    /// A known step kind with a body that does not fit it.
    #[error("{at}: invalid `{kind}` step: {reason}")]
    InvalidStep {
        /// Where the step is.
        at: String,
        /// The step kind.
        kind: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `await_tool` naming an id no `ask_user_question` step declares.
    #[error(
        "{at}: `await_tool` names tool call `{id}`, which no ask_user_question step of the scenario declares"
    )]
    UndeclaredToolCall {
        /// Where the step is.
        at: String,
        /// The undeclared id.
        id: String,
    },
    /// `await`, `cancel_elicitation` or `say_choice` naming an id no elicit step declares.
    #[error(
        "{at}: `{kind}` names elicitation `{id}`, which no elicit step of the scenario declares"
    )]
    UndeclaredElicitation {
        /// Where the step is.
        at: String,
        /// The step kind.
        kind: &'static str,
        /// The undeclared id.
        id: String,
    },
}
