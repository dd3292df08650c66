//! How a clarification leaves `pending`, exactly once. Who may still change a record
//! afterwards is decided by [`Settlement::effect_on`], the one rule the stores implement
//! as a conditional update:
//!
//! - a pending record takes any settlement;
//! - a status the backend set provisionally (`settled_by = backend`, e.g. after agentctl
//!   said `NOT_FOUND` to a losing respond before the winner's settlement was applied) is
//!   corrected by what agentctl decided: its own event, or an operator's verb it accepted,
//!   when that says something else;
//! - a record agentctl settled first keeps its status, and the operator's settlement of
//!   the same status (the respond whose reply lost the race against the event) still
//!   records the answer and who gave it;
//! - anything else changes nothing.

use kandev_agent_stream::SettleOutcome;
use kandev_elicitation::OperatorAnswer;

use crate::model::clarification::{
    Clarification, ClarificationStatus, Outcome, SettledBy, answered_by,
};
use crate::model::lease::Fence;

/// One way a record leaves `pending`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// The status it takes.
    pub status: ClarificationStatus,
    /// What became of it.
    pub outcome: Outcome,
    /// Who settles.
    pub by: SettledBy,
    /// The operator's answer, when one was given.
    pub answer: Option<OperatorAnswer>,
    /// The operator, when one acted.
    pub answered_by: Option<String>,
    /// The lease generation of the session's owner this settlement is made under: it
    /// applies only while that lease stands (docs/architecture.md §12).
    pub fence: Fence,
}

/// What a [`Settlement`] does to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// It settles (or corrects) the record.
    Settle,
    /// The record keeps its status; the answer and who gave it are recorded.
    RecordAnswer,
    /// Nothing changes.
    Nothing,
}

/// The facts of a record that decide a settlement's [`Effect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Standing {
    /// Its status.
    pub status: ClarificationStatus,
    /// Its outcome.
    pub outcome: Option<Outcome>,
    /// Who settled it.
    pub settled_by: Option<SettledBy>,
    /// Whether an operator is recorded on it.
    pub has_operator: bool,
}

impl Settlement {
    /// agentctl's settled event.
    pub fn from_agentctl(outcome: SettleOutcome) -> Self {
        // What answered when the deadline did something else than decline.
        let answered_by = match outcome {
            SettleOutcome::TimedOutDefaults => Some(answered_by::DEADLINE_DEFAULTS.to_owned()),
            SettleOutcome::TimedOutCancelled => Some(answered_by::DEADLINE_CANCEL.to_owned()),
            _ => None,
        };
        let (status, outcome) = match outcome {
            SettleOutcome::Answered => (ClarificationStatus::Answered, Outcome::Answered),
            SettleOutcome::Declined => (ClarificationStatus::Declined, Outcome::Skipped),
            SettleOutcome::OperatorCancelled => {
                (ClarificationStatus::Cancelled, Outcome::Cancelled)
            }
            SettleOutcome::TimedOut
            | SettleOutcome::TimedOutDefaults
            | SettleOutcome::TimedOutCancelled => (ClarificationStatus::Expired, Outcome::TimedOut),
            SettleOutcome::AgentCancelled | SettleOutcome::TurnCancelled => {
                (ClarificationStatus::Cancelled, Outcome::AgentCancelled)
            }
            SettleOutcome::Shutdown => (ClarificationStatus::Cancelled, Outcome::Withdrawn),
            SettleOutcome::AgentExited => {
                (ClarificationStatus::AgentDisconnected, Outcome::Withdrawn)
            }
        };
        Self {
            status,
            outcome,
            by: SettledBy::Agentctl,
            answer: None,
            answered_by,
            fence: Fence::NONE,
        }
    }

