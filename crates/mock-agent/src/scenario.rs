//! The scenario format: a named list of steps the agent plays for one turn.
//!
//! The contract is the step types below (summarised by `mock-agent --help`); parsing is strict so that a typo
//! in a scenario is a clear error naming the step, never a silently skipped one.

use std::collections::BTreeSet;
use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOption, StopReason, ToolCall, ToolCallUpdate};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Every step kind the parser accepts, for error messages.
const STEP_KINDS: &str = "text, stream, tool_call, tool_call_update, elicit, elicit_questions, elicit_raw, \
     cancel_elicitation, await, say_choice, ask_user_question, await_tool, request_permission, sleep_ms, \
     if_capability, end_turn, exit";

/// A scenario: what the agent does with one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The name a prompt selects it by (`/e2e:NAME`).
    pub name: String,
    /// One line for `--list-scenarios`.
    pub description: String,
    /// The steps, played in order.
    pub steps: Vec<Step>,
}

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

impl Scenario {
    /// Parse a scenario from its JSON text.
    pub fn from_json(text: &str) -> Result<Self, ScenarioError> {
        let value: Value = serde_json::from_str(text)?;
        Self::from_value(value)
    }

    /// Parse a scenario from a JSON value.
    pub fn from_value(value: Value) -> Result<Self, ScenarioError> {
        let Value::Object(mut object) = value else {
            return Err(ScenarioError::Shape(format!("found {}", kind_of(&value))));
        };
        let name = match object.remove("name") {
            Some(Value::String(name)) => name,
            other => {
                return Err(ScenarioError::Shape(format!(
                    "`name` is {}",
                    other.as_ref().map_or("missing", kind_of)
                )));
            }
        };
        let description = match object.remove("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(description)) => description,
            Some(other) => {
                return Err(ScenarioError::Shape(format!(
                    "`description` is {}",
                    kind_of(&other)
                )));
            }
        };
        let steps = match object.remove("steps") {
            Some(Value::Array(steps)) => parse_steps(steps, "steps")?,
            other => {
                return Err(ScenarioError::Shape(format!(
                    "`steps` is {}",
                    other.as_ref().map_or("missing", kind_of)
                )));
            }
        };
        if let Some(extra) = object.keys().next() {
            return Err(ScenarioError::Shape(format!("unknown key `{extra}`")));
        }
        let mut declared = BTreeSet::new();
        collect_declared(&steps, &mut declared);
        check_references(&steps, "steps", &declared)?;
        Ok(Self {
            name,
            description,
            steps,
        })
    }
}

fn parse_steps(steps: Vec<Value>, at: &str) -> Result<Vec<Step>, ScenarioError> {
    steps
        .into_iter()
        .enumerate()
        .map(|(index, step)| parse_step(step, &format!("{at}[{index}]")))
        .collect()
}

