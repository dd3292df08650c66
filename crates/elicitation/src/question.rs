//! The operator-facing question model (docs/architecture.md §4.3).
//!
//! A [`Question`] is what one property of an elicitation's `requestedSchema` becomes
//! after mapping. Its [`Question::id`] is the verbatim schema property key, so an
//! answer addressed by question id replays to the right content key by identity.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the operator answers a question, and the JSON type the answer takes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// Exactly one option (rule 1, or a plain string `enum`); content value is the option's const.
    SingleSelect,
    /// Any number of options (rule 2, or `items.enum`); content value is an array in declaration order.
    MultiSelect,
    /// Free text (rule 4); content value is the trimmed text.
    Text,
    /// A `boolean` property; answered as `"true"`/`"false"` text, sent as a JSON boolean.
    Boolean,
    /// A `number` property; answered as text, sent as a JSON number.
    Number,
    /// An `integer` property; answered as text, sent as a JSON integer.
    Integer,
}

impl QuestionKind {
    /// Whether the question is answered by choosing among [`Question::options`].
    pub fn is_select(self) -> bool {
        matches!(self, Self::SingleSelect | Self::MultiSelect)
    }
}

/// One choice of a select question, in the schema's declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// The enum `const`, verbatim; it is also the value written to the ACP content.
    pub id: String,
    /// The entry's `title`, or the const when there is none.
    pub label: String,
    /// The entry's `description`, when present.
    #[serde(default)]
    pub description: Option<String>,
    /// A preview to show beside the option (`_meta._claude/askUserQuestionOption.preview`,
    /// markdown), when the agent gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// The free-text companion property of a question, found by its
/// `_meta._askUserQuestionCustomAnswer.questionId` marker (never by key suffix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomAnswer {
    /// The companion's own property key, verbatim; free text is written there.
    pub key: String,
    /// The companion's `title`, when present.
    #[serde(default)]
    pub title: Option<String>,
    /// The companion's `description`, when present.
    #[serde(default)]
    pub description: Option<String>,
}

/// Validation constraints carried over from the schema (docs/architecture.md §7).
///
/// Every field is optional; an unconstrained question serializes as `{}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Constraints {
    /// `minLength` of a text answer, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// `maxLength` of a text answer, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// `pattern` (ECMA-style regular expression) a text answer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `format` of a text answer: `email`, `uri`, `date` or `date-time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// `minimum` of a number or integer answer, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// `maximum` of a number or integer answer, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// `minItems` of a multi-select answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// `maxItems` of a multi-select answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The schema's `writeOnly: true`: the value goes to the agent and is never shown
    /// back or kept (kandev-elicitation `secret.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub write_only: bool,
}

impl Constraints {
    /// True when no constraint is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One question put to the operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The verbatim schema property key.
    pub id: String,
    /// How it is answered.
    pub kind: QuestionKind,
    /// The property's `title`, when present.
    #[serde(default)]
    pub title: Option<String>,
    /// The text shown to the operator: description, else the request message,
    /// else the title, else the key (D10).
    pub prompt: String,
    /// Choices in declaration order; empty for non-select kinds and for an enum
    /// that came back empty.
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// The free-text companion, or `None` when the schema declared none.
    #[serde(default)]
    pub custom_answer: Option<CustomAnswer>,
    /// Whether the schema's `required` array names this property.
    #[serde(default)]
    pub required: bool,
    /// The schema's `default`, to pre-fill the answer surface.
    #[serde(default)]
    pub default: Option<Value>,
    /// Constraints the answer must meet.
    #[serde(default)]
    pub constraints: Constraints,
}

impl Question {
    /// Whether free text for this question is written to its own key: it has no
    /// companion and no options to choose from (rule 4, typed fields, or an empty enum).
    pub fn text_goes_to_own_key(&self) -> bool {
        self.custom_answer.is_none() && self.options.is_empty()
    }
}
