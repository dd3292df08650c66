//! Clarifications raised by the `ask_user_question_kandev` MCP tool agentctl serves
//! (docs/architecture.md §6 F3, spec AC-57, D4). What differs from an elicitation:
//!
//! - the record id is minted here (UUID v4); agentctl's `request_id` names one tool call,
//!   and several calls may wait on one record;
//! - creation is deduplicated: a call on the same session whose normalised questions
//!   match a still-pending record of this source joins it — no second message, record or
//!   notification;
//! - the backend checks the answer against this path's rules
//!   ([`kandev_elicitation::ask_user_question::validate`]) and a settled record takes no
//!   more answers (409 `NOT_ACTIVE`).
//!
//! As for an elicitation, the operator's verb is sent to agentctl and never written here:
//! it names every call waiting on the record, agentctl returns those it still holds
//! together (so of two answers at once, one wins and the other finds none), and echoes
//! the answer and who gave it in each call's `ask_user_question_settled`. The session's
//! consumer applies those events ([`settled`]) and is the record's one writer; a call that
//! joined after the verb was sent is sent the same verb from there.

use std::sync::Arc;

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
    Clarification, ClarificationStatus, NewClarification, Outcome, SettledBy, Settlement, Source,
    new_record_id,
};
use crate::store::{CallSettles, Opened, QuestionOpened, StoreError};

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
    applied_seq: Option<u64>,
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
        pending_id: new_record_id(),
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
    let notification = clarifications.opening_notification(session);
    match clarifications
        .stores
        .clarifications
        .open_question(
            &request.request_id,
            &key,
            &record,
            &message,
            notification.as_ref(),
            applied_seq,
        )
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
            // Opened with its call (`questions`): the session is read back.
            let stored = Opened {
                record: *record,
                message: *message,
                session: None,
            };
            clarifications
                .announce_opened(session, stored, notification)
                .await?;
            Ok(Some(opened))
        }
    }
}

/// What `ask_user_question_settled` says, as the consumer hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSettled {
    /// Which call.
    pub request_id: String,
    /// How it returned.
    pub outcome: SettleOutcome,
    /// The operator's answer it returned, when one did.
    pub answer: Option<OperatorAnswer>,
    /// Who answered or cancelled, when someone did through the backend.
    pub answered_by: Option<String>,
    /// Every call the same verb returned, this one included.
    pub returned_together: Vec<String>,
}

/// `ask_user_question_settled`: a call returned to the agent; applied by the session's
/// consumer, the record's one writer. An operator's answer or cancel settles the record
/// at once, and calls that joined it after the verb was sent are sent the same verb
/// (`agents` holds the session's link); a call that returned on its own settles the
/// record only when no other call waits on it. Whether it changed anything (a replayed
/// event does not).
pub async fn settled(
    clarifications: &Clarifications,
    agents: Arc<dyn SessionAgents>,
    session: &SessionRef,
    event: CallSettled,
) -> Result<bool, StoreError> {
    let CallSettled {
        request_id,
        outcome,
        answer,
        answered_by,
        returned_together,
    } = event;
    let settlement = Settlement::reported(outcome, answer, answered_by.as_deref());
    let verb = Verb::of(&settlement);
    let settles = if verb.is_some() {
        CallSettles::Record
    } else {
        CallSettles::IfLast
    };
    let Some(returned) = clarifications
        .stores
        .clarifications
        .call_returned(
            &request_id,
            &outcome_name(outcome),
            &settlement.fenced(session.fence),
            settles,
        )
        .await?
    else {
        return Ok(false);
    };
    if let Some(done) = &returned.settled {
        tracing::info!(request_id, pending_id = %done.record.pending_id, status = done.record.status.as_str(), "clarification settled");
        clarifications.announce(done);
    }
    // The verb waiting for this settlement may answer now.
    clarifications.open.settlement_applied(&returned.pending_id);
    let late: Vec<String> = (returned.waiting.into_iter())
        .filter(|call| !returned_together.contains(call))
        .collect();
    if let Some(verb) = verb.filter(|_| !late.is_empty()) {
        send_to_late_calls(agents, session, verb, late);
    }
    Ok(true)
}

/// Calls that joined a record after an operator's verb was sent get the same verb, on a
/// task of its own (the consumer never waits on the link); their settlements come back
/// as events like any other.
fn send_to_late_calls(
    agents: Arc<dyn SessionAgents>,
    session: &SessionRef,
    verb: Verb,
    calls: Vec<String>,
) {
    let Some((link, _)) = agents.link_of(&session.session_id) else {
        return;
    };
    tokio::spawn(async move {
        if let Err(err) = verb.send(&link, calls).await {
            tracing::info!(error = %err, "the operator's verb did not reach the calls that joined late");
        }
    });
}

