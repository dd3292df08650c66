//! Clarifications raised by ACP `elicitation/create` (docs/architecture.md §3): the record keeps
//! agentctl's `pending_id` verbatim (AC-60) and is never deduplicated (D4). An operator's
//! answer or cancel is ALWAYS forwarded first, with no local already-settled check in
//! front (D5, AC-61, AC-12g): agentctl is the one place that adjudicates duplicates, and
//! the record is then settled from its verdict.

use kandev_agent_stream::request::{ElicitationsCancel, ElicitationsRespond};
use kandev_agent_stream::response::Success;
use kandev_agent_stream::{
    ElicitationRequested, ErrorCode, ErrorPayload, SettleOutcome, action, timing,
};
use kandev_elicitation::OperatorAnswer;
use serde_json::{Map, Value, json};

use super::service::{
    CancelStatus, Clarifications, RespondStatus, SessionAgents, SessionRef, has_verdict,
};
use crate::agent_link::{LinkError, call};
use crate::error::{AppError, Origin};
use crate::model::clarification::Effect;
use crate::model::{
    Clarification, ClarificationStatus, Fence, MessageKind, NewClarification, NewMessage, Outcome,
    Settlement, Source, author,
};
use crate::store::{SettledRecord, StoreError};

/// `elicitation_requested`: stores the record and its `clarification_request` message in
/// one transaction, then announces them. The record when it was new (a replayed event
/// is not).
pub async fn requested(
    rooms: &Clarifications,
    session: &SessionRef,
    request: &ElicitationRequested,
) -> Result<Option<Clarification>, StoreError> {
    timing::hop(timing::hop::BACKEND_APPLYING, &request.pending_id);
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
    let Some((record, message)) = rooms
        .stores
        .clarifications
        .open_clarification(&record, &message)
        .await?
    else {
        return Ok(None);
    };
    timing::hop(timing::hop::BACKEND_STORED, &record.pending_id);
    let opened = record.clone();
    rooms.announce_opened(session, record, message).await?;
    Ok(Some(opened))
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

/// `elicitation_settled`: agentctl's word is final (it may correct a provisional status).
pub async fn settled(
    rooms: &Clarifications,
    session: &SessionRef,
    pending_id: &str,
    outcome: SettleOutcome,
) -> Result<Option<SettledRecord>, StoreError> {
    let settlement = Settlement::from_agentctl(outcome).fenced(session.fence);
    if let Some(standing) = rooms.open.answer_settled(pending_id).await
        && settlement.effect_on(standing) == Effect::Nothing
    {
        // What does nothing to a committed record never will (`nothing_is_final`).
        return Ok(None);
    }
    let settled = rooms.settle_and_announce(pending_id, &settlement).await?;
    if let Some(done) = &settled {
        tracing::info!(
            pending_id,
            status = done.record.status.as_str(),
            "clarification settled by agentctl"
        );
    }
    Ok(settled)
}

/// After a re-attach: `held` is agentctl's list of still-open elicitations. One the
/// backend missed is opened; a pending record agentctl no longer holds can never be
/// answered and becomes `agent_disconnected`.
pub async fn reattached(
    rooms: &Clarifications,
    session: &SessionRef,
    held: &[ElicitationRequested],
) -> Result<(), StoreError> {
    for request in held {
        requested(rooms, session, request).await?;
    }
    let keep: Vec<String> = held.iter().map(|r| r.pending_id.clone()).collect();
    let gone = rooms
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
        rooms.announce(done);
    }
    Ok(())
}

/// Forward-first respond (D5).
pub(super) async fn respond(
    rooms: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    answer: OperatorAnswer,
    operator: &str,
) -> Result<RespondStatus, AppError> {
    let Some((link, fence)) = deliverable(rooms, agents, &record).await? else {
        return not_delivered(rooms, &record, &answer).await;
    };
    let payload = ElicitationsRespond {
        pending_id: record.pending_id.clone(),
        answer: answer.clone(),
    };
    // agentctl's settled event follows its success at once: it waits for this.
    let answering = rooms.open.answering(&record.pending_id);
    timing::hop(timing::hop::BACKEND_FORWARD, &record.pending_id);
    let asked = std::time::Instant::now();
    let verdict = call::<_, Success>(&*link, action::ELICITATIONS_RESPOND, &payload).await;
    crate::metrics::delivery(Source::Elicitation, asked, has_verdict(&verdict));
    match verdict {
        Ok(_) => {
            timing::hop(timing::hop::BACKEND_FORWARDED, &record.pending_id);
            let verdict = if answer.rejected {
                RespondStatus::Declined
            } else {
                RespondStatus::Answered
            };
            // The agent got the secret; the record keeps it redacted (kandev_elicitation::secret).
            let kept = kandev_elicitation::redact(&record.questions, &answer);
            let settlement = Settlement::answered(kept, operator).fenced(fence);
            if let Some(done) = rooms
                .settle_and_announce(&record.pending_id, &settlement)
                .await?
            {
                answering.settled(&done.record);
            }
            timing::hop(timing::hop::BACKEND_SETTLED, &record.pending_id);
            tracing::info!(status = ?verdict, "answer delivered");
            Ok(verdict)
        }
        Err(err) => Err(refused(rooms, &record, fence, err).await?),
    }
}

