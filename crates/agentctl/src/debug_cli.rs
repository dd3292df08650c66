//! `agentctl elicitation map|respond`: the mapping on stdin/stdout, for debugging a form
//! without an agent or a backend (docs/architecture.md §7).

use kandev_elicitation::{OperatorAnswer, build_response, map_request};
use serde_json::{Value, json};

/// What a debug command prints, and whether it counts as a failure (exit code 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The JSON to print on stdout.
    pub output: Value,
    /// Whether the process should exit 1.
    pub failed: bool,
}

fn params_of(text: &str) -> Value {
    // Unparseable input is mapped like any malformed body: it becomes a decline.
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `elicitation map`: `elicitation/create` params → the mapped elicitation
/// (`{session_id, tool_call_id, message, questions}`) or `{"decline": {reason, detail}}`.
pub fn map(params_text: &str) -> Outcome {
    let output = match map_request(&params_of(params_text)) {
        Ok(mapped) => serde_json::to_value(mapped).unwrap_or(Value::Null),
        Err(decline) => json!({"decline": decline}),
    };
    Outcome {
        output,
        failed: false,
    }
}

/// `elicitation respond`: params + operator answer → the ACP response, or
/// `{"error": {code, message, …}}` with `failed` set.
pub fn respond(params_text: &str, answer_text: &str) -> Outcome {
    let failure = |error: Value| Outcome {
        output: json!({"error": error}),
        failed: true,
    };
    let mapped = match map_request(&params_of(params_text)) {
        Ok(mapped) => mapped,
        Err(decline) => {
            return failure(json!({
                "code": "DECLINED",
                "message": format!("the request would be declined, so it takes no answer: {decline}"),
                "decline": decline,
            }));
        }
    };
    let answer: OperatorAnswer = match serde_json::from_str(answer_text) {
        Ok(answer) => answer,
        Err(err) => {
            return failure(json!({
                "code": "BAD_REQUEST",
                "message": format!("the answer on stdin is not {{answers, rejected, reject_reason}}: {err}"),
            }));
        }
    };
    match build_response(&mapped, &answer) {
        Ok(response) => Outcome {
            output: response.to_json(),
            failed: false,
        },
        Err(err) => {
            failure(json!({"code": "INVALID_ANSWER", "message": err.to_string(), "detail": err}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APIKEY: &str = r#"{"mode": "form", "sessionId": "s", "message": "Key?",
        "requestedSchema": {"type": "object", "properties": {"apiKey": {"type": "string"}}}}"#;

    #[test]
    fn map_prints_questions_or_a_decline_and_never_fails() {
        let mapped = map(APIKEY);
        assert!(!mapped.failed);
        assert_eq!(mapped.output["questions"][0]["id"], "apiKey");
        let declined = map("{]");
        assert!(!declined.failed);
        assert_eq!(declined.output["decline"]["reason"], "malformed");
    }

    #[test]
    fn respond_builds_the_response_or_reports_the_error() {
        let ok = respond(
            APIKEY,
            r#"{"answers": [{"question_id": "apiKey", "custom_text": " T "}]}"#,
        );
        assert_eq!(
            ok,
            Outcome {
                output: json!({"action": "accept", "content": {"apiKey": "T"}}),
                failed: false
            }
        );
        let invalid = respond(APIKEY, r#"{"answers": [{"question_id": "nope"}]}"#);
        assert!(invalid.failed);
        assert_eq!(invalid.output["error"]["code"], "INVALID_ANSWER");
        let undecodable = respond(APIKEY, "nope");
        assert_eq!(undecodable.output["error"]["code"], "BAD_REQUEST");
        let declined = respond(r#"{"mode": "url"}"#, "{}");
        assert_eq!(declined.output["error"]["code"], "DECLINED");
    }
}
