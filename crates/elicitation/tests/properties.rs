//! Property tests: D1 is a total, deterministic order; the mapping is independent of
//! declaration order; `map_request` and `build_response` never panic on any input.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use kandev_elicitation::{Answer, OperatorAnswer, build_response, compare_keys, map_request};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Map, Number, Value, json};

/// 512 cases; failures persist in `tests/properties.proptest-regressions`, beside this
/// file. (Proptest's default looks for the nearest `main.rs` and would write
/// `proptest-regressions/properties.txt` beside `tests/` instead.)
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// ---- keys ------------------------------------------------------------------------

/// Property keys of every reachable shape: plain, trailing/interior/leading digits,
/// only digits, leading zeros, digit runs far past u64, non-ASCII.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,6}",
        "[a-z_]{0,4}[0-9]{1,4}",
        "question_[0-9]{1,3}",
        "[a-z]{0,3}[0-9]{1,3}[a-z_]{1,3}[0-9]{0,3}",
        "[0-9]{1,5}",
        "[0-9]{1,3}_[a-z]{1,3}",
        "[a-z]{0,2}0{1,4}[0-9]{0,2}",
        "[a-z]{0,2}[0-9]{20,60}",
        "\\PC{0,4}[0-9]{0,3}",
        "[éü名前🙂]{1,3}[0-9]{0,3}",
    ]
}

/// A key's prefix and trailing ASCII-digit number, computed the obvious way; `None`
/// when the run does not fit a u128 (where this reference is not exact).
fn reference_split(k: &str) -> Option<(&[u8], Option<u128>)> {
    let b = k.as_bytes();
    let n = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let (prefix, digits) = b.split_at(b.len() - n);
    if digits.is_empty() {
        return Some((prefix, None));
    }
    let number = std::str::from_utf8(digits).ok()?.parse::<u128>().ok()?;
    Some((prefix, Some(number)))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn d1_is_antisymmetric(a in key(), b in key()) {
        prop_assert_eq!(compare_keys(&a, &b), compare_keys(&b, &a).reverse());
    }

    #[test]
    fn d1_is_transitive(a in key(), b in key(), c in key()) {
        let mut v = [a, b, c];
        v.sort_by(|x, y| compare_keys(x, y));
        prop_assert!(compare_keys(&v[0], &v[1]).is_le());
        prop_assert!(compare_keys(&v[1], &v[2]).is_le());
        prop_assert!(compare_keys(&v[0], &v[2]).is_le());
    }

    #[test]
    fn d1_is_total_and_equal_only_for_identical_keys(a in key(), b in key()) {
        prop_assert_eq!(compare_keys(&a, &b) == Ordering::Equal, a == b);
        prop_assert_eq!(compare_keys(&a, &a), Ordering::Equal);
    }

    #[test]
    fn d1_agrees_with_a_numeric_reference_on_short_runs(a in key(), b in key()) {
        let (Some((pa, na)), Some((pb, nb))) = (reference_split(&a), reference_split(&b)) else {
            return Ok(());
        };
        let numeric = match (na, nb) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        let expected = pa.cmp(pb).then(numeric).then_with(|| a.as_bytes().cmp(b.as_bytes()));
        prop_assert_eq!(compare_keys(&a, &b), expected);
    }

    #[test]
    fn d1_orders_question_n_numerically(n in any::<u64>(), m in any::<u64>()) {
        let (a, b) = (format!("question_{n}"), format!("question_{m}"));
        prop_assert_eq!(compare_keys(&a, &b), n.cmp(&m));
    }

    #[test]
    fn d1_orders_huge_numbers_numerically(n in "[1-9][0-9]{0,80}", m in "[1-9][0-9]{0,80}") {
        let expected = n.len().cmp(&m.len()).then_with(|| n.cmp(&m));
        prop_assert_eq!(compare_keys(&format!("k{n}"), &format!("k{m}")), expected);
    }

    #[test]
    fn mapping_order_is_independent_of_insertion_order(
        keys in prop::collection::btree_set(key(), 1..16)
            .prop_flat_map(|set| {
                let v: Vec<String> = set.into_iter().collect();
                (Just(v.clone()), Just(v).prop_shuffle())
            })
    ) {
        let (sorted_keys, shuffled) = keys;
        let build = |order: &[String]| {
            let props: Map<String, Value> = order
                .iter()
                .map(|k| (k.clone(), json!({"type": "string", "oneOf": [{"const": "a"}]})))
                .collect();
            map_request(&json!({"mode": "form", "sessionId": "s",
                "requestedSchema": {"type": "object", "properties": props}}))
        };
        let a = build(&sorted_keys).expect("maps");
        let b = build(&shuffled).expect("maps");
        prop_assert_eq!(&a, &b);
        let ids: Vec<&str> = a.questions.iter().map(|q| q.id.as_str()).collect();
        for pair in ids.windows(2) {
            prop_assert_eq!(compare_keys(pair[0], pair[1]), Ordering::Less);
        }
        let all: BTreeSet<&str> = ids.iter().copied().collect();
        prop_assert_eq!(all.len(), sorted_keys.len());
    }
}

// ---- arbitrary JSON --------------------------------------------------------------

