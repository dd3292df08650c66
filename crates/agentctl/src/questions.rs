//! The `ask_user_question_kandev` MCP tool (docs/architecture.md §6 F3): its input rules, the
//! calls waiting for the operator, and what the agent gets back.
//!
//! The tool is the clarification path that predates elicitation. agentctl only checks
//! the call's shape ([`parse_input`]), announces it as `ask_user_question_requested` and
//! parks it in a [`QuestionSet`]; the backend owns the record (its own id, dedup, the
//! answer rules) and sends the operator's answer with `agent.questions.respond`, naming
//! every call waiting on the record. Like a pending elicitation, whoever *removes* a
//! waiting call from the set is the only one who may return it, and the calls of one verb
//! are removed together.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kandev_agent_stream::{AskUserQuestionRequested, SettleOutcome};
use kandev_elicitation::{Constraints, OperatorAnswer, Question, QuestionKind, QuestionOption};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

/// The tool's name.
pub const TOOL_NAME: &str = "ask_user_question_kandev";
/// The most questions one call may ask.
pub const MAX_QUESTIONS: usize = 4;
/// The fewest options a question may offer.
pub const MIN_OPTIONS: usize = 2;
/// The most options a question may offer.
pub const MAX_OPTIONS: usize = 6;

/// The tool's description, as `tools/list` shows it.
pub const TOOL_DESCRIPTION: &str = "Ask the human operator supervising you one to four \
    multiple-choice questions and wait for the answer. Each question needs a prompt and 2-6 \
    options; the operator picks one option per question or types their own answer instead, or \
    skips the whole bundle. Returns JSON: {\"status\": \"answered\", \"answers\": [{\"question_id\", \
    \"selected_option\", \"custom_text\"}]} or {\"status\": \"rejected\"}.";

/// The tool's JSON Schema input.
pub fn input_schema() -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "questions": {
                "type": "array", "minItems": 1, "maxItems": MAX_QUESTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Optional id; q1, q2, … when absent."},
                        "title": {"type": "string", "description": "A short header."},
                        "prompt": {"type": "string", "minLength": 1, "description": "The question."},
                        "options": {
                            "type": "array", "minItems": MIN_OPTIONS, "maxItems": MAX_OPTIONS,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": {"type": "string", "minLength": 1},
                                    "description": {"type": "string"}
                                },
                                "required": ["label"]
                            }
                        }
                    },
                    "required": ["prompt", "options"]
                }
            },
            "context": {"type": "string", "description": "Why you ask, shown with the questions."}
        },
        "required": ["questions"]
    });
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A call's input after the shape checks.
#[derive(Debug, Clone, PartialEq)]
pub struct AskInput {
    /// The questions in the §4.3 shape.
    pub questions: Vec<Question>,
    /// The optional context.
    pub context: Option<String>,
}

/// Checks a call's arguments and builds the questions: 1–4 questions, each with a
/// non-empty prompt and 2–6 options with distinct non-empty labels, distinct ids
/// (`q1…` filled in where absent). The error is the tool error text the agent reads.
pub fn parse_input(arguments: Option<&Map<String, Value>>) -> Result<AskInput, String> {
    let empty = Map::new();
    let arguments = arguments.unwrap_or(&empty);
    let questions = match arguments.get("questions") {
        Some(Value::Array(questions)) => questions,
        Some(_) => return Err("`questions` must be an array of question objects".to_owned()),
        None => return Err("`questions` is required: an array of 1 to 4 questions".to_owned()),
    };
    if questions.is_empty() || questions.len() > MAX_QUESTIONS {
        return Err(format!(
            "ask 1 to {MAX_QUESTIONS} questions per call; got {}",
            questions.len()
        ));
    }
    let context = match arguments.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()).filter(|t| !t.trim().is_empty()),
        Some(_) => return Err("`context` must be a string".to_owned()),
    };
    let mut parsed = Vec::with_capacity(questions.len());
    let mut ids = HashSet::new();
    for (index, question) in questions.iter().enumerate() {
        let question = parse_question(index, question)?;
        if !ids.insert(question.id.clone()) {
            return Err(format!(
                "questions[{index}]: id `{}` is used twice; ids must be distinct",
                question.id
            ));
        }
        parsed.push(question);
    }
    Ok(AskInput {
        questions: parsed,
        context,
    })
}

