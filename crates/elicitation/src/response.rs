//! Operator answer + mapped elicitation → ACP `elicitation/create` response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::answer::{Answer, OperatorAnswer};
use crate::format;
use crate::pattern::{self, PatternVerdict};
use crate::question::{Question, QuestionKind};
use crate::request::MappedElicitation;

/// The ACP response to `elicitation/create`: `{"action": "accept", "content": {…}}`,
/// `{"action": "decline"}` or `{"action": "cancel"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum ElicitationResponse {
    /// The operator submitted; content is sparse and keyed by verbatim schema keys.
    Accept {
        /// Answered keys only; an unanswered question contributes no key.
        content: Map<String, Value>,
    },
    /// The operator skipped, the deadline passed, or the request was not acceptable.
    Decline,
    /// The turn was cancelled or the session torn down.
    Cancel,
}

impl ElicitationResponse {
    /// The response as JSON, ready to send.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::json!({"action": "decline"}))
    }
}

/// Why an operator answer does not fit the questions (F10). The pending stays open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AnswerError {
    /// `question_id` names no question of this elicitation.
    #[error("unknown question id `{question_id}`")]
    UnknownQuestion {
        /// The offending id.
        question_id: String,
    },
    /// The same question is answered twice in one submission.
    #[error("question `{question_id}` is answered more than once")]
    DuplicateAnswer {
        /// The offending id.
        question_id: String,
    },
    /// More than one option for a single-select question.
    #[error("question `{question_id}` takes one choice, got {count}")]
    TooManyChoices {
        /// The offending id.
        question_id: String,
        /// How many were sent.
        count: usize,
    },
    /// An option that the question does not declare.
    #[error("question `{question_id}` has no option `{option}`")]
    UndeclaredOption {
        /// The offending id.
        question_id: String,
        /// The option sent.
        option: String,
    },
    /// Text that does not parse as the question's type.
    #[error("question `{question_id}` expects {expected}, got `{value}`")]
    UnparseableValue {
        /// The offending id.
        question_id: String,
        /// The type expected (`a boolean`, `a number`, `an integer`).
        expected: String,
        /// The text sent.
        value: String,
    },
    /// A value outside a constraint of the schema.
    #[error("question `{question_id}`: {detail}")]
    ConstraintViolated {
        /// The offending id.
        question_id: String,
        /// The constraint (`minLength`, `maximum`, …).
        constraint: String,
        /// What is wrong, for the operator.
        detail: String,
    },
    /// A `required` question left unanswered on submit.
    #[error("question `{question_id}` is required")]
    RequiredUnanswered {
        /// The offending id.
        question_id: String,
    },
    /// Answers sent together with `rejected: true`.
    #[error("a rejected submission carries no answers")]
    AnswersWithReject,
}

impl AnswerError {
    /// The question the error is about, if it is about one.
    pub fn question_id(&self) -> Option<&str> {
        match self {
            Self::UnknownQuestion { question_id }
            | Self::DuplicateAnswer { question_id }
            | Self::TooManyChoices { question_id, .. }
            | Self::UndeclaredOption { question_id, .. }
            | Self::UnparseableValue { question_id, .. }
            | Self::ConstraintViolated { question_id, .. }
            | Self::RequiredUnanswered { question_id } => Some(question_id),
            Self::AnswersWithReject => None,
        }
    }
}

