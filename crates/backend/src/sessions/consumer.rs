//! One task per live session: applies its link's events in order. A plain dispatcher —
//! text to the [`Transcript`] (a burst of queued chunks as one append, [`chunks`]),
//! questions to the clarifications, the turn's end to the session store — that owns the
//! transcript, so nothing here takes a lock. It is the one writer of the session's
//! clarification records, of both sources: each is opened from agentctl's
//! `elicitation_requested` / `ask_user_question_requested` and settled from its
//! `elicitation_settled` / `ask_user_question_settled` (which echo an operator's answer
//! and name), one event after the other, so no two writes of a record can race
//! (docs/architecture.md §3).

use std::sync::Arc;

use kandev_agent_stream::AgentEvent;
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

use crate::agent_link::LinkEvent;
use crate::auto_answers::AutoAnswers;
use crate::clarifications::ask_user_question::CallSettled;
use crate::clarifications::elicitation::SettledEvent;
use crate::clarifications::{Clarifications, SessionAgents, ask_user_question, elicitation};
use crate::events::{Change, Publisher};
use crate::notifications::Notifier;
use crate::sessions::chunks::{self, Step};
use crate::sessions::ends::SessionEnds;
use crate::sessions::live::{LiveSession, LiveSessions};
use crate::sessions::ownership::Ownership;
use crate::sessions::transcript::{Target, Transcript};
use crate::store::{StoreError, Stores};

/// What every session's consumer applies its events to; [`Consumers::go_live`] starts one.
#[derive(Debug)]
pub struct Consumers {
    /// Messages, sessions and the progress of their events.
    pub stores: Stores,
    /// Where committed changes are announced.
    pub publisher: Publisher,
    /// Turn-finished notifications.
    pub notifier: Notifier,
    /// The session's questions.
    pub clarifications: Clarifications,
    /// The agents' auto-answer rules.
    pub auto_answers: AutoAnswers,
    /// The sessions live here (an auto-answer reaches its agent through them).
    pub live: Arc<LiveSessions>,
    /// This replica's leases.
    pub ownership: Arc<Ownership>,
    /// How a session ends when its agent is gone.
    pub ends: Arc<SessionEnds>,
}

impl Consumers {
    /// Makes `live` live here and consumes its link's events from `after_seq` on — unless
    /// its lease was lost meanwhile: then its link is detached.
    pub fn go_live(
        self: &Arc<Self>,
        live: Arc<LiveSession>,
        events: UnboundedReceiver<LinkEvent>,
        after_seq: Option<u64>,
    ) {
        if !self.ownership.holds(&live.id, live.fence) {
            self.ends
                .detach(&live, "its lease was lost while it started");
            return;
        }
        self.live.insert(Arc::clone(&live));
        let span = tracing::info_span!("session", session_id = %live.id);
        tokio::spawn(run(Arc::clone(self), live, events, after_seq).instrument(span));
    }
}

/// Consumes `events` until the link is lost or the session ends; `stored` is the
/// `last_event_seq` already stored.
async fn run(
    shared: Arc<Consumers>,
    live: Arc<LiveSession>,
    mut events: UnboundedReceiver<LinkEvent>,
    stored: Option<u64>,
) {
    let mut consumer = Consumer {
        turn: live.turn(),
        shared,
        live,
        transcript: Transcript::default(),
        changed: false,
        unstored: false,
        stored,
        position: None,
    };
    // An event taken while merging chunks that did not join them: applied next.
    let mut held = None;
    loop {
        let event = match held.take() {
            Some(event) => event,
            None => match events.recv().await {
                Some(event) => event,
                None => break,
            },
        };
        let last = matches!(event, LinkEvent::Lost { .. });
        let (step, next) = chunks::next_step(event, || events.try_recv().ok());
        held = next;
        consumer.changed = true;
        consumer.position = match held {
            None => consumer.position_after(&events),
            Some(_) => None,
        };
        if let Err(err) = consumer.apply_step(step).await {
            tracing::error!(error = %err, "cannot apply an agent event");
        }
        if last {
            return;
        }
        consumer.unstored |= consumer.changed;
        // A held event was counted as delivered but is not applied yet.
        if held.is_none() {
            consumer.store_progress(&events).await;
        }
    }
    if let Err(err) = consumer
        .shared
        .ends
        .lost(&consumer.live, "the agent stream closed")
        .await
    {
        tracing::error!(error = %err, "cannot record the lost link");
    }
}

