//! One `requestedSchema` property → what it becomes: a question, a companion, or
//! nothing (spec rules 1–5, then the docs/architecture.md §7 extensions between rules 4 and 5).
//!
//! Works on raw JSON and is lenient inside the schema: a property (or option entry)
//! of a shape it does not recognise is skipped, never an error.

use serde_json::{Map, Value};

use crate::limits::MAX_OPTIONS;
use crate::question::{Constraints, CustomAnswer, Question, QuestionKind, QuestionOption};

/// The marker that makes a string property a custom-answer companion (rule 3).
pub(crate) const COMPANION_MARKER: &str = "_askUserQuestionCustomAnswer";

/// What one property maps to.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "short-lived: each value is matched and moved out at once"
)]
pub(crate) enum Property {
    /// A question, without its companion (D2 attaches that later).
    Question(Question),
    /// A rule-3 companion of the question whose key is `target`.
    Companion {
        /// The `questionId` the marker names.
        target: String,
        /// The companion itself.
        custom: CustomAnswer,
    },
    /// Rule 5: not a shape we map.
    Ignored,
}

/// A select question declares more than [`MAX_OPTIONS`] options.
#[derive(Debug)]
pub(crate) struct TooManyOptions {
    pub(crate) count: usize,
}

/// Inputs shared by every property of one request.
pub(crate) struct Context<'a> {
    /// The request's `message`, the D10 fallback after the description.
    pub(crate) message: &'a str,
    /// The schema's `required` keys.
    pub(crate) required: &'a [&'a str],
}

/// Classifies one property under rules 1–5 and the extensions, first match wins.
pub(crate) fn classify(
    key: &str,
    property: &Value,
    ctx: &Context<'_>,
) -> Result<Property, TooManyOptions> {
    let Some(prop) = property.as_object() else {
        return Ok(Property::Ignored);
    };
    // `anyOf: [T, {"type": "null"}]` (Pydantic's and FastMCP's optional field) is an
    // optional T (docs/decisions/0015-nullable-anyof-is-optional.md).
    let unwrapped = nullable_inner(prop);
    let prop = unwrapped.as_ref().unwrap_or(prop);
    let optional = unwrapped.is_some();
    let kind_and_options = match prop.get("type").and_then(Value::as_str) {
        Some("string") => {
            if let Some(entries) = prop.get("oneOf") {
                // Rule 1. A `oneOf` that is not an array is no recognisable shape.
                match entries.as_array() {
                    Some(entries) => (QuestionKind::SingleSelect, const_options(entries)?),
                    None => return Ok(Property::Ignored),
                }
            } else if let Some(target) = companion_target(prop) {
                // Rule 3, before rule 4: a companion is itself a plain string.
                return Ok(Property::Companion {
                    target: target.to_owned(),
                    custom: CustomAnswer {
                        key: key.to_owned(),
                        title: non_empty_str(prop, "title"),
                        description: non_empty_str(prop, "description"),
                    },
                });
            } else if let Some(entries) = prop.get("enum") {
                // Extension: a string `enum` enumerates its values, so it is a
                // single-select rather than rule-4 free text.
                match entries.as_array() {
                    Some(entries) => (
                        QuestionKind::SingleSelect,
                        enum_options(entries, prop.get("enumNames"))?,
                    ),
                    None => return Ok(Property::Ignored),
                }
            } else {
                // Rule 4.
                (QuestionKind::Text, Vec::new())
            }
        }
        Some("array") => {
            let Some(items) = prop.get("items").and_then(Value::as_object) else {
                return Ok(Property::Ignored);
            };
            if let Some(entries) = items.get("anyOf").and_then(Value::as_array) {
                // Rule 2.
                (QuestionKind::MultiSelect, const_options(entries)?)
            } else if let Some(entries) = items.get("enum").and_then(Value::as_array) {
                (
                    QuestionKind::MultiSelect,
                    enum_options(entries, items.get("enumNames"))?,
                )
            } else if let Some(entries) = items.get("oneOf").and_then(Value::as_array) {
                (QuestionKind::MultiSelect, const_options(entries)?)
            } else {
                return Ok(Property::Ignored);
            }
        }
        Some("boolean") => (QuestionKind::Boolean, Vec::new()),
        Some("number") => (QuestionKind::Number, Vec::new()),
        Some("integer") => (QuestionKind::Integer, Vec::new()),
        // Rule 5.
        _ => return Ok(Property::Ignored),
    };
    let (kind, options) = kind_and_options;
    let title = non_empty_str(prop, "title");
    let prompt = non_empty_str(prop, "description")
        .or_else(|| (!ctx.message.is_empty()).then(|| ctx.message.to_owned()))
        .or_else(|| title.clone())
        .unwrap_or_else(|| key.to_owned());
    Ok(Property::Question(Question {
        id: key.to_owned(),
        kind,
        title,
        prompt,
        options,
        custom_answer: None,
        required: !optional && ctx.required.contains(&key),
        // `null` reads back as `None` through serde, so map it to `None` here too.
        default: prop.get("default").filter(|v| !v.is_null()).cloned(),
        constraints: constraints(kind, prop),
    }))
}

