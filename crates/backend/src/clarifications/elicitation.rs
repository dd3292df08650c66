//! Clarifications raised by ACP `elicitation/create` (docs/architecture.md §3): the record keeps
//! agentctl's `pending_id` verbatim (AC-60) and is never deduplicated (D4). An operator's
//! answer or cancel is ALWAYS forwarded first, with no local already-settled check in
//! front (D5, AC-61, AC-12g): agentctl is the one place that adjudicates duplicates, and
//! the record is then settled from its verdict.

use kandev_agent_stream::request::{ElicitationsCancel, ElicitationsRespond};
use kandev_agent_stream::{ElicitationRequested, ErrorCode, ErrorPayload, SettleOutcome};
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::error::ClarificationError;
use super::service::{
    CancelStatus, Clarifications, RespondStatus, SessionAgents, SessionRef, has_verdict,
};
use crate::agent_link::{LinkError, call};
use crate::model::{
    Clarification, ClarificationStatus, Fence, MessageKind, NewClarification, NewMessage,
    Settlement, Source, author,
};
use crate::store::{SettledRecord, StoreError};

/// `elicitation_requested`: stores the record and its `clarification_request` message
/// (and the session's `applied_seq`, when given) in one transaction, then announces them.
/// The record when it was new (a replayed event is not).
pub async fn requested(
    clarifications: &Clarifications,
    session: &SessionRef,
    request: &ElicitationRequested,
    applied_seq: Option<u64>,
) -> Result<Option<Clarification>, StoreError> {
    // Hop spans (kandev_log::hops): applying the event, then its record committed.
    let _applying = tracing::debug_span!(target: "kandev::timing", "backend.applying", pending_id = %request.pending_id);
    let record = NewClarification {
        pending_id: request.pending_id.clone(),
        source: Source::Elicitation,
        task_id: session.task_id.clone(),
        session_id: session.session_id.clone(),
        tool_call_id: request.tool_call_id.clone(),
        message: request.message.clone(),
        questions: request.questions.clone(),
        expires_at: crate::reach::deadline::parse_wire(request.expires_at.as_deref()),
        on_deadline: request.on_deadline.map(|o| o.as_str().to_owned()),
    };
    let message = request_message(session, &record, &request.message);
    let notification = clarifications.opening_notification(session);
    let Some(opened) = clarifications
        .stores
        .clarifications
        .open_clarification(&record, &message, notification.as_ref(), applied_seq)
        .await?
    else {
        return Ok(None);
    };
    let _stored = tracing::debug_span!(target: "kandev::timing", "backend.stored", pending_id = %opened.record.pending_id);
    let record = opened.record.clone();
    clarifications
        .announce_opened(session, opened, notification)
        .await?;
    Ok(Some(record))
}

/// The agent-authored message that carries a record (AC-08).
pub(super) fn request_message(
    session: &SessionRef,
    record: &NewClarification,
    content: &str,
) -> NewMessage {
    let mut metadata = Map::new();
    metadata.insert("pending_id".into(), json!(record.pending_id));
    metadata.insert("source".into(), json!(record.source));
    metadata.insert("tool_call_id".into(), json!(record.tool_call_id));
    metadata.insert("questions".into(), json!(record.questions));
    metadata.insert("status".into(), json!(ClarificationStatus::Pending));
    metadata.insert("answer".into(), Value::Null);
    NewMessage {
        requests_input: true,
        ..NewMessage::new(
            &session.session_id,
            &session.task_id,
            MessageKind::ClarificationRequest,
            author::AGENT,
            content,
        )
        .with_metadata(metadata)
    }
}

/// `elicitation_settled`: agentctl's word is final, and the only word. When the
/// settlement came from an operator's verb, the event echoes the answer and who gave it,
/// so this is where the record is written: the session's consumer, in stream order, is
/// the record's one writer (docs/architecture.md §3).
pub async fn settled(
    clarifications: &Clarifications,
    session: &SessionRef,
    event: SettledEvent,
) -> Result<Option<SettledRecord>, StoreError> {
    let SettledEvent {
        pending_id,
        outcome,
        answer,
        answered_by,
    } = event;
    let mut settlement = Settlement::reported(outcome, answer, answered_by.as_deref());
    if let Some(answer) = settlement.answer.take() {
        // The agent got the secret; the record keeps it redacted (kandev_elicitation::secret).
        let questions = match clarifications.open.get(&pending_id) {
            Some(record) => record.questions,
            None => clarifications
                .stores
                .clarifications
                .clarification(&pending_id)
                .await?
                .map(|record| record.questions)
                .unwrap_or_default(),
        };
        settlement.answer = Some(kandev_elicitation::redact(&questions, &answer));
    }
    let settled = clarifications
        .settle_and_announce(&pending_id, &settlement.fenced(session.fence))
        .await;
    // Hop span (kandev_log::hops): the settlement is committed; a waiting verb answers next.
    let _settled =
        tracing::debug_span!(target: "kandev::timing", "backend.settled", pending_id = %pending_id);
    // Whatever it changed, the verb waiting for it may now answer (a failed write leaves
    // the record pending, as the verb's caller will see).
    clarifications.open.settlement_applied(&pending_id);
    let settled = settled?;
    if let Some(done) = &settled {
        tracing::info!(
            pending_id,
            status = done.record.status.as_str(),
            "clarification settled"
        );
    }
    Ok(settled)
}

/// What `elicitation_settled` says, as the consumer hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledEvent {
    /// Which record.
    pub pending_id: String,
    /// How it ended.
    pub outcome: SettleOutcome,
    /// The operator's answer, when one settled it.
    pub answer: Option<OperatorAnswer>,
    /// Who answered or cancelled, when someone did through the backend.
    pub answered_by: Option<String>,
}