fn parse_step(step: Value, at: &str) -> Result<Step, ScenarioError> {
    let Value::Object(mut object) = step else {
        return Err(ScenarioError::StepShape {
            at: at.to_owned(),
            found: kind_of(&step).to_owned(),
        });
    };
    // `if_capability` is the one step that carries sibling keys (`then`, `else`).
    if let Some(path) = object.remove("if_capability") {
        return parse_if_capability(path, object, at);
    }
    if object.len() != 1 {
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        return Err(ScenarioError::StepShape {
            at: at.to_owned(),
            found: format!("keys {keys:?}"),
        });
    }
    let Some((kind, body)) = object.into_iter().next() else {
        return Err(ScenarioError::StepShape {
            at: at.to_owned(),
            found: "no key".to_owned(),
        });
    };
    let invalid = |kind: &'static str, reason: String| ScenarioError::InvalidStep {
        at: at.to_owned(),
        kind,
        reason,
    };
    match kind.as_str() {
        "text" => match body {
            Value::String(text) => Ok(Step::Text(text)),
            other => Err(invalid(
                "text",
                format!("expected a string, found {}", kind_of(&other)),
            )),
        },
        "stream" => {
            let body: StreamBody = typed(body).map_err(|reason| invalid("stream", reason))?;
            Ok(Step::Stream {
                chunks: body.chunks,
                text: body.text,
                thought: body.thought,
            })
        }
        "tool_call" => {
            let fields = object_body(body).map_err(|reason| invalid("tool_call", reason))?;
            serde_json::from_value::<ToolCall>(Value::Object(fields.clone()))
                .map_err(|error| invalid("tool_call", format!("not an ACP tool call: {error}")))?;
            Ok(Step::ToolCall(fields))
        }
        "tool_call_update" => {
            let fields = object_body(body).map_err(|reason| invalid("tool_call_update", reason))?;
            serde_json::from_value::<ToolCallUpdate>(Value::Object(fields.clone())).map_err(
                |error| {
                    invalid(
                        "tool_call_update",
                        format!("not an ACP tool call update: {error}"),
                    )
                },
            )?;
            Ok(Step::ToolCallUpdate(fields))
        }
        "elicit" => {
            let body: ElicitBody = typed(body).map_err(|reason| invalid("elicit", reason))?;
            Ok(Step::Elicit {
                id: body.id,
                params: body.params,
            })
        }
        "elicit_questions" => {
            let body: ElicitQuestionsBody =
                typed(body).map_err(|reason| invalid("elicit_questions", reason))?;
            if body.questions.is_empty() {
                return Err(invalid(
                    "elicit_questions",
                    "needs at least one question (use `elicit` for an empty form)".to_owned(),
                ));
            }
            Ok(Step::ElicitQuestions {
                id: body.id,
                tool_call_id: body.tool_call_id,
                questions: body.questions,
            })
        }
        "elicit_raw" => {
            let body: ElicitBody = typed(body).map_err(|reason| invalid("elicit_raw", reason))?;
            Ok(Step::ElicitRaw {
                id: body.id,
                params: body.params,
            })
        }
        "cancel_elicitation" => {
            let body: CancelBody =
                typed(body).map_err(|reason| invalid("cancel_elicitation", reason))?;
            Ok(Step::CancelElicitation {
                id: body.id,
                after: Duration::from_millis(body.after_ms),
            })
        }
        "await" => {
            let body: AwaitBody = typed(body).map_err(|reason| invalid("await", reason))?;
            Ok(Step::Await { id: body.id })
        }
        "say_choice" => {
            let body: SayChoiceBody =
                typed(body).map_err(|reason| invalid("say_choice", reason))?;
            Ok(Step::SayChoice {
                id: body.id,
                question: body.question,
            })
        }
        "ask_user_question" => {
            let body: AskUserQuestionBody =
                typed(body).map_err(|reason| invalid("ask_user_question", reason))?;
            Ok(Step::AskUserQuestion {
                id: body.id,
                arguments: body.arguments,
            })
        }
        "await_tool" => {
            let body: AwaitBody = typed(body).map_err(|reason| invalid("await_tool", reason))?;
            Ok(Step::AwaitTool { id: body.id })
        }
        "request_permission" => {
            let mut fields =
                object_body(body).map_err(|reason| invalid("request_permission", reason))?;
            let options = match fields.remove("options") {
                Some(Value::Array(options)) => options,
                other => {
                    return Err(invalid(
                        "request_permission",
                        format!(
                            "`options` must be an array, found {}",
                            other.as_ref().map_or("nothing", kind_of)
                        ),
                    ));
                }
            };
            serde_json::from_value::<Vec<PermissionOption>>(Value::Array(options.clone()))
                .map_err(|error| {
                    invalid(
                        "request_permission",
                        format!("not ACP permission options: {error}"),
                    )
                })?;
            if !fields.get("toolCallId").is_some_and(Value::is_string) {
                return Err(invalid(
                    "request_permission",
                    "`toolCallId` must be a string".to_owned(),
                ));
            }
            Ok(Step::RequestPermission {
                tool_call: fields,
                options,
            })
        }
        "sleep_ms" => {
            let millis: u64 = typed(body).map_err(|reason| invalid("sleep_ms", reason))?;
            Ok(Step::Sleep(Duration::from_millis(millis)))
        }
        "end_turn" => {
            let reason: StopReason = typed(body).map_err(|reason| invalid("end_turn", reason))?;
            Ok(Step::EndTurn(reason))
        }
        "exit" => {
            let code: i32 = typed(body).map_err(|reason| invalid("exit", reason))?;
            Ok(Step::Exit(code))
        }
        "then" | "else" => Err(invalid(
            "if_capability",
            format!("`{kind}` without `if_capability`"),
        )),
        _ => Err(ScenarioError::UnknownStep {
            at: at.to_owned(),
            kind,
        }),
    }
}