/// Validates `answer` against `elicitation` and builds the ACP response:
/// `rejected` → decline; otherwise accept with sparse content.
///
/// Validation (F10) runs over the answers in submission order, then over the
/// questions for `required`; the first problem is returned and nothing is built.
/// An answer entry counts as "carrying an answer" when it has a selected option or
/// non-whitespace text; only such entries make a rejected submission an error.
///
/// Content, per question (keys verbatim, absent when unanswered, never `null`/`""`):
/// - trimmed text and a companion → the companion key only, even over a selection;
/// - trimmed text, no companion, no options → the question's own key, as a string
///   (`text`, and a select whose options came back empty), a JSON boolean
///   (`boolean`), a JSON number (`number`: an integer literal such as `42` is sent
///   as `42`, anything else as a float, so `42.0` stays `42.0`; non-finite values
///   are rejected) or a JSON integer (`integer`: any i64 or u64 literal, `42.0`
///   rejected); booleans are `true`/`false`, trimmed, in any case;
/// - otherwise the selection, when there is one: the const for a single-select, an
///   array of consts in declaration order for a multi-select; text on a question
///   with options and no companion is dropped.
pub fn build_response(
    elicitation: &MappedElicitation,
    answer: &OperatorAnswer,
) -> Result<ElicitationResponse, AnswerError> {
    if answer.rejected {
        if answer.answers.iter().any(carries_answer) {
            return Err(AnswerError::AnswersWithReject);
        }
        return Ok(ElicitationResponse::Decline);
    }
    let mut content = Map::new();
    let mut seen: Vec<&str> = Vec::with_capacity(answer.answers.len());
    let mut answered: Vec<&str> = Vec::new();
    for a in &answer.answers {
        let id = a.question_id.as_str();
        let Some(question) = elicitation.question(id) else {
            return Err(AnswerError::UnknownQuestion {
                question_id: id.to_owned(),
            });
        };
        if seen.contains(&id) {
            return Err(AnswerError::DuplicateAnswer {
                question_id: id.to_owned(),
            });
        }
        seen.push(id);
        if let Some((key, value)) = answer_content(question, a)? {
            content.insert(key, value);
            answered.push(id);
        }
    }
    if let Some(q) = elicitation
        .questions
        .iter()
        .find(|q| q.required && !answered.contains(&q.id.as_str()))
    {
        return Err(AnswerError::RequiredUnanswered {
            question_id: q.id.clone(),
        });
    }
    Ok(ElicitationResponse::Accept { content })
}

fn carries_answer(a: &Answer) -> bool {
    !a.selected_options.is_empty() || !a.custom_text.trim().is_empty()
}

/// Validates one answer and returns the one content entry it contributes, if any.
fn answer_content(question: &Question, a: &Answer) -> Result<Option<(String, Value)>, AnswerError> {
    let qid = || question.id.clone();
    // Dedupe, keeping the first occurrence: a repeated id is the same choice.
    let mut selected: Vec<&str> = Vec::with_capacity(a.selected_options.len());
    for option in &a.selected_options {
        if !question.options.iter().any(|o| &o.id == option) {
            return Err(AnswerError::UndeclaredOption {
                question_id: qid(),
                option: option.clone(),
            });
        }
        if !selected.contains(&option.as_str()) {
            selected.push(option);
        }
    }
    if question.kind == QuestionKind::SingleSelect && selected.len() > 1 {
        return Err(AnswerError::TooManyChoices {
            question_id: qid(),
            count: selected.len(),
        });
    }

    let text = a.custom_text.trim();
    if !text.is_empty() {
        if let Some(custom) = &question.custom_answer {
            // AC-12a/AC-12i: the companion wins; the selection is not sent.
            return Ok(Some((custom.key.clone(), Value::String(text.to_owned()))));
        }
        if question.text_goes_to_own_key() {
            let value = typed_value(question, text)?;
            return Ok(Some((question.id.clone(), value)));
        }
        // A question with options and no companion has nowhere to put text.
    }

    match question.kind {
        QuestionKind::SingleSelect => Ok(selected
            .first()
            .map(|id| (question.id.clone(), Value::String((*id).to_owned())))),
        QuestionKind::MultiSelect if !selected.is_empty() => {
            check_items(question, selected.len())?;
            // F12: declaration order, whatever order the operator clicked in.
            let values = question
                .options
                .iter()
                .filter(|o| selected.contains(&o.id.as_str()))
                .map(|o| Value::String(o.id.clone()))
                .collect();
            Ok(Some((question.id.clone(), Value::Array(values))))
        }
        _ => Ok(None),
    }
}