/// Where a session's transcript writes (a function of two fields, so the transcript
/// itself can be borrowed alongside).
fn target<'a>(shared: &'a Consumers, live: &'a LiveSession) -> Target<'a> {
    Target {
        messages: &*shared.stores.messages,
        publisher: &shared.publisher,
        session_id: &live.id,
        task_id: &live.task_id,
    }
}

struct Consumer {
    shared: Arc<Consumers>,
    live: Arc<LiveSession>,
    transcript: Transcript,
    /// The turn the transcript's open message belongs to.
    turn: u64,
    /// Whether the event being applied may have changed anything (only a settlement that
    /// found its record already settled is known not to).
    changed: bool,
    /// Whether an event applied since `last_event_seq` was stored changed anything: if
    /// none did, replaying them after a crash changes nothing either, so the write waits
    /// for one that does (agentctl's `elicitation_settled` after an operator's answer
    /// then costs no write at all).
    unstored: bool,
    /// The `last_event_seq` stored.
    stored: Option<u64>,
    /// The stream position once the event being applied is: when it is the last event
    /// delivered, an open or an append commits it with what it writes instead of a write
    /// of its own.
    position: Option<u64>,
}

impl Consumer {
    /// Applies one step: an event, or a run of text chunks as one append.
    async fn apply_step(&mut self, step: Step) -> Result<(), StoreError> {
        // A prompt its request has not announced yet goes first: the agent's reply to it
        // can be here before that request is back from agentctl.
        let publisher = &self.shared.publisher;
        self.live
            .announce_prompt(|prompt| publisher.publish(Change::MessageCreated(prompt)));
        match step {
            Step::Event(event) => self.apply(event).await,
            Step::Text { kind, text, .. } => {
                if self.live.is_ended() {
                    return Ok(());
                }
                self.follow_turn();
                let to = target(&self.shared, &self.live);
                let position = self.position;
                if self.transcript.text(to, kind, &text, position).await? {
                    self.stored_with(position);
                }
                Ok(())
            }
        }
    }

    /// If a prompt started a new turn since the last update, its text is a new message.
    fn follow_turn(&mut self) {
        if self.live.turn() != self.turn {
            self.turn = self.live.turn();
            self.transcript.close();
        }
    }

