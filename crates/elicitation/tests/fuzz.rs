//! Fuzzing of the mapping and the response builder (docs/architecture.md §8: "the mapping never
//! panics on any JSON"), as proptest properties over arbitrary JSON, structurally mutated
//! fixtures and byte-mutated fixtures, with answers derived from whatever the mapping
//! produced (valid and invalid ones alike). The corpus seeds are every params fixture of
//! `tests/fixtures` and `tests/fixtures/bridge`.
//!
//! The long run is `just fuzz` (`PROPTEST_CASES=20000 cargo test --workspace --test
//! elicitation -- --ignored --nocapture fuzz::fuzz_`); without `--ignored` a 64-case smoke
//! of the same properties keeps the suite compiled and honest.

use std::path::Path;

use kandev_elicitation::{
    Answer, ElicitationResponse, MappedElicitation, OperatorAnswer, build_response, map_request,
};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Number, Value};

// ---- the corpus -------------------------------------------------------------------

/// Every fixture that is an `elicitation/create` params object.
fn seeds() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut seeds = Vec::new();
    for dir in [root.clone(), root.join("bridge")] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("fixtures dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("fixture");
            let value: Value = serde_json::from_str(&text).expect("fixture JSON");
            if value.get("mode").is_some() {
                seeds.push(value);
            }
        }
    }
    assert!(seeds.len() >= 8, "the corpus holds the fixtures");
    seeds
}

fn corpus() -> &'static [Value] {
    static CORPUS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(seeds)
}

// ---- arbitrary JSON ---------------------------------------------------------------

/// Keys the mapping looks at, so arbitrary objects hit its branches often.
const KEYWORDS: &[&str] = &[
    "mode",
    "sessionId",
    "requestId",
    "message",
    "toolCallId",
    "requestedSchema",
    "type",
    "properties",
    "oneOf",
    "anyOf",
    "items",
    "const",
    "title",
    "description",
    "_meta",
    "_askUserQuestionCustomAnswer",
    "questionId",
    "isCustomAnswer",
    "enum",
    "enumNames",
    "default",
    "required",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "question_0",
    "question_0_custom",
    "question_10",
];

/// String values the mapping compares against.
const WORDS: &[&str] = &[
    "form",
    "url",
    "object",
    "string",
    "array",
    "boolean",
    "number",
    "integer",
    "null",
    "question_0",
    "question_1",
    "sess-1",
    "",
    " ",
    "email",
    "uri",
    "date",
    "date-time",
    "^[a-z]+$",
    "(",
    "[",
    "\\",
    "a{99999999}",
    "🙂名前",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYWORDS).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
        1 => "question_[0-9]{1,3}(_custom)?",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(WORDS).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Arbitrary JSON shaped like a request often enough to get past the first checks.
fn request_like() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop_oneof![Just(Value::from("form")), leaf()]),
        prop::option::of(leaf()),
        prop::collection::vec((key(), json()), 0..10),
        json(),
    )
        .prop_map(|(mode, session, properties, extra)| {
            let mut params = Map::new();
            if let Some(mode) = mode {
                params.insert("mode".into(), mode);
            }
            if let Some(session) = session {
                params.insert("sessionId".into(), session);
            }
            params.insert("message".into(), extra);
            let properties: Map<String, Value> = properties.into_iter().collect();
            params.insert(
                "requestedSchema".into(),
                serde_json::json!({"type": "object", "properties": properties}),
            );
            Value::Object(params)
        })
}

// ---- mutating fixtures ------------------------------------------------------------

#[derive(Debug, Clone)]
enum Edit {
    Replace(Value),
    Remove,
    Insert(String, Value),
    WrapInArray,
    Duplicate,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => json().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        2 => (key(), json()).prop_map(|(k, v)| Edit::Insert(k, v)),
        1 => Just(Edit::WrapInArray),
        1 => Just(Edit::Duplicate),
    ]
}

/// Every path in `value` as a list of object keys / array indices.
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                prefix.push(Step::Key(k.clone()));
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

