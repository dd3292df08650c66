//! D2: attaching custom-answer companions to their questions.
//!
//! A companion is found by its marker only (never by key suffix), resolved before
//! D1 ordering, and never becomes a question itself. A companion naming no question
//! property is ignored; when two name the same question, the one whose own key sorts
//! first under D1 wins and the other is ignored entirely.

use crate::order::compare_keys;
use crate::question::{CustomAnswer, Question};

/// A companion as classified, before resolution.
#[derive(Debug)]
pub(crate) struct Companion {
    /// The question key its marker names.
    pub(crate) target: String,
    /// The companion itself.
    pub(crate) custom: CustomAnswer,
}

/// Sets each question's [`Question::custom_answer`] from `companions`.
pub(crate) fn attach(questions: &mut [Question], companions: Vec<Companion>) {
    for companion in companions {
        let Some(question) = questions.iter_mut().find(|q| q.id == companion.target) else {
            continue;
        };
        let wins = match &question.custom_answer {
            None => true,
            Some(current) => compare_keys(&companion.custom.key, &current.key).is_lt(),
        };
        if wins {
            question.custom_answer = Some(companion.custom);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Constraints, QuestionKind};

    fn question(id: &str) -> Question {
        Question {
            id: id.into(),
            kind: QuestionKind::Text,
            title: None,
            prompt: id.into(),
            options: Vec::new(),
            custom_answer: None,
            required: false,
            default: None,
            constraints: Constraints::default(),
        }
    }

    fn companion(key: &str, target: &str) -> Companion {
        Companion {
            target: target.into(),
            custom: CustomAnswer {
                key: key.into(),
                title: None,
                description: None,
            },
        }
    }

    #[test]
    fn first_under_d1_wins_whatever_the_input_order() {
        for order in [["other_10", "other_2"], ["other_2", "other_10"]] {
            let mut qs = [question("q")];
            attach(&mut qs, order.iter().map(|k| companion(k, "q")).collect());
            assert_eq!(
                qs[0].custom_answer.as_ref().map(|c| c.key.as_str()),
                Some("other_2")
            );
        }
    }

    #[test]
    fn unknown_target_is_ignored() {
        let mut qs = [question("q")];
        attach(&mut qs, vec![companion("c", "missing")]);
        assert_eq!(qs[0].custom_answer, None);
    }
}
