//! # kandev-elicitation
//!
//! The pure core of Kandev's ACP form elicitation: no I/O, no async, no panics on
//! any input.
//!
//! - [`map_request`] turns the raw params of an ACP `elicitation/create` request into a
//!   [`MappedElicitation`] (ordered [`Question`]s) or a [`Decline`] with its reason.
//! - [`build_response`] validates an [`OperatorAnswer`] against the mapped questions and
//!   builds the ACP response ([`ElicitationResponse`]) with sparse, verbatim-keyed content.
//! - [`compare_keys`] is the D1 order over schema property keys.
//!
//! Everything works on [`serde_json::Value`], so a malformed body becomes a decline,
//! never a protocol error.
//!
//! ```
//! use kandev_elicitation::{Answer, OperatorAnswer, build_response, map_request};
//! use serde_json::json;
//!
//! let params = json!({
//!     "mode": "form", "sessionId": "sess-1", "message": "Pick a colour",
//!     "requestedSchema": {"type": "object", "properties": {
//!         "question_0": {"type": "string", "oneOf": [{"const": "Red"}, {"const": "Blue"}]}
//!     }}
//! });
//! let mapped = map_request(&params).expect("a form with one question");
//! assert_eq!(mapped.questions[0].prompt, "Pick a colour");
//!
//! let answer = OperatorAnswer {
//!     answers: vec![Answer {
//!         question_id: "question_0".into(),
//!         selected_options: vec!["Red".into()],
//!         custom_text: String::new(),
//!     }],
//!     ..OperatorAnswer::default()
//! };
//! let response = build_response(&mapped, &answer).expect("a valid answer");
//! assert_eq!(response.to_json(), json!({"action": "accept", "content": {"question_0": "Red"}}));
//! ```
//!
//! ## Mapping rules
//!
//! Each property of `requestedSchema.properties` is classified by the first rule that
//! matches (spec "Schema → questions mapping", docs/architecture.md §5 and §7):
//!
//! 1. `{type: "string", oneOf: [...]}` → single-select; each entry with a string
//!    `const` becomes an option (label `title || const`); other entries are skipped.
//! 2. `{type: "array", items: {anyOf: [...]}}` → multi-select, options as in rule 1.
//! 3. `{type: "string"}` with `_meta._askUserQuestionCustomAnswer.questionId` → the
//!    free-text companion of that question (D2), never a question of its own.
//! 4. `{type: "string"}` with no `oneOf`, no `enum` and no marker → free text, zero
//!    options.
//!
//! Then the extensions, which never change what rules 1–4 produce: `boolean`,
//! `number`, `integer`; a string `enum` → single-select (labels from `enumNames`);
//! an array with `items.enum` (or `items.oneOf`) → multi-select; plus `default`,
//! `required` and the constraints `minLength`, `maxLength`, `pattern`, `format`,
//! `minimum`, `maximum`, `minItems`, `maxItems` on every kind they apply to.
//! 5. Anything else is ignored — except `anyOf: [T, {"type": "null"}]` (Pydantic's optional
//!    field), which is an optional T (docs/decisions/0015).
//!
//! **Decision — `enum` versus rule 4.** Rule 4 reads "a string without `oneOf`"; a
//! string with an `enum` would match it literally. An `enum` is an enumeration of the
//! acceptable values, though, so such a property is the enum extension (a
//! single-select), not free text. Rule-4 text is reserved for strings that constrain
//! their value by no list at all.
//!
//! A rule-1/2 question whose entries are all filtered out stays a question with zero
//! options, answered by text at its own key. Repeated option consts keep their first
//! entry. Companions are resolved and removed before ordering; a companion naming no
//! question is ignored; of two companions for one question the one first under D1
//! wins. Questions are sorted by [`compare_keys`] (D1). A prompt is the property's
//! description, else the request message, else the property title, else the key
//! (D10).
//!
//! ## Responses
//!
//! [`build_response`] validates first (F10, one [`AnswerError`] per kind of mistake)
//! and only then builds sparse content: a key appears only when it carries an answer;
//! trimmed free text goes to the companion when there is one (the selection is then
//! not sent), else to the question's own key when it has no options (typed for
//! `boolean`/`number`/`integer`), else it is dropped; multi-select values are sent in
//! declaration order. Patterns are ECMA-262 (lookaround, backreferences) with a bounded
//! backtrack; one that cannot be checked refuses the answer rather than passing it.
//!
//! ## Secrets
//!
//! [`is_secret`] names the questions whose value must never be kept or shown back
//! (`format: password`, `writeOnly`, a key like `apiKey`); [`redact`] is the answer as it
//! may be stored.

pub mod answer;
pub mod ask_user_question;
pub mod defaults;
pub mod limits;
pub mod order;
pub mod question;
pub mod request;
pub mod response;
pub mod secret;

mod companion;
mod format;
mod pattern;

mod schema;
mod size;

pub use answer::{Answer, OperatorAnswer};
pub use defaults::defaults_answer;
pub use order::compare_keys;
pub use question::{Constraints, CustomAnswer, Question, QuestionKind, QuestionOption};
pub use request::{Decline, DeclineReason, MappedElicitation, map_request};
pub use response::{AnswerError, ElicitationResponse, build_response};
pub use secret::{REDACTED, is_secret, redact};