fn apply(value: &mut Value, selector: usize, edit: &Edit) {
    let mut all = Vec::new();
    paths(value, &mut Vec::new(), &mut all);
    let path = &all[selector % all.len()];
    match edit {
        Edit::Replace(v) => {
            if let Some(target) = at(value, path) {
                *target = v.clone();
            }
        }
        Edit::Remove => {
            if let Some((last, parent)) = path.split_last()
                && let Some(parent) = at(value, parent)
            {
                match (parent, last) {
                    (Value::Object(map), Step::Key(k)) => {
                        map.remove(k);
                    }
                    (Value::Array(items), Step::Index(i)) if *i < items.len() => {
                        items.remove(*i);
                    }
                    _ => {}
                }
            }
        }
        Edit::Insert(k, v) => match at(value, path) {
            Some(Value::Object(map)) => {
                map.insert(k.clone(), v.clone());
            }
            Some(Value::Array(items)) => items.push(v.clone()),
            _ => {}
        },
        Edit::WrapInArray => {
            if let Some(target) = at(value, path) {
                *target = Value::Array(vec![target.take()]);
            }
        }
        Edit::Duplicate => {
            if let Some(target) = at(value, path) {
                let copy = target.clone();
                match target {
                    Value::Array(items) => {
                        items.extend(copy.as_array().cloned().unwrap_or_default())
                    }
                    Value::Object(map) => {
                        let pairs: Vec<_> = map
                            .iter()
                            .map(|(k, v)| (format!("{k}_2"), v.clone()))
                            .collect();
                        map.extend(pairs);
                    }
                    other => *other = Value::Array(vec![copy.clone(), copy]),
                }
            }
        }
    }
}

fn mutated_fixture() -> impl Strategy<Value = Value> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec((any::<usize>(), edit()), 1..5),
    )
        .prop_map(|(which, edits)| {
            let corpus = corpus();
            let mut value = corpus[which.index(corpus.len())].clone();
            for (selector, edit) in &edits {
                apply(&mut value, *selector, edit);
            }
            value
        })
}

