//! A session's elicitations: an `elicitation/create` from the agent becomes a pending
//! entry and an event; the operator's answer, a cancel or the end of the session settles it
//! exactly once.

use kandev_agent_stream::request::OnDeadline;
use kandev_agent_stream::request::{ElicitationsCancel, ElicitationsRespond};
use kandev_agent_stream::{
    AgentEvent, DoorDecline, ElicitationRequested, ErrorCode, ErrorPayload, SettleOutcome,
};
use kandev_elicitation::{ElicitationResponse, build_response, defaults_answer, map_request};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::{Session, respond_or_log};
use crate::agent::AcpResponder;
use crate::pending::{PendingElicitation, TakeRefused};

impl Session {
    /// Counts a decline at the door and tells the backend why (the reason only: the
    /// request itself never leaves agentctl).
    pub(super) fn declined(&self, reason: DoorDecline) {
        crate::metrics::elicitation_declined(reason);
        self.emit(AgentEvent::ElicitationDeclined { reason });
    }

    pub(super) fn on_elicitation(&self, params: Value, responder: AcpResponder) {
        // Hop span (see `kandev_log::hops`): the id is recorded once it exists.
        let received = tracing::debug_span!(target: "kandev::timing", "agentctl.received", pending_id = tracing::field::Empty);
        if !self.elicitation_enabled {
            // AC-20: an unadvertised elicitation never reaches the operator.
            tracing::info!(session_id = %self.id, "elicitation/create declined: features.acpElicitation is off");
            respond_or_log(responder, ElicitationResponse::Decline.to_json());
            self.declined(DoorDecline::FlagOff);
            return;
        }
        let mapped = match map_request(&params) {
            Ok(mapped) => mapped,
            Err(decline) => {
                tracing::info!(session_id = %self.id, reason = ?decline.reason, detail = %decline.detail, "elicitation/create declined");
                respond_or_log(responder, ElicitationResponse::Decline.to_json());
                self.declined(decline.reason.into());
                return;
            }
        };
        // Time-ordered, as kandev's own record ids: it is the clarification's key in
        // kandev's database (docs/decisions/0023).
        let pending_id = uuid::Uuid::now_v7().to_string();
        received.record("pending_id", pending_id.as_str());
        let span =
            tracing::info_span!("elicitation", session_id = %self.id, pending_id = %pending_id);
        let _entered = span.enter();
        let requested = ElicitationRequested {
            pending_id: pending_id.clone(),
            acp_session_id: mapped.session_id.clone(),
            tool_call_id: mapped.tool_call_id.clone(),
            message: mapped.message.clone(),
            questions: mapped.questions.clone(),
            expires_at: Some(crate::config::deadline_after(self.timeouts.answer)),
            on_deadline: Some(self.on_deadline),
        };
        let cancellation = responder.cancellation();
        let (settled_tx, settled_rx) = oneshot::channel();
        let entry = PendingElicitation {
            requested: requested.clone(),
            mapped,
            responder,
            settled: Some(settled_tx),
        };
        let questions = requested.questions.len();
        let mut collision = None;
        // Parked and announced in one step, so no settlement can be reported before it.
        let announced = self
            .outbox
            .emit_if(&AgentEvent::ElicitationRequested(requested), || match self
                .pending
                .insert(entry)
            {
                Ok(()) => true,
                Err(entry) => {
                    collision = Some(entry);
                    false
                }
            });
        if let Some(entry) = collision {
            // A UUID v4 collision; answer rather than leave the agent waiting.
            tracing::error!("pending id collision; declining");
            respond_or_log(entry.responder, ElicitationResponse::Decline.to_json());
            self.declined(DoorDecline::IdCollision);
            return;
        }
        drop(received);
        tracing::debug_span!(target: "kandev::timing", "agentctl.emitted", pending_id = %pending_id)
            .in_scope(|| tracing::info!(questions, seq = announced, "elicitation pending"));

        let me = self.me.clone();
        let answer_timeout = self.timeouts.answer;
        tokio::spawn(
            async move {
                tokio::select! {
                    _ = tokio::time::sleep(answer_timeout) => {
                        if let Some(session) = me.upgrade() {
                            session.deadline_passed(&pending_id);
                        }
                    }
                    _ = cancellation.cancelled() => {
                        if let Some(session) = me.upgrade() {
                            session.settle_by_id(&pending_id, SettleOutcome::AgentCancelled, Some(ElicitationResponse::Cancel));
                        }
                    }
                    // The entry was settled by someone else and dropped its sender.
                    _ = settled_rx => {}
                }
            }
            .instrument(span.clone()),
        );
    }

