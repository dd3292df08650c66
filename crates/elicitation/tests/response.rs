//! Operator answer + mapped elicitation → ACP response: the response ACs, the F10
//! validation errors and the §7 typed values and constraints.

use crate::common::{answer, content, mapped, respond, submission};
use kandev_elicitation::{
    Answer, AnswerError, ElicitationResponse, MappedElicitation, OperatorAnswer, build_response,
    map_request,
};
use serde_json::{Value, json};

const COLOUR: &str = "colour-k.json";
const SINGLE: &str = "askuserquestion-single.json";
const TWO: &str = "askuserquestion-two-questions.json";
const MCP: &str = "mcp-passthrough.json";
const REFUSAL: &str = "refusal-fallback.json";
const EXT: &str = "extended-vocabulary.json";

fn form(properties: Value) -> MappedElicitation {
    map_request(&json!({"mode": "form", "sessionId": "sess", "message": "m",
        "requestedSchema": {"type": "object", "properties": properties}}))
    .unwrap_or_else(|d| panic!("declined: {d}"))
}

/// The wire response to `answers` on fixture `name`.
fn respond_to(name: &str, answers: Vec<Answer>) -> Value {
    respond(&mapped(name), answers)
}

/// An accept carrying `content`.
fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn rejected_answer(m: &MappedElicitation, answers: Vec<Answer>) -> AnswerError {
    match build_response(m, &submission(answers)) {
        Ok(r) => panic!("expected an answer error, built {}", r.to_json()),
        Err(e) => e,
    }
}

/// The error `answers` on fixture `name` are refused with.
fn refused(name: &str, answers: Vec<Answer>) -> AnswerError {
    rejected_answer(&mapped(name), answers)
}

fn skip(answers: Vec<Answer>) -> OperatorAnswer {
    OperatorAnswer {
        answers,
        rejected: true,
        reject_reason: "not now".into(),
    }
}

/// One `#[test]` per row: on the form `$form`, each list of answers is sent as an
/// accept carrying exactly `$content`.
macro_rules! accepts {
    ($($name:ident($form:expr) { $([$($answer:expr),* $(,)?] => $content:tt),+ $(,)? })*) => {
        $(
            #[test]
            fn $name() {
                let m = $form;
                $(assert_eq!(respond(&m, vec![$($answer),*]), accept(json!($content)));)+
            }
        )*
    };
}

// ---- the ACs -------------------------------------------------------------------

accepts! {
    ac_10_selected_label_is_sent_at_the_schema_key(mapped(COLOUR)) {
        [answer("question_0", &["Red"], "")] => {"question_0": "Red"},
    }
    ac_11a_mcp_passthrough_free_text_goes_to_its_own_key(mapped(MCP)) {
        [answer("apiKey", &[], "T")] => {"apiKey": "T"},
    }
    ac_12_two_selected_options_are_sent_as_an_array(mapped(TWO)) {
        [answer("question_1", &["dev", "staging"], "")] => {"question_1": ["dev", "staging"]},
    }
    ac_12i_selection_and_text_send_the_companion_only(mapped(SINGLE)) {
        [answer("question_0", &["SQLite"], "  Cockroach  ")] => {"question_0_custom": "Cockroach"},
    }
    ac_55_multi_select_is_sent_in_declaration_order(mapped(TWO)) {
        [answer("question_1", &["prod", "dev"], "")] => {"question_1": ["dev", "prod"]},
        [answer("question_1", &["prod", "staging", "dev"], "")]
            => {"question_1": ["dev", "staging", "prod"]},
    }
}

#[test]
fn ac_11_free_text_goes_to_the_marker_named_companion_key() {
    let out = respond_to(
        "custom-answer-arbitrary-key.json",
        vec![answer("release_name", &[], "Cassiopeia")],
    );
    assert_eq!(out, accept(json!({"answer_freeform": "Cassiopeia"})));
    assert!(out["content"].get("release_name_custom").is_none());
}

#[test]
fn ac_12a_free_text_with_a_selection_is_trimmed_at_the_companion_key() {
    let out = respond_to(
        SINGLE,
        vec![answer("question_0", &["Postgres"], " CockroachDB ")],
    );
    assert_eq!(out["content"]["question_0_custom"], json!("CockroachDB"));
}

