//! Shared helpers for the integration tests: fixtures and answer builders.

use kandev_elicitation::{
    Answer, ElicitationResponse, MappedElicitation, OperatorAnswer, build_response, map_request,
};
use serde_json::Value;

/// A fixture file of `tests/fixtures`, parsed.
pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// A fixture mapped; panics when it is declined.
pub fn mapped(name: &str) -> MappedElicitation {
    map_request(&fixture(name)).unwrap_or_else(|d| panic!("{name} declined: {d}"))
}

/// One answer.
pub fn answer(question_id: &str, selected: &[&str], text: &str) -> Answer {
    Answer {
        question_id: question_id.to_owned(),
        selected_options: selected.iter().map(|s| s.to_string()).collect(),
        custom_text: text.to_owned(),
    }
}

/// A submission (not rejected) of `answers`.
pub fn submission(answers: Vec<Answer>) -> OperatorAnswer {
    OperatorAnswer {
        answers,
        rejected: false,
        reject_reason: String::new(),
    }
}

/// Builds the response for a submission and returns it as wire JSON; panics on an
/// [`kandev_elicitation::AnswerError`].
pub fn respond(m: &MappedElicitation, answers: Vec<Answer>) -> Value {
    match build_response(m, &submission(answers)) {
        Ok(r) => r.to_json(),
        Err(e) => panic!("answer rejected: {e}"),
    }
}

/// The content map of an accept; panics on any other action.
pub fn content(response: &ElicitationResponse) -> &serde_json::Map<String, Value> {
    match response {
        ElicitationResponse::Accept { content } => content,
        other => panic!("expected accept, got {other:?}"),
    }
}