    /// The answer deadline of `pending_id` passed: answer as `on_deadline` says (F13a,
    /// AC-64 for `decline`). `defaults` sends the schema's defaults when every required
    /// field has one and they validate, else declines.
    fn deadline_passed(&self, pending_id: &str) {
        let Some(entry) = self.pending.take(pending_id) else {
            return;
        };
        let (outcome, response) = match self.on_deadline {
            OnDeadline::Decline => (SettleOutcome::TimedOut, ElicitationResponse::Decline),
            OnDeadline::Cancel => (
                SettleOutcome::TimedOutCancelled,
                ElicitationResponse::Cancel,
            ),
            OnDeadline::Defaults => {
                let built = defaults_answer(&entry.mapped.questions)
                    .ok_or_else(|| "a required field has no default".to_owned())
                    .and_then(|answer| {
                        build_response(&entry.mapped, &answer).map_err(|err| err.to_string())
                    });
                match built {
                    Ok(response) => (SettleOutcome::TimedOutDefaults, response),
                    Err(why) => {
                        tracing::info!(session_id = %self.id, pending_id, reason = %why, "deadline: the defaults cannot answer; declining");
                        (SettleOutcome::TimedOut, ElicitationResponse::Decline)
                    }
                }
            }
        };
        self.settle(entry, outcome, Some(response));
    }

    pub(super) fn settle_by_id(
        &self,
        pending_id: &str,
        outcome: SettleOutcome,
        response: Option<ElicitationResponse>,
    ) {
        if let Some(entry) = self.pending.take(pending_id) {
            self.settle(entry, outcome, response);
        }
    }

    /// Answers a removed entry (the caller removed it, so it alone may) and emits
    /// `elicitation_settled`. Returns whether the response reached the connection.
    pub(super) fn settle(
        &self,
        entry: PendingElicitation<AcpResponder>,
        outcome: SettleOutcome,
        response: Option<ElicitationResponse>,
    ) -> bool {
        self.settle_then(entry, outcome, response, Settler::default(), || {})
    }

