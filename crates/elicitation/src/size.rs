//! The cheap size check behind [`crate::limits::MAX_PARAMS_BYTES`].
//!
//! Measures the compact JSON encoding of a value without building it: one walk that
//! sums token lengths and stops as soon as the budget is spent, so an oversized body
//! costs no more than the budget to reject. Iterative, so no nesting depth can
//! exhaust the stack.

use std::fmt::{self, Write};

use serde_json::Value;

/// The compact JSON length of `value` if it is at most `limit` bytes, else `None`.
pub(crate) fn encoded_len_within(value: &Value, limit: usize) -> Option<usize> {
    let mut total: usize = 0;
    let mut stack: Vec<&Value> = vec![value];
    while let Some(v) = stack.pop() {
        let len = match v {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => number_len(n),
            Value::String(s) => string_len(s),
            Value::Array(items) => {
                stack.extend(items.iter());
                // Brackets plus the commas between items.
                2 + items.len().saturating_sub(1)
            }
            Value::Object(map) => {
                let mut len = 2 + map.len().saturating_sub(1);
                for (key, item) in map {
                    len = len.saturating_add(string_len(key) + 1);
                    stack.push(item);
                }
                len
            }
        };
        total = total.saturating_add(len);
        if total > limit {
            return None;
        }
    }
    Some(total)
}

/// Encoded length of a string literal: quotes plus escapes as `serde_json` writes them.
fn string_len(s: &str) -> usize {
    s.bytes().fold(2usize, |acc, b| {
        acc.saturating_add(match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
    })
}

/// Encoded length of a number, counted through `Display` (which is how `serde_json`
/// writes it) without allocating.
fn number_len(n: &serde_json::Number) -> usize {
    struct Counter(usize);
    impl Write for Counter {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail; a failure would only undercount.
    let _ = write!(counter, "{n}");
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exact(v: &Value) -> usize {
        serde_json::to_string(v).expect("serializes").len()
    }

    #[test]
    fn matches_serde_json_compact_length() {
        let samples = [
            json!(null),
            json!(true),
            json!(false),
            json!(-12.5e-7),
            json!(18446744073709551615u64),
            json!("quote \" backslash \\ newline \n bell \u{7} é 名"),
            json!([]),
            json!({}),
            json!({"a": [1, 2, {"b": null}], "c\td": "x"}),
        ];
        for v in &samples {
            assert_eq!(encoded_len_within(v, usize::MAX), Some(exact(v)), "{v}");
        }
    }

    #[test]
    fn stops_past_the_limit() {
        let v = json!({"k": "x".repeat(100)});
        let n = exact(&v);
        assert_eq!(encoded_len_within(&v, n), Some(n));
        assert_eq!(encoded_len_within(&v, n - 1), None);
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let mut v = json!(0);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(encoded_len_within(&v, usize::MAX), Some(200_001));
        // Dropping a 100k-deep value recursively would overflow; leak it instead.
        std::mem::forget(v);
    }
}