fn parse_question(index: usize, value: &Value) -> Result<Question, String> {
    let at = format!("questions[{index}]");
    let Value::Object(question) = value else {
        return Err(format!(
            "{at} must be an object with `prompt` and `options`"
        ));
    };
    let text = |key: &str| -> Result<Option<String>, String> {
        match question.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(_) => Err(format!("{at}.{key} must be a string")),
        }
    };
    let prompt =
        text("prompt")?.ok_or_else(|| format!("{at}.prompt is required and must not be empty"))?;
    let id = text("id")?.unwrap_or_else(|| format!("q{}", index + 1));
    let title = text("title")?;
    let options = match question.get("options") {
        Some(Value::Array(options)) => options,
        _ => {
            return Err(format!(
                "{at}.options is required: an array of {MIN_OPTIONS} to {MAX_OPTIONS} options"
            ));
        }
    };
    if options.len() < MIN_OPTIONS || options.len() > MAX_OPTIONS {
        return Err(format!(
            "{at} needs {MIN_OPTIONS} to {MAX_OPTIONS} options; got {}",
            options.len()
        ));
    }
    let mut labels = HashSet::new();
    let mut parsed = Vec::with_capacity(options.len());
    for (o, option) in options.iter().enumerate() {
        let oat = format!("{at}.options[{o}]");
        let Value::Object(option) = option else {
            return Err(format!("{oat} must be an object with a `label`"));
        };
        let label = match option.get("label") {
            Some(Value::String(label)) if !label.trim().is_empty() => label.trim().to_owned(),
            _ => return Err(format!("{oat}.label is required and must not be empty")),
        };
        let description = match option.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()).filter(|d| !d.trim().is_empty()),
            Some(_) => return Err(format!("{oat}.description must be a string")),
        };
        if !labels.insert(label.clone()) {
            return Err(format!(
                "{at}: option `{label}` appears twice; labels must be distinct"
            ));
        }
        // The label is the option's id: the answer names the option by it.
        parsed.push(QuestionOption {
            id: label.clone(),
            label,
            description,
            preview: None,
        });
    }
    Ok(Question {
        id,
        kind: QuestionKind::SingleSelect,
        title,
        prompt,
        options: parsed,
        // Custom text on this path is the answer's own `custom_text`, exclusive of a
        // choice; there is no companion key.
        custom_answer: None,
        required: true,
        default: None,
        // The backend's rule for this path, carried so the answer surface checks it too.
        constraints: Constraints {
            max_length: Some(kandev_elicitation::ask_user_question::MAX_CUSTOM_TEXT_CHARS as u64),
            ..Constraints::default()
        },
    })
}

/// How a waiting call ends.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionVerdict {
    /// The backend's verdict: answers, or `rejected: true`.
    Responded(OperatorAnswer),
    /// Returned without the operator (turn cancelled, deadline, caller gone, shutdown).
    Ended(SettleOutcome),
}

/// What the agent gets back: the JSON text of the tool result, and whether it is a
/// tool error (the call ended without the operator's answer).
pub fn tool_result(questions: &[Question], verdict: &QuestionVerdict) -> (Value, bool) {
    match verdict {
        QuestionVerdict::Responded(answer) if answer.rejected => (
            json!({
                "status": "rejected",
                "reason": answer.reject_reason,
                "message": "The operator skipped these questions without answering. Proceed with your best judgement or ask differently.",
            }),
            false,
        ),
        QuestionVerdict::Responded(answer) => {
            let answers: Vec<Value> = questions
                .iter()
                .map(|q| {
                    let given = answer.answers.iter().find(|a| a.question_id == q.id);
                    let selected = given
                        .and_then(|a| a.selected_options.first())
                        .and_then(|id| q.options.iter().find(|o| &o.id == id))
                        .map(|o| o.label.clone());
                    let custom = given
                        .map(|a| a.custom_text.trim().to_owned())
                        .filter(|t| !t.is_empty());
                    json!({
                        "question_id": q.id,
                        "prompt": q.prompt,
                        "selected_option": selected,
                        "custom_text": custom,
                    })
                })
                .collect();
            (json!({"status": "answered", "answers": answers}), false)
        }
        QuestionVerdict::Ended(outcome) => {
            let why = match outcome {
                SettleOutcome::TurnCancelled => {
                    "the turn was cancelled before the operator answered"
                }
                SettleOutcome::TimedOut
                | SettleOutcome::TimedOutDefaults
                | SettleOutcome::TimedOutCancelled => {
                    "the operator did not answer before the deadline (KANDEV_ASK_USER_QUESTION_TIMEOUT)"
                }
                SettleOutcome::Shutdown => "agentctl is shutting down",
                SettleOutcome::AgentExited => "the agent exited",
                SettleOutcome::AgentCancelled => "the call was cancelled",
                SettleOutcome::OperatorCancelled => {
                    "the operator cancelled the question; do not ask it again unless asked to"
                }
                SettleOutcome::Answered | SettleOutcome::Declined => "the call ended",
            };
            let status = serde_json::to_value(outcome).unwrap_or(Value::Null);
            (json!({"status": status, "message": why}), true)
        }
    }
}

