//! The AskUserQuestion form, built the way `@agentclientprotocol/claude-agent-acp`
//! 0.65.0 builds it (`askUserQuestionsToCreateRequest`, spec §C).
//!
//! Key order matters to byte-level comparisons, so the objects are built in the
//! bridge's order (serde_json's `preserve_order` is on in the workspace), and
//! the bridge's JavaScript truthiness is kept: an empty description, header or
//! preview is omitted, not sent as `""`.

use serde_json::{Map, Value, json};

use crate::scenario::AskQuestion;

/// `_meta` key of an option's preview.
const OPTION_META_KEY: &str = "_claude/askUserQuestionOption";
/// `_meta` key marking a property as the custom-answer companion of a question.
const CUSTOM_ANSWER_META_KEY: &str = "_askUserQuestionCustomAnswer";
/// The companion's description in 0.65.0, the same for every question.
const CUSTOM_ANSWER_DESCRIPTION: &str =
    "Type your own answer instead of choosing an option above (optional).";
/// The form message when there is more than one question.
const MANY_QUESTIONS_MESSAGE: &str = "Please answer the following questions.";

/// The `elicitation/create` params for these questions.
pub fn ask_user_question_params(
    questions: &[AskQuestion],
    session_id: &str,
    tool_call_id: Option<&str>,
) -> Value {
    let single = questions.len() == 1;
    let mut properties = Map::new();
    for (index, question) in questions.iter().enumerate() {
        let key = format!("question_{index}");
        let options: Vec<Value> = question
            .options
            .iter()
            .map(|option| {
                let mut entry = Map::new();
                entry.insert("const".into(), json!(option.label));
                entry.insert("title".into(), json!(option.label));
                if let Some(description) = non_empty(option.description.as_deref()) {
                    entry.insert("description".into(), json!(description));
                }
                if let Some(preview) = non_empty(option.preview.as_deref()) {
                    entry.insert(
                        "_meta".into(),
                        json!({ OPTION_META_KEY: { "preview": preview } }),
                    );
                }
                Value::Object(entry)
            })
            .collect();

        let mut field = Map::new();
        field.insert(
            "type".into(),
            json!(if question.multi_select {
                "array"
            } else {
                "string"
            }),
        );
        if let Some(header) = non_empty(question.header.as_deref()) {
            field.insert("title".into(), json!(header));
        }
        // A lone question's text travels in `message`, so the field repeats it only
        // when there are several.
        if !single {
            field.insert("description".into(), json!(question.question));
        }
        if question.multi_select {
            field.insert("items".into(), json!({ "anyOf": options }));
        } else {
            field.insert("oneOf".into(), Value::Array(options));
        }
        properties.insert(key.clone(), Value::Object(field));

        properties.insert(
            format!("{key}_custom"),
            json!({
                "type": "string",
                "title": "Other",
                "description": CUSTOM_ANSWER_DESCRIPTION,
                "_meta": { CUSTOM_ANSWER_META_KEY: { "questionId": key, "isCustomAnswer": true } }
            }),
        );
    }

    let message = match questions {
        [only] => only.question.as_str(),
        _ => MANY_QUESTIONS_MESSAGE,
    };
    let mut params = Map::new();
    params.insert("mode".into(), json!("form"));
    params.insert("sessionId".into(), json!(session_id));
    if let Some(tool_call_id) = non_empty(tool_call_id) {
        params.insert("toolCallId".into(), json!(tool_call_id));
    }
    params.insert("message".into(), json!(message));
    params.insert(
        "requestedSchema".into(),
        json!({ "type": "object", "properties": properties }),
    );
    Value::Object(params)
}