    /// Applies one event.
    async fn apply(&mut self, event: LinkEvent) -> Result<(), StoreError> {
        if self.live.is_ended() {
            return Ok(());
        }
        let clarifications = &self.shared.clarifications;
        let session = self.live.session_ref();
        match event {
            LinkEvent::Agent(AgentEvent::SessionUpdate { update }) => {
                self.follow_turn();
                let to = target(&self.shared, &self.live);
                self.transcript.apply(to, &update).await
            }
            LinkEvent::Agent(AgentEvent::TurnCompleted { stop_reason, error }) => {
                self.transcript.close();
                self.shared
                    .stores
                    .sessions
                    .end_turn(&self.live.id, self.live.fence)
                    .await?;
                self.shared
                    .publisher
                    .session_changed(&self.live.id, &self.live.task_id);
                tracing::info!(%stop_reason, "turn completed");
                if let Some(error) = error {
                    self.shared
                        .ends
                        .status_message(
                            &self.live.id,
                            &self.live.task_id,
                            &format!("The turn failed: {error}"),
                        )
                        .await;
                }
                self.shared
                    .notifier
                    .turn_finished(&self.live.task_title, &self.live.task_id, &self.live.id)
                    .await?;
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::ElicitationRequested(request)) => {
                let position = self.position;
                if let Some(record) =
                    elicitation::requested(clarifications, &session, &request, position).await?
                {
                    self.stored_with(position);
                    // Text after the question is a new message.
                    self.transcript.close();
                    self.auto_answer(&record);
                }
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::ElicitationDeclined { reason }) => {
                tracing::info!(reason = reason.as_str(), "agentctl declined an elicitation");
                crate::metrics::elicitation_declined(reason);
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::ElicitationSettled {
                pending_id,
                outcome,
                answer,
                answered_by,
                ..
            }) => {
                let event = SettledEvent {
                    pending_id,
                    outcome,
                    answer,
                    answered_by,
                };
                let settled = elicitation::settled(clarifications, &session, event).await?;
                self.changed = settled.is_some();
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(request)) => {
                let position = self.position;
                if let Some(record) =
                    ask_user_question::requested(clarifications, &session, &request, position)
                        .await?
                {
                    self.stored_with(position);
                    self.transcript.close();
                    self.auto_answer(&record);
                }
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
                request_id,
                outcome,
                answer,
                answered_by,
                returned_together,
            }) => {
                let event = CallSettled {
                    request_id,
                    outcome,
                    answer,
                    answered_by,
                    returned_together,
                };
                let agents: Arc<dyn SessionAgents> = self.shared.live.clone();
                self.changed =
                    ask_user_question::settled(clarifications, agents, &session, event).await?;
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::PermissionResolved {
                tool_call_id,
                option_id,
            }) => {
                tracing::debug!(?tool_call_id, ?option_id, "permission resolved by policy");
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::AgentExited { code }) => {
                let reason = match code {
                    Some(code) => format!("the agent exited with code {code}"),
                    None => "the agent exited".to_owned(),
                };
                self.shared.ends.lost(&self.live, &reason).await
            }
            LinkEvent::Agent(AgentEvent::AgentStderr { line }) => {
                // Agent output may hold anything; keep it out of info logs.
                tracing::debug!(%line, "agent stderr");
                Ok(())
            }
            LinkEvent::Disconnected => {
                tracing::warn!("agent stream dropped; re-attaching");
                Ok(())
            }
            LinkEvent::Reattached { pending, questions } => {
                tracing::info!(pending = pending.len(), "agent stream re-attached");
                elicitation::reattached(clarifications, &session, &pending).await?;
                if let Some(held) = questions {
                    ask_user_question::reconcile(clarifications, &session, &held).await?;
                }
                Ok(())
            }
            LinkEvent::Lost { reason } => self.shared.ends.lost(&self.live, &reason).await,
        }
    }

    /// A question just opened: the agent's first matching auto-answer rule, if any,
    /// answers it after its `after` (on a task of its own).
    fn auto_answer(&self, record: &crate::model::Clarification) {
        let agents: Arc<dyn SessionAgents> = self.shared.live.clone();
        self.shared.auto_answers.opened(
            &self.shared.clarifications,
            agents,
            &self.live.agent,
            record,
        );
    }

    /// The stream position once the event just taken is applied, when nothing was
    /// delivered after it: the link hands an event over together with counting it, so
    /// with the queue empty every event up to `delivered_seq` read before has been taken.
    fn position_after(&self, events: &UnboundedReceiver<LinkEvent>) -> Option<u64> {
        let seq = self.live.link.delivered_seq()?;
        events.is_empty().then_some(seq)
    }

    /// A write (a question's open, streamed text) committed `position` with what it
    /// wrote: everything applied so far is stored.
    fn stored_with(&mut self, position: Option<u64>) {
        if position.is_some() {
            self.stored = position;
            self.unstored = false;
            self.changed = false;
        }
    }

    /// Stores how far the session's events are applied, once the queue is drained (see
    /// [`Self::position_after`]). Written when idle, not per event, to spare a burst of
    /// updates a write each.
    async fn store_progress(&mut self, events: &UnboundedReceiver<LinkEvent>) {
        let Some(seq) = self.live.link.delivered_seq() else {
            return;
        };
        if self.stored == Some(seq) || !events.is_empty() || !self.unstored {
            return;
        }
        match self
            .shared
            .stores
            .sessions
            .set_last_event_seq(&self.live.id, seq)
            .await
        {
            Ok(()) => {
                self.stored = Some(seq);
                self.unstored = false;
            }
            Err(err) => tracing::warn!(error = %err, "cannot store the last applied event"),
        }
    }
}
