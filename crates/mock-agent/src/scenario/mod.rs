//! The scenario format: a named list of steps the agent plays for one turn.
//!
//! The contract is the step types below (summarised by `mock-agent --help`); parsing is strict so that a typo
//! in a scenario is a clear error naming the step, never a silently skipped one.
//!
//! [`step`] holds what a scenario is made of, [`parse`] the rules, [`error`] what breaks them.

mod error;
mod parse;
mod step;

use std::collections::BTreeSet;

use serde_json::Value;

pub use error::ScenarioError;
use parse::{check_references, collect_declared, kind_of, parse_steps};
pub use step::{AskQuestion, Step};

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
    use std::time::Duration;

    use agent_client_protocol::v1::schema::StopReason;
    use serde_json::json;

    use super::step::AskOption;
    use super::*;

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