/// The name of `outcome` as the calls table keeps it: its wire name.
fn outcome_name(outcome: SettleOutcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
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
        requested(clarifications, session, request, None).await?;
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
        let returned = clarifications
            .stores
            .clarifications
            .call_returned(request_id, RETURNED_UNSEEN, &unseen, CallSettles::IfLast)
            .await?;
        if let Some(done) = returned.and_then(|r| r.settled) {
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

/// An operator's verb on a record's waiting calls.
#[derive(Debug, Clone)]
enum Verb {
    Answer { answer: OperatorAnswer, by: String },
    Cancel { by: String },
}

impl Verb {
    /// The operator's verb a settlement reports, if it reports one.
    fn of(settlement: &Settlement) -> Option<Self> {
        let by = settlement.answered_by.clone()?;
        match (settlement.by, &settlement.answer) {
            (SettledBy::Operator, Some(answer)) => Some(Verb::Answer {
                answer: answer.clone(),
                by,
            }),
            (SettledBy::Operator, None) => Some(Verb::Cancel { by }),
            _ => None,
        }
    }

    /// Sends the verb for `calls` in one request: agentctl returns those it holds together.
    async fn send(&self, link: &DynLink, calls: Vec<String>) -> Result<Success, LinkError> {
        match self {
            Verb::Answer { answer, by } => {
                let payload = QuestionsRespond {
                    request_ids: calls,
                    result: answer.clone(),
                    answered_by: Some(by.clone()),
                };
                let asked = std::time::Instant::now();
                let verdict = call(&**link, &payload).await;
                crate::metrics::delivery(Source::AskUserQuestion, asked, has_verdict(&verdict));
                verdict
            }
            Verb::Cancel { by } => {
                let payload = QuestionsCancel {
                    request_ids: calls,
                    cancelled_by: Some(by.clone()),
                };
                call(&**link, &payload).await
            }
        }
    }
}

/// Sends `verb` to every call waiting on `record` and waits (boundedly) for the
/// consumer to apply the settlement agentctl reports: the one delivery path of an
/// answer, a skip and a cancel. Nothing is written here.
async fn deliver(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: &Clarification,
    verb: Verb,
) -> Result<(), ClarificationError> {
    if record.status != ClarificationStatus::Pending {
        return Err(not_active(&record.pending_id, record.status));
    }
    let Some((link, _fence)) = agents.link_of(&record.session_id) else {
        // Between a restart and the adoption, or between a lost link and the end it
        // brings: nothing was sent, and the record stays as it is.
        return Err(ClarificationError::Link(LinkError::NotConnected));
    };
    let store = &clarifications.stores.clarifications;
    let calls = store.waiting_calls(&record.pending_id).await?;
    if calls.is_empty() {
        return Err(returned_already(clarifications, record, None).await);
    }
    let applied = clarifications.open.await_settlement(&record.pending_id);
    match verb.send(&link, calls).await {
        Ok(_) => {
            if !applied.wait().await {
                tracing::info!("delivered; its settlement is not applied yet");
            }
            tracing::info!("delivered");
            Ok(())
        }
        Err(LinkError::Remote(ErrorPayload {
            code: ErrorCode::NotFound,
            ..
        })) => Err(returned_already(clarifications, record, Some(applied)).await),
        Err(err) => {
            tracing::info!(error = %err, "not delivered; the record stays pending");
            Err(err.into())
        }
    }
}

/// agentctl holds none of the record's calls: they returned, and their settlements came
/// on the stream before its refusal. Once the consumer has applied them (`applied`, when
/// the record still reads pending), the record says whether another verb won (409) or
/// the calls returned on their own (404).
async fn returned_already(
    clarifications: &Clarifications,
    record: &Clarification,
    applied: Option<super::open_records::Applied>,
) -> ClarificationError {
    let store = &clarifications.stores.clarifications;
    let mut now = store.clarification(&record.pending_id).await;
    if let (Ok(Some(rec)), Some(applied)) = (&now, applied)
        && rec.status == ClarificationStatus::Pending
    {
        applied.wait().await;
        now = store.clarification(&record.pending_id).await;
    }
    match now {
        Ok(Some(rec)) if rec.status != ClarificationStatus::Pending => {
            not_active(&rec.pending_id, rec.status)
        }
        Ok(_) => ClarificationError::NotFound {
            message: format!(
                "the tool calls behind clarification `{}` already returned to the agent",
                record.pending_id
            ),
            origin: Some(Origin::Agentctl),
        },
        Err(err) => err.into(),
    }
}

/// Answers an `ask_user_question` record: this path's rules, then every waiting call.
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
    let verb = Verb::Answer {
        answer,
        by: operator.to_owned(),
    };
    deliver(clarifications, agents, &record, verb).await?;
    Ok(verdict)
}

/// Cancels an `ask_user_question` record: every waiting call returns as cancelled.
pub(super) async fn cancel(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    operator: &str,
) -> Result<CancelStatus, ClarificationError> {
    let verb = Verb::Cancel {
        by: operator.to_owned(),
    };
    deliver(clarifications, agents, &record, verb).await?;
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
