//! Secret-looking fields (an API key, a token, a password): the agent receives the
//! value, but nothing that keeps or shows an answer does. A question is secret when its
//! schema says `format: "password"` or `writeOnly: true`, or when its key reads like a
//! credential (`*key`, `*token`, `*secret`, `*password`, case-insensitive), which is how an
//! MCP server forwarding `{"apiKey": {"type": "string"}}` names one. The web UI applies
//! the same rule (apps/web/static/answer-rules.js `isSecret`).

use crate::answer::OperatorAnswer;
use crate::question::Question;

/// What a secret answer's text is replaced with wherever the answer is kept.
pub const REDACTED: &str = "[redacted]";

const SECRET_KEY_ENDINGS: [&str; 5] = ["key", "token", "secret", "password", "passwd"];

/// Whether `question` asks for a secret.
pub fn is_secret(question: &Question) -> bool {
    let c = &question.constraints;
    if c.write_only || c.format.as_deref() == Some("password") {
        return true;
    }
    let key = question.id.to_ascii_lowercase();
    SECRET_KEY_ENDINGS.iter().any(|end| key.ends_with(end))
}

/// `answer` with the text of every secret question replaced by [`REDACTED`] (an empty
/// text stays empty, so an unanswered field still reads as unanswered).
pub fn redact(questions: &[Question], answer: &OperatorAnswer) -> OperatorAnswer {
    let mut kept = answer.clone();
    for a in &mut kept.answers {
        let secret = questions
            .iter()
            .any(|q| q.id == a.question_id && is_secret(q));
        if secret && !a.custom_text.trim().is_empty() {
            a.custom_text = REDACTED.to_owned();
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Answer;
    use crate::request::map_request;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn questions(properties: Value) -> Vec<Question> {
        map_request(&json!({"mode": "form", "sessionId": "s",
            "requestedSchema": {"type": "object", "properties": properties}}))
        .expect("maps")
        .questions
    }

    #[test]
    fn secret_by_format_write_only_or_key() {
        let qs = questions(json!({
            "apiKey": {"type": "string"},
            "GITHUB_TOKEN": {"type": "string"},
            "clientSecret": {"type": "string"},
            "password": {"type": "string"},
            "pin": {"type": "string", "format": "password"},
            "hidden": {"type": "string", "writeOnly": true},
            "name": {"type": "string"},
            "tokens_used": {"type": "integer"}
        }));
        let mut secret: Vec<&str> = qs
            .iter()
            .filter(|q| is_secret(q))
            .map(|q| q.id.as_str())
            .collect();
        secret.sort_unstable();
        assert_eq!(
            secret,
            [
                "GITHUB_TOKEN",
                "apiKey",
                "clientSecret",
                "hidden",
                "password",
                "pin"
            ]
        );
    }

    #[test]
    fn redact_replaces_secret_text_only() {
        let qs = questions(json!({"apiKey": {"type": "string"}, "name": {"type": "string"}}));
        let answer = OperatorAnswer {
            answers: vec![
                Answer {
                    question_id: "apiKey".into(),
                    custom_text: "sk-live-123".into(),
                    ..Answer::default()
                },
                Answer {
                    question_id: "name".into(),
                    custom_text: "svc".into(),
                    ..Answer::default()
                },
            ],
            ..OperatorAnswer::default()
        };
        let kept = redact(&qs, &answer);
        assert_eq!(kept.answers[0].custom_text, REDACTED);
        assert_eq!(kept.answers[1].custom_text, "svc");
        assert!(
            !serde_json::to_string(&kept)
                .expect("json")
                .contains("sk-live")
        );
    }

    proptest! {
        /// Whatever the secret value, the kept answer never contains it.
        #[test]
        fn a_redacted_answer_never_holds_the_value(value in "[ -~]{1,40}") {
            prop_assume!(!value.trim().is_empty());
            let qs = questions(json!({"deployToken": {"type": "string"}}));
            let answer = OperatorAnswer {
                answers: vec![Answer { question_id: "deployToken".into(), custom_text: value.clone(), ..Answer::default() }],
                ..OperatorAnswer::default()
            };
            let kept = redact(&qs, &answer);
            prop_assert_eq!(kept.answers[0].custom_text.as_str(), REDACTED);
            prop_assert_eq!(&kept.answers[0].question_id, "deployToken");
        }
    }
}
