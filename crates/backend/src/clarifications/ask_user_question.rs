//! Clarifications raised by the `ask_user_question_kandev` MCP tool agentctl serves
//! (docs/architecture.md §6 F3, spec AC-57, D4). What differs from an elicitation:
//!
//! - the record id is minted here (UUID v4); agentctl's `request_id` names one tool call,
//!   and several calls may wait on one record;
//! - creation is deduplicated: a call on the same session whose normalised questions
//!   match a still-pending record of this source joins it — no second message, record or
//!   notification;
//! - the backend adjudicates the answer: this path's rules
//!   ([`kandev_elicitation::ask_user_question::validate`]), then whoever claims the record
//!   delivers it to every waiting call with `agent.questions.respond`; a later answer gets
//!   409 `NOT_ACTIVE`. The claim is a conditional update, so this holds across processes.

use kandev_agent_stream::request::{QuestionsCancel, QuestionsRespond};
use kandev_agent_stream::response::Success;
use kandev_agent_stream::{AskUserQuestionRequested, ErrorCode, ErrorPayload, SettleOutcome};
use kandev_elicitation::{OperatorAnswer, Question};
use serde_json::{Value, json};

use super::error::{ClarificationError, Origin};
use super::service::{
    CancelStatus, Clarifications, RespondStatus, SessionAgents, SessionRef, has_verdict,
};
use crate::agent_link::{DynLink, LinkError, call};
use crate::model::{
    Clarification, ClarificationStatus, NewClarification, Outcome, Settlement, Source,
};
use crate::store::{Claim, QuestionOpened, StoreError};

/// The `outcome` stored on a call agentctl no longer held after a re-attach (its own
/// `ask_user_question_settled` never arrived).
pub const RETURNED_UNSEEN: &str = "returned_unseen";

/// The dedup identity of a bundle of questions: ids, titles, prompts and options with
/// surrounding and repeated whitespace removed, in order.
pub fn normalised_key(questions: &[Question]) -> String {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let opt = |s: &Option<String>| s.as_deref().map(squash);
    let normal: Vec<Value> = questions
        .iter()
        .map(|q| {
            json!([
                q.id.trim(),
                opt(&q.title),
                squash(&q.prompt),
                q.options
                    .iter()
                    .map(|o| json!([squash(&o.label), opt(&o.description)]))
                    .collect::<Vec<_>>(),
            ])
        })
        .collect();
    Value::Array(normal).to_string()
}

/// `ask_user_question_requested`: opens (or joins, D4) the record, in one transaction;
/// the record when it is new.
pub async fn requested(
    clarifications: &Clarifications,
    session: &SessionRef,
    request: &AskUserQuestionRequested,
) -> Result<Option<Clarification>, StoreError> {
    let content = request
        .context
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .or_else(|| request.questions.first().map(|q| q.prompt.as_str()))
        .unwrap_or("")
        .to_owned();
    let record = NewClarification {
        pending_id: uuid::Uuid::new_v4().to_string(),
        source: Source::AskUserQuestion,
        task_id: session.task_id.clone(),
        session_id: session.session_id.clone(),
        tool_call_id: None,
        message: content.clone(),
        questions: request.questions.clone(),
        expires_at: crate::reach::deadline::parse_wire(request.expires_at.as_deref()),
        on_deadline: None,
    };
    let message = super::elicitation::request_message(session, &record, &content);
    let key = normalised_key(&request.questions);
    match clarifications
        .stores
        .clarifications
        .open_question(&request.request_id, &key, &record, &message)
        .await?
    {
        QuestionOpened::Duplicate => Ok(None),
        QuestionOpened::Joined { pending_id } => {
            tracing::info!(
                request_id = %request.request_id,
                pending_id = %pending_id,
                "same questions already pending on this session; the call joins that record (D4)"
            );
            Ok(None)
        }
        QuestionOpened::Opened { record, message } => {
            let opened = (*record).clone();
            clarifications
                .announce_opened(session, *record, *message)
                .await?;
            Ok(Some(opened))
        }
    }
}

