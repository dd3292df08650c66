//! The schema's defaults as an operator's answer: what an unattended run sends when it
//! accepts the defaults (`on_deadline = "defaults"`, an auto-answer rule's
//! `answer = "defaults"`). Validated like any answer before it is sent.

use serde_json::Value;

use crate::{Answer, OperatorAnswer, Question, QuestionKind};

/// One question's default as an answer, when it has a usable one.
fn default_answer(question: &Question) -> Option<Answer> {
    let default = question.default.as_ref()?;
    let mut answer = Answer {
        question_id: question.id.clone(),
        ..Answer::default()
    };
    match (question.kind, default) {
        (QuestionKind::SingleSelect, Value::String(id)) if !question.options.is_empty() => {
            answer.selected_options = vec![id.clone()];
        }
        (QuestionKind::MultiSelect, Value::Array(ids)) if !question.options.is_empty() => {
            answer.selected_options = ids
                .iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?;
        }
        (QuestionKind::Boolean, Value::Bool(b)) => answer.custom_text = b.to_string(),
        (QuestionKind::Number | QuestionKind::Integer, Value::Number(n)) => {
            answer.custom_text = n.to_string();
        }
        // Text, and a select whose options came back empty (answered by text); never a
        // string default on a boolean or number question.
        (
            QuestionKind::Text | QuestionKind::SingleSelect | QuestionKind::MultiSelect,
            Value::String(text),
        ) if question.text_goes_to_own_key() => {
            answer.custom_text = text.clone();
        }
        _ => return None,
    }
    Some(answer)
}

/// The answer made of every question's default, or `None` when a required question has
/// none (or one of a shape its kind cannot take). Questions without a default and not
/// required are left unanswered.
pub fn defaults_answer(questions: &[Question]) -> Option<OperatorAnswer> {
    let mut answers = Vec::new();
    for question in questions {
        match default_answer(question) {
            Some(answer) => answers.push(answer),
            None if question.required => return None,
            None => {}
        }
    }
    Some(OperatorAnswer {
        answers,
        ..OperatorAnswer::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_response, map_request};
    use serde_json::json;

    fn mapped(properties: Value, required: Value) -> crate::MappedElicitation {
        map_request(&json!({
            "mode": "form", "sessionId": "s", "message": "m",
            "requestedSchema": {"type": "object", "properties": properties, "required": required}
        }))
        .expect("maps")
    }

    #[test]
    fn every_kind_takes_its_default_and_the_answer_validates() {
        let form = mapped(
            json!({
                "colour": {"type": "string", "enum": ["red", "blue"], "default": "blue"},
                "sizes": {"type": "array", "items": {"enum": ["s", "m", "l"]}, "default": ["m", "s"]},
                "ok": {"type": "boolean", "default": true},
                "n": {"type": "integer", "default": 3},
                "note": {"type": "string", "default": "none"},
                "free": {"type": "string"},
            }),
            json!(["colour", "ok"]),
        );
        let answer = defaults_answer(&form.questions).expect("every required has a default");
        assert_eq!(answer.answers.len(), 5, "{answer:?}");
        let response = build_response(&form, &answer).expect("the defaults validate");
        assert_eq!(
            response.to_json(),
            json!({"action": "accept", "content": {
                "colour": "blue", "sizes": ["s", "m"], "ok": true, "n": 3, "note": "none"}})
        );
    }

    #[test]
    fn a_required_question_without_a_default_means_no_defaults_answer() {
        let form = mapped(
            json!({"a": {"type": "string", "default": "x"}, "b": {"type": "string"}}),
            json!(["b"]),
        );
        assert_eq!(defaults_answer(&form.questions), None);
        let wrong_shape = mapped(
            json!({"a": {"type": "boolean", "default": "yes"}}),
            json!(["a"]),
        );
        assert_eq!(defaults_answer(&wrong_shape.questions), None);
    }
}