/// Words the mapping looks for, so random JSON hits its branches often.
const VOCABULARY: &[&str] = &[
    "type",
    "string",
    "array",
    "boolean",
    "number",
    "integer",
    "object",
    "oneOf",
    "anyOf",
    "enum",
    "enumNames",
    "items",
    "const",
    "title",
    "description",
    "_meta",
    "_askUserQuestionCustomAnswer",
    "questionId",
    "mode",
    "form",
    "url",
    "sessionId",
    "requestId",
    "toolCallId",
    "message",
    "requestedSchema",
    "properties",
    "required",
    "default",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "email",
    "uri",
    "date",
    "date-time",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "question_0",
    "(",
    "^a$",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(VOCABULARY).prop_map(str::to_owned),
        1 => key(),
        1 => ".{0,12}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        word().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A property schema built from the vocabulary, to reach deep into the rules.
fn schemaish_property() -> impl Strategy<Value = Value> {
    let entry = prop_oneof![
        (word(), word(), prop::option::of(word()))
            .prop_map(|(c, t, d)| json!({"const": c, "title": t, "description": d})),
        json_value(),
    ];
    let entries = prop::collection::vec(entry, 0..6);
    (
        prop::sample::select(&["string", "array", "boolean", "number", "integer", "object"][..]),
        prop::option::of(entries.clone()),
        prop::option::of(entries),
        prop::option::of(word()),
        prop::collection::vec((word(), json_value()), 0..4),
    )
        .prop_map(|(ty, one_of, any_of, target, extra)| {
            let mut p = Map::new();
            p.insert("type".into(), json!(ty));
            if let Some(e) = one_of {
                p.insert("oneOf".into(), Value::Array(e));
            }
            if let Some(e) = any_of {
                p.insert("items".into(), json!({"anyOf": e, "enum": ["a", "b"]}));
            }
            if let Some(t) = target {
                p.insert(
                    "_meta".into(),
                    json!({"_askUserQuestionCustomAnswer": {"questionId": t}}),
                );
            }
            for (k, v) in extra {
                p.insert(k, v);
            }
            Value::Object(p)
        })
}

fn form_params() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec((word(), schemaish_property()), 0..10),
        json_value(),
        prop::option::of(word()),
    )
        .prop_map(|(props, required, message)| {
            let props: Map<String, Value> = props.into_iter().collect();
            json!({"mode": "form", "sessionId": "s", "message": message,
                   "requestedSchema": {"type": "object", "properties": props, "required": required}})
        })
}

fn answers(ids: Vec<String>, options: Vec<String>) -> impl Strategy<Value = OperatorAnswer> {
    let id = prop_oneof![3 => prop::sample::select(ids), 1 => word()];
    let option = prop_oneof![3 => prop::sample::select(options), 1 => word()];
    let text = prop_oneof![
        Just(String::new()),
        "[ \t]{0,3}",
        "-?[0-9]{1,4}(\\.[0-9]{1,3})?",
        prop::sample::select(&["true", "FALSE", "a@b.c", "2024-02-29", "NaN", "1e999"][..])
            .prop_map(str::to_owned),
        ".{0,20}",
    ];
    let answer = (id, prop::collection::vec(option, 0..4), text).prop_map(
        |(question_id, selected_options, custom_text)| Answer {
            question_id,
            selected_options,
            custom_text,
        },
    );
    (prop::collection::vec(answer, 0..6), any::<bool>()).prop_map(|(answers, rejected)| {
        OperatorAnswer {
            answers,
            rejected,
            reject_reason: String::new(),
        }
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn map_request_never_panics_on_arbitrary_json(v in json_value()) {
        let _ = map_request(&v);
    }

    #[test]
    fn map_request_never_panics_inside_a_valid_envelope(props in json_value(), schema in json_value()) {
        let _ = map_request(&json!({"mode": "form", "sessionId": "s",
            "requestedSchema": {"type": "object", "properties": props}}));
        let _ = map_request(&json!({"mode": "form", "sessionId": "s", "requestedSchema": schema}));
    }

    #[test]
    fn mapped_questions_are_d1_sorted_and_companions_are_not_questions(params in form_params()) {
        if let Ok(m) = map_request(&params) {
            prop_assert!(!m.questions.is_empty());
            for pair in m.questions.windows(2) {
                prop_assert_eq!(compare_keys(&pair[0].id, &pair[1].id), Ordering::Less);
            }
            for q in &m.questions {
                if let Some(c) = &q.custom_answer {
                    prop_assert!(m.question(&c.key).is_none(), "companion {} is also a question", c.key);
                }
            }
        }
    }

    #[test]
    fn build_response_never_panics_on_arbitrary_answers(
        case in form_params().prop_filter_map("maps", |p| map_request(&p).ok()).prop_flat_map(|m| {
            let ids: Vec<String> = m.questions.iter().map(|q| q.id.clone()).collect();
            let mut options: Vec<String> =
                m.questions.iter().flat_map(|q| q.options.iter().map(|o| o.id.clone())).collect();
            options.push("not-an-option".into());
            (Just(m), answers(ids, options))
        })
    ) {
        let (m, answer) = case;
        if let Ok(response) = build_response(&m, &answer) {
            let wire = response.to_json();
            // Sparse content: never null, never "" (unless "" is the option the operator
            // chose: a schema may declare it as a value).
            if let Some(content) = wire.get("content").and_then(Value::as_object) {
                for (key, v) in content {
                    prop_assert!(!v.is_null());
                    let declared_empty = m
                        .question(key)
                        .is_some_and(|q| q.options.iter().any(|o| o.id.is_empty()));
                    if !declared_empty {
                        prop_assert_ne!(v, &json!(""));
                    }
                }
            }
        }
    }
}