/// `ask_user_question_settled`: a call returned to the agent. When it returned without
/// the operator's answer and no other call waits on its record, the record is settled
/// with that outcome — proof, too, that an answer whose reply was cut off arrived.
pub async fn returned(
    clarifications: &Clarifications,
    session: &SessionRef,
    request_id: &str,
    outcome: SettleOutcome,
) -> Result<(), StoreError> {
    let name = serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let settled = clarifications
        .stores
        .clarifications
        .call_returned(
            request_id,
            &name,
            &Settlement::from_agentctl(outcome).fenced(session.fence),
        )
        .await?;
    if let Some(done) = settled {
        tracing::info!(request_id, pending_id = %done.record.pending_id, status = done.record.status.as_str(), "clarification settled: its last tool call returned");
        clarifications.announce(&done);
    }
    Ok(())
}

/// After a re-attach: `held` is agentctl's `agent.questions.list`. A listed call the
/// backend does not know yet is opened; a call still waiting here but no longer held has
/// returned and its settlement was lost: it returns here with [`RETURNED_UNSEEN`], its
/// record `cancelled` when it was the last (the real outcome is unknown).
pub async fn reconcile(
    clarifications: &Clarifications,
    session: &SessionRef,
    held: &[AskUserQuestionRequested],
) -> Result<(), StoreError> {
    for request in held {
        requested(clarifications, session, request).await?;
    }
    let waiting = clarifications
        .stores
        .clarifications
        .waiting_calls_of_session(&session.session_id)
        .await?;
    let unseen = Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn)
        .fenced(session.fence);
    for request_id in waiting
        .iter()
        .filter(|id| !held.iter().any(|h| &h.request_id == *id))
    {
        tracing::info!(session_id = %session.session_id, request_id = %request_id, "tool call no longer held by agentctl; its settlement was lost");
        if let Some(done) = clarifications
            .stores
            .clarifications
            .call_returned(request_id, RETURNED_UNSEEN, &unseen)
            .await?
        {
            clarifications.announce(&done);
        }
    }
    Ok(())
}

/// 409 `NOT_ACTIVE`.
fn not_active(pending_id: &str, status: ClarificationStatus) -> ClarificationError {
    ClarificationError::NotActive(format!(
        "clarification `{pending_id}` is {} and takes no more answers",
        status.as_str()
    ))
}

/// The operator's verb for one waiting call.
enum Verb<'a> {
    Answer(&'a OperatorAnswer),
    Cancel,
}

impl Verb<'_> {
    async fn send(&self, link: &DynLink, request_id: &str) -> Result<Success, LinkError> {
        match self {
            Verb::Answer(answer) => {
                let payload = QuestionsRespond {
                    request_id: request_id.to_owned(),
                    result: (*answer).clone(),
                };
                let asked = std::time::Instant::now();
                let verdict = call(&**link, &payload).await;
                crate::metrics::delivery(Source::AskUserQuestion, asked, has_verdict(&verdict));
                verdict
            }
            Verb::Cancel => {
                let payload = QuestionsCancel {
                    request_id: request_id.to_owned(),
                };
                call(&**link, &payload).await
            }
        }
    }

    fn call_outcome(&self) -> &'static str {
        match self {
            Verb::Answer(a) if a.rejected => "declined",
            Verb::Answer(_) => "answered",
            Verb::Cancel => "operator_cancelled",
        }
    }
}

