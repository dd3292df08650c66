//! `elicitation/create` params → questions: the mapping ACs, D1/D2/D10 and the §7
//! extensions, against the fixtures of `tests/fixtures`.

use crate::common::{fixture, mapped};
use kandev_elicitation::limits::{MAX_OPTIONS, MAX_PARAMS_BYTES, MAX_PROPERTIES};
use kandev_elicitation::{
    Constraints, CustomAnswer, DeclineReason, MappedElicitation, Question, QuestionKind,
    map_request,
};
use serde_json::{Value, json};

fn form(properties: Value) -> Value {
    json!({"mode": "form", "sessionId": "sess", "message": "The message",
           "requestedSchema": {"type": "object", "properties": properties}})
}

fn map(params: &Value) -> MappedElicitation {
    map_request(params).unwrap_or_else(|d| panic!("declined: {d}"))
}

fn declined(params: &Value) -> DeclineReason {
    match map_request(params) {
        Ok(m) => panic!("expected a decline, mapped {m:?}"),
        Err(d) => d.reason,
    }
}

fn ids(m: &MappedElicitation) -> Vec<&str> {
    m.questions.iter().map(|q| q.id.as_str()).collect()
}

/// The key of `q`'s companion, if it has one.
fn companion_key(q: &Question) -> Option<&str> {
    q.custom_answer.as_ref().map(|c| c.key.as_str())
}

fn option_ids(m: &MappedElicitation, question: &str) -> Vec<String> {
    m.question(question)
        .unwrap_or_else(|| panic!("no question {question}"))
        .options
        .iter()
        .map(|o| o.id.clone())
        .collect()
}

#[test]
fn single_question_fixture_maps_envelope_fields() {
    let m = mapped("askuserquestion-single.json");
    assert_eq!(m.session_id, "sess-1");
    assert_eq!(m.tool_call_id.as_deref(), Some("tool-42"));
    assert_eq!(m.message, "Which database should the new service use?");
    let q = &m.questions[0];
    assert_eq!(q.title.as_deref(), Some("Datastore"));
    assert_eq!(
        q.options[0].description.as_deref(),
        Some("Relational, already operated by the team.")
    );
    assert_eq!(q.options[2].description, None);
    assert!(!q.required);
    assert_eq!(q.default, None);
    assert!(q.constraints.is_empty());
}

#[test]
fn ac_04_one_oneof_property_with_companion_maps_to_one_question() {
    let m = mapped("askuserquestion-single.json");
    assert_eq!(ids(&m), ["question_0"]);
    let q = &m.questions[0];
    assert_eq!(q.kind, QuestionKind::SingleSelect);
    assert_eq!(
        option_ids(&m, "question_0"),
        ["Postgres", "SQLite", "DynamoDB"]
    );
    assert_eq!(
        q.custom_answer,
        Some(CustomAnswer {
            key: "question_0_custom".into(),
            title: Some("Other".into()),
            description: Some(
                "Type your own answer instead of choosing an option above (optional).".into()
            ),
        })
    );
}

#[test]
fn ac_04a_mcp_passthrough_string_maps_to_one_zero_option_text_question() {
    let m = mapped("mcp-passthrough.json");
    assert_eq!(ids(&m), ["apiKey"]);
    let q = &m.questions[0];
    assert_eq!(q.kind, QuestionKind::Text);
    assert!(q.options.is_empty());
    assert_eq!(q.custom_answer, None);
    assert!(q.text_goes_to_own_key());
    assert_eq!(m.tool_call_id, None);
}

#[test]
fn ac_05_two_questions_take_their_prompts_from_their_descriptions() {
    let m = mapped("askuserquestion-two-questions.json");
    assert_eq!(ids(&m), ["question_0", "question_1"]);
    assert_eq!(
        m.questions[0].prompt,
        "Which database should the new service use?"
    );
    assert_eq!(
        m.questions[1].prompt,
        "Which environments should it deploy to?"
    );
    for q in &m.questions {
        assert_ne!(q.prompt, m.message);
    }
}