    /// [`Self::settle`], running `delivered` between answering the agent and emitting
    /// `elicitation_settled` when the response reached the connection.
    ///
    /// All three happen in one outbox critical section (every step only queues a frame),
    /// so the settlement is on the stream before anything the agent does with the answer.
    fn settle_then(
        &self,
        entry: PendingElicitation<AcpResponder>,
        outcome: SettleOutcome,
        response: Option<ElicitationResponse>,
        by: Settler,
        delivered: impl FnOnce(),
    ) -> bool {
        let PendingElicitation {
            requested,
            responder,
            ..
        } = entry;
        let span = tracing::info_span!("settle", session_id = %self.id, pending_id = %requested.pending_id);
        let _entered = span.enter();
        // (outcome, action, whether the response reached the connection), for the log line.
        let mut settled = (outcome, "none", false);
        self.outbox.emit_made(|| {
            let (outcome, sent) = match response {
                Some(response) => {
                    let json = response.to_json();
                    match responder.respond(json.clone()) {
                        Ok(()) => {
                            let _hop = tracing::debug_span!(target: "kandev::timing", "agentctl.replied", pending_id = %requested.pending_id).entered();
                            (outcome, json)
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, ?outcome, "could not answer the agent; its connection is gone");
                            (SettleOutcome::AgentExited, Value::Null)
                        }
                    }
                }
                None => {
                    // The agent is gone; nothing can be sent.
                    drop(responder);
                    (outcome, Value::Null)
                }
            };
            let reached = !sent.is_null();
            if reached {
                delivered();
            }
            settled = (outcome, action_of(&sent), reached);
            Some(AgentEvent::ElicitationSettled {
                pending_id: requested.pending_id,
                outcome,
                response: sent,
                answer: by.answer,
                answered_by: by.who,
            })
        });
        // The content is the operator's answer and may hold a secret (an MCP server asking
        // for an API key), so only the action is logged; the backend gets it on the stream.
        let (outcome, action, reached) = settled;
        tracing::info!(?outcome, action, "elicitation settled");
        reached
    }

    /// `agent.elicitations.respond`: validate (F10), then answer exactly once. `accepted`
    /// runs once the agent has the answer and before `elicitation_settled` is emitted: the
    /// server sends its success response there, so the backend records the operator's
    /// answer before the event arrives, which then finds the record settled (one write
    /// for the pair, not two).
    pub fn respond(
        &self,
        respond: &ElicitationsRespond,
        accepted: impl FnOnce(),
    ) -> Result<(), ErrorPayload> {
        let _hop = tracing::debug_span!(target: "kandev::timing", "agentctl.respond", pending_id = %respond.pending_id).entered();
        let taken = self.pending.take_if(&respond.pending_id, |entry| {
            build_response(&entry.mapped, &respond.answer)
        });
        let (entry, response) = match taken {
            Ok(taken) => taken,
            Err(TakeRefused::NotFound) => {
                return Err(ErrorPayload::new(
                    ErrorCode::NotFound,
                    format!(
                        "no pending elicitation `{}` (unknown or already settled)",
                        respond.pending_id
                    ),
                ));
            }
            Err(TakeRefused::Rejected(err)) => {
                tracing::info!(session_id = %self.id, pending_id = %respond.pending_id, error = %err, "answer refused");
                return Err(ErrorPayload::new(ErrorCode::InvalidAnswer, err.to_string()));
            }
        };
        let outcome = match response {
            ElicitationResponse::Decline => SettleOutcome::Declined,
            _ => SettleOutcome::Answered,
        };
        let by = Settler {
            answer: Some(respond.answer.clone()),
            who: respond.answered_by.clone(),
        };
        if self.settle_then(entry, outcome, Some(response), by, accepted) {
            Ok(())
        } else {
            Err(ErrorPayload::new(
                ErrorCode::Internal,
                "the agent connection is closed; the answer was not delivered",
            ))
        }
    }

    /// `agent.elicitations.cancel`: the operator aborts the request; the agent gets
    /// `{"action": "cancel"}`, exactly once.
    pub fn cancel_elicitation(&self, cancel: &ElicitationsCancel) -> Result<(), ErrorPayload> {
        let pending_id = cancel.pending_id.as_str();
        let Some(entry) = self.pending.take(pending_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!("no pending elicitation `{pending_id}` (unknown or already settled)"),
            ));
        };
        let by = Settler {
            answer: None,
            who: cancel.cancelled_by.clone(),
        };
        if self.settle_then(
            entry,
            SettleOutcome::OperatorCancelled,
            Some(ElicitationResponse::Cancel),
            by,
            || {},
        ) {
            Ok(())
        } else {
            Err(ErrorPayload::new(
                ErrorCode::Internal,
                "the agent connection is closed; the cancel was not delivered",
            ))
        }
    }

    pub(super) fn settle_all(&self, outcome: SettleOutcome, response: Option<ElicitationResponse>) {
        for entry in self.pending.drain() {
            self.settle(entry, outcome, response.clone());
        }
    }
}

/// Who settled an elicitation through the backend, echoed in `elicitation_settled` so the
/// backend writes the record from that event alone (nothing for agentctl's own
/// settlements: deadline, turn cancel, shutdown).
#[derive(Debug, Default)]
pub(super) struct Settler {
    answer: Option<kandev_elicitation::OperatorAnswer>,
    who: Option<String>,
}

/// The `action` of an ACP elicitation response (`"none"` when nothing was sent).
fn action_of(sent: &Value) -> &'static str {
    match sent.get("action").and_then(Value::as_str) {
        Some("accept") => "accept",
        Some("decline") => "decline",
        Some("cancel") => "cancel",
        Some(_) => "other",
        None => "none",
    }
}