/// Claims the record, sends `verb` to every call waiting on it, settles with
/// `settlement`: the one delivery path of an answer, a skip and a cancel.
async fn deliver(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: &Clarification,
    verb: Verb<'_>,
    settlement: Settlement,
) -> Result<(), ClarificationError> {
    let store = &clarifications.stores.clarifications;
    let Some((link, fence)) = agents.link_of(&record.session_id) else {
        return Err(not_active(&record.pending_id, record.status));
    };
    let settlement = settlement.fenced(fence);
    let token = uuid::Uuid::new_v4().to_string();
    let calls = match store.claim(&record.pending_id, &token).await? {
        Claim::Claimed { calls, .. } => calls,
        Claim::NotActive(status) => return Err(not_active(&record.pending_id, status)),
        Claim::Busy => {
            return Err(ClarificationError::NotActive(format!(
                "clarification `{}` is being answered by someone else",
                record.pending_id
            )));
        }
        Claim::Missing => {
            return Err(ClarificationError::NotFound {
                message: format!("no clarification `{}`", record.pending_id),
                origin: None,
            });
        }
    };
    let (mut delivered, mut failure) = (0usize, None);
    for request_id in &calls {
        match verb.send(&link, request_id).await {
            Ok(_) => {
                store
                    .mark_call_returned(request_id, verb.call_outcome())
                    .await?;
                delivered += 1;
            }
            // The call already returned; its settled event is on its way.
            Err(LinkError::Remote(ErrorPayload {
                code: ErrorCode::NotFound,
                ..
            })) => {}
            Err(err) => failure = Some(err),
        }
    }
    if delivered == 0 {
        if let Some(err) = failure {
            tracing::info!(error = %err, "not delivered; the record stays pending");
            store.release_claim(&record.pending_id, &token).await?;
            return Err(err.into());
        }
        // Every call had returned already (or none waited): nothing can take the verb.
        tracing::info!("no tool call waits for this record any more");
        let withdrawn = Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn)
            .fenced(fence);
        if let Some(done) = store
            .settle_claimed(&record.pending_id, &token, &withdrawn)
            .await?
        {
            clarifications.announce(&done);
        }
        return Err(ClarificationError::NotFound {
            message: format!(
                "the tool call behind clarification `{}` already returned to the agent",
                record.pending_id
            ),
            origin: Some(Origin::Agentctl),
        });
    }
    if let Some(done) = store
        .settle_claimed(&record.pending_id, &token, &settlement)
        .await?
    {
        clarifications.announce(&done);
    }
    tracing::info!(
        status = settlement.status.as_str(),
        calls = delivered,
        "delivered"
    );
    Ok(())
}

/// Answers an `ask_user_question` record: this path's rules, then the first claim wins.
pub(super) async fn respond(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    answer: OperatorAnswer,
    operator: &str,
) -> Result<RespondStatus, ClarificationError> {
    kandev_elicitation::ask_user_question::validate(&record.questions, &answer)
        .map_err(|err| ClarificationError::InvalidAnswer(err.to_string()))?;
    let verdict = if answer.rejected {
        RespondStatus::Declined
    } else {
        RespondStatus::Answered
    };
    let settlement = Settlement::answered(answer.clone(), operator);
    deliver(
        clarifications,
        agents,
        &record,
        Verb::Answer(&answer),
        settlement,
    )
    .await?;
    Ok(verdict)
}

/// Cancels an `ask_user_question` record: every waiting call returns as cancelled.
pub(super) async fn cancel(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    operator: &str,
) -> Result<CancelStatus, ClarificationError> {
    deliver(
        clarifications,
        agents,
        &record,
        Verb::Cancel,
        Settlement::cancelled_by(operator),
    )
    .await?;
    Ok(CancelStatus::Cancelled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_elicitation::{Constraints, QuestionKind, QuestionOption};

    fn question(id: &str, prompt: &str, labels: &[&str]) -> Question {
        Question {
            id: id.to_owned(),
            kind: QuestionKind::SingleSelect,
            title: None,
            prompt: prompt.to_owned(),
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

    #[test]
    fn normalised_key_ignores_whitespace_only() {
        let a = vec![question("q1", "Which  DB?\n", &["Postgres", " SQLite"])];
        let b = vec![question("q1", " Which DB?", &["Postgres", "SQLite "])];
        let c = vec![question("q1", "Which DB?", &["SQLite", "Postgres"])];
        assert_eq!(normalised_key(&a), normalised_key(&b));
        assert_ne!(normalised_key(&a), normalised_key(&c));
    }
}