struct Waiting {
    order: u64,
    requested: AskUserQuestionRequested,
    tx: oneshot::Sender<QuestionVerdict>,
}

/// A waiting call, taken out of the set: its announcement and the way to return it.
pub struct TakenCall {
    /// What was announced.
    pub requested: AskUserQuestionRequested,
    tx: oneshot::Sender<QuestionVerdict>,
}

impl TakenCall {
    /// Returns the call with `verdict`; false when the caller is no longer waiting.
    pub fn finish(self, verdict: QuestionVerdict) -> bool {
        self.tx.send(verdict).is_ok()
    }
}

/// The `ask_user_question_kandev` calls of one session waiting for the operator.
#[derive(Default)]
pub struct QuestionSet {
    inner: Mutex<(u64, HashMap<String, Waiting>)>,
}

impl QuestionSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<String, Waiting>)> {
        // Every operation is a single map call, so a poisoned lock is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parks a call; the receiver yields its verdict.
    pub fn insert(
        &self,
        requested: AskUserQuestionRequested,
    ) -> oneshot::Receiver<QuestionVerdict> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        let order = inner.0;
        inner.0 += 1;
        inner.1.insert(
            requested.request_id.clone(),
            Waiting {
                order,
                requested,
                tx,
            },
        );
        rx
    }

    /// Removes a call; the caller now alone may return it.
    pub fn take(&self, request_id: &str) -> Option<TakenCall> {
        self.lock().1.remove(request_id).map(|w| TakenCall {
            requested: w.requested,
            tx: w.tx,
        })
    }

    /// Removes, in one step, each of `request_ids` still waiting, in the order named:
    /// of two verbs naming the same calls, one takes them all and the other none.
    pub fn take_all(&self, request_ids: &[String]) -> Vec<TakenCall> {
        let mut inner = self.lock();
        request_ids
            .iter()
            .filter_map(|id| inner.1.remove(id))
            .map(|w| TakenCall {
                requested: w.requested,
                tx: w.tx,
            })
            .collect()
    }

    /// Removes every call, oldest first.
    pub fn drain(&self) -> Vec<TakenCall> {
        let mut all: Vec<Waiting> = self.lock().1.drain().map(|(_, w)| w).collect();
        all.sort_by_key(|w| w.order);
        all.into_iter()
            .map(|w| TakenCall {
                requested: w.requested,
                tx: w.tx,
            })
            .collect()
    }

    /// The calls still waiting, oldest first.
    pub fn list(&self) -> Vec<AskUserQuestionRequested> {
        let inner = self.lock();
        let mut all: Vec<&Waiting> = inner.1.values().collect();
        all.sort_by_key(|w| w.order);
        all.into_iter().map(|w| w.requested.clone()).collect()
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.lock().1.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_elicitation::Answer;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("object expected"),
        }
    }

    fn options(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"label": format!("opt{i}")}))
                .collect(),
        )
    }

    #[test]
    fn ids_are_filled_in_and_kept() {
        let input = parse_input(Some(&args(json!({
            "questions": [
                {"prompt": "Which DB?", "title": "Datastore", "options": [{"label": "Postgres", "description": "SQL"}, {"label": "SQLite"}]},
                {"id": "cache", "prompt": "Cache?", "options": options(2)},
                {"prompt": "Third?", "options": options(6)},
            ],
            "context": "Setting up the service",
        }))))
        .expect("valid");
        let ids: Vec<&str> = input.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["q1", "cache", "q3"]);
        let q = &input.questions[0];
        assert_eq!(q.kind, QuestionKind::SingleSelect);
        assert_eq!(q.title.as_deref(), Some("Datastore"));
        assert_eq!(q.options[0].id, "Postgres");
        assert_eq!(q.options[0].description.as_deref(), Some("SQL"));
        assert!(q.custom_answer.is_none() && q.required);
        assert_eq!(input.context.as_deref(), Some("Setting up the service"));
    }

    #[test]
    fn each_violation_is_a_clear_error() {
        let q = |prompt: &str, opts: Value| json!({"prompt": prompt, "options": opts});
        let cases = [
            (json!({}), "`questions` is required"),
            (json!({"questions": "x"}), "must be an array"),
            (json!({"questions": []}), "1 to 4 questions"),
            (
                json!({"questions": [q("a", options(2)), q("b", options(2)), q("c", options(2)), q("d", options(2)), q("e", options(2))]}),
                "got 5",
            ),
            (
                json!({"questions": [q("a", options(1))]}),
                "2 to 6 options; got 1",
            ),
            (
                json!({"questions": [q("a", options(7))]}),
                "2 to 6 options; got 7",
            ),
            (
                json!({"questions": [q("  ", options(2))]}),
                "prompt is required",
            ),
            (
                json!({"questions": [{"options": options(2)}]}),
                "prompt is required",
            ),
            (
                json!({"questions": [q("a", json!([{"label": ""}, {"label": "b"}]))]}),
                "label is required",
            ),
            (
                json!({"questions": [q("a", json!([{"label": "x"}, {"label": "x"}]))]}),
                "appears twice",
            ),
            (
                json!({"questions": [{"id": "x", "prompt": "a", "options": options(2)}, {"id": "x", "prompt": "b", "options": options(2)}]}),
                "used twice",
            ),
            (
                json!({"questions": [q("a", options(2))], "context": 3}),
                "`context` must be a string",
            ),
            (json!({"questions": [7]}), "must be an object"),
        ];
        for (value, expected) in cases {
            let err = parse_input(Some(&args(value.clone()))).expect_err(expected);
            assert!(
                err.contains(expected),
                "{value}: {err:?} should say {expected:?}"
            );
        }
        assert!(parse_input(None).is_err());
    }

    #[test]
    fn answers_are_returned_by_label_and_text() {
        let input = parse_input(Some(&args(json!({"questions": [
            {"prompt": "Which DB?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
            {"prompt": "Cache?", "options": options(2)},
        ]}))))
        .expect("valid");
        let verdict = QuestionVerdict::Responded(OperatorAnswer {
            answers: vec![
                Answer {
                    question_id: "q1".into(),
                    selected_options: vec!["SQLite".into()],
                    custom_text: String::new(),
                },
                Answer {
                    question_id: "q2".into(),
                    selected_options: vec![],
                    custom_text: " memcached ".into(),
                },
            ],
            rejected: false,
            reject_reason: String::new(),
        });
        let (result, is_error) = tool_result(&input.questions, &verdict);
        assert!(!is_error);
        assert_eq!(result["status"], "answered");
        assert_eq!(result["answers"][0]["selected_option"], "SQLite");
        assert_eq!(result["answers"][0]["custom_text"], Value::Null);
        assert_eq!(result["answers"][1]["custom_text"], "memcached");
        let (rejected, is_error) = tool_result(
            &input.questions,
            &QuestionVerdict::Responded(OperatorAnswer {
                rejected: true,
                ..OperatorAnswer::default()
            }),
        );
        assert_eq!(
            (rejected["status"].as_str(), is_error),
            (Some("rejected"), false)
        );
        let (cancelled, is_error) = tool_result(
            &input.questions,
            &QuestionVerdict::Ended(SettleOutcome::TurnCancelled),
        );
        assert_eq!(
            (cancelled["status"].as_str(), is_error),
            (Some("turn_cancelled"), true)
        );
    }

    proptest::proptest! {
        /// Whatever the counts, the input is accepted exactly when there are 1–4
        /// questions of 2–6 options each.
        #[test]
        fn counts_are_accepted_exactly_within_the_limits(
            counts in proptest::collection::vec(0usize..9, 0..7),
        ) {
            let questions: Vec<Value> = counts
                .iter()
                .map(|n| json!({"prompt": "p", "options": options(*n)}))
                .collect();
            let expected = (1..=MAX_QUESTIONS).contains(&counts.len())
                && counts.iter().all(|n| (MIN_OPTIONS..=MAX_OPTIONS).contains(n));
            let parsed = parse_input(Some(&args(json!({"questions": questions}))));
            proptest::prop_assert_eq!(parsed.is_ok(), expected, "{:?}", parsed);
        }
    }

    #[test]
    fn a_call_is_taken_once() {
        let set = QuestionSet::default();
        let requested = |id: &str| AskUserQuestionRequested {
            request_id: id.into(),
            acp_session_id: "acp".into(),
            questions: vec![],
            context: None,
            expires_at: None,
        };
        let mut rx_a = set.insert(requested("a"));
        let _rx_b = set.insert(requested("b"));
        assert_eq!(set.list().len(), 2);
        let taken = set.take("a").expect("waiting");
        assert!(set.take("a").is_none());
        assert!(taken.finish(QuestionVerdict::Ended(SettleOutcome::TimedOut)));
        assert_eq!(
            rx_a.try_recv().expect("sent"),
            QuestionVerdict::Ended(SettleOutcome::TimedOut)
        );
        let drained: Vec<String> = set
            .drain()
            .into_iter()
            .map(|t| t.requested.request_id)
            .collect();
        assert_eq!(drained, ["b"]);
        assert!(set.is_empty());
    }
}
