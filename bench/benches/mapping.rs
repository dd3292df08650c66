//! Criterion benches of the mapping (docs/architecture.md §8: mapping the two-question bridge
//! form costs at most 2× parsing its JSON). Each measured operation has its baseline in
//! the same group: `serde_json::from_slice` of the same bytes.
//!
//! Groups (read by `kandev-bench` from `target/criterion/<group>/<fn>/new/estimates.json`):
//! - `map_two_question` / `map_sixty_four`: `map_request` on the parsed params vs
//!   `from_slice` of the params' bytes;
//! - `respond_two_question` / `respond_sixty_four`: `build_response(..).to_json()` vs
//!   `from_slice` of the operator answer's bytes (the respond payload it is built from).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kandev_elicitation::{Answer, OperatorAnswer, build_response, map_request};
use serde_json::{Value, json};

const TWO_QUESTIONS: &str =
    include_str!("../../crates/elicitation/tests/fixtures/askuserquestion-two-questions.json");

/// A 64-property form (the mapping's limit) mixing every kind of the vocabulary.
fn sixty_four_form() -> Value {
    let mut properties = serde_json::Map::new();
    for i in 0..64 {
        let key = format!("field_{i}");
        let options: Vec<Value> = (0..4)
            .map(|o| json!({"const": format!("opt{o}"), "title": format!("Option {o}"), "description": "An option."}))
            .collect();
        let property = match i % 6 {
            0 => {
                json!({"type": "string", "title": key, "description": "Pick one.", "oneOf": options})
            }
            1 => {
                json!({"type": "array", "title": key, "description": "Pick some.", "items": {"anyOf": options}})
            }
            2 => {
                json!({"type": "string", "title": key, "description": "Say something.", "maxLength": 200})
            }
            3 => {
                json!({"type": "boolean", "title": key, "description": "Yes or no?", "default": false})
            }
            4 => {
                json!({"type": "integer", "title": key, "description": "How many?", "minimum": 0, "maximum": 100})
            }
            _ => {
                json!({"type": "string", "title": key, "enum": ["a", "b", "c"], "enumNames": ["A", "B", "C"]})
            }
        };
        properties.insert(key, property);
    }
    json!({"mode": "form", "sessionId": "sess-1", "message": "Sixty-four fields.",
        "requestedSchema": {"type": "object", "properties": properties}})
}

fn answer(question_id: &str, selected: &[&str], text: &str) -> Answer {
    Answer {
        question_id: question_id.to_owned(),
        selected_options: selected.iter().map(|s| (*s).to_owned()).collect(),
        custom_text: text.to_owned(),
    }
}

fn two_question_answer() -> OperatorAnswer {
    OperatorAnswer {
        answers: vec![
            answer("question_0", &["Postgres"], ""),
            answer("question_1", &["prod", "dev"], ""),
        ],
        ..OperatorAnswer::default()
    }
}

fn sixty_four_answer() -> OperatorAnswer {
    let answers = (0..64)
        .map(|i| {
            let id = format!("field_{i}");
            match i % 6 {
                0 => answer(&id, &["opt2"], ""),
                1 => answer(&id, &["opt3", "opt0"], ""),
                2 => answer(&id, &[], "some free text"),
                3 => answer(&id, &[], "true"),
                4 => answer(&id, &[], "42"),
                _ => answer(&id, &["b"], ""),
            }
        })
        .collect();
    OperatorAnswer {
        answers,
        ..OperatorAnswer::default()
    }
}

fn bench_form(c: &mut Criterion, name: &str, bytes: &[u8], answer: &OperatorAnswer) {
    let params: Value = serde_json::from_slice(bytes).expect("the form is JSON");
    let mapped = map_request(&params).expect("the form maps");
    let answer_bytes = serde_json::to_vec(answer).expect("answer encodes");
    build_response(&mapped, answer).expect("the answer fits the form");

    let mut map = c.benchmark_group(format!("map_{name}"));
    map.bench_function("map_request", |b| {
        b.iter(|| map_request(black_box(&params)))
    });
    map.bench_function("from_slice", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(bytes)))
    });
    map.finish();

    let mut respond = c.benchmark_group(format!("respond_{name}"));
    respond.bench_function("build_response", |b| {
        b.iter(|| build_response(black_box(&mapped), black_box(answer)).map(|r| r.to_json()))
    });
    respond.bench_function("from_slice", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&answer_bytes)))
    });
    respond.finish();
}

fn mapping(c: &mut Criterion) {
    bench_form(
        c,
        "two_question",
        TWO_QUESTIONS.as_bytes(),
        &two_question_answer(),
    );
    let sixty_four = serde_json::to_vec(&sixty_four_form()).expect("encodes");
    bench_form(c, "sixty_four", &sixty_four, &sixty_four_answer());
}

criterion_group!(benches, mapping);
criterion_main!(benches);