fn parse_if_capability(
    path: Value,
    mut rest: Map<String, Value>,
    at: &str,
) -> Result<Step, ScenarioError> {
    let invalid = |reason: String| ScenarioError::InvalidStep {
        at: at.to_owned(),
        kind: "if_capability",
        reason,
    };
    let Value::String(path) = path else {
        return Err(invalid(format!(
            "the capability path must be a string, found {}",
            kind_of(&path)
        )));
    };
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(invalid(format!("`{path}` is not a dotted path")));
    }
    let mut branch = |key: &str| -> Result<Vec<Step>, ScenarioError> {
        match rest.remove(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(steps)) => parse_steps(steps, &format!("{at}.{key}")),
            Some(other) => Err(invalid(format!(
                "`{key}` must be an array of steps, found {}",
                kind_of(&other)
            ))),
        }
    };
    let then = branch("then")?;
    let otherwise = branch("else")?;
    if let Some(extra) = rest.keys().next() {
        return Err(invalid(format!(
            "unexpected key `{extra}` (only `then` and `else`)"
        )));
    }
    Ok(Step::IfCapability {
        path,
        then,
        otherwise,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ElicitBody {
    id: String,
    params: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ElicitQuestionsBody {
    id: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    questions: Vec<AskQuestion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskUserQuestionBody {
    id: String,
    arguments: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamBody {
    chunks: usize,
    text: String,
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    id: String,
    #[serde(default)]
    after_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitBody {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SayChoiceBody {
    id: String,
    question: String,
}

fn typed<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, String> {
    serde_json::from_value(body).map_err(|error| error.to_string())
}

fn object_body(body: Value) -> Result<Map<String, Value>, String> {
    match body {
        Value::Object(fields) => Ok(fields),
        other => Err(format!("expected an object, found {}", kind_of(&other))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn collect_declared(steps: &[Step], declared: &mut BTreeSet<String>) {
    for step in steps {
        match step {
            Step::Elicit { id, .. }
            | Step::ElicitQuestions { id, .. }
            | Step::ElicitRaw { id, .. } => {
                declared.insert(id.clone());
            }
            // Tool calls live in their own namespace (`tool:` prefix).
            Step::AskUserQuestion { id, .. } => {
                declared.insert(format!("tool:{id}"));
            }
            Step::IfCapability {
                then, otherwise, ..
            } => {
                collect_declared(then, declared);
                collect_declared(otherwise, declared);
            }
            _ => {}
        }
    }
}

fn check_references(
    steps: &[Step],
    at: &str,
    declared: &BTreeSet<String>,
) -> Result<(), ScenarioError> {
    for (index, step) in steps.iter().enumerate() {
        let here = format!("{at}[{index}]");
        let reference = match step {
            Step::Await { id } => Some(("await", id)),
            Step::CancelElicitation { id, .. } => Some(("cancel_elicitation", id)),
            Step::SayChoice { id, .. } => Some(("say_choice", id)),
            Step::AwaitTool { id } => {
                if !declared.contains(&format!("tool:{id}")) {
                    return Err(ScenarioError::UndeclaredToolCall {
                        at: here,
                        id: id.clone(),
                    });
                }
                None
            }
            Step::IfCapability {
                then, otherwise, ..
            } => {
                check_references(then, &format!("{here}.then"), declared)?;
                check_references(otherwise, &format!("{here}.else"), declared)?;
                None
            }
            _ => None,
        };
        if let Some((kind, id)) = reference
            && !declared.contains(id)
        {
            return Err(ScenarioError::UndeclaredElicitation {
                at: here,
                kind,
                id: id.clone(),
            });
        }
    }
    Ok(())
}

/// Replace `$SESSION_ID` in every string value (not in keys) of `value`.
pub fn substitute_session_id(value: &Value, session_id: &str) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace("$SESSION_ID", session_id)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute_session_id(item, session_id))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, item)| (key.clone(), substitute_session_id(item, session_id)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one_step(step: Value) -> Result<Step, ScenarioError> {
        let mut scenario = Scenario::from_value(json!({"name": "t", "steps": [step]}))?;
        Ok(scenario.steps.remove(0))
    }

    #[test]
    fn parses_every_step_kind() {
        let scenario = Scenario::from_json(
            r#"{
              "name": "all",
              "description": "every step",
              "steps": [
                {"text": "Hello"},
                {"tool_call": {"toolCallId": "t1", "title": "Read file", "kind": "read", "status": "pending"}},
                {"tool_call_update": {"toolCallId": "t1", "status": "completed"}},
                {"elicit": {"id": "e1", "params": {"sessionId": "$SESSION_ID"}}},
                {"elicit_questions": {"id": "e2", "tool_call_id": "tool-1", "questions": [
                  {"question": "Which DB?", "header": "Datastore",
                   "options": [{"label": "Postgres", "description": "Relational"}], "multiSelect": false}]}},
                {"elicit_raw": {"id": "e3", "params": "not an object"}},
                {"cancel_elicitation": {"id": "e1", "after_ms": 50}},
                {"await": {"id": "e1"}},
                {"say_choice": {"id": "e2", "question": "question_0"}},
                {"request_permission": {"toolCallId": "t1", "options": [
                  {"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}},
                {"sleep_ms": 100},
                {"if_capability": "elicitation.form", "then": [{"text": "yes"}], "else": [{"text": "no"}]},
                {"end_turn": "max_tokens"},
                {"exit": 3}
              ]
            }"#,
        )
        .expect("scenario parses");
        assert_eq!(scenario.name, "all");
        assert_eq!(scenario.description, "every step");
        let steps = scenario.steps;
        assert_eq!(steps.len(), 14);
        assert_eq!(steps[0], Step::Text("Hello".to_owned()));
        let Step::ToolCall(fields) = &steps[1] else {
            panic!("tool_call: {:?}", steps[1]);
        };
        assert_eq!(fields.get("kind"), Some(&json!("read")));
        assert!(
            matches!(&steps[2], Step::ToolCallUpdate(fields) if fields["status"] == "completed")
        );
        assert_eq!(
            steps[3],
            Step::Elicit {
                id: "e1".to_owned(),
                params: json!({"sessionId": "$SESSION_ID"})
            }
        );
        assert_eq!(
            steps[4],
            Step::ElicitQuestions {
                id: "e2".to_owned(),
                tool_call_id: Some("tool-1".to_owned()),
                questions: vec![AskQuestion {
                    question: "Which DB?".to_owned(),
                    header: Some("Datastore".to_owned()),
                    options: vec![AskOption {
                        label: "Postgres".to_owned(),
                        description: Some("Relational".to_owned()),
                        preview: None,
                    }],
                    multi_select: false,
                }],
            }
        );
        assert_eq!(
            steps[5],
            Step::ElicitRaw {
                id: "e3".to_owned(),
                params: json!("not an object")
            }
        );
        assert_eq!(
            steps[6],
            Step::CancelElicitation {
                id: "e1".to_owned(),
                after: Duration::from_millis(50)
            }
        );
        assert_eq!(
            steps[7],
            Step::Await {
                id: "e1".to_owned()
            }
        );
        assert_eq!(
            steps[8],
            Step::SayChoice {
                id: "e2".to_owned(),
                question: "question_0".to_owned()
            }
        );
        let Step::RequestPermission { tool_call, options } = &steps[9] else {
            panic!("request_permission: {:?}", steps[9]);
        };
        assert_eq!(
            Value::Object(tool_call.clone()),
            json!({"toolCallId": "t1"})
        );
        assert_eq!(options.len(), 1);
        assert_eq!(steps[10], Step::Sleep(Duration::from_millis(100)));
        assert_eq!(
            steps[11],
            Step::IfCapability {
                path: "elicitation.form".to_owned(),
                then: vec![Step::Text("yes".to_owned())],
                otherwise: vec![Step::Text("no".to_owned())],
            }
        );
        assert_eq!(steps[12], Step::EndTurn(StopReason::MaxTokens));
        assert_eq!(steps[13], Step::Exit(3));
    }

    #[test]
    fn a_stream_step_parses_with_thought_off_by_default() {
        assert_eq!(
            one_step(json!({"stream": {"chunks": 3, "text": "word "}})).expect("parses"),
            Step::Stream {
                chunks: 3,
                text: "word ".to_owned(),
                thought: false
            }
        );
        assert_eq!(
            one_step(json!({"stream": {"chunks": 1, "text": "", "thought": true}}))
                .expect("parses"),
            Step::Stream {
                chunks: 1,
                text: String::new(),
                thought: true
            }
        );
        assert!(one_step(json!({"stream": {"chunks": -1, "text": "x"}})).is_err());
        assert!(
            one_step(json!({"stream": {"chunks": 1}})).is_err(),
            "text is required"
        );
    }

    #[test]
    fn every_stop_reason_of_the_format_parses() {
        for (text, reason) in [
            ("end_turn", StopReason::EndTurn),
            ("cancelled", StopReason::Cancelled),
            ("max_tokens", StopReason::MaxTokens),
            ("refusal", StopReason::Refusal),
        ] {
            assert_eq!(
                one_step(json!({ "end_turn": text })).expect("parses"),
                Step::EndTurn(reason)
            );
        }
        let error = one_step(json!({"end_turn": "whenever"})).expect_err("unknown stop reason");
        assert!(
            error
                .to_string()
                .contains("steps[0]: invalid `end_turn` step"),
            "{error}"
        );
    }

    #[test]
    fn unknown_step_is_an_error_naming_the_step_and_where_it_is() {
        let error = Scenario::from_value(json!({
            "name": "t",
            "steps": [{"text": "ok"}, {"if_capability": "a.b", "then": [{"shout": "hi"}]}]
        }))
        .expect_err("unknown step");
        let message = error.to_string();
        assert!(matches!(&error, ScenarioError::UnknownStep { kind, .. } if kind == "shout"));
        assert!(message.contains("unknown step `shout`"), "{message}");
        assert!(message.contains("steps[1].then[0]"), "{message}");
    }

    #[test]
    fn a_step_with_two_keys_is_refused() {
        let error = one_step(json!({"text": "a", "sleep_ms": 1})).expect_err("two keys");
        assert!(matches!(error, ScenarioError::StepShape { .. }), "{error}");
    }

    #[test]
    fn a_step_body_with_a_typo_is_refused() {
        let error = one_step(json!({"elicit": {"id": "e1", "parms": {}}})).expect_err("typo");
        assert!(
            error.to_string().contains("invalid `elicit` step"),
            "{error}"
        );
        let error = one_step(json!({"tool_call": {"status": "pending"}})).expect_err("no id");
        assert!(
            error.to_string().contains("not an ACP tool call"),
            "{error}"
        );
    }

    #[test]
    fn await_of_an_undeclared_elicitation_is_refused() {
        let error = Scenario::from_value(json!({
            "name": "t",
            "steps": [{"elicit": {"id": "e1", "params": {}}}, {"await": {"id": "e2"}}]
        }))
        .expect_err("undeclared");
        assert!(
            error.to_string().contains("`await` names elicitation `e2`"),
            "{error}"
        );
    }

    #[test]
    fn ask_user_question_and_await_tool_parse_and_are_checked() {
        let scenario = Scenario::from_value(json!({
            "name": "t",
            "steps": [
                {"ask_user_question": {"id": "a1", "arguments": {"questions": [], "context": "$SESSION_ID"}}},
                {"await_tool": {"id": "a1"}}
            ]
        }))
        .expect("parses");
        assert_eq!(
            scenario.steps[1],
            Step::AwaitTool {
                id: "a1".to_owned()
            }
        );
        assert!(
            matches!(&scenario.steps[0], Step::AskUserQuestion { id, arguments } if id == "a1" && arguments["context"] == "$SESSION_ID")
        );
        let error = Scenario::from_value(json!({
            "name": "t",
            "steps": [{"elicit": {"id": "a1", "params": {}}}, {"await_tool": {"id": "a1"}}]
        }))
        .expect_err("an elicitation is not a tool call");
        assert!(
            error
                .to_string()
                .contains("`await_tool` names tool call `a1`"),
            "{error}"
        );
        let error = one_step(json!({"ask_user_question": {"id": "a1", "arguments": []}}))
            .expect_err("arguments must be an object");
        assert!(
            error
                .to_string()
                .contains("invalid `ask_user_question` step"),
            "{error}"
        );
    }

    #[test]
    fn elicitations_declared_in_a_branch_may_be_awaited_after_it() {
        Scenario::from_value(json!({
            "name": "t",
            "steps": [
                {"if_capability": "elicitation.form", "then": [{"elicit": {"id": "e1", "params": {}}}]},
                {"await": {"id": "e1"}}
            ]
        }))
        .expect("declared in a branch");
    }

    #[test]
    fn scenario_shape_errors_say_what_is_wrong() {
        let error = Scenario::from_json("[]").expect_err("array");
        assert!(error.to_string().contains("found an array"), "{error}");
        let error = Scenario::from_json(r#"{"name": "x"}"#).expect_err("no steps");
        assert!(error.to_string().contains("`steps` is missing"), "{error}");
        let error = Scenario::from_json("{").expect_err("not json");
        assert!(matches!(error, ScenarioError::Json(_)));
    }

    #[test]
    fn session_id_is_substituted_in_string_values_only() {
        let params = json!({
            "sessionId": "$SESSION_ID",
            "message": "session $SESSION_ID, again $SESSION_ID",
            "$SESSION_ID": 1,
            "nested": [{"id": "$SESSION_ID"}, 7, null, true]
        });
        assert_eq!(
            substitute_session_id(&params, "mock-session-1"),
            json!({
                "sessionId": "mock-session-1",
                "message": "session mock-session-1, again mock-session-1",
                "$SESSION_ID": 1,
                "nested": [{"id": "mock-session-1"}, 7, null, true]
            })
        );
    }
}