/// A fixture's bytes with a few bytes flipped, inserted or deleted.
fn byte_mutated_fixture() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(which, edits)| {
            let corpus = corpus();
            let mut bytes =
                serde_json::to_vec(&corpus[which.index(corpus.len())]).expect("encodes");
            for (at, byte, op) in edits {
                let i = at % bytes.len().max(1);
                match op {
                    0 if !bytes.is_empty() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ if !bytes.is_empty() => {
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
            bytes
        })
}

// ---- answers ----------------------------------------------------------------------

/// An answer entry chosen by selectors against whatever questions the mapping produced.
#[derive(Debug, Clone)]
struct AnswerSeed {
    question: usize,
    foreign_id: Option<String>,
    options: Vec<usize>,
    undeclared_option: Option<String>,
    text: String,
}

const TEXTS: &[&str] = &[
    "",
    " ",
    "true",
    "FALSE",
    "42",
    "-7",
    "42.0",
    "1e400",
    "-1e309",
    "NaN",
    "inf",
    "18446744073709551616",
    "0x10",
    "abc",
    "a@b.c",
    "2024-01-01",
];

fn answer_seed() -> impl Strategy<Value = AnswerSeed> {
    (
        any::<usize>(),
        prop::option::weighted(0.1, "\\PC{0,6}"),
        prop::collection::vec(any::<usize>(), 0..4),
        prop::option::weighted(0.1, "\\PC{0,6}"),
        prop_oneof![
            prop::sample::select(TEXTS).prop_map(str::to_owned),
            "\\PC{0,10}"
        ],
    )
        .prop_map(
            |(question, foreign_id, options, undeclared_option, text)| AnswerSeed {
                question,
                foreign_id,
                options,
                undeclared_option,
                text,
            },
        )
}

fn operator_answer(
    mapped: &MappedElicitation,
    seeds: &[AnswerSeed],
    rejected: bool,
) -> OperatorAnswer {
    let answers = seeds
        .iter()
        .map(|seed| {
            let question = &mapped.questions[seed.question % mapped.questions.len()];
            let mut selected: Vec<String> = if question.options.is_empty() {
                Vec::new()
            } else {
                seed.options
                    .iter()
                    .map(|i| question.options[i % question.options.len()].id.clone())
                    .collect()
            };
            selected.extend(seed.undeclared_option.clone());
            Answer {
                question_id: seed
                    .foreign_id
                    .clone()
                    .unwrap_or_else(|| question.id.clone()),
                selected_options: selected,
                custom_text: seed.text.clone(),
            }
        })
        .collect();
    OperatorAnswer {
        answers,
        rejected,
        reject_reason: String::new(),
    }
}

// ---- the properties ---------------------------------------------------------------

/// Maps `params` and, when it maps, builds a response from `seeds`: neither may panic,
/// and whatever comes out must be well-formed.
fn check(params: &Value, seeds: &[AnswerSeed], rejected: bool) -> Result<(), TestCaseError> {
    let first = map_request(params);
    prop_assert_eq!(&first, &map_request(params), "map_request is deterministic");
    let Ok(mapped) = first else { return Ok(()) };
    prop_assert!(
        !mapped.questions.is_empty(),
        "a mapped request has questions"
    );
    let answer = operator_answer(&mapped, seeds, rejected);
    match build_response(&mapped, &answer) {
        Ok(ElicitationResponse::Decline) => prop_assert!(rejected),
        Ok(response @ ElicitationResponse::Accept { .. }) => {
            let json = response.to_json();
            prop_assert_eq!(&json["action"], "accept");
            let keys: Vec<&str> = mapped
                .questions
                .iter()
                .flat_map(|q| {
                    std::iter::once(q.id.as_str())
                        .chain(q.custom_answer.as_ref().map(|c| c.key.as_str()))
                })
                .collect();
            for (k, v) in json["content"].as_object().into_iter().flatten() {
                prop_assert!(
                    keys.contains(&k.as_str()),
                    "content key {} is a question's or companion's",
                    k
                );
                prop_assert!(!v.is_null() && v != "", "content is sparse: {} = {}", k, v);
            }
        }
        Ok(ElicitationResponse::Cancel) => {
            prop_assert!(false, "an operator answer never builds a cancel");
        }
        Err(_) => {}
    }
    Ok(())
}

fn answers() -> impl Strategy<Value = (Vec<AnswerSeed>, bool)> {
    (
        prop::collection::vec(answer_seed(), 0..6),
        prop::bool::weighted(0.1),
    )
}

/// `PROPTEST_CASES` (read by proptest's default config) decides the count of the long run.
fn long_run() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

fn smoke() -> Config {
    Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(long_run())]

    #[test]
    #[ignore = "long run: `just fuzz`"]
    fn fuzz_arbitrary_json(params in prop_oneof![json(), request_like()], (seeds, rejected) in answers()) {
        check(&params, &seeds, rejected)?;
    }

    #[test]
    #[ignore = "long run: `just fuzz`"]
    fn fuzz_mutated_fixtures(params in mutated_fixture(), (seeds, rejected) in answers()) {
        check(&params, &seeds, rejected)?;
    }

    #[test]
    #[ignore = "long run: `just fuzz`"]
    fn fuzz_byte_mutated_fixtures(bytes in byte_mutated_fixture(), (seeds, rejected) in answers()) {
        if let Ok(params) = serde_json::from_slice::<Value>(&bytes) {
            check(&params, &seeds, rejected)?;
        }
    }
}

proptest! {
    #![proptest_config(smoke())]

    #[test]
    fn smoke_arbitrary_json(params in prop_oneof![json(), request_like()], (seeds, rejected) in answers()) {
        check(&params, &seeds, rejected)?;
    }

    #[test]
    fn smoke_mutated_fixtures(params in mutated_fixture(), (seeds, rejected) in answers()) {
        check(&params, &seeds, rejected)?;
    }

    #[test]
    fn smoke_byte_mutated_fixtures(bytes in byte_mutated_fixture(), (seeds, rejected) in answers()) {
        if let Ok(params) = serde_json::from_slice::<Value>(&bytes) {
            check(&params, &seeds, rejected)?;
        }
    }
}

#[test]
fn every_seed_maps_and_an_unmutated_seed_answers_cleanly() {
    for seed in corpus() {
        let mapped = map_request(seed).unwrap_or_else(|d| panic!("seed {seed} declined: {d}"));
        let empty = operator_answer(&mapped, &[], true);
        assert_eq!(
            build_response(&mapped, &empty).expect("a skip is always valid"),
            ElicitationResponse::Decline
        );
    }
}

#[test]
fn edits_change_the_seed() {
    let mut value = corpus()[0].clone();
    apply(&mut value, 0, &Edit::Replace(Value::from("x")));
    assert_eq!(value, Value::from("x"));
    let mut value = corpus()[0].clone();
    apply(&mut value, 1, &Edit::Remove);
    assert_ne!(&value, &corpus()[0]);
}