#[test]
fn ac_06_single_question_without_description_takes_the_message_as_prompt() {
    let m = mapped("askuserquestion-single.json");
    assert_eq!(
        m.questions[0].prompt,
        "Which database should the new service use?"
    );
    assert_eq!(mapped("colour-k.json").questions[0].prompt, "Pick a colour");
}

#[test]
fn ac_07_array_of_anyof_maps_to_one_multi_select_with_one_option_per_entry() {
    let m = mapped("askuserquestion-two-questions.json");
    let q = m.question("question_1").expect("question_1");
    assert_eq!(q.kind, QuestionKind::MultiSelect);
    assert_eq!(q.title.as_deref(), Some("Envs"));
    assert_eq!(option_ids(&m, "question_1"), ["dev", "staging", "prod"]);
    assert_eq!(companion_key(q), Some("question_1_custom"));
}

#[test]
fn ac_12c_refusal_fallback_maps_to_one_two_option_question_prompted_by_the_message() {
    let m = mapped("refusal-fallback.json");
    assert_eq!(ids(&m), ["choice"]);
    let q = &m.questions[0];
    assert_eq!(q.kind, QuestionKind::SingleSelect);
    assert_eq!(option_ids(&m, "choice"), ["retry_fallback", "cancelled"]);
    assert_eq!(q.options[0].label, "Retry with Opus");
    assert_eq!(
        q.prompt,
        "Fable declined this request (safety). Retry with Opus?\n\nguidance"
    );
    assert_eq!(q.title, None);
    assert_eq!(q.custom_answer, None);
}

#[test]
fn ac_12d_eleven_questions_map_to_the_identical_order_one_hundred_times() {
    let params = fixture("eleven-questions.json");
    let expected: Vec<String> = (0..=10).map(|i| format!("question_{i}")).collect();
    let first = map(&params);
    for _ in 0..100 {
        let m = map(&params);
        assert_eq!(m, first);
        assert_eq!(ids(&m), expected);
    }
    let pos = |k: &str| ids(&first).iter().position(|id| *id == k).expect("present");
    assert!(pos("question_2") < pos("question_10"));
}

#[test]
fn ac_12d_order_does_not_depend_on_declaration_order() {
    let params = fixture("eleven-questions.json");
    let props = params["requestedSchema"]["properties"]
        .as_object()
        .expect("properties");
    let mut reversed = serde_json::Map::new();
    for (k, v) in props.iter().rev() {
        reversed.insert(k.clone(), v.clone());
    }
    let mut params2 = params.clone();
    params2["requestedSchema"]["properties"] = Value::Object(reversed);
    assert_eq!(map(&params2), map(&params));
}