/// Forward-first cancel (docs/architecture.md §13): the agent gets `{"action": "cancel"}`.
pub(super) async fn cancel(
    rooms: &Clarifications,
    agents: &dyn SessionAgents,
    record: Clarification,
    operator: &str,
) -> Result<CancelStatus, AppError> {
    let Some((link, fence)) = deliverable(rooms, agents, &record).await? else {
        return Err(AppError::NotFound {
            message: format!(
                "clarification `{}` can no longer be cancelled: its agent is gone",
                record.pending_id
            ),
            origin: Some(Origin::Backend),
        });
    };
    let payload = ElicitationsCancel {
        pending_id: record.pending_id.clone(),
    };
    match call::<_, Success>(&*link, action::ELICITATIONS_CANCEL, &payload).await {
        Ok(_) => {
            let settlement = Settlement::cancelled_by(operator).fenced(fence);
            rooms
                .settle_and_announce(&record.pending_id, &settlement)
                .await?;
            tracing::info!("cancel delivered");
            Ok(CancelStatus::Cancelled)
        }
        Err(err) => Err(refused(rooms, &record, fence, err).await?),
    }
}

/// The link an operator's verb goes through (with its session's fence), or `None` when
/// the agent is gone for good (a record still pending is then `agent_disconnected`).
async fn deliverable(
    rooms: &Clarifications,
    agents: &dyn SessionAgents,
    record: &Clarification,
) -> Result<Option<(crate::agent_link::DynLink, Fence)>, AppError> {
    if record.status == ClarificationStatus::AgentDisconnected {
        return Ok(None);
    }
    if let Some(held) = agents.link_of(&record.session_id) {
        return Ok(Some(held));
    }
    if record.status == ClarificationStatus::Pending {
        // Its session has no link any more: nothing can deliver the answer.
        rooms
            .settle_and_announce(&record.pending_id, &Settlement::disconnected())
            .await?;
        return Ok(None);
    }
    Err(AppError::NotFound {
        message: format!(
            "clarification `{}` is {} and its session has ended",
            record.pending_id,
            record.status.as_str()
        ),
        origin: Some(Origin::Backend),
    })
}

/// agentctl refused the verb. `NOT_FOUND`: it no longer holds the pending, so the surface
/// is withdrawn provisionally (its own settled event, if still on its way, corrects the
/// status). Anything else leaves the record as it was.
async fn refused(
    rooms: &Clarifications,
    record: &Clarification,
    fence: Fence,
    err: LinkError,
) -> Result<AppError, StoreError> {
    if let LinkError::Remote(ErrorPayload {
        code: ErrorCode::NotFound,
        ..
    }) = &err
    {
        tracing::info!("agentctl does not hold this pending (already settled or unknown)");
        rooms
            .settle_and_announce(
                &record.pending_id,
                &Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn)
                    .fenced(fence),
            )
            .await?;
    } else {
        tracing::info!(error = %err, "not delivered; the record stays as it was");
    }
    Ok(AppError::from(err))
}

async fn not_delivered(
    rooms: &Clarifications,
    record: &Clarification,
    answer: &OperatorAnswer,
) -> Result<RespondStatus, AppError> {
    tracing::info!("agent is gone; answer recorded, not delivered");
    let kept = kandev_elicitation::redact(&record.questions, answer);
    if let Some(message) = rooms
        .stores
        .clarifications
        .note_undelivered(&record.pending_id, &kept)
        .await?
    {
        rooms
            .publisher
            .publish(crate::events::Change::MessageUpdated(message));
    }
    Ok(RespondStatus::NotDelivered)
}
