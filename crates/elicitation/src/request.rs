//! `elicitation/create` params → questions (spec rules 1–5, D1, D2, D10, docs/architecture.md §7).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::companion::{self, Companion};
use crate::limits::{MAX_OPTIONS, MAX_PARAMS_BYTES, MAX_PROPERTIES};
use crate::order::compare_keys;
use crate::question::Question;
use crate::schema::{Context, Property, TooManyOptions, classify};
use crate::size::encoded_len_within;
use DeclineReason::{
    Malformed, MissingSessionId, NoQuestions, NotFormMode, RequestScope, TooLarge,
};

/// An `elicitation/create` request that maps to at least one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MappedElicitation {
    /// The ACP session id the request is scoped to.
    pub session_id: String,
    /// The tool call that raised it (present for the Claude bridge's AskUserQuestion).
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The request's human-readable message.
    pub message: String,
    /// The questions, in D1 order.
    pub questions: Vec<Question>,
}

impl MappedElicitation {
    /// The question with this id (its verbatim schema key), if any.
    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }
}

/// Why a request was declined without reaching the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    /// `mode` is not `"form"` (for example `"url"`).
    NotFormMode,
    /// The request is scoped by `requestId` rather than `sessionId`.
    RequestScope,
    /// Neither a `sessionId` nor a `requestId`.
    MissingSessionId,
    /// The params are not the shape of an elicitation request.
    Malformed,
    /// The schema maps to zero questions.
    NoQuestions,
    /// Past a limit of [`crate::limits`].
    TooLarge,
}

/// A decline decision with a human-readable detail for logs and debugging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("declined ({reason:?}): {detail}")]
pub struct Decline {
    /// The category.
    pub reason: DeclineReason,
    /// What exactly was wrong.
    pub detail: String,
}

/// Maps raw `elicitation/create` params. Never panics.
///
/// Checks, in order: the params are an object (else [`DeclineReason::Malformed`]);
/// `mode` is a string (missing or not a string: `Malformed`) equal to `"form"` (else
/// [`DeclineReason::NotFormMode`]); the scope: `requestId` with `sessionId` is
/// `Malformed`, `requestId` alone [`DeclineReason::RequestScope`], neither (or an empty
/// `sessionId`) [`DeclineReason::MissingSessionId`] — a `null` counts as absent;
/// `sessionId`, `toolCallId` and `message` are strings when present (else `Malformed`);
/// the encoded params fit [`MAX_PARAMS_BYTES`] (else [`DeclineReason::TooLarge`]);
/// `requestedSchema.properties` is an object of at most [`MAX_PROPERTIES`] entries
/// (missing or not an object: [`DeclineReason::NoQuestions`]; too many: `TooLarge`);
/// every select question has at most [`crate::limits::MAX_OPTIONS`] options
/// (`TooLarge`); at least one property is a question (else `NoQuestions`).
pub fn map_request(params: &Value) -> Result<MappedElicitation, Decline> {
    let Some(obj) = params.as_object() else {
        return Err(decline(Malformed, "params are not a JSON object"));
    };
    match obj.get("mode") {
        Some(Value::String(mode)) if mode == "form" => {}
        Some(Value::String(mode)) => {
            return Err(decline(
                NotFormMode,
                format!("mode is `{mode}`, not `form`"),
            ));
        }
        Some(Value::Null) | None => return Err(decline(Malformed, "mode is missing")),
        Some(_) => return Err(decline(Malformed, "mode is not a string")),
    }
    let session_id = present(obj, "sessionId");
    match (session_id, present(obj, "requestId")) {
        (Some(_), Some(_)) => {
            return Err(decline(Malformed, "both sessionId and requestId are set"));
        }
        (None, Some(_)) => {
            return Err(decline(
                RequestScope,
                "request-scoped (requestId), not session-scoped",
            ));
        }
        _ => {}
    }
    let session_id = match session_id {
        None => return Err(decline(MissingSessionId, "sessionId is missing")),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(decline(MissingSessionId, "sessionId is empty"));
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(decline(Malformed, "sessionId is not a string")),
    };
    let tool_call_id = match present(obj, "toolCallId") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(decline(Malformed, "toolCallId is not a string")),
    };
    let message = match present(obj, "message") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(decline(Malformed, "message is not a string")),
    };
    if encoded_len_within(params, MAX_PARAMS_BYTES).is_none() {
        return Err(decline(
            TooLarge,
            format!("params exceed {MAX_PARAMS_BYTES} bytes as JSON"),
        ));
    }

    let schema = obj.get("requestedSchema").and_then(Value::as_object);
    let Some(properties) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return Err(decline(
            NoQuestions,
            "requestedSchema has no properties object",
        ));
    };
    if properties.len() > MAX_PROPERTIES {
        return Err(decline(
            TooLarge,
            format!(
                "{} properties, more than {MAX_PROPERTIES}",
                properties.len()
            ),
        ));
    }
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|keys| keys.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let ctx = Context {
        message: &message,
        required: &required,
    };

    let mut questions = Vec::new();
    let mut companions = Vec::new();
    for (key, property) in properties {
        match classify(key, property, &ctx) {
            Ok(Property::Question(q)) => questions.push(q),
            Ok(Property::Companion { target, custom }) => {
                companions.push(Companion { target, custom });
            }
            Ok(Property::Ignored) => {}
            Err(TooManyOptions { count }) => {
                return Err(decline(
                    TooLarge,
                    format!("property `{key}` has {count}+ options, more than {MAX_OPTIONS}"),
                ));
            }
        }
    }
    // D2 before D1: companions never take a position of their own.
    companion::attach(&mut questions, companions);
    questions.sort_by(|a, b| compare_keys(&a.id, &b.id));
    if questions.is_empty() {
        return Err(decline(NoQuestions, "no property maps to a question"));
    }
    Ok(MappedElicitation {
        session_id,
        tool_call_id,
        message,
        questions,
    })
}