/// Parses own-key text into the question's JSON type and checks its constraints.
fn typed_value(question: &Question, text: &str) -> Result<Value, AnswerError> {
    let unparseable = |expected: &str| AnswerError::UnparseableValue {
        question_id: question.id.clone(),
        expected: expected.to_owned(),
        value: text.to_owned(),
    };
    match question.kind {
        QuestionKind::Boolean => {
            if text.eq_ignore_ascii_case("true") {
                Ok(Value::Bool(true))
            } else if text.eq_ignore_ascii_case("false") {
                Ok(Value::Bool(false))
            } else {
                Err(unparseable("a boolean"))
            }
        }
        QuestionKind::Number => {
            let number = match text.parse::<i64>() {
                Ok(i) => Number::from(i),
                Err(_) => text
                    .parse::<f64>()
                    .ok()
                    .and_then(Number::from_f64)
                    .ok_or_else(|| unparseable("a number"))?,
            };
            check_range(question, number.as_f64().unwrap_or(f64::NAN), text)?;
            Ok(Value::Number(number))
        }
        QuestionKind::Integer => {
            let number = match text.parse::<i64>() {
                Ok(i) => Number::from(i),
                Err(_) => Number::from(text.parse::<u64>().map_err(|_| unparseable("an integer"))?),
            };
            check_range(question, number.as_f64().unwrap_or(f64::NAN), text)?;
            Ok(Value::Number(number))
        }
        QuestionKind::Text | QuestionKind::SingleSelect | QuestionKind::MultiSelect => {
            check_text(question, text)?;
            Ok(Value::String(text.to_owned()))
        }
    }
}

fn violated(question: &Question, constraint: &str, detail: String) -> AnswerError {
    AnswerError::ConstraintViolated {
        question_id: question.id.clone(),
        constraint: constraint.to_owned(),
        detail,
    }
}

fn check_text(question: &Question, text: &str) -> Result<(), AnswerError> {
    let c = &question.constraints;
    let chars = text.chars().count() as u64;
    if let Some(min) = c.min_length.filter(|&min| chars < min) {
        return Err(violated(
            question,
            "minLength",
            format!("at least {min} characters, got {chars}"),
        ));
    }
    if let Some(max) = c.max_length.filter(|&max| chars > max) {
        return Err(violated(
            question,
            "maxLength",
            format!("at most {max} characters, got {chars}"),
        ));
    }
    if let Some(pattern) = &c.pattern {
        match pattern::check(pattern, text) {
            PatternVerdict::Matches => {}
            PatternVerdict::Mismatch => {
                return Err(violated(
                    question,
                    "pattern",
                    format!("must match the format the agent asked for (pattern `{pattern}`)"),
                ));
            }
            // Fail closed: a pattern nothing can check never passes as a match.
            PatternVerdict::Unusable { reason } => {
                return Err(violated(
                    question,
                    "pattern",
                    format!(
                        "the agent's pattern `{pattern}` cannot be checked ({reason}), so this field cannot be answered; leave it empty or Skip"
                    ),
                ));
            }
        }
    }
    if let Some(format) = &c.format
        && format::matches(format, text) == Some(false)
    {
        return Err(violated(
            question,
            "format",
            format!("must be a valid {format}"),
        ));
    }
    Ok(())
}

fn check_range(question: &Question, value: f64, text: &str) -> Result<(), AnswerError> {
    let c = &question.constraints;
    if let Some(min) = c.minimum.filter(|&min| value < min) {
        return Err(violated(
            question,
            "minimum",
            format!("at least {min}, got {text}"),
        ));
    }
    if let Some(max) = c.maximum.filter(|&max| value > max) {
        return Err(violated(
            question,
            "maximum",
            format!("at most {max}, got {text}"),
        ));
    }
    Ok(())
}

