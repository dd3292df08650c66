//! The answer rules of the `ask_user_question_kandev` path (docs/architecture.md §6 F3, spec
//! AC-57), which are stricter than an elicitation's: either `rejected: true` with no
//! answers, or every question answered exactly once with one declared option or custom
//! text (at most [`MAX_CUSTOM_TEXT_CHARS`] characters), never both.

use std::collections::HashSet;

use crate::answer::{Answer, OperatorAnswer};
use crate::question::Question;

/// The longest custom answer this path accepts, in characters.
pub const MAX_CUSTOM_TEXT_CHARS: usize = 2000;

/// Why an answer breaks this path's rules; each names the question at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionAnswerError {
    /// `rejected: true` came with answers.
    #[error("`rejected: true` must come alone: send no answers when skipping")]
    RejectWithAnswers,
    /// An answer names no question of the bundle.
    #[error("unknown question `{id}`; this clarification asks {known}")]
    UnknownQuestion {
        /// The id given.
        id: String,
        /// The ids asked, quoted and comma-separated.
        known: String,
    },
    /// A question is answered twice.
    #[error("question `{0}` is answered more than once")]
    Repeated(String),
    /// Questions are left unanswered.
    #[error(
        "every question must be answered (or the whole bundle skipped with `rejected: true`); missing: {}",
        .0.join(", ")
    )]
    Missing(Vec<String>),
    /// Neither an option nor text.
    #[error("question `{0}` has no answer: choose one option or type a custom answer")]
    Empty(String),
    /// Both an option and text.
    #[error("question `{0}`: choose an option or type a custom answer, not both")]
    Both(String),
    /// An option the question does not offer.
    #[error("question `{id}` has no option `{option}`")]
    NoSuchOption {
        /// The question.
        id: String,
        /// The option given.
        option: String,
    },
    /// More than one option.
    #[error("question `{id}` takes exactly one option, got {count}")]
    SeveralOptions {
        /// The question.
        id: String,
        /// How many were given.
        count: usize,
    },
    /// Custom text past the limit.
    #[error(
        "question `{id}`: the custom answer is {chars} characters; at most {MAX_CUSTOM_TEXT_CHARS} are accepted"
    )]
    TooLong {
        /// The question.
        id: String,
        /// Its length in characters.
        chars: usize,
    },
}