fn non_empty(text: Option<&str>) -> Option<&str> {
    text.filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn questions(value: Value) -> Vec<AskQuestion> {
        serde_json::from_value(value).expect("questions parse")
    }

    /// The spec's §C single-question form, literally.
    #[test]
    fn single_question_matches_the_spec_shape_byte_for_byte() {
        let built = ask_user_question_params(
            &questions(json!([{
                "question": "Which database should the new service use?",
                "header": "Datastore",
                "multiSelect": false,
                "options": [
                    {"label": "Postgres", "description": "Relational, already operated by the team."},
                    {"label": "SQLite", "description": "Embedded; no ops burden.", "preview": "file:./app.db"},
                    {"label": "DynamoDB", "description": ""}
                ]
            }])),
            "sess-1",
            Some("tool-42"),
        );
        let expected = r#"{"mode":"form","sessionId":"sess-1","toolCallId":"tool-42","message":"Which database should the new service use?","requestedSchema":{"type":"object","properties":{"question_0":{"type":"string","title":"Datastore","oneOf":[{"const":"Postgres","title":"Postgres","description":"Relational, already operated by the team."},{"const":"SQLite","title":"SQLite","description":"Embedded; no ops burden.","_meta":{"_claude/askUserQuestionOption":{"preview":"file:./app.db"}}},{"const":"DynamoDB","title":"DynamoDB"}]},"question_0_custom":{"type":"string","title":"Other","description":"Type your own answer instead of choosing an option above (optional).","_meta":{"_askUserQuestionCustomAnswer":{"questionId":"question_0","isCustomAnswer":true}}}}}}"#;
        assert_eq!(serde_json::to_string(&built).expect("serializes"), expected);
    }

    /// The spec's §C two-question form: the generic message, per-field
    /// descriptions, and `items.anyOf` for the multi-select.
    #[test]
    fn two_questions_use_the_generic_message_and_field_descriptions() {
        let built = ask_user_question_params(
            &questions(json!([
                {"question": "Which database?", "header": "Datastore",
                 "options": [{"label": "Postgres"}]},
                {"question": "Which environments should it deploy to?", "header": "Envs",
                 "multiSelect": true,
                 "options": [{"label": "dev"}, {"label": "staging"}, {"label": "prod"}]}
            ])),
            "sess-1",
            None,
        );
        assert_eq!(built["message"], "Please answer the following questions.");
        assert!(built.get("toolCallId").is_none());
        assert_eq!(
            built["requestedSchema"]["properties"]["question_1"],
            json!({
                "type": "array",
                "title": "Envs",
                "description": "Which environments should it deploy to?",
                "items": { "anyOf": [
                    { "const": "dev", "title": "dev" },
                    { "const": "staging", "title": "staging" },
                    { "const": "prod", "title": "prod" }
                ] }
            })
        );
        assert_eq!(
            built["requestedSchema"]["properties"]["question_0"]["description"],
            "Which database?"
        );
        assert_eq!(
            built["requestedSchema"]["properties"]["question_1_custom"]["_meta"],
            json!({"_askUserQuestionCustomAnswer": {"questionId": "question_1", "isCustomAnswer": true}})
        );
        assert!(built["requestedSchema"].get("required").is_none());
    }

    /// Conformance with the forms captured from the real bridge 0.65.0 by the
    /// elicitation crate (`crates/elicitation/tests/fixtures/bridge`).
    #[test]
    fn matches_every_form_captured_from_bridge_0_65_0() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../elicitation/tests/fixtures/bridge");
        let inputs: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("inputs.json")).expect("captured inputs exist"),
        )
        .expect("inputs parse");
        let session_id = inputs["session_id"].as_str().expect("session id");
        let tool_call_id = inputs["tool_call_id"].as_str().expect("tool call id");
        let sets = inputs["question_sets"].as_object().expect("question sets");
        assert!(sets.len() >= 3, "expected several captured question sets");
        for (name, set) in sets {
            let captured: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(format!("v0.65.0-{name}.json")))
                    .expect("captured form exists"),
            )
            .expect("captured form parses");
            let built =
                ask_user_question_params(&questions(set.clone()), session_id, Some(tool_call_id));
            assert_eq!(
                serde_json::to_string(&built).expect("serializes"),
                serde_json::to_string(&captured).expect("serializes"),
                "question set `{name}`"
            );
        }
    }
}
