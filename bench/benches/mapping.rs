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
use serde_json::Value;

const TWO_QUESTIONS: &str =
    include_str!("../../crates/elicitation/tests/fixtures/askuserquestion-two-questions.json");

/// A 64-property form (the mapping's limit) mixing every kind of the vocabulary; the
/// stack bench's large form too.
const SIXTY_FOUR_FORM: &str = include_str!("../fixtures/sixty-four-form.json");

/// An operator's answer to every field of [`SIXTY_FOUR_FORM`].
const SIXTY_FOUR_ANSWER: &str = include_str!("../fixtures/sixty-four-answer.json");

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
    // Compact bytes, as an agent sends them (the fixture is indented for reading).
    let form: Value = serde_json::from_str(SIXTY_FOUR_FORM).expect("the fixture is JSON");
    let sixty_four = serde_json::to_vec(&form).expect("encodes");
    let answer: OperatorAnswer =
        serde_json::from_str(SIXTY_FOUR_ANSWER).expect("the fixture is an operator answer");
    bench_form(c, "sixty_four", &sixty_four, &answer);
}

criterion_group!(benches, mapping);
criterion_main!(benches);