    /// What an agentctl settlement event reports (`elicitation_settled`,
    /// `ask_user_question_settled`): the operator's answer or cancel when it echoes who
    /// gave it, else agentctl's own outcome.
    pub fn reported(
        outcome: SettleOutcome,
        answer: Option<OperatorAnswer>,
        answered_by: Option<&str>,
    ) -> Self {
        match (outcome, answer, answered_by) {
            (SettleOutcome::Answered | SettleOutcome::Declined, Some(answer), Some(who)) => {
                Self::answered(answer, who)
            }
            (SettleOutcome::OperatorCancelled, _, Some(who)) => Self::cancelled_by(who),
            (outcome, _, _) => Self::from_agentctl(outcome),
        }
    }

    /// The operator's answer (or skip, with `rejected: true`), accepted by agentctl.
    pub fn answered(answer: OperatorAnswer, operator: &str) -> Self {
        let (status, outcome) = if answer.rejected {
            (ClarificationStatus::Declined, Outcome::Skipped)
        } else {
            (ClarificationStatus::Answered, Outcome::Answered)
        };
        Self {
            status,
            outcome,
            by: SettledBy::Operator,
            answer: Some(answer),
            answered_by: Some(operator.to_owned()),
            fence: Fence::NONE,
        }
    }

    /// The operator's cancel, accepted by agentctl.
    pub fn cancelled_by(operator: &str) -> Self {
        Self {
            status: ClarificationStatus::Cancelled,
            outcome: Outcome::Cancelled,
            by: SettledBy::Operator,
            answer: None,
            answered_by: Some(operator.to_owned()),
            fence: Fence::NONE,
        }
    }

    /// The backend's own settlement (provisional until agentctl says otherwise).
    pub fn by_backend(status: ClarificationStatus, outcome: Outcome) -> Self {
        Self {
            status,
            outcome,
            by: SettledBy::Backend,
            answer: None,
            answered_by: None,
            fence: Fence::NONE,
        }
    }

    /// The same settlement, applied only while the session's lease has `fence`'s
    /// generation.
    pub fn fenced(self, fence: Fence) -> Self {
        Self { fence, ..self }
    }

    /// Its agent or agentctl is gone: it can never be answered.
    pub fn disconnected() -> Self {
        Self::by_backend(ClarificationStatus::AgentDisconnected, Outcome::Withdrawn)
    }

    /// What this settlement does to a record standing as `current` (see the module docs).
    pub fn effect_on(&self, current: Standing) -> Effect {
        if current.status == ClarificationStatus::Pending {
            return Effect::Settle;
        }
        let differs = (current.status, current.outcome) != (self.status, Some(self.outcome));
        match (current.settled_by, self.by) {
            (Some(SettledBy::Backend), SettledBy::Agentctl | SettledBy::Operator) if differs => {
                Effect::Settle
            }
            (Some(SettledBy::Agentctl), SettledBy::Operator)
                if current.status == self.status && !current.has_operator =>
            {
                Effect::RecordAnswer
            }
            _ => Effect::Nothing,
        }
    }
}

impl Clarification {
    /// The facts [`Settlement::effect_on`] decides by.
    pub fn standing(&self) -> Standing {
        Standing {
            status: self.status,
            outcome: self.outcome,
            settled_by: self.settled_by,
            has_operator: self.answered_by.is_some(),
        }
    }
}