/// After a re-attach: `held` is agentctl's list of still-open elicitations. One the
/// backend missed is opened; a pending record agentctl no longer holds can never be
/// answered and becomes `agent_disconnected`.
pub async fn reattached(
    clarifications: &Clarifications,
    session: &SessionRef,
    held: &[ElicitationRequested],
) -> Result<(), StoreError> {
    for request in held {
        requested(clarifications, session, request, None).await?;
    }
    let keep: Vec<String> = held.iter().map(|r| r.pending_id.clone()).collect();
    let gone = clarifications
        .stores
        .clarifications
        .settle_pending(
            &session.session_id,
            Some(Source::Elicitation),
            &keep,
            &Settlement::disconnected().fenced(session.fence),
        )
        .await?;
    for done in &gone {
        clarifications.announce(done);
    }
    Ok(())
}

/// Forward-first respond (D5). The handler never writes the record: agentctl settles
/// the request and reports it with `elicitation_settled`, which the session's consumer
/// applies; the handler waits (boundedly) for that before it answers.
pub(super) async fn respond(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    answer: OperatorAnswer,
    operator: &str,
) -> Result<RespondStatus, ClarificationError> {
    let Some((link, _fence)) = deliverable(agents, &record)? else {
        return not_delivered(clarifications, &record, &answer).await;
    };
    let verdict = if answer.rejected {
        RespondStatus::Declined
    } else {
        RespondStatus::Answered
    };
    let payload = ElicitationsRespond {
        pending_id: record.pending_id.clone(),
        answer,
        answered_by: Some(operator.to_owned()),
    };
    let applied = clarifications.open.await_settlement(&record.pending_id);
    let asked = std::time::Instant::now();
    // Hop span (kandev_log::hops): the request to agentctl until its reply.
    let forward = tracing::debug_span!(target: "kandev::timing", "backend.forward", pending_id = %record.pending_id);
    let sent = call(&*link, &payload).instrument(forward).await;
    crate::metrics::delivery(Source::Elicitation, asked, has_verdict(&sent));
    match sent {
        Ok(_) => {
            let _forwarded = tracing::debug_span!(target: "kandev::timing", "backend.forwarded", pending_id = %record.pending_id);
            if !applied.wait().await {
                tracing::info!("answer delivered; its settlement is not applied yet");
            }
            tracing::info!(status = ?verdict, "answer delivered");
            Ok(verdict)
        }
        Err(err) => Err(refused(err)),
    }
}

/// Forward-first cancel (docs/architecture.md §13): the agent gets `{"action": "cancel"}`;
/// the record is written from agentctl's settlement, as for an answer.
pub(super) async fn cancel(
    clarifications: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    operator: &str,
) -> Result<CancelStatus, ClarificationError> {
    let Some((link, _fence)) = deliverable(agents, &record)? else {
        return Err(ClarificationError::not_found(format!(
            "clarification `{}` can no longer be cancelled: its agent is gone",
            record.pending_id
        )));
    };
    let payload = ElicitationsCancel {
        pending_id: record.pending_id.clone(),
        cancelled_by: Some(operator.to_owned()),
    };
    let applied = clarifications.open.await_settlement(&record.pending_id);
    match call(&*link, &payload).await {
        Ok(_) => {
            applied.wait().await;
            tracing::info!("cancel delivered");
            Ok(CancelStatus::Cancelled)
        }
        Err(err) => Err(refused(err)),
    }
}

/// The link an operator's verb goes through (with its session's fence), or `None` when
/// the agent is gone for good (the record is `agent_disconnected`). A record still pending
/// whose session has no link here is not written: the session's own end settles it (its
/// consumer, or the adoption that fails it), and the caller may try again.
fn deliverable(
    agents: &dyn SessionAgents,
    record: &Clarification,
) -> Result<Option<(crate::agent_link::DynLink, Fence)>, ClarificationError> {
    if record.status == ClarificationStatus::AgentDisconnected {
        return Ok(None);
    }
    if let Some(held) = agents.link_of(&record.session_id) {
        return Ok(Some(held));
    }
    if record.status == ClarificationStatus::Pending {
        // Between a restart and the adoption, or between a lost link and the end it
        // brings: nothing was sent, and the record stays as it is.
        return Err(ClarificationError::Link(LinkError::NotConnected));
    }
    Err(ClarificationError::not_found(format!(
        "clarification `{}` is {} and its session has ended",
        record.pending_id,
        record.status.as_str()
    )))
}

/// agentctl refused the verb. The record is left as it is: `NOT_FOUND` means agentctl no
/// longer holds the request, and its `elicitation_settled` (already applied, or on its
/// way) is what settles the record; anything else changed nothing.
fn refused(err: LinkError) -> ClarificationError {
    if let LinkError::Remote(ErrorPayload {
        code: ErrorCode::NotFound,
        ..
    }) = &err
    {
        tracing::info!("agentctl does not hold this pending (already settled or unknown)");
    } else {
        tracing::info!(error = %err, "not delivered; the record stays as it was");
    }
    ClarificationError::Link(err)
}

async fn not_delivered(
    clarifications: &Clarifications,
    record: &Clarification,
    answer: &OperatorAnswer,
) -> Result<RespondStatus, ClarificationError> {
    tracing::info!("agent is gone; answer recorded, not delivered");
    let kept = kandev_elicitation::redact(&record.questions, answer);
    if let Some(message) = clarifications
        .stores
        .clarifications
        .note_undelivered(&record.pending_id, &kept)
        .await?
    {
        clarifications
            .publisher
            .publish(crate::events::Change::MessageUpdated(message));
    }
    Ok(RespondStatus::NotDelivered)
}
