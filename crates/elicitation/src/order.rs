//! D1: the total, deterministic order of questions by schema property key.
//!
//! Declaration order does not survive every JSON binding, so questions are ordered by
//! their keys: split each key at its maximal trailing run of ASCII digits; compare the
//! prefixes bytewise; with equal prefixes a key with a number sorts before one without
//! and two numbers compare numerically (`question_2` < `question_10`); the full key,
//! bytewise, breaks any remaining tie.
//!
//! The prefix is whatever precedes the trailing digit run, digits included:
//! `step1_field2` splits as `"step1_field"` + `2`, `100_items` has no number (it does
//! not end in digits), `42` is `""` + `42`. Numbers are compared as digit strings with
//! their leading zeros stripped (shorter is smaller, then bytewise), so a run of any
//! length compares correctly without overflow; `x007` and `x7` are numerically equal
//! and fall through to the full-key tiebreak (`x007` < `x7`).

use std::cmp::Ordering;

/// A key split at its maximal trailing run of ASCII digits.
struct SplitKey<'a> {
    prefix: &'a [u8],
    /// The trailing digits with leading zeros stripped (`None` when the key has no
    /// trailing digits; `Some(b"")` for a run of zeros).
    number: Option<&'a [u8]>,
}

fn split(key: &str) -> SplitKey<'_> {
    let bytes = key.as_bytes();
    // ASCII digits never occur inside a multi-byte UTF-8 sequence, so a byte split is safe.
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let (prefix, run) = bytes.split_at(bytes.len() - digits);
    if run.is_empty() {
        return SplitKey {
            prefix,
            number: None,
        };
    }
    let zeros = run.iter().take_while(|&&b| b == b'0').count();
    SplitKey {
        prefix,
        number: Some(&run[zeros..]),
    }
}

/// Compares two schema property keys under D1.
///
/// A total order: antisymmetric, transitive, and `Equal` only for identical keys.
///
/// ```
/// use std::cmp::Ordering;
/// use kandev_elicitation::compare_keys;
///
/// assert_eq!(compare_keys("question_2", "question_10"), Ordering::Less);
/// assert_eq!(compare_keys("question_9", "question_"), Ordering::Less);
/// assert_eq!(compare_keys("step1_field2", "step1_field10"), Ordering::Less);
/// assert_eq!(compare_keys("apiKey", "apiKey"), Ordering::Equal);
/// ```
pub fn compare_keys(a: &str, b: &str) -> Ordering {
    let (sa, sb) = (split(a), split(b));
    sa.prefix
        .cmp(sb.prefix)
        .then_with(|| match (sa.number, sb.number) {
            (Some(na), Some(nb)) => na.len().cmp(&nb.len()).then_with(|| na.cmp(nb)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(keys: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        v.sort_by(|a, b| compare_keys(a, b));
        v
    }

    #[test]
    fn numeric_suffixes_compare_numerically() {
        assert_eq!(compare_keys("question_2", "question_10"), Ordering::Less);
        assert_eq!(compare_keys("question_10", "question_2"), Ordering::Greater);
    }

    #[test]
    fn number_sorts_before_no_number_with_equal_prefix() {
        assert_eq!(compare_keys("question_99", "question_"), Ordering::Less);
        assert_eq!(compare_keys("", "0"), Ordering::Greater);
    }

    #[test]
    fn prefix_keeps_interior_digits() {
        // "step1_field" + 2 vs "step1_field" + 10.
        assert_eq!(
            compare_keys("step1_field2", "step1_field10"),
            Ordering::Less
        );
        // Different prefixes: "step1_field" < "step2_field" bytewise, whatever the numbers.
        assert_eq!(
            compare_keys("step2_field1", "step1_field9"),
            Ordering::Greater
        );
    }

    #[test]
    fn leading_and_only_digits() {
        assert_eq!(
            sorted(&["100_items", "42", "7", "a", "007"]),
            ["007", "7", "42", "100_items", "a"]
        );
    }

    #[test]
    fn leading_zeros_tie_break_on_full_key() {
        assert_eq!(compare_keys("x007", "x7"), Ordering::Less);
        assert_eq!(compare_keys("x7", "x007"), Ordering::Greater);
        assert_eq!(compare_keys("x0", "x00"), Ordering::Less);
    }

    #[test]
    fn huge_digit_runs_do_not_overflow() {
        let big = format!("q{}", "9".repeat(100));
        let bigger = format!("q1{}", "0".repeat(100));
        assert_eq!(compare_keys(&big, &bigger), Ordering::Less);
        assert_eq!(
            compare_keys("q18446744073709551616", "q18446744073709551615"),
            Ordering::Greater
        );
    }

    #[test]
    fn non_ascii_keys_are_bytewise() {
        assert_eq!(compare_keys("é1", "z1"), Ordering::Greater);
        assert_eq!(compare_keys("名前2", "名前10"), Ordering::Less);
    }

    #[test]
    fn equal_only_for_identical_keys() {
        assert_eq!(compare_keys("a1", "a1"), Ordering::Equal);
        assert_ne!(compare_keys("a01", "a1"), Ordering::Equal);
    }
}