#[test]
fn ac_12b_nothing_answered_is_accept_with_empty_content() {
    let m = mapped(TWO);
    let empty = accept(json!({}));
    assert_eq!(respond(&m, vec![]), empty);
    // Entries that carry nothing are still "nothing answered".
    let blank = vec![
        answer("question_0", &[], "  "),
        answer("question_1", &[], ""),
    ];
    assert_eq!(respond(&m, blank), empty);
    let wire = serde_json::to_string(&respond(&m, vec![])).expect("json");
    assert_eq!(wire, r#"{"action":"accept","content":{}}"#);
}

#[test]
fn ac_12c_refusal_fallback_first_option_is_sent_at_choice() {
    let m = mapped(REFUSAL);
    let first = m.questions[0].options[0].id.clone();
    let out = respond(&m, vec![answer("choice", &[&first], "")]);
    assert_eq!(out, accept(json!({"choice": "retry_fallback"})));
}

#[test]
fn ac_12h_only_the_answered_question_contributes_a_key() {
    let m = form(json!({
        "a": {"type": "string", "oneOf": [{"const": "x"}]},
        "b": {"type": "string", "oneOf": [{"const": "y"}]},
        "c": {"type": "string"},
    }));
    let out = build_response(&m, &submission(vec![answer("b", &["y"], "")])).expect("valid");
    let content = content(&out);
    assert_eq!(content.len(), 1);
    assert_eq!(content.get("b"), Some(&json!("y")));
    assert!(!content.contains_key("a") && !content.contains_key("c"));
}

/// The "never \"\"" of AC-12h is about unanswered questions: an option the schema declares
/// as `""` is sent when chosen (proptest found the case).
#[test]
fn a_chosen_option_declared_as_the_empty_string_is_sent() {
    let m = form(json!({
        "a": {"type": "string", "oneOf": [{"const": "", "title": "None"}, {"const": "x"}]},
    }));
    let out = build_response(&m, &submission(vec![answer("a", &[""], "")])).expect("valid");
    assert_eq!(content(&out).get("a"), Some(&json!("")));
}

#[test]
fn ac_12j_whitespace_only_text_is_no_text() {
    for (fixture, given, sent) in [
        (SINGLE, answer("question_0", &[], " \t\n "), json!({})),
        // With a selection, whitespace text falls back to the selection.
        (
            SINGLE,
            answer("question_0", &["SQLite"], "   "),
            json!({"question_0": "SQLite"}),
        ),
        (MCP, answer("apiKey", &[], "   "), json!({})),
    ] {
        assert_eq!(respond_to(fixture, vec![given]), accept(sent), "{fixture}");
    }
}

#[test]
fn ac_14_rejected_bundle_is_decline() {
    let m = mapped(SINGLE);
    let out = build_response(&m, &skip(vec![])).expect("valid");
    assert_eq!(out, ElicitationResponse::Decline);
    assert_eq!(out.to_json(), json!({"action": "decline"}));
    // Empty entries do not count as answers.
    let out = build_response(&m, &skip(vec![answer("question_0", &[], " ")])).expect("valid");
    assert_eq!(out, ElicitationResponse::Decline);
}

#[test]
fn ac_56_zero_option_question_answered_with_text() {
    let m = mapped(MCP);
    assert!(m.questions[0].options.is_empty());
    let out = respond(&m, vec![answer("apiKey", &[], "T")]);
    assert_eq!(out, accept(json!({"apiKey": "T"})));
}

// ---- content rules beyond the named ACs ------------------------------------------

accepts! {
    text_on_a_select_without_companion_is_dropped_and_the_selection_kept(mapped(REFUSAL)) {
        [answer("choice", &["cancelled"], "maybe later")] => {"choice": "cancelled"},
        [answer("choice", &[], "maybe later")] => {},
    }
    text_on_an_emptied_enum_goes_to_its_own_key(form(json!({
        "one": {"type": "string", "oneOf": [{"title": "no const"}]},
        "many": {"type": "array", "items": {"anyOf": []}},
    }))) {
        [answer("one", &[], " a "), answer("many", &[], "b")] => {"one": "a", "many": "b"},
    }
    text_on_a_rule_4_question_with_companion_goes_to_the_companion(form(json!({
        "name": {"type": "string"},
        "name_other": {"type": "string",
                       "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "name"}}},
    }))) {
        [answer("name", &[], "x")] => {"name_other": "x"},
    }
    keys_are_verbatim(form(json!({
        "Größe ✓": {"type": "string", "oneOf": [{"const": "XL 🙂"}]},
        "with space": {"type": "string"},
    }))) {
        [answer("Größe ✓", &["XL 🙂"], ""), answer("with space", &[], "v")]
            => {"Größe ✓": "XL 🙂", "with space": "v"},
    }
    repeated_option_ids_in_one_answer_are_deduplicated(mapped(TWO)) {
        [answer("question_0", &["SQLite", "SQLite"], ""),
         answer("question_1", &["prod", "dev", "prod"], "")]
            => {"question_0": "SQLite", "question_1": ["dev", "prod"]},
    }
    answers_of_every_question_of_the_two_question_frame(mapped(TWO)) {
        [answer("question_1", &["staging"], "all of them"), answer("question_0", &["Postgres"], "")]
            => {"question_1_custom": "all of them", "question_0": "Postgres"},
    }
}

// ---- F10: every validation error ------------------------------------------------

#[test]
fn f10_unknown_question_id() {
    for id in ["question_1", "question_0_custom", ""] {
        assert_eq!(
            refused(COLOUR, vec![answer(id, &["Red"], "")]),
            AnswerError::UnknownQuestion {
                question_id: id.into()
            }
        );
    }
}

#[test]
fn f10_duplicate_answer() {
    let twice = vec![
        answer("question_0", &["Red"], ""),
        answer("question_0", &["Blue"], ""),
    ];
    let question_id = "question_0".into();
    assert_eq!(
        refused(COLOUR, twice),
        AnswerError::DuplicateAnswer { question_id }
    );
}

#[test]
fn f10_two_choices_for_a_single_select() {
    let question_id = "question_0".into();
    assert_eq!(
        refused(COLOUR, vec![answer("question_0", &["Red", "Blue"], "")]),
        AnswerError::TooManyChoices {
            question_id,
            count: 2
        }
    );
    // Even when the companion text would win, the selection must be valid.
    assert!(matches!(
        refused(
            COLOUR,
            vec![answer("question_0", &["Red", "Blue"], "Green")]
        ),
        AnswerError::TooManyChoices { .. }
    ));
}

#[test]
fn f10_undeclared_option() {
    for (fixture, id, option) in [
        (COLOUR, "question_0", "Green"),
        // A question without options accepts none.
        (MCP, "apiKey", "T"),
    ] {
        assert_eq!(
            refused(fixture, vec![answer(id, &[option], "")]),
            AnswerError::UndeclaredOption {
                question_id: id.into(),
                option: option.into()
            }
        );
    }
    // Option ids are the consts, compared exactly.
    assert!(matches!(
        refused(COLOUR, vec![answer("question_0", &["red"], "")]),
        AnswerError::UndeclaredOption { .. }
    ));
    let m = form(json!({"b": {"type": "boolean"}}));
    assert!(matches!(
        rejected_answer(&m, vec![answer("b", &["true"], "")]),
        AnswerError::UndeclaredOption { .. }
    ));
}

#[test]
fn f10_unparseable_typed_value() {
    for (id, text, expected) in [
        ("confirm", "yes", "a boolean"),
        ("confirm", "1", "a boolean"),
        ("cpu", "two", "a number"),
        ("cpu", "NaN", "a number"),
        ("cpu", "1e999", "a number"),
        ("replicas", "3.0", "an integer"),
        ("replicas", "3.5", "an integer"),
        ("replicas", "99999999999999999999999", "an integer"),
    ] {
        assert_eq!(
            refused(
                EXT,
                vec![answer(id, &[], text), answer("service", &[], "svc")]
            ),
            AnswerError::UnparseableValue {
                question_id: id.into(),
                expected: expected.into(),
                value: text.into()
            },
            "{id} {text}"
        );
    }
}

#[test]
fn f10_required_question_unanswered() {
    for (answers, unanswered) in [
        (vec![answer("service", &[], "svc")], "confirm"),
        (ext_answers("true", "   "), "service"),
    ] {
        assert_eq!(
            refused(EXT, answers),
            AnswerError::RequiredUnanswered {
                question_id: unanswered.into()
            }
        );
    }
    // Skip is always allowed, required or not.
    let skipped = build_response(&mapped(EXT), &skip(vec![])).expect("valid");
    assert_eq!(skipped, ElicitationResponse::Decline);
}

#[test]
fn f10_required_select_answered_through_its_companion_counts() {
    let m = map_required_colour();
    let out = respond(&m, vec![answer("question_0", &[], "Green")]);
    assert_eq!(out, accept(json!({"question_0_custom": "Green"})));
    let question_id = "question_0".into();
    assert_eq!(
        rejected_answer(&m, vec![]),
        AnswerError::RequiredUnanswered { question_id }
    );
}

fn map_required_colour() -> MappedElicitation {
    let mut params = crate::common::fixture(COLOUR);
    params["requestedSchema"]["required"] = json!(["question_0"]);
    map_request(&params).expect("maps")
}

#[test]
fn f10_answers_with_reject() {
    let m = mapped(COLOUR);
    assert_eq!(
        build_response(&m, &skip(vec![answer("question_0", &["Red"], "")])),
        Err(AnswerError::AnswersWithReject)
    );
    assert_eq!(
        build_response(&m, &skip(vec![answer("question_0", &[], "Green")])),
        Err(AnswerError::AnswersWithReject)
    );
    assert_eq!(AnswerError::AnswersWithReject.question_id(), None);
}

#[test]
fn f10_errors_serialize_with_a_kind_tag() {
    let e = AnswerError::TooManyChoices {
        question_id: "q".into(),
        count: 2,
    };
    assert_eq!(
        serde_json::to_value(&e).expect("json"),
        json!({"kind": "too_many_choices", "question_id": "q", "count": 2})
    );
    assert_eq!(e.question_id(), Some("q"));
}

// ---- §7 typed values and constraints --------------------------------------------

/// The extended vocabulary's two required answers: `confirm` and `service`.
fn ext_answers(confirm: &str, service: &str) -> Vec<Answer> {
    vec![
        answer("confirm", &[], confirm),
        answer("service", &[], service),
    ]
}

/// The content sent for `answers` beside `confirm = false`, `service = svc`.
fn ext_ok(answers: Vec<Answer>) -> Value {
    let mut all = ext_answers("false", "svc");
    all.extend(answers);
    respond_to(EXT, all)["content"].clone()
}

/// The error `answers` beside `confirm = false`, `service = svc` are refused with.
fn ext_err(answers: Vec<Answer>) -> AnswerError {
    let mut all = ext_answers("false", "svc");
    all.extend(answers);
    refused(EXT, all)
}

fn constraint_of(e: &AnswerError) -> &str {
    match e {
        AnswerError::ConstraintViolated { constraint, .. } => constraint,
        other => panic!("expected a constraint violation, got {other:?}"),
    }
}

#[test]
fn extension_typed_values_are_sent_as_json_types() {
    let c = ext_ok(vec![
        answer("replicas", &[], " 4 "),
        answer("cpu", &[], "0.5"),
        answer("region", &["us-east-1"], ""),
        answer("features", &["tracing", "metrics"], ""),
    ]);
    assert_eq!(
        c,
        json!({"confirm": false, "service": "svc", "replicas": 4, "cpu": 0.5,
               "region": "us-east-1", "features": ["metrics", "tracing"]})
    );
    assert!(c["replicas"].is_i64());
    let c = ext_ok(vec![answer("cpu", &[], "2")]);
    assert!(
        c["cpu"].is_i64(),
        "an integer literal for a number is sent as 2"
    );
    let c = ext_ok(vec![answer("cpu", &[], "2.0")]);
    assert_eq!(serde_json::to_string(&c["cpu"]).expect("json"), "2.0");
    let c = respond_to(EXT, ext_answers("True", "svc"));
    assert_eq!(c["content"]["confirm"], json!(true));
}

#[test]
fn extension_constraint_min_length() {
    let e = refused(EXT, ext_answers("true", " ab "));
    assert_eq!(constraint_of(&e), "minLength");
    assert_eq!(e.question_id(), Some("service"));
    // Characters, not bytes: "äbc" is three.
    let m = form(json!({"t": {"type": "string", "minLength": 3, "maxLength": 3}}));
    assert_eq!(
        respond(&m, vec![answer("t", &[], "äbc")])["content"]["t"],
        json!("äbc")
    );
}

#[test]
fn extension_constraint_max_length() {
    let e = refused(EXT, ext_answers("true", &"a".repeat(21)));
    assert_eq!(constraint_of(&e), "maxLength");
}

#[test]
fn extension_constraint_pattern_is_an_unanchored_search() {
    let e = refused(EXT, ext_answers("true", "Svc"));
    assert_eq!(constraint_of(&e), "pattern");
    let m = form(json!({"t": {"type": "string", "pattern": "b+"}}));
    assert_eq!(
        respond(&m, vec![answer("t", &[], "abbc")])["content"]["t"],
        json!("abbc")
    );
    assert_eq!(
        constraint_of(&rejected_answer(&m, vec![answer("t", &[], "ac")])),
        "pattern"
    );
}

#[test]
fn extension_constraint_invalid_pattern_fails_closed() {
    // Decision 0015: a pattern nothing can compile refuses the answer, never passes it.
    let m = form(json!({"t": {"type": "string", "pattern": "(unclosed"}}));
    let err =
        build_response(&m, &submission(vec![answer("t", &[], "anything")])).expect_err("refused");
    assert!(
        matches!(err, AnswerError::ConstraintViolated { ref constraint, .. } if constraint == "pattern"),
        "{err:?}"
    );
}

#[test]
fn extension_constraint_formats() {
    for (id, good, bad) in [
        ("owner", "ops@example.com", "not-an-email"),
        ("docs", "https://runbooks.example.com/svc", "runbooks/svc"),
        ("launch", "2024-02-29", "2023-02-29"),
        ("window", "2024-05-06T22:00:00Z", "2024-05-06 22:00"),
    ] {
        assert_eq!(ext_ok(vec![answer(id, &[], good)])[id], json!(good), "{id}");
        let e = ext_err(vec![answer(id, &[], bad)]);
        assert_eq!(constraint_of(&e), "format", "{id} {bad}");
    }
}

#[test]
fn extension_constraint_minimum_and_maximum() {
    for (id, too_low, too_high) in [("replicas", "0", "11"), ("cpu", "0.2", "8.5")] {
        for (text, constraint) in [(too_low, "minimum"), (too_high, "maximum")] {
            assert_eq!(
                constraint_of(&ext_err(vec![answer(id, &[], text)])),
                constraint,
                "{id} {text}"
            );
        }
    }
    // Bounds are inclusive.
    let c = ext_ok(vec![
        answer("replicas", &[], "10"),
        answer("cpu", &[], "0.25"),
    ]);
    assert_eq!(
        (c["replicas"].clone(), c["cpu"].clone()),
        (json!(10), json!(0.25))
    );
}

#[test]
fn extension_constraint_min_items_and_max_items() {
    assert_eq!(
        constraint_of(&ext_err(vec![answer(
            "features",
            &["metrics", "tracing", "profiling"],
            ""
        )])),
        "maxItems"
    );
    let m =
        form(json!({"f": {"type": "array", "minItems": 2, "items": {"enum": ["a", "b", "c"]}}}));
    // Duplicates count once.
    for too_few in [&["a"][..], &["a", "a"]] {
        assert_eq!(
            constraint_of(&rejected_answer(&m, vec![answer("f", too_few, "")])),
            "minItems",
            "{too_few:?}"
        );
    }
    // Unanswered is not "too few": the key is simply absent.
    assert_eq!(
        respond(&m, vec![answer("f", &[], "")]),
        json!({"action": "accept", "content": {}})
    );
}