/// The field's value unless it is absent or `null`.
fn present<'a>(obj: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    obj.get(field).filter(|v| !v.is_null())
}

fn decline(reason: DeclineReason, detail: impl Into<String>) -> Decline {
    Decline {
        reason,
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(properties: Value) -> Value {
        json!({"mode": "form", "sessionId": "s", "message": "m",
               "requestedSchema": {"type": "object", "properties": properties}})
    }

    fn reason(params: &Value) -> DeclineReason {
        map_request(params).expect_err("declined").reason
    }

    #[test]
    fn envelope_declines() {
        let ok = form(json!({"a": {"type": "string"}}));
        assert!(map_request(&ok).is_ok());
        let with = |field: &str, v: Value| {
            let mut p = ok.clone();
            p[field] = v;
            p
        };
        let without = |field: &str| {
            let mut p = ok.clone();
            p.as_object_mut().expect("object").remove(field);
            p
        };
        assert_eq!(reason(&json!([])), Malformed);
        assert_eq!(reason(&without("mode")), Malformed);
        assert_eq!(reason(&with("mode", json!(1))), Malformed);
        assert_eq!(reason(&with("mode", json!("url"))), NotFormMode);
        assert_eq!(reason(&with("requestId", json!("r"))), Malformed);
        let mut request_scoped = with("requestId", json!(7));
        request_scoped
            .as_object_mut()
            .expect("object")
            .remove("sessionId");
        assert_eq!(reason(&request_scoped), RequestScope);
        assert_eq!(reason(&without("sessionId")), MissingSessionId);
        assert_eq!(reason(&with("sessionId", json!(null))), MissingSessionId);
        assert_eq!(reason(&with("sessionId", json!(""))), MissingSessionId);
        assert_eq!(reason(&with("sessionId", json!(5))), Malformed);
        assert_eq!(reason(&with("toolCallId", json!(5))), Malformed);
        assert_eq!(reason(&with("message", json!({}))), Malformed);
        assert!(map_request(&with("requestId", json!(null))).is_ok());
        assert_eq!(map_request(&without("message")).expect("maps").message, "");
    }

    #[test]
    fn schema_declines() {
        let mut no_schema = form(json!({}));
        no_schema
            .as_object_mut()
            .expect("object")
            .remove("requestedSchema");
        assert_eq!(reason(&no_schema), NoQuestions);
        let mut schema_not_object = form(json!({}));
        schema_not_object["requestedSchema"] = json!("x");
        assert_eq!(reason(&schema_not_object), NoQuestions);
        assert_eq!(reason(&form(json!([]))), NoQuestions);
        assert_eq!(reason(&form(json!({}))), NoQuestions);
        assert_eq!(reason(&form(json!({"x": {"type": "object"}}))), NoQuestions);
    }

    #[test]
    fn required_reads_string_keys_only() {
        let mut p = form(json!({"a": {"type": "string"}, "b": {"type": "boolean"}}));
        p["requestedSchema"]["required"] = json!(["b", 3, "zzz"]);
        let m = map_request(&p).expect("maps");
        assert!(!m.questions[0].required);
        assert!(m.questions[1].required);
    }
}
