//! Operator answer + mapped elicitation → ACP response: the response ACs, the F10
//! validation errors and the §7 typed values and constraints.

mod common;

use common::{answer, content, mapped, respond, submission};
use kandev_elicitation::{
    AnswerError, ElicitationResponse, MappedElicitation, OperatorAnswer, build_response,
    map_request,
};
use serde_json::{Value, json};

fn form(properties: Value) -> MappedElicitation {
    map_request(&json!({"mode": "form", "sessionId": "sess", "message": "m",
        "requestedSchema": {"type": "object", "properties": properties}}))
    .unwrap_or_else(|d| panic!("declined: {d}"))
}

fn rejected_answer(m: &MappedElicitation, answers: Vec<kandev_elicitation::Answer>) -> AnswerError {
    match build_response(m, &submission(answers)) {
        Ok(r) => panic!("expected an answer error, built {}", r.to_json()),
        Err(e) => e,
    }
}

fn skip(answers: Vec<kandev_elicitation::Answer>) -> OperatorAnswer {
    OperatorAnswer {
        answers,
        rejected: true,
        reject_reason: "not now".into(),
    }
}

// ---- the ACs -------------------------------------------------------------------

#[test]
fn ac_10_selected_label_is_sent_at_the_schema_key() {
    let m = mapped("colour-k.json");
    assert_eq!(
        respond(&m, vec![answer("question_0", &["Red"], "")]),
        json!({"action": "accept", "content": {"question_0": "Red"}})
    );
}

#[test]
fn ac_11_free_text_goes_to_the_marker_named_companion_key() {
    let m = mapped("custom-answer-arbitrary-key.json");
    let out = respond(&m, vec![answer("release_name", &[], "Cassiopeia")]);
    assert_eq!(
        out,
        json!({"action": "accept", "content": {"answer_freeform": "Cassiopeia"}})
    );
    assert!(out["content"].get("release_name_custom").is_none());
}

#[test]
fn ac_11a_mcp_passthrough_free_text_goes_to_its_own_key() {
    let m = mapped("mcp-passthrough.json");
    assert_eq!(
        respond(&m, vec![answer("apiKey", &[], "T")]),
        json!({"action": "accept", "content": {"apiKey": "T"}})
    );
}

#[test]
fn ac_12_two_selected_options_are_sent_as_an_array() {
    let m = mapped("askuserquestion-two-questions.json");
    assert_eq!(
        respond(&m, vec![answer("question_1", &["dev", "staging"], "")]),
        json!({"action": "accept", "content": {"question_1": ["dev", "staging"]}})
    );
}

#[test]
fn ac_12a_free_text_with_a_selection_is_trimmed_at_the_companion_key() {
    let m = mapped("askuserquestion-single.json");
    let out = respond(
        &m,
        vec![answer("question_0", &["Postgres"], " CockroachDB ")],
    );
    assert_eq!(out["content"]["question_0_custom"], json!("CockroachDB"));
}

#[test]
fn ac_12b_nothing_answered_is_accept_with_empty_content() {
    let m = mapped("askuserquestion-two-questions.json");
    let empty = json!({"action": "accept", "content": {}});
    assert_eq!(respond(&m, vec![]), empty);
    // Entries that carry nothing are still "nothing answered".
    assert_eq!(
        respond(
            &m,
            vec![
                answer("question_0", &[], "  "),
                answer("question_1", &[], "")
            ]
        ),
        empty
    );
    assert_eq!(
        serde_json::to_string(&respond(&m, vec![])).expect("json"),
        r#"{"action":"accept","content":{}}"#
    );
}