/// For `{anyOf: [T, {"type": "null"}], …}` (either order): T with the outer keys
/// (title, description, default…) laid over it. `None` for any other shape, including
/// an `anyOf` of two real types, which stays rule 5.
fn nullable_inner(prop: &Map<String, Value>) -> Option<Map<String, Value>> {
    if prop.contains_key("type") {
        return None;
    }
    let entries = prop.get("anyOf")?.as_array()?;
    let is_null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
    let [a, b] = entries.as_slice() else {
        return None;
    };
    let inner = match (is_null(a), is_null(b)) {
        (true, false) => b,
        (false, true) => a,
        _ => return None,
    };
    let mut merged = inner.as_object()?.clone();
    for (key, value) in prop {
        if key != "anyOf" {
            merged.insert(key.clone(), value.clone());
        }
    }
    Some(merged)
}

/// `_meta["_claude/askUserQuestionOption"].preview` of an option entry, when a non-empty string.
fn option_preview(entry: &Map<String, Value>) -> Option<String> {
    entry
        .get("_meta")?
        .get("_claude/askUserQuestionOption")?
        .get("preview")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `_meta._askUserQuestionCustomAnswer.questionId`, when it is a string.
fn companion_target(prop: &Map<String, Value>) -> Option<&str> {
    prop.get("_meta")?
        .get(COMPANION_MARKER)?
        .get("questionId")?
        .as_str()
}

fn non_empty_str(obj: &Map<String, Value>, field: &str) -> Option<String> {
    obj.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Options from `{const, title, description}` entries (rules 1 and 2). An entry
/// without a string `const` is skipped; label is `title || const`; a repeated const
/// keeps its first entry, so option ids stay unique.
fn const_options(entries: &[Value]) -> Result<Vec<QuestionOption>, TooManyOptions> {
    let mut options: Vec<QuestionOption> = Vec::new();
    for entry in entries {
        let Some(entry) = entry.as_object() else {
            continue;
        };
        let Some(id) = entry.get("const").and_then(Value::as_str) else {
            continue;
        };
        push_option(
            &mut options,
            QuestionOption {
                id: id.to_owned(),
                label: non_empty_str(entry, "title").unwrap_or_else(|| id.to_owned()),
                description: non_empty_str(entry, "description"),
                preview: option_preview(entry),
            },
        )?;
    }
    Ok(options)
}

/// Options from a plain `enum` of strings, labelled by the parallel `enumNames`
/// where it has a non-empty string; non-string values are skipped.
fn enum_options(
    entries: &[Value],
    names: Option<&Value>,
) -> Result<Vec<QuestionOption>, TooManyOptions> {
    let names = names.and_then(Value::as_array);
    let mut options: Vec<QuestionOption> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let Some(id) = entry.as_str() else {
            continue;
        };
        let label = names
            .and_then(|n| n.get(i))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(id);
        push_option(
            &mut options,
            QuestionOption {
                id: id.to_owned(),
                label: label.to_owned(),
                description: None,
                preview: None,
            },
        )?;
    }
    Ok(options)
}

fn push_option(
    options: &mut Vec<QuestionOption>,
    option: QuestionOption,
) -> Result<(), TooManyOptions> {
    if options.iter().any(|o| o.id == option.id) {
        return Ok(());
    }
    if options.len() >= MAX_OPTIONS {
        return Err(TooManyOptions {
            count: options.len() + 1,
        });
    }
    options.push(option);
    Ok(())
}

/// The §7 constraints that apply to answers of this kind.
fn constraints(kind: QuestionKind, prop: &Map<String, Value>) -> Constraints {
    let mut c = Constraints {
        write_only: prop.get("writeOnly").and_then(Value::as_bool) == Some(true),
        ..Constraints::default()
    };
    match kind {
        QuestionKind::Text => {
            c.min_length = count(prop, "minLength");
            c.max_length = count(prop, "maxLength");
            c.pattern = non_empty_str(prop, "pattern");
            c.format = non_empty_str(prop, "format");
        }
        QuestionKind::Number | QuestionKind::Integer => {
            c.minimum = prop.get("minimum").and_then(Value::as_f64);
            c.maximum = prop.get("maximum").and_then(Value::as_f64);
        }
        QuestionKind::MultiSelect => {
            c.min_items = count(prop, "minItems");
            c.max_items = count(prop, "maxItems");
        }
        QuestionKind::SingleSelect | QuestionKind::Boolean => {}
    }
    c
}

/// A non-negative integer (`3` or `3.0`); anything else is no constraint.
fn count(prop: &Map<String, Value>, field: &str) -> Option<u64> {
    let v = prop.get(field)?;
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        // In range and integral: the cast below is exact.
        (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CTX: Context<'static> = Context {
        message: "msg",
        required: &[],
    };

    fn question(key: &str, prop: Value) -> Question {
        match classify(key, &prop, &CTX).expect("within limits") {
            Property::Question(q) => q,
            other => panic!("expected a question, got {other:?}"),
        }
    }

    #[test]
    fn rule_1_filters_entries_without_string_const() {
        let q = question(
            "q",
            json!({"type": "string", "oneOf": [
                {"const": "a", "title": "A"}, {"title": "no const"}, {"const": 3}, "x",
                {"const": "b", "title": ""}, {"const": "a", "title": "dup"}
            ]}),
        );
        assert_eq!(q.kind, QuestionKind::SingleSelect);
        let ids: Vec<_> = q
            .options
            .iter()
            .map(|o| (o.id.as_str(), o.label.as_str()))
            .collect();
        assert_eq!(ids, [("a", "A"), ("b", "b")]);
    }

    #[test]
    fn rule_1_wins_over_a_marker() {
        let q = question(
            "q",
            json!({"type": "string", "oneOf": [],
                   "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "x"}}}),
        );
        assert_eq!(q.kind, QuestionKind::SingleSelect);
        assert!(q.options.is_empty());
    }

    #[test]
    fn rule_3_marker_beats_enum_extension() {
        let p = classify(
            "c",
            &json!({"type": "string", "enum": ["a"],
                    "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "q"}}}),
            &CTX,
        )
        .expect("within limits");
        assert!(matches!(p, Property::Companion { ref target, .. } if target == "q"));
    }

    #[test]
    fn non_string_question_id_is_no_marker() {
        let q = question(
            "c",
            json!({"type": "string", "_meta": {"_askUserQuestionCustomAnswer": {"questionId": 1}}}),
        );
        assert_eq!(q.kind, QuestionKind::Text);
    }

    #[test]
    fn enum_labels_come_from_enum_names() {
        let q = question(
            "e",
            json!({"type": "string", "enum": ["s", 1, "m", "l"], "enumNames": ["Small", "x", ""]}),
        );
        let labels: Vec<_> = q.options.iter().map(|o| o.label.as_str()).collect();
        // enumNames is parallel to enum, so "m" takes index 2 (empty → falls back).
        assert_eq!(labels, ["Small", "m", "l"]);
    }

    #[test]
    fn unrecognised_shapes_are_ignored() {
        for prop in [
            json!("string"),
            json!({"type": "object"}),
            json!({"type": ["string", "null"]}),
            json!({"type": "string", "oneOf": "nope"}),
            json!({"type": "string", "enum": {}}),
            json!({"type": "array"}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({}),
        ] {
            let p = classify("k", &prop, &CTX).expect("within limits");
            assert!(matches!(p, Property::Ignored), "{prop}");
        }
    }

    #[test]
    fn too_many_options_counts_distinct_consts() {
        let entries: Vec<Value> = (0..=MAX_OPTIONS)
            .map(|i| json!({"const": format!("o{i}")}))
            .collect();
        let err = classify("q", &json!({"type": "string", "oneOf": entries}), &CTX)
            .expect_err("past the limit");
        assert_eq!(err.count, MAX_OPTIONS + 1);
        let dupes: Vec<Value> = (0..200).map(|_| json!({"const": "same"})).collect();
        assert_eq!(
            question("q", json!({"type": "string", "oneOf": dupes}))
                .options
                .len(),
            1
        );
    }

    #[test]
    fn constraints_per_kind() {
        let text = question(
            "t",
            json!({"type": "string", "minLength": 2, "maxLength": 5.0, "pattern": "^a",
                   "format": "email", "minimum": 3}),
        );
        assert_eq!(
            text.constraints,
            Constraints {
                min_length: Some(2),
                max_length: Some(5),
                pattern: Some("^a".into()),
                format: Some("email".into()),
                ..Constraints::default()
            }
        );
        let num = question(
            "n",
            json!({"type": "number", "minimum": -1.5, "maximum": 10, "minLength": 1}),
        );
        assert_eq!(num.constraints.minimum, Some(-1.5));
        assert_eq!(num.constraints.maximum, Some(10.0));
        assert_eq!(num.constraints.min_length, None);
        let multi = question(
            "m",
            json!({"type": "array", "items": {"enum": ["a"]}, "minItems": 1, "maxItems": -1}),
        );
        assert_eq!(multi.constraints.min_items, Some(1));
        assert_eq!(multi.constraints.max_items, None);
    }

    #[test]
    fn nullable_any_of_is_an_optional_t() {
        let ctx = Context {
            message: "msg",
            required: &["name", "size"],
        };
        let q = |prop: Value| match classify("name", &prop, &ctx).expect("within limits") {
            Property::Question(q) => q,
            other => panic!("expected a question, got {other:?}"),
        };
        let name = q(
            json!({"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}],
                            "default": null, "title": "Name"}),
        );
        assert_eq!(name.kind, QuestionKind::Text);
        assert_eq!(name.title.as_deref(), Some("Name"));
        assert_eq!(name.constraints.max_length, Some(8));
        assert!(
            !name.required,
            "nullable means optional, even when listed in required"
        );
        assert_eq!(name.default, None);
        let size = q(
            json!({"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1}], "default": 3}),
        );
        assert_eq!(size.kind, QuestionKind::Integer);
        assert_eq!(size.constraints.minimum, Some(1.0));
        assert_eq!(size.default, Some(json!(3)));
        let pick = q(json!({"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}));
        assert_eq!(pick.kind, QuestionKind::SingleSelect);
        assert_eq!(pick.options.len(), 2);
        // Not the nullable shape: still rule 5.
        for prop in [
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            json!({"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "integer"}]}),
            json!({"anyOf": [{"type": "null"}, {"type": "null"}]}),
            json!({"anyOf": [{"type": "object"}, {"type": "null"}]}),
        ] {
            let p = classify("k", &prop, &CTX).expect("within limits");
            assert!(matches!(p, Property::Ignored), "{prop}");
        }
    }

    #[test]
    fn option_previews_and_write_only_are_kept() {
        let q = question(
            "q",
            json!({"type": "string", "writeOnly": true, "oneOf": [
                {"const": "SQLite", "_meta": {"_claude/askUserQuestionOption": {"preview": "file:./app.db"}}},
                {"const": "Postgres"}
            ]}),
        );
        assert_eq!(q.options[0].preview.as_deref(), Some("file:./app.db"));
        assert_eq!(q.options[1].preview, None);
        assert!(q.constraints.write_only);
    }

    #[test]
    fn d10_prompt_fallback_chain() {
        let with_desc = question(
            "k",
            json!({"type": "string", "description": "D", "title": "T"}),
        );
        assert_eq!(with_desc.prompt, "D");
        let with_msg = question("k", json!({"type": "string", "title": "T"}));
        assert_eq!(with_msg.prompt, "msg");
        let no_msg = Context {
            message: "",
            required: &[],
        };
        let titled = classify("k", &json!({"type": "string", "title": "T"}), &no_msg);
        assert!(matches!(titled, Ok(Property::Question(ref q)) if q.prompt == "T"));
        let bare = classify("k", &json!({"type": "string"}), &no_msg);
        assert!(matches!(bare, Ok(Property::Question(ref q)) if q.prompt == "k"));
    }
}
