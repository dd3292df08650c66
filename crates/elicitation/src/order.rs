//! D1: the total, deterministic order of questions by schema property key.
//!
//! Declaration order does not survive every JSON binding, so questions are ordered by
//! their keys: split each key at its maximal trailing run of ASCII digits; compare the
//! prefixes bytewise; with equal prefixes a key with a number sorts before one without
//! and two numbers compare numerically (`question_2` < `question_10`); the full key,
//! bytewise, breaks any remaining tie.

use std::cmp::Ordering;

/// Compares two schema property keys under D1.
pub fn compare_keys(a: &str, b: &str) -> Ordering {
    todo!("D1 {a} {b}")
}
