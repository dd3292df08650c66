//! JSON Schema `pattern` checks. JSON Schema patterns are ECMA-262 regular expressions,
//! unanchored, so lookahead, lookbehind and backreferences are legal and must be
//! enforced: `fancy-regex` runs them, with a backtrack limit that keeps one check
//! bounded whatever the pattern. A pattern that cannot be compiled, or whose check
//! runs past the limit, fails closed: the answer is refused, never taken as a match.

use fancy_regex::RegexBuilder;

/// Backtracking steps one check may take before it gives up (and refuses the answer).
const BACKTRACK_LIMIT: usize = 100_000;

/// What a pattern says about a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatternVerdict {
    /// The text matches somewhere (JSON Schema patterns are unanchored).
    Matches,
    /// The text does not match.
    Mismatch,
    /// The pattern cannot be used (it does not compile, or the check ran past the
    /// backtrack limit); `reason` says why, for the operator.
    Unusable {
        /// The engine's words.
        reason: String,
    },
}

/// Checks `text` against `pattern`.
pub(crate) fn check(pattern: &str, text: &str) -> PatternVerdict {
    let regex = match RegexBuilder::new(pattern)
        .backtrack_limit(BACKTRACK_LIMIT)
        .build()
    {
        Ok(regex) => regex,
        Err(err) => {
            return PatternVerdict::Unusable {
                reason: err.to_string(),
            };
        }
    };
    match regex.is_match(text) {
        Ok(true) => PatternVerdict::Matches,
        Ok(false) => PatternVerdict::Mismatch,
        Err(err) => PatternVerdict::Unusable {
            reason: err.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{PatternVerdict, check};
    use proptest::prelude::*;

    const PROD: &str = r"^prod-(?=[0-9]+$)([0-9])\1$";

    #[test]
    fn lookahead_and_backreference_are_enforced() {
        assert_eq!(check(PROD, "prod-44"), PatternVerdict::Matches);
        assert_eq!(check(PROD, "prod-45"), PatternVerdict::Mismatch);
        assert_eq!(check(PROD, "prod-4"), PatternVerdict::Mismatch);
    }

    #[test]
    fn lookbehind_is_enforced() {
        assert_eq!(check("(?<=a)b", "ab"), PatternVerdict::Matches);
        assert_eq!(check("(?<=a)b", "cb"), PatternVerdict::Mismatch);
        assert_eq!(check("(?<!a)b", "ab"), PatternVerdict::Mismatch);
    }

    #[test]
    fn patterns_are_unanchored_searches() {
        assert_eq!(check("[0-9]", "abc1"), PatternVerdict::Matches);
        assert_eq!(check("^[0-9]$", "abc1"), PatternVerdict::Mismatch);
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_unusable() {
        for bad in ["(", "[a-", r"\1(a)(", "a{2,1}"] {
            assert!(
                matches!(check(bad, "a"), PatternVerdict::Unusable { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_check_past_the_backtrack_limit_is_unusable() {
        // Catastrophic backtracking: the backreference forces the backtracking engine.
        let evil = r"^(a+)+\1b$";
        let text = "a".repeat(40);
        assert!(matches!(
            check(evil, &text),
            PatternVerdict::Unusable { .. }
        ));
    }

    proptest! {
        /// The lookahead+backreference rule is exactly "two equal digits after prod-".
        #[test]
        fn prod_pattern_accepts_exactly_doubled_digits(a in 0u8..10, b in 0u8..10, tail in "[0-9a-z]{0,2}") {
            let text = format!("prod-{a}{b}{tail}");
            let expected = a == b && tail.is_empty();
            prop_assert_eq!(check(PROD, &text) == PatternVerdict::Matches, expected);
        }

        /// Plain patterns behave as an unanchored search: a literal is found wherever it is.
        #[test]
        fn a_literal_is_found_anywhere(prefix in "[a-z]{0,5}", suffix in "[a-z]{0,5}") {
            let text = format!("{prefix}XY{suffix}");
            prop_assert_eq!(check("XY", &text), PatternVerdict::Matches);
        }

        /// Never a panic, whatever the pattern and text.
        #[test]
        fn any_pattern_gives_a_verdict(pattern in ".{0,12}", text in ".{0,12}") {
            let _ = check(&pattern, &text);
        }
    }
}