#[test]
fn ac_12c_refusal_fallback_first_option_is_sent_at_choice() {
    let m = mapped("refusal-fallback.json");
    let first = m.questions[0].options[0].id.clone();
    assert_eq!(
        respond(&m, vec![answer("choice", &[&first], "")]),
        json!({"action": "accept", "content": {"choice": "retry_fallback"}})
    );
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

#[test]
fn ac_12i_selection_and_text_send_the_companion_only() {
    let m = mapped("askuserquestion-single.json");
    assert_eq!(
        respond(&m, vec![answer("question_0", &["SQLite"], "  Cockroach  ")]),
        json!({"action": "accept", "content": {"question_0_custom": "Cockroach"}})
    );
}

#[test]
fn ac_12j_whitespace_only_text_is_no_text() {
    let m = mapped("askuserquestion-single.json");
    assert_eq!(
        respond(&m, vec![answer("question_0", &[], " \t\n ")]),
        json!({"action": "accept", "content": {}})
    );
    // With a selection, whitespace text falls back to the selection.
    assert_eq!(
        respond(&m, vec![answer("question_0", &["SQLite"], "   ")]),
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
    let m = mapped("mcp-passthrough.json");
    assert_eq!(
        respond(&m, vec![answer("apiKey", &[], "   ")]),
        json!({"action": "accept", "content": {}})
    );
}

#[test]
fn ac_14_rejected_bundle_is_decline() {
    let m = mapped("askuserquestion-single.json");
    let out = build_response(&m, &skip(vec![])).expect("valid");
    assert_eq!(out, ElicitationResponse::Decline);
    assert_eq!(out.to_json(), json!({"action": "decline"}));
    // Empty entries do not count as answers.
    let out = build_response(&m, &skip(vec![answer("question_0", &[], " ")])).expect("valid");
    assert_eq!(out, ElicitationResponse::Decline);
}

#[test]
fn ac_55_multi_select_is_sent_in_declaration_order() {
    let m = mapped("askuserquestion-two-questions.json");
    assert_eq!(
        respond(&m, vec![answer("question_1", &["prod", "dev"], "")]),
        json!({"action": "accept", "content": {"question_1": ["dev", "prod"]}})
    );
    assert_eq!(
        respond(
            &m,
            vec![answer("question_1", &["prod", "staging", "dev"], "")]
        )["content"]["question_1"],
        json!(["dev", "staging", "prod"])
    );
}

#[test]
fn ac_56_zero_option_question_answered_with_text() {
    let m = mapped("mcp-passthrough.json");
    assert!(m.questions[0].options.is_empty());
    assert_eq!(
        respond(&m, vec![answer("apiKey", &[], "T")]),
        json!({"action": "accept", "content": {"apiKey": "T"}})
    );
}

// ---- content rules beyond the named ACs ------------------------------------------

#[test]
fn text_on_a_select_without_companion_is_dropped_and_the_selection_kept() {
    let m = mapped("refusal-fallback.json");
    assert_eq!(
        respond(&m, vec![answer("choice", &["cancelled"], "maybe later")]),
        json!({"action": "accept", "content": {"choice": "cancelled"}})
    );
    assert_eq!(
        respond(&m, vec![answer("choice", &[], "maybe later")]),
        json!({"action": "accept", "content": {}})
    );
}

#[test]
fn text_on_an_emptied_enum_goes_to_its_own_key() {
    let m = form(json!({
        "one": {"type": "string", "oneOf": [{"title": "no const"}]},
        "many": {"type": "array", "items": {"anyOf": []}},
    }));
    assert_eq!(
        respond(
            &m,
            vec![answer("one", &[], " a "), answer("many", &[], "b")]
        ),
        json!({"action": "accept", "content": {"one": "a", "many": "b"}})
    );
}

#[test]
fn text_on_a_rule_4_question_with_companion_goes_to_the_companion() {
    let m = form(json!({
        "name": {"type": "string"},
        "name_other": {"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "name"}}},
    }));
    assert_eq!(
        respond(&m, vec![answer("name", &[], "x")]),
        json!({"action": "accept", "content": {"name_other": "x"}})
    );
}

#[test]
fn keys_are_verbatim() {
    let m = form(json!({
        "Größe ✓": {"type": "string", "oneOf": [{"const": "XL 🙂"}]},
        "with space": {"type": "string"},
    }));
    assert_eq!(
        respond(
            &m,
            vec![
                answer("Größe ✓", &["XL 🙂"], ""),
                answer("with space", &[], "v")
            ]
        ),
        json!({"action": "accept", "content": {"Größe ✓": "XL 🙂", "with space": "v"}})
    );
}

#[test]
fn repeated_option_ids_in_one_answer_are_deduplicated() {
    let m = mapped("askuserquestion-two-questions.json");
    assert_eq!(
        respond(
            &m,
            vec![
                answer("question_0", &["SQLite", "SQLite"], ""),
                answer("question_1", &["prod", "dev", "prod"], "")
            ]
        )["content"],
        json!({"question_0": "SQLite", "question_1": ["dev", "prod"]})
    );
}

#[test]
fn answers_of_every_question_of_the_two_question_frame() {
    let m = mapped("askuserquestion-two-questions.json");
    assert_eq!(
        respond(
            &m,
            vec![
                answer("question_1", &["staging"], "all of them"),
                answer("question_0", &["Postgres"], ""),
            ]
        ),
        json!({"action": "accept", "content": {"question_1_custom": "all of them", "question_0": "Postgres"}})
    );
}

// ---- F10: every validation error ------------------------------------------------

#[test]
fn f10_unknown_question_id() {
    let m = mapped("colour-k.json");
    for id in ["question_1", "question_0_custom", ""] {
        assert_eq!(
            rejected_answer(&m, vec![answer(id, &["Red"], "")]),
            AnswerError::UnknownQuestion {
                question_id: id.into()
            }
        );
    }
}

#[test]
fn f10_duplicate_answer() {
    let m = mapped("colour-k.json");
    assert_eq!(
        rejected_answer(
            &m,
            vec![
                answer("question_0", &["Red"], ""),
                answer("question_0", &["Blue"], "")
            ]
        ),
        AnswerError::DuplicateAnswer {
            question_id: "question_0".into()
        }
    );
}

#[test]
fn f10_two_choices_for_a_single_select() {
    let m = mapped("colour-k.json");
    assert_eq!(
        rejected_answer(&m, vec![answer("question_0", &["Red", "Blue"], "")]),
        AnswerError::TooManyChoices {
            question_id: "question_0".into(),
            count: 2
        }
    );
    // Even when the companion text would win, the selection must be valid.
    assert!(matches!(
        rejected_answer(&m, vec![answer("question_0", &["Red", "Blue"], "Green")]),
        AnswerError::TooManyChoices { .. }
    ));
}

#[test]
fn f10_undeclared_option() {
    let m = mapped("colour-k.json");
    assert_eq!(
        rejected_answer(&m, vec![answer("question_0", &["Green"], "")]),
        AnswerError::UndeclaredOption {
            question_id: "question_0".into(),
            option: "Green".into()
        }
    );
    // Option ids are the consts, compared exactly.
    assert!(matches!(
        rejected_answer(&m, vec![answer("question_0", &["red"], "")]),
        AnswerError::UndeclaredOption { .. }
    ));
    // A question without options accepts none.
    let m = mapped("mcp-passthrough.json");
    assert_eq!(
        rejected_answer(&m, vec![answer("apiKey", &["T"], "")]),
        AnswerError::UndeclaredOption {
            question_id: "apiKey".into(),
            option: "T".into()
        }
    );
    let m = form(json!({"b": {"type": "boolean"}}));
    assert!(matches!(
        rejected_answer(&m, vec![answer("b", &["true"], "")]),
        AnswerError::UndeclaredOption { .. }
    ));
}

#[test]
fn f10_unparseable_typed_value() {
    let m = mapped("extended-vocabulary.json");
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
            rejected_answer(
                &m,
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
    let m = mapped("extended-vocabulary.json");
    assert_eq!(
        rejected_answer(&m, vec![answer("service", &[], "svc")]),
        AnswerError::RequiredUnanswered {
            question_id: "confirm".into()
        }
    );
    assert_eq!(
        rejected_answer(
            &m,
            vec![
                answer("confirm", &[], "true"),
                answer("service", &[], "   ")
            ]
        ),
        AnswerError::RequiredUnanswered {
            question_id: "service".into()
        }
    );
    // Skip is always allowed, required or not.
    let skipped = build_response(&m, &skip(vec![])).expect("valid");
    assert_eq!(skipped, ElicitationResponse::Decline);
}

#[test]
fn f10_required_select_answered_through_its_companion_counts() {
    let m = map_required_colour();
    assert_eq!(
        respond(&m, vec![answer("question_0", &[], "Green")]),
        json!({"action": "accept", "content": {"question_0_custom": "Green"}})
    );
    assert_eq!(
        rejected_answer(&m, vec![]),
        AnswerError::RequiredUnanswered {
            question_id: "question_0".into()
        }
    );
}

fn map_required_colour() -> MappedElicitation {
    let mut params = common::fixture("colour-k.json");
    params["requestedSchema"]["required"] = json!(["question_0"]);
    map_request(&params).expect("maps")
}

#[test]
fn f10_answers_with_reject() {
    let m = mapped("colour-k.json");
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

fn ext_ok(answers: Vec<kandev_elicitation::Answer>) -> Value {
    let m = mapped("extended-vocabulary.json");
    let mut all = vec![
        answer("confirm", &[], "false"),
        answer("service", &[], "svc"),
    ];
    all.extend(answers);
    respond(&m, all)["content"].clone()
}

fn ext_err(answers: Vec<kandev_elicitation::Answer>) -> AnswerError {
    let m = mapped("extended-vocabulary.json");
    let mut all = vec![
        answer("confirm", &[], "false"),
        answer("service", &[], "svc"),
    ];
    all.extend(answers);
    rejected_answer(&m, all)
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
    let m = mapped("extended-vocabulary.json");
    let c = respond(
        &m,
        vec![
            answer("confirm", &[], "True"),
            answer("service", &[], "svc"),
        ],
    );
    assert_eq!(c["content"]["confirm"], json!(true));
}

#[test]
fn extension_constraint_min_length() {
    let m = mapped("extended-vocabulary.json");
    let e = rejected_answer(
        &m,
        vec![
            answer("confirm", &[], "true"),
            answer("service", &[], " ab "),
        ],
    );
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
    let m = mapped("extended-vocabulary.json");
    let long = "a".repeat(21);
    let e = rejected_answer(
        &m,
        vec![
            answer("confirm", &[], "true"),
            answer("service", &[], &long),
        ],
    );
    assert_eq!(constraint_of(&e), "maxLength");
}

#[test]
fn extension_constraint_pattern_is_an_unanchored_search() {
    let m = mapped("extended-vocabulary.json");
    let e = rejected_answer(
        &m,
        vec![
            answer("confirm", &[], "true"),
            answer("service", &[], "Svc"),
        ],
    );
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
    for (id, text, constraint) in [
        ("replicas", "0", "minimum"),
        ("replicas", "11", "maximum"),
        ("cpu", "0.2", "minimum"),
        ("cpu", "8.5", "maximum"),
    ] {
        assert_eq!(
            constraint_of(&ext_err(vec![answer(id, &[], text)])),
            constraint,
            "{id} {text}"
        );
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
    assert_eq!(
        constraint_of(&rejected_answer(&m, vec![answer("f", &["a"], "")])),
        "minItems"
    );
    // Duplicates count once.
    assert_eq!(
        constraint_of(&rejected_answer(&m, vec![answer("f", &["a", "a"], "")])),
        "minItems"
    );
    // Unanswered is not "too few": the key is simply absent.
    assert_eq!(
        respond(&m, vec![answer("f", &[], "")]),
        json!({"action": "accept", "content": {}})
    );
}