fn check_items(question: &Question, count: usize) -> Result<(), AnswerError> {
    let c = &question.constraints;
    let n = count as u64;
    if let Some(min) = c.min_items.filter(|&min| n < min) {
        return Err(violated(
            question,
            "minItems",
            format!("choose at least {min}, got {n}"),
        ));
    }
    if let Some(max) = c.max_items.filter(|&max| n > max) {
        return Err(violated(
            question,
            "maxItems",
            format!("choose at most {max}, got {n}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::map_request;
    use serde_json::json;

    fn mapped(properties: Value) -> MappedElicitation {
        map_request(&json!({"mode": "form", "sessionId": "s",
            "requestedSchema": {"type": "object", "properties": properties}}))
        .expect("maps")
    }

    fn answer(id: &str, options: &[&str], text: &str) -> Answer {
        Answer {
            question_id: id.into(),
            selected_options: options.iter().map(|o| o.to_string()).collect(),
            custom_text: text.into(),
        }
    }

    fn submit(m: &MappedElicitation, answers: Vec<Answer>) -> Result<Value, AnswerError> {
        build_response(
            m,
            &OperatorAnswer {
                answers,
                ..OperatorAnswer::default()
            },
        )
        .map(|r| r.to_json())
    }

    #[test]
    fn typed_values_become_json_types() {
        let m = mapped(json!({
            "b": {"type": "boolean"}, "n": {"type": "number"}, "f": {"type": "number"},
            "i": {"type": "integer"}, "t": {"type": "string"}
        }));
        let out = submit(
            &m,
            vec![
                answer("b", &[], " TRUE "),
                answer("n", &[], "42"),
                answer("f", &[], "42.0"),
                answer("i", &[], "-7"),
                answer("t", &[], " hi "),
            ],
        )
        .expect("valid");
        assert_eq!(
            out,
            json!({"action": "accept", "content": {"b": true, "n": 42, "f": 42.0, "i": -7, "t": "hi"}})
        );
        assert_eq!(
            serde_json::to_string(&out["content"]["f"]).expect("json"),
            "42.0"
        );
    }

    #[test]
    fn unparseable_typed_values() {
        let m = mapped(
            json!({"b": {"type": "boolean"}, "n": {"type": "number"}, "i": {"type": "integer"}}),
        );
        for (id, text) in [
            ("b", "yes"),
            ("n", "NaN"),
            ("n", "inf"),
            ("n", "4 2"),
            ("i", "42.0"),
            ("i", "1e3"),
        ] {
            let err = submit(&m, vec![answer(id, &[], text)]).expect_err("unparseable");
            assert!(
                matches!(err, AnswerError::UnparseableValue { ref value, .. } if value == text),
                "{id} {text}: {err:?}"
            );
        }
    }

    #[test]
    fn a_pattern_nothing_can_compile_fails_closed() {
        let m = mapped(json!({"t": {"type": "string", "pattern": "(unclosed"}}));
        let err = submit(&m, vec![answer("t", &[], "zzz")]).expect_err("refused");
        assert!(
            matches!(err, AnswerError::ConstraintViolated { ref constraint, ref detail, .. }
                if constraint == "pattern" && detail.contains("cannot be checked")),
            "{err:?}"
        );
        // Left empty, the optional field is simply not answered.
        assert_eq!(
            submit(&m, vec![answer("t", &[], "  ")]).expect("accepted"),
            json!({"action": "accept", "content": {}})
        );
    }

    #[test]
    fn ecma_lookaround_and_backreferences_are_enforced() {
        let m =
            mapped(json!({"env": {"type": "string", "pattern": r"^prod-(?=[0-9]+$)([0-9])\1$"}}));
        let err = submit(&m, vec![answer("env", &[], "prod-45")]).expect_err("refused");
        assert!(
            matches!(err, AnswerError::ConstraintViolated { ref constraint, .. } if constraint == "pattern"),
            "{err:?}"
        );
        assert_eq!(
            submit(&m, vec![answer("env", &[], "prod-44")]).expect("accepted"),
            json!({"action": "accept", "content": {"env": "prod-44"}})
        );
    }
}