/// Checks an operator answer against this path's rules.
pub fn validate(
    questions: &[Question],
    answer: &OperatorAnswer,
) -> Result<(), QuestionAnswerError> {
    if answer.rejected {
        return if answer.answers.is_empty() {
            Ok(())
        } else {
            Err(QuestionAnswerError::RejectWithAnswers)
        };
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for given in &answer.answers {
        let Some(question) = questions.iter().find(|q| q.id == given.question_id) else {
            return Err(QuestionAnswerError::UnknownQuestion {
                id: given.question_id.clone(),
                known: questions
                    .iter()
                    .map(|q| format!("`{}`", q.id))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        if !seen.insert(given.question_id.as_str()) {
            return Err(QuestionAnswerError::Repeated(given.question_id.clone()));
        }
        check_one(question, given)?;
    }
    let missing: Vec<String> = questions
        .iter()
        .filter(|q| !seen.contains(q.id.as_str()))
        .map(|q| q.id.clone())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(QuestionAnswerError::Missing(missing))
    }
}

fn check_one(question: &Question, answer: &Answer) -> Result<(), QuestionAnswerError> {
    let id = || question.id.clone();
    let text = answer.custom_text.trim();
    match (answer.selected_options.as_slice(), text.is_empty()) {
        ([], true) => Err(QuestionAnswerError::Empty(id())),
        ([_, ..], false) => Err(QuestionAnswerError::Both(id())),
        ([one], true) if question.options.iter().any(|o| &o.id == one) => Ok(()),
        ([one], true) => Err(QuestionAnswerError::NoSuchOption {
            id: id(),
            option: one.clone(),
        }),
        ([_, _, ..], true) => Err(QuestionAnswerError::SeveralOptions {
            id: id(),
            count: answer.selected_options.len(),
        }),
        ([], false) => {
            let chars = text.chars().count();
            if chars > MAX_CUSTOM_TEXT_CHARS {
                Err(QuestionAnswerError::TooLong { id: id(), chars })
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Constraints, QuestionKind, QuestionOption};
    use proptest::prelude::*;

    fn question(id: &str, labels: &[&str]) -> Question {
        Question {
            id: id.to_owned(),
            kind: QuestionKind::SingleSelect,
            title: None,
            prompt: "p".to_owned(),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    id: (*l).to_owned(),
                    label: (*l).to_owned(),
                    description: None,
                    preview: None,
                })
                .collect(),
            custom_answer: None,
            required: true,
            default: None,
            constraints: Constraints::default(),
        }
    }

    fn answer(id: &str, selected: &[&str], text: &str) -> Answer {
        Answer {
            question_id: id.to_owned(),
            selected_options: selected.iter().map(|s| (*s).to_owned()).collect(),
            custom_text: text.to_owned(),
        }
    }

    fn body(answers: Vec<Answer>, rejected: bool) -> OperatorAnswer {
        OperatorAnswer {
            answers,
            rejected,
            reject_reason: String::new(),
        }
    }

    fn two() -> Vec<Question> {
        vec![
            question("q1", &["Postgres", "SQLite"]),
            question("q2", &["Redis", "None"]),
        ]
    }

    #[test]
    fn one_option_or_custom_text_per_question_is_accepted() {
        let ok = body(
            vec![
                answer("q1", &["Postgres"], ""),
                answer("q2", &[], "memcached"),
            ],
            false,
        );
        assert_eq!(validate(&two(), &ok), Ok(()));
        assert_eq!(validate(&two(), &body(vec![], true)), Ok(()));
    }

    #[test]
    fn each_rule_has_its_own_message() {
        let qs = two();
        let cases = [
            (
                body(
                    vec![
                        answer("q1", &["Postgres"], "x"),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "not both",
            ),
            (
                body(vec![answer("q1", &["Postgres"], "")], false),
                "missing: q2",
            ),
            (
                body(
                    vec![
                        answer("q1", &["Postgres", "SQLite"], ""),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "exactly one option",
            ),
            (
                body(
                    vec![answer("q1", &["MySQL"], ""), answer("q2", &["Redis"], "")],
                    false,
                ),
                "no option `MySQL`",
            ),
            (
                body(
                    vec![answer("q1", &[], "  "), answer("q2", &["Redis"], "")],
                    false,
                ),
                "has no answer",
            ),
            (
                body(
                    vec![
                        answer("q1", &["Postgres"], ""),
                        answer("q1", &["SQLite"], ""),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "more than once",
            ),
            (
                body(vec![answer("q9", &["Postgres"], "")], false),
                "unknown question `q9`",
            ),
            (
                body(vec![answer("q1", &["Postgres"], "")], true),
                "must come alone",
            ),
        ];
        for (b, expected) in cases {
            let err = validate(&qs, &b).expect_err(expected).to_string();
            assert!(err.contains(expected), "{err:?} should say {expected:?}");
        }
    }

    #[test]
    fn custom_text_is_limited_to_2000_characters() {
        let qs = vec![question("q1", &["a", "b"])];
        let at_limit = "é".repeat(MAX_CUSTOM_TEXT_CHARS);
        assert_eq!(
            validate(&qs, &body(vec![answer("q1", &[], &at_limit)], false)),
            Ok(())
        );
        let over = "é".repeat(MAX_CUSTOM_TEXT_CHARS + 1);
        let err =
            validate(&qs, &body(vec![answer("q1", &[], &over)], false)).expect_err("too long");
        assert!(err.to_string().contains("2001 characters"), "{err}");
    }

    proptest! {
        /// Whatever the answer, it is accepted exactly when every question has one
        /// declared option xor non-blank text of at most 2,000 characters.
        #[test]
        fn accepted_exactly_when_the_rules_hold(
            picks in proptest::collection::vec((proptest::option::of(0usize..3), proptest::option::of("[a-z ]{0,4}")), 2),
        ) {
            let qs = two();
            let labels = [["Postgres", "SQLite", "MySQL"], ["Redis", "None", "Memcached"]];
            let answers: Vec<Answer> = picks.iter().enumerate().map(|(i, (pick, text))| Answer {
                question_id: qs[i].id.clone(),
                selected_options: pick.map(|p| vec![labels[i][p].to_owned()]).unwrap_or_default(),
                custom_text: text.clone().unwrap_or_default(),
            }).collect();
            let expected = picks.iter().all(|(pick, text)| {
                let has_text = text.as_deref().is_some_and(|t| !t.trim().is_empty());
                match pick {
                    Some(p) => *p < 2 && !has_text,
                    None => has_text,
                }
            });
            prop_assert_eq!(validate(&qs, &body(answers, false)).is_ok(), expected);
        }
    }
}
