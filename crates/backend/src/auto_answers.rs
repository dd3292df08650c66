//! Auto-answer rules at work (`[[agents.<id>.auto_answers]]`, configured and checked in
//! `config::auto_answers`): when a question opens on a session live here, the first rule
//! of its agent that matches waits `after`, then answers through the operator's own path
//! ([`Clarifications::respond`]: the same validation, forward-first, D5) as
//! `rule:<name>`. An operator who answers first wins: the rule then finds the record
//! settled and does nothing, and a race at the last moment is agentctl's to decide.
//!
//! A rule whose answer does not fit the question never answers: the answer is checked
//! against the question before anything is sent, and the question stays with the
//! operator, with the reason logged and counted (`kandev_auto_answers_total`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kandev_elicitation::{
    Answer, MappedElicitation, OperatorAnswer, build_response, defaults_answer,
};
use tracing::Instrument;

use crate::clarifications::{Clarifications, SessionAgents};
use crate::config::{AutoAnswerRule, Config, RuleAnswer, RuleTool, answer_deadline};
use crate::model::clarification::answered_by::RULE_PREFIX;
use crate::model::{Clarification, ClarificationStatus, Source};

/// Every agent's rules, compiled once at start.
#[derive(Debug, Default)]
pub struct AutoAnswers {
    by_agent: BTreeMap<String, Vec<AutoAnswerRule>>,
}

impl AutoAnswers {
    /// The rules of a validated configuration (one that does not compile is skipped:
    /// validation has refused it already).
    pub fn from_config(config: &Config) -> Self {
        let deadline = answer_deadline();
        let by_agent = config
            .agents
            .iter()
            .map(|(id, agent)| {
                let rules = agent
                    .auto_answers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, rule)| {
                        rule.compile(&format!("agents.{id}.auto_answers[{i}]"), deadline)
                            .ok()
                    })
                    .collect();
                (id.clone(), rules)
            })
            .collect();
        Self { by_agent }
    }

    /// The first rule of `agent` that matches `record`.
    pub fn first_match(&self, agent: &str, record: &Clarification) -> Option<&AutoAnswerRule> {
        self.by_agent
            .get(agent)?
            .iter()
            .find(|rule| matches(rule, record))
    }

    /// `record` just opened on a session of `agent` live here: the first matching rule,
    /// if any, answers it after its `after`.
    pub fn opened(
        &self,
        clarifications: &Clarifications,
        agents: Arc<dyn SessionAgents>,
        agent: &str,
        record: &Clarification,
    ) {
        let Some(rule) = self.first_match(agent, record) else {
            return;
        };
        let span = tracing::info_span!("auto_answer", rule = %rule.name, session_id = %record.session_id, pending_id = %record.pending_id);
        let answer = {
            let _entered = span.enter();
            match answer_of(rule, record) {
                Ok(answer) => answer,
                Err(reason) => {
                    tracing::warn!(%reason, "auto-answer rule cannot answer this question; it stays with the operator");
                    crate::metrics::auto_answer("invalid");
                    return;
                }
            }
        };
        let clarifications = clarifications.clone();
        let after = rule.after;
        let by = format!("{RULE_PREFIX}{}", rule.name);
        let pending_id = record.pending_id.clone();
        tokio::spawn(
            async move {
                tokio::time::sleep(after).await;
                fire(&clarifications, &*agents, &pending_id, answer, &by).await;
            }
            .instrument(span),
        );
    }
}

/// Answers `pending_id` as `by`, unless it was settled meanwhile.
async fn fire(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    pending_id: &str,
    answer: OperatorAnswer,
    by: &str,
) {
    match clarifications.record_of(agents, pending_id).await {
        Ok(Some(record)) if record.status == ClarificationStatus::Pending => {}
        Ok(_) => {
            tracing::info!("auto-answer rule did not answer: the question was settled first");
            crate::metrics::auto_answer("preempted");
            return;
        }
        Err(err) => {
            tracing::warn!(error = %err, "auto-answer rule did not answer: the record cannot be read");
            crate::metrics::auto_answer("refused");
            return;
        }
    }
    match clarifications.respond(agents, pending_id, answer, by).await {
        Ok(status) => {
            tracing::info!(?status, "auto-answer rule answered");
            crate::metrics::auto_answer("answered");
        }
        Err(err) => {
            tracing::info!(error = %err, "auto-answer rule did not answer: refused");
            crate::metrics::auto_answer("refused");
        }
    }
}

/// Whether every criterion of `rule` holds for `record`.
fn matches(rule: &AutoAnswerRule, record: &Clarification) -> bool {
    let tool = match record.source {
        Source::Elicitation => RuleTool::Elicitation,
        Source::AskUserQuestion => RuleTool::AskUserQuestion,
    };
    if rule.tool.is_some_and(|t| t != tool) {
        return false;
    }
    let questions: Vec<_> = match &rule.question_id {
        Some(id) => record.questions.iter().filter(|q| &q.id == id).collect(),
        None => record.questions.iter().collect(),
    };
    if questions.is_empty() {
        return false;
    }
    if rule
        .message
        .as_ref()
        .is_some_and(|re| !re.is_match(&record.message))
    {
        return false;
    }
    rule.prompt
        .as_ref()
        .is_none_or(|re| questions.iter().any(|q| re.is_match(&q.prompt)))
}

/// What `rule` answers to `record`, checked against its questions as the answer path
/// will check it; the reason when it does not fit.
pub fn answer_of(rule: &AutoAnswerRule, record: &Clarification) -> Result<OperatorAnswer, String> {
    let answer = match &rule.answer {
        RuleAnswer::Skip => OperatorAnswer {
            answers: Vec::new(),
            rejected: true,
            reject_reason: format!("skipped by rule `{}`", rule.name),
        },
        RuleAnswer::Defaults => defaults_answer(&record.questions)
            .ok_or_else(|| "a required question has no default".to_owned())?,
        RuleAnswer::Given { options, text } => {
            let question_id = match (&rule.question_id, record.questions.as_slice()) {
                (Some(id), _) => id.clone(),
                (None, [only]) => only.id.clone(),
                (None, many) => {
                    return Err(format!(
                        "the form has {} questions and the rule names no question_id",
                        many.len()
                    ));
                }
            };
            OperatorAnswer {
                answers: vec![Answer {
                    question_id,
                    selected_options: options.clone(),
                    custom_text: text.clone(),
                }],
                ..OperatorAnswer::default()
            }
        }
    };
    match record.source {
        Source::Elicitation => {
            let form = MappedElicitation {
                session_id: String::new(),
                tool_call_id: record.tool_call_id.clone(),
                message: record.message.clone(),
                questions: record.questions.clone(),
            };
            build_response(&form, &answer).map_err(|err| err.to_string())?;
        }
        Source::AskUserQuestion => {
            kandev_elicitation::ask_user_question::validate(&record.questions, &answer)
                .map_err(|err| err.to_string())?;
        }
    }
    Ok(answer)
}