/// What the property tests draw: the settlement made of the `status`th, `outcome`th and
/// `by`th entries of the `ALL` lists, naming an operator when one settles.
#[cfg(test)]
impl Settlement {
    pub(crate) fn drawn(status: usize, outcome: usize, by: usize) -> Self {
        let by = SettledBy::ALL[by];
        Self {
            status: ClarificationStatus::ALL[status],
            outcome: Outcome::ALL[outcome],
            by,
            answer: None,
            answered_by: (by == SettledBy::Operator).then(|| "op".to_owned()),
            fence: Fence::NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_reported_settlement_is_the_operators_only_when_it_echoes_who() {
        let answer = OperatorAnswer::default();
        let cases = [
            (
                SettleOutcome::Answered,
                Some(answer.clone()),
                Some("alice"),
                Settlement::answered(answer.clone(), "alice"),
            ),
            (
                SettleOutcome::OperatorCancelled,
                None,
                Some("bob"),
                Settlement::cancelled_by("bob"),
            ),
            // No operator echoed (an older agentctl, or agentctl's own outcome).
            (
                SettleOutcome::Answered,
                Some(answer.clone()),
                None,
                Settlement::from_agentctl(SettleOutcome::Answered),
            ),
            (
                SettleOutcome::OperatorCancelled,
                None,
                None,
                Settlement::from_agentctl(SettleOutcome::OperatorCancelled),
            ),
            (
                SettleOutcome::TimedOut,
                None,
                Some("alice"),
                Settlement::from_agentctl(SettleOutcome::TimedOut),
            ),
        ];
        for (outcome, answer, who, expected) in cases {
            assert_eq!(
                Settlement::reported(outcome, answer, who),
                expected,
                "{outcome:?} {who:?}"
            );
        }
    }

    #[test]
    fn agentctl_outcomes_map_to_status_and_outcome() {
        use ClarificationStatus as S;
        use Outcome as O;
        use SettleOutcome as E;
        let cases = [
            (E::Answered, S::Answered, O::Answered),
            (E::Declined, S::Declined, O::Skipped),
            (E::OperatorCancelled, S::Cancelled, O::Cancelled),
            (E::TimedOut, S::Expired, O::TimedOut),
            (E::TimedOutDefaults, S::Expired, O::TimedOut),
            (E::TimedOutCancelled, S::Expired, O::TimedOut),
            (E::AgentCancelled, S::Cancelled, O::AgentCancelled),
            (E::TurnCancelled, S::Cancelled, O::AgentCancelled),
            (E::Shutdown, S::Cancelled, O::Withdrawn),
            (E::AgentExited, S::AgentDisconnected, O::Withdrawn),
        ];
        assert_eq!(Settlement::from_agentctl(E::TimedOut).answered_by, None);
        assert_eq!(
            Settlement::from_agentctl(E::TimedOutDefaults)
                .answered_by
                .as_deref(),
            Some("deadline:defaults")
        );
        assert_eq!(
            Settlement::from_agentctl(E::TimedOutCancelled)
                .answered_by
                .as_deref(),
            Some("deadline:cancel")
        );
        for (event, status, outcome) in cases {
            let s = Settlement::from_agentctl(event);
            assert_eq!(
                (s.status, s.outcome, s.by),
                (status, outcome, SettledBy::Agentctl)
            );
        }
    }

    #[test]
    fn a_skip_is_declined_and_an_answer_answered() {
        let skip = OperatorAnswer {
            rejected: true,
            ..OperatorAnswer::default()
        };
        let s = Settlement::answered(skip, "alice");
        assert_eq!(
            (s.status, s.outcome),
            (ClarificationStatus::Declined, Outcome::Skipped)
        );
        assert_eq!(s.answered_by.as_deref(), Some("alice"));
        let s = Settlement::answered(OperatorAnswer::default(), "local");
        assert_eq!(
            (s.status, s.outcome),
            (ClarificationStatus::Answered, Outcome::Answered)
        );
    }

    /// Why only agentctl's settlements may be skipped on a read: an operator's answer
    /// that matches what the backend settled does nothing, but once agentctl corrects the
    /// backend to the same status, the same answer is recorded.
    #[test]
    fn an_operators_answer_that_did_nothing_may_be_recorded_later() {
        let by_backend = Standing {
            status: ClarificationStatus::Answered,
            outcome: Some(Outcome::Cancelled),
            settled_by: Some(SettledBy::Backend),
            has_operator: false,
        };
        let operator = Settlement {
            status: ClarificationStatus::Answered,
            outcome: Outcome::Cancelled,
            by: SettledBy::Operator,
            answer: None,
            answered_by: Some("op".into()),
            fence: Fence::NONE,
        };
        assert_eq!(operator.effect_on(by_backend), Effect::Nothing);
        let by_agentctl = Standing {
            outcome: Some(Outcome::Answered),
            settled_by: Some(SettledBy::Agentctl),
            ..by_backend
        };
        assert_eq!(operator.effect_on(by_agentctl), Effect::RecordAnswer);
    }

    fn standing(status: usize, outcome: usize, by: usize, has_operator: bool) -> Standing {
        let status = ClarificationStatus::ALL[status];
        let pending = status == ClarificationStatus::Pending;
        Standing {
            status,
            outcome: (!pending).then_some(Outcome::ALL[outcome]),
            settled_by: (!pending).then_some(SettledBy::ALL[by]),
            has_operator,
        }
    }

    proptest! {
        /// A pending record takes anything; once settled, only agentctl's word (its event
        /// or a verb it accepted) corrects the backend, only the operator adds its answer
        /// to agentctl's settlement, and a
        /// settlement applied twice changes nothing the second time.
        #[test]
        fn settlement_rules(
            status in 0usize..6, outcome in 0usize..6, by in 0usize..3, has_op in any::<bool>(),
            new_status in 1usize..6, new_outcome in 0usize..6, new_by in 0usize..3,
        ) {
            let current = standing(status, outcome, by, has_op);
            let s = Settlement::drawn(new_status, new_outcome, new_by);
            let effect = s.effect_on(current);
            if current.status == ClarificationStatus::Pending {
                prop_assert_eq!(effect, Effect::Settle);
            } else {
                match effect {
                    Effect::Settle => {
                        prop_assert_eq!(current.settled_by, Some(SettledBy::Backend));
                        prop_assert_ne!(s.by, SettledBy::Backend);
                    }
                    Effect::RecordAnswer => {
                        prop_assert_eq!(current.settled_by, Some(SettledBy::Agentctl));
                        prop_assert_eq!(s.by, SettledBy::Operator);
                        prop_assert_eq!(current.status, s.status);
                    }
                    Effect::Nothing => {}
                }
            }
            // Applying the same settlement again is a no-op.
            let after = match effect {
                Effect::Settle => Standing {
                    status: s.status,
                    outcome: Some(s.outcome),
                    settled_by: Some(s.by),
                    has_operator: s.answered_by.is_some() || current.has_operator,
                },
                Effect::RecordAnswer => Standing { has_operator: true, ..current },
                Effect::Nothing => current,
            };
            prop_assert_eq!(s.effect_on(after), Effect::Nothing);
        }

        /// A settlement of agentctl's that does nothing to a settled record never will,
        /// whatever comes after: so a store may read the record outside a transaction and
        /// skip agentctl's write (a stale read only shows an earlier standing). Not so for
        /// the operator's (`an_operators_answer_that_did_nothing_may_be_recorded_later`),
        /// whose settlement the store always writes.
        #[test]
        fn nothing_is_final_for_agentctl(
            status in 0usize..6, outcome in 0usize..6, by in 0usize..3, has_op in any::<bool>(),
            later in proptest::collection::vec((1usize..6, 0usize..6, 0usize..3), 0..4),
            new_status in 1usize..6, new_outcome in 0usize..6,
        ) {
            let new_by = 0;
            prop_assert_eq!(SettledBy::ALL[new_by], SettledBy::Agentctl);
            let settlement = |status: usize, outcome: usize, by: usize| Settlement {
                status: ClarificationStatus::ALL[status],
                outcome: Outcome::ALL[outcome],
                by: SettledBy::ALL[by],
                answer: None,
                answered_by: (SettledBy::ALL[by] == SettledBy::Operator).then(|| "op".to_owned()),
                fence: Fence::NONE,
            };
            let s = settlement(new_status, new_outcome, new_by);
            let mut current = standing(status, outcome, by, has_op);
            if s.effect_on(current) == Effect::Nothing {
                for (status, outcome, by) in later {
                    let t = settlement(status, outcome, by);
                    current = match t.effect_on(current) {
                        Effect::Settle => Standing {
                            status: t.status,
                            outcome: Some(t.outcome),
                            settled_by: Some(t.by),
                            has_operator: t.answered_by.is_some() || current.has_operator,
                        },
                        Effect::RecordAnswer => Standing { has_operator: true, ..current },
                        Effect::Nothing => current,
                    };
                    prop_assert_eq!(s.effect_on(current), Effect::Nothing);
                }
            }
        }
    }
}
