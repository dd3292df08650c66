//! Strict parsing of steps: one known key per step, bodies that fit it, and references
//! (`await`, `cancel_elicitation`, `say_choice`, `await_tool`) to ids the scenario declares.

use std::collections::BTreeSet;
use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOption, StopReason, ToolCall, ToolCallUpdate};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::ScenarioError;
use super::step::{AskQuestion, Step};

/// Each step of `steps`, parsed; `at` is where the list is (`steps`, `steps[3].then`).
pub(super) fn parse_steps(steps: Vec<Value>, at: &str) -> Result<Vec<Step>, ScenarioError> {
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

/// What kind of JSON value `value` is, for error messages.
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Adds every id the steps declare (elicitations, and tool calls as `tool:ID`), branches included.
pub(super) fn collect_declared(steps: &[Step], declared: &mut BTreeSet<String>) {
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

/// Refuses a step that names an elicitation or tool call no step declares.
pub(super) fn check_references(
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