#[test]
fn ac_12e_companion_naming_no_property_is_ignored() {
    let m = map(&form(json!({
        "q": {"type": "string", "oneOf": [{"const": "a"}]},
        "orphan": {"type": "string",
                   "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "nope", "isCustomAnswer": true}}}
    })));
    assert_eq!(ids(&m), ["q"]);
    assert_eq!(m.questions[0].custom_answer, None);
    // Alone, an orphan companion leaves nothing to ask.
    let only = form(json!({"orphan": {"type": "string",
        "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "nope"}}}}));
    assert_eq!(declined(&only), DeclineReason::NoQuestions);
}

#[test]
fn d2_two_companions_for_one_question_first_under_d1_wins() {
    let marker = |target: &str| {
        json!({"type": "string", "title": "Other",
               "_meta": {"_askUserQuestionCustomAnswer": {"questionId": target}}})
    };
    // Declared loser first, so a first-seen rule would pick the wrong one.
    let m = map(&form(json!({
        "q": {"type": "string", "oneOf": [{"const": "a"}]},
        "other_10": marker("q"),
        "other_2": marker("q"),
    })));
    assert_eq!(ids(&m), ["q"]);
    assert_eq!(companion_key(&m.questions[0]), Some("other_2"));
}

#[test]
fn d2_companion_is_found_by_marker_never_by_suffix() {
    // `q_custom` has no marker: it is a rule-4 question, not q's companion.
    let m = map(&form(json!({
        "q": {"type": "string", "oneOf": [{"const": "a"}]},
        "q_custom": {"type": "string"},
    })));
    assert_eq!(ids(&m), ["q", "q_custom"]);
    assert_eq!(m.questions[0].custom_answer, None);
    // AC-11's fixture: the companion key bears no relation to its question's key.
    let m = mapped("custom-answer-arbitrary-key.json");
    assert_eq!(ids(&m), ["release_name"]);
    assert_eq!(companion_key(&m.questions[0]), Some("answer_freeform"));
}

#[test]
fn d2_companion_naming_a_companion_or_an_ignored_property_is_ignored() {
    let m = map(&form(json!({
        "q": {"type": "string"},
        "obj": {"type": "object"},
        "c1": {"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "obj"}}},
        "c2": {"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "c1"}}},
        "c3": {"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "c3"}}},
    })));
    assert_eq!(ids(&m), ["q"]);
    assert_eq!(m.questions[0].custom_answer, None);
}

#[test]
fn d2_companion_attaches_to_a_rule_4_text_question() {
    let m = map(&form(json!({
        "name": {"type": "string"},
        "name_other": {"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "name"}}},
    })));
    assert_eq!(ids(&m), ["name"]);
    assert_eq!(companion_key(&m.questions[0]), Some("name_other"));
    assert!(!m.questions[0].text_goes_to_own_key());
}

#[test]
fn d10_prompt_falls_back_to_title_then_key_without_message() {
    let mut params = form(json!({
        "titled": {"type": "string", "title": "The title"},
        "bare": {"type": "string"},
        "described": {"type": "string", "title": "T", "description": "The description"},
    }));
    params["message"] = json!("");
    let m = map(&params);
    let prompt = |id: &str| m.question(id).expect("question").prompt.clone();
    assert_eq!(prompt("titled"), "The title");
    assert_eq!(prompt("bare"), "bare");
    assert_eq!(prompt("described"), "The description");
    assert_eq!(
        m.question("titled").expect("q").title.as_deref(),
        Some("The title")
    );
    assert_eq!(m.question("bare").expect("q").title, None);
}

#[test]
fn rule_1_and_2_with_every_entry_filtered_stay_zero_option_questions() {
    let m = map(&form(json!({
        "one": {"type": "string", "oneOf": [{"title": "no const"}, {"const": 5}, null]},
        "many": {"type": "array", "items": {"anyOf": []}},
    })));
    assert_eq!(ids(&m), ["many", "one"]);
    for q in &m.questions {
        assert!(q.options.is_empty());
        assert!(q.text_goes_to_own_key());
    }
    assert_eq!(
        m.question("one").expect("q").kind,
        QuestionKind::SingleSelect
    );
    assert_eq!(
        m.question("many").expect("q").kind,
        QuestionKind::MultiSelect
    );
}

#[test]
fn rule_1_option_label_is_title_or_const() {
    let m = map(&form(json!({"q": {"type": "string", "oneOf": [
        {"const": "a", "title": "Alpha", "description": "first"},
        {"const": "b"},
        {"const": "c", "title": ""},
        {"title": "skipped"}
    ]}})));
    let labels: Vec<_> = m.questions[0]
        .options
        .iter()
        .map(|o| (o.id.as_str(), o.label.as_str(), o.description.as_deref()))
        .collect();
    assert_eq!(
        labels,
        [
            ("a", "Alpha", Some("first")),
            ("b", "b", None),
            ("c", "c", None)
        ]
    );
}

#[test]
fn ac_16_url_mode_is_declined() {
    let mut params = fixture("askuserquestion-single.json");
    params["mode"] = json!("url");
    params["url"] = json!("https://example.com/auth");
    assert_eq!(declined(&params), DeclineReason::NotFormMode);
}

#[test]
fn ac_17_request_scope_is_declined() {
    let mut params = fixture("askuserquestion-single.json");
    let obj = params.as_object_mut().expect("object");
    obj.remove("sessionId");
    obj.insert("requestId".into(), json!("req-1"));
    assert_eq!(declined(&params), DeclineReason::RequestScope);
}

#[test]
fn both_session_and_request_scope_is_malformed() {
    let mut params = fixture("askuserquestion-single.json");
    params["requestId"] = json!("req-1");
    assert_eq!(declined(&params), DeclineReason::Malformed);
}

#[test]
fn missing_session_id_is_declined() {
    let mut params = fixture("askuserquestion-single.json");
    params.as_object_mut().expect("object").remove("sessionId");
    assert_eq!(declined(&params), DeclineReason::MissingSessionId);
}

#[test]
fn missing_mode_and_wrongly_typed_fields_are_malformed() {
    for (field, value) in [
        ("mode", Value::Null),
        ("sessionId", json!(42)),
        ("toolCallId", json!(["x"])),
        ("message", json!(1)),
    ] {
        let mut params = fixture("askuserquestion-single.json");
        params[field] = value;
        assert_eq!(declined(&params), DeclineReason::Malformed, "{field}");
    }
    assert_eq!(declined(&json!("params")), DeclineReason::Malformed);
    assert_eq!(declined(&Value::Null), DeclineReason::Malformed);
}

#[test]
fn ac_18_empty_properties_are_declined() {
    assert_eq!(declined(&form(json!({}))), DeclineReason::NoQuestions);
}

#[test]
fn ac_18_only_unrecognised_properties_are_declined() {
    let params = form(json!({
        "obj": {"type": "object", "properties": {}},
        "nul": {"type": "null"},
        "untyped": {"title": "no type"},
        "union": {"type": ["string", "null"]},
        "array_of_strings": {"type": "array", "items": {"type": "string"}},
        "not_a_schema": 42,
    }));
    assert_eq!(declined(&params), DeclineReason::NoQuestions);
}

#[test]
fn ac_18_absent_properties_are_declined() {
    let mut params = form(json!({}));
    params["requestedSchema"]
        .as_object_mut()
        .expect("schema")
        .remove("properties");
    assert_eq!(declined(&params), DeclineReason::NoQuestions);
    params
        .as_object_mut()
        .expect("object")
        .remove("requestedSchema");
    assert_eq!(declined(&params), DeclineReason::NoQuestions);
}

#[test]
fn unrecognised_properties_are_ignored_beside_recognised_ones() {
    let m = mapped("extended-vocabulary.json");
    assert!(m.question("metadata").is_none());
    assert_eq!(m.questions.len(), 10);
}

#[test]
fn extension_types_map_to_their_kinds() {
    let m = mapped("extended-vocabulary.json");
    let kind = |id: &str| m.question(id).expect("question").kind;
    assert_eq!(kind("confirm"), QuestionKind::Boolean);
    assert_eq!(kind("replicas"), QuestionKind::Integer);
    assert_eq!(kind("cpu"), QuestionKind::Number);
    assert_eq!(kind("region"), QuestionKind::SingleSelect);
    assert_eq!(kind("features"), QuestionKind::MultiSelect);
    for text in ["owner", "service", "docs", "launch", "window"] {
        assert_eq!(kind(text), QuestionKind::Text, "{text}");
    }
    assert_eq!(
        ids(&m),
        [
            "confirm", "cpu", "docs", "features", "launch", "owner", "region", "replicas",
            "service", "window"
        ]
    );
}

#[test]
fn extension_string_enum_is_a_single_select_labelled_by_enum_names() {
    let m = mapped("extended-vocabulary.json");
    let q = m.question("region").expect("region");
    let options: Vec<_> = q
        .options
        .iter()
        .map(|o| (o.id.as_str(), o.label.as_str()))
        .collect();
    assert_eq!(
        options,
        [
            ("eu-west-1", "Ireland"),
            ("us-east-1", "Virginia"),
            ("ap-south-1", "Mumbai")
        ]
    );
    assert!(!q.text_goes_to_own_key());
}

#[test]
fn extension_items_enum_and_items_oneof_are_multi_selects() {
    let m = mapped("extended-vocabulary.json");
    assert_eq!(
        option_ids(&m, "features"),
        ["metrics", "tracing", "profiling"]
    );
    let m = map(&form(json!({"tags": {"type": "array",
        "items": {"oneOf": [{"const": "x", "title": "X"}, {"const": "y"}]}}})));
    assert_eq!(m.questions[0].kind, QuestionKind::MultiSelect);
    assert_eq!(option_ids(&m, "tags"), ["x", "y"]);
    assert_eq!(m.questions[0].options[0].label, "X");
}

#[test]
fn extension_defaults_are_kept_verbatim() {
    let m = mapped("extended-vocabulary.json");
    let default = |id: &str| m.question(id).expect("question").default.clone();
    assert_eq!(default("confirm"), Some(json!(false)));
    assert_eq!(default("replicas"), Some(json!(3)));
    assert_eq!(default("region"), Some(json!("eu-west-1")));
    assert_eq!(default("cpu"), None);
    let m = map(&form(
        json!({"x": {"type": "string", "default": {"nested": [1, "two"]}}}),
    ));
    assert_eq!(m.questions[0].default, Some(json!({"nested": [1, "two"]})));
}

#[test]
fn extension_required_comes_from_the_schema_required_array() {
    let m = mapped("extended-vocabulary.json");
    let required: Vec<&str> = m
        .questions
        .iter()
        .filter(|q| q.required)
        .map(|q| q.id.as_str())
        .collect();
    assert_eq!(required, ["confirm", "service"]);
}

#[test]
fn extension_constraints_are_carried_per_kind() {
    let m = mapped("extended-vocabulary.json");
    let c = |id: &str| m.question(id).expect("question").constraints.clone();
    assert_eq!(
        c("service"),
        Constraints {
            min_length: Some(3),
            max_length: Some(20),
            pattern: Some("^[a-z][a-z0-9-]*$".into()),
            ..Constraints::default()
        }
    );
    assert_eq!(c("owner").format.as_deref(), Some("email"));
    assert_eq!(c("docs").format.as_deref(), Some("uri"));
    assert_eq!(c("launch").format.as_deref(), Some("date"));
    assert_eq!(c("window").format.as_deref(), Some("date-time"));
    assert_eq!(
        (c("replicas").minimum, c("replicas").maximum),
        (Some(1.0), Some(10.0))
    );
    assert_eq!(
        (c("cpu").minimum, c("cpu").maximum),
        (Some(0.25), Some(8.0))
    );
    assert_eq!(
        (c("features").min_items, c("features").max_items),
        (Some(1), Some(2))
    );
    assert!(c("confirm").is_empty());
    assert!(c("region").is_empty());
}

#[test]
fn extensions_do_not_change_rules_1_to_4() {
    // The §C frame maps to exactly the spec's question whatever extensions exist.
    let m = mapped("askuserquestion-two-questions.json");
    for q in &m.questions {
        assert!(q.constraints.is_empty());
        assert!(!q.required);
        assert_eq!(q.default, None);
    }
    // A marker beats `enum` (rule 3 before the extensions) ...
    let m = map(&form(json!({
        "q": {"type": "string"},
        "c": {"type": "string", "enum": ["a"], "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "q"}}}
    })));
    assert_eq!(ids(&m), ["q"]);
    // ... and `oneOf` beats `enum` (rule 1).
    let m = map(&form(
        json!({"q": {"type": "string", "oneOf": [{"const": "one"}], "enum": ["e"]}}),
    ));
    assert_eq!(option_ids(&m, "q"), ["one"]);
}

#[test]
fn size_limit_more_than_max_properties_is_too_large() {
    let props = |n: usize| {
        let map: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("q{i}"), json!({"type": "string"})))
            .collect();
        Value::Object(map)
    };
    assert_eq!(
        map(&form(props(MAX_PROPERTIES))).questions.len(),
        MAX_PROPERTIES
    );
    assert_eq!(
        declined(&form(props(MAX_PROPERTIES + 1))),
        DeclineReason::TooLarge
    );
}

#[test]
fn size_limit_more_than_max_options_is_too_large() {
    let entries =
        |n: usize| -> Vec<Value> { (0..n).map(|i| json!({"const": format!("o{i}")})).collect() };
    let ok = map(&form(
        json!({"q": {"type": "string", "oneOf": entries(MAX_OPTIONS)}}),
    ));
    assert_eq!(ok.questions[0].options.len(), MAX_OPTIONS);
    for params in [
        form(json!({"q": {"type": "string", "oneOf": entries(MAX_OPTIONS + 1)}})),
        form(json!({"q": {"type": "array", "items": {"anyOf": entries(MAX_OPTIONS + 1)}}})),
        form(
            json!({"q": {"type": "string", "enum": (0..=MAX_OPTIONS).map(|i| i.to_string()).collect::<Vec<_>>()}}),
        ),
    ] {
        assert_eq!(declined(&params), DeclineReason::TooLarge);
    }
}

#[test]
fn size_limit_params_past_max_bytes_are_too_large() {
    let base = form(json!({"q": {"type": "string", "description": ""}}));
    let base_len = serde_json::to_string(&base).expect("json").len();
    let fill = |n: usize| {
        let mut p = base.clone();
        p["requestedSchema"]["properties"]["q"]["description"] = json!("x".repeat(n));
        p
    };
    let at_limit = fill(MAX_PARAMS_BYTES - base_len);
    assert_eq!(
        serde_json::to_string(&at_limit).expect("json").len(),
        MAX_PARAMS_BYTES
    );
    assert!(map_request(&at_limit).is_ok());
    assert_eq!(
        declined(&fill(MAX_PARAMS_BYTES - base_len + 1)),
        DeclineReason::TooLarge
    );
    // Bytes anywhere in the params count, not only inside the schema.
    let mut padded = base.clone();
    padded["_meta"] = json!({"pad": "y".repeat(MAX_PARAMS_BYTES)});
    assert_eq!(declined(&padded), DeclineReason::TooLarge);
}

#[test]
fn mapped_elicitation_round_trips_through_its_wire_shape() {
    for name in [
        "askuserquestion-single.json",
        "askuserquestion-two-questions.json",
        "colour-k.json",
        "refusal-fallback.json",
        "mcp-passthrough.json",
        "custom-answer-arbitrary-key.json",
        "eleven-questions.json",
        "extended-vocabulary.json",
    ] {
        let m = mapped(name);
        let wire = serde_json::to_value(&m).expect("serializes");
        let back: MappedElicitation = serde_json::from_value(wire).expect("deserializes");
        assert_eq!(back, m, "{name}");
    }
}

#[test]
fn question_wire_shape_matches_architecture_4_3() {
    let m = mapped("askuserquestion-two-questions.json");
    let wire = serde_json::to_value(&m.questions[0]).expect("serializes");
    assert_eq!(
        wire,
        json!({
            "id": "question_0", "kind": "single_select", "title": "Datastore",
            "prompt": "Which database should the new service use?",
            "options": [
                {"id": "Postgres", "label": "Postgres", "description": "Relational, already operated by the team."},
                // Claude's option preview travels with its option (issue 26).
                {"id": "SQLite", "label": "SQLite", "description": "Embedded; no ops burden.",
                 "preview": "file:./app.db"},
                {"id": "DynamoDB", "label": "DynamoDB", "description": null}
            ],
            "custom_answer": {"key": "question_0_custom", "title": "Other",
                "description": "Type your own answer instead of choosing an option above (optional)."},
            "required": false, "default": null, "constraints": {}
        })
    );
}
