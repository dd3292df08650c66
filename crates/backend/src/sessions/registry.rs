//! [`SessionRegistry`]: the sessions live in this process and the operator's verbs on them.
//!
//! The map of live sessions is the only thing behind a lock, held for an insert, a
//! remove or a lookup and never across an await. What must hold across processes —
//! one turn at a time, the state machine — is a conditional update in the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kandev_agent_stream::request::{Cancel, Prompt, SessionStart};
use kandev_agent_stream::response::SessionStarted;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

use crate::agent_link::{AgentConnector, DynLink, LinkEvent, call};
use crate::clarifications::{Clarifications, SessionAgents};
use crate::config::{AgentConfig, Config};
use crate::error::AppError;
use crate::events::{Change, Publisher};
use crate::flags::Flags;
use crate::model::{
    Fence, MessageKind, NewMessage, Session, SessionLease, SessionState, Settlement, TakeOver,
    Task, author,
};
use crate::notifications::Notifier;
use crate::sessions::live::LiveSession;
use crate::sessions::ownership::Ownership;
use crate::store::{StartFacts, StoreError, Stores, TurnStart};

/// Every session live in this process, and what they share.
pub struct SessionRegistry {
    pub(crate) stores: Stores,
    pub(crate) publisher: Publisher,
    pub(crate) notifier: Notifier,
    pub(crate) clarifications: Clarifications,
    pub(crate) config: Arc<Config>,
    flags: Arc<Flags>,
    pub(crate) connector: Arc<dyn AgentConnector>,
    /// This replica and the leases it holds.
    pub ownership: Ownership,
    /// The agents' auto-answer rules.
    pub(crate) auto_answers: crate::auto_answers::AutoAnswers,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
}

impl std::fmt::Debug for SessionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRegistry").finish_non_exhaustive()
    }
}

impl SessionAgents for SessionRegistry {
    fn link_of(&self, session_id: &str) -> Option<(DynLink, Fence)> {
        self.live(session_id)
            .map(|live| (Arc::clone(&live.link), live.fence))
    }
}

impl SessionRegistry {
    /// A registry with no live session.
    pub fn new(
        stores: Stores,
        publisher: Publisher,
        clarifications: Clarifications,
        config: Arc<Config>,
        flags: Arc<Flags>,
        connector: Arc<dyn AgentConnector>,
    ) -> Self {
        let notifier = Notifier::new(
            stores.clone(),
            publisher.clone(),
            config.notifications.clone(),
        )
        .with_webhooks(crate::reach::Webhooks::from_config(stores.clone(), &config));
        let ownership = Ownership::from_config(&config);
        // Every JSON log line names the replica it came from.
        kandev_log::set_process_field("replica_id", &ownership.replica_id);
        Self {
            auto_answers: crate::auto_answers::AutoAnswers::from_config(&config),
            stores,
            publisher,
            notifier,
            clarifications,
            config,
            flags,
            connector,
            ownership,
            live: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        // Only inserted into and removed from; a poisoned lock still holds a valid map.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many sessions are live here (their links held by this process).
    pub fn attached(&self) -> usize {
        self.map().len()
    }

    /// The live session `id`, if its link is up here.
    pub fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.map().get(id).cloned()
    }

    /// Every session live here, at this moment.
    pub(crate) fn all_live(&self) -> Vec<Arc<LiveSession>> {
        self.map().values().cloned().collect()
    }

    /// Removes session `id` from the live map.
    pub(crate) fn forget_live(&self, id: &str) {
        self.map().remove(id);
        self.clarifications.open.forget_session(id);
    }

    /// Makes `live` live here and consumes its link's events from `after_seq` on — unless
    /// its lease was lost meanwhile: then its link is detached.
    pub(crate) fn go_live(
        self: &Arc<Self>,
        live: Arc<LiveSession>,
        events: UnboundedReceiver<LinkEvent>,
        after_seq: Option<u64>,
    ) {
        if !self.ownership.holds(&live.id, live.fence) {
            self.detach_live(&live, "its lease was lost while it started");
            return;
        }
        self.map().insert(live.id.clone(), Arc::clone(&live));
        let span = tracing::info_span!("session", session_id = %live.id);
        tokio::spawn(
            super::consumer::run(Arc::clone(self), live, events, after_seq).instrument(span),
        );
    }

    /// Starts a session of `agent_id` on `task`, sending `prompt` first when given.
    /// Returns once the start has finished (the session is then live, or `FAILED`).
    pub async fn start(
        self: &Arc<Self>,
        task: &Task,
        agent_id: &str,
        prompt: Option<String>,
    ) -> Result<Session, AppError> {
        let Some(agent) = self.config.agents.get(agent_id).cloned() else {
            let known: Vec<&str> = self.config.agents.keys().map(String::as_str).collect();
            return Err(AppError::BadRequest(format!(
                "unknown agent `{agent_id}`; configured agents: {}",
                known.join(", ")
            )));
        };
        let record = self
            .stores
            .sessions
            .insert_session(&task.id, agent_id)
            .await?;
        let lease = self
            .stores
            .leases
            .claim(&record.id, self.ownership.claimant(), TakeOver::Expired)
            .await?
            .ok_or_else(|| AppError::Internal("a new session's lease is held elsewhere".into()))?;
        self.ownership.hold(&lease);
        self.publisher.session_changed(&record.id, &task.id);
        let span = tracing::info_span!("session", session_id = %record.id, agent = agent_id);
        let this = Arc::clone(self);
        let task = task.clone();
        let session_id = record.id.clone();
        let agent_id = agent_id.to_owned();
        // Its own task, so a client hanging up cannot abort a half-started session.
        let started = tokio::spawn(
            async move {
                if let Err(reason) = this
                    .try_start(&task, &lease, &agent_id, &agent, prompt)
                    .await
                {
                    tracing::warn!(%reason, "session start failed");
                    if let Err(err) = this
                        .stores
                        .sessions
                        .transition(
                            &session_id,
                            SessionState::Failed,
                            Some(&reason),
                            lease.fence(),
                        )
                        .await
                    {
                        tracing::error!(error = %err, "cannot record the failed start");
                    }
                    this.release(&lease).await;
                    this.publisher.session_changed(&session_id, &task.id);
                }
            }
            .instrument(span),
        );
        if let Err(err) = started.await {
            tracing::error!(error = %err, "session start task panicked");
        }
        self.stores
            .session_view(&record.id)
            .await?
            .ok_or_else(|| AppError::Internal("session vanished during start".into()))
    }

    async fn try_start(
        self: &Arc<Self>,
        task: &Task,
        lease: &SessionLease,
        agent_id: &str,
        agent: &AgentConfig,
        prompt: Option<String>,
    ) -> Result<(), String> {
        let db_err = |e: StoreError| e.to_string();
        let session_id = lease.session_id.as_str();
        let fence = lease.fence();
        self.stores
            .sessions
            .transition(session_id, SessionState::Starting, None, fence)
            .await
            .map_err(db_err)?;
        self.publisher.session_changed(session_id, &task.id);
        // Resolved now, so a Settings change applies to every session started after it.
        let snapshot = self
            .flags
            .snapshot()
            .await
            .map_err(|e| format!("cannot resolve runtime flags: {e}"))?;
        let (link, events) = self.connect_agent(lease).await?;
        let start = SessionStart {
            session_id: session_id.to_owned(),
            agent: agent.spec(agent_id),
            flags: snapshot.as_map().clone(),
        };
        let started: SessionStarted = match call(&*link, &start).await {
            Ok(started) => started,
            Err(err) => {
                link.shutdown().await;
                return Err(format!("agent.session.start failed: {err}"));
            }
        };
        let facts = StartFacts {
            acp_session_id: started.acp_session_id.clone(),
            client_capabilities: started.client_capabilities.clone(),
            flags: serde_json::to_value(&snapshot).unwrap_or(Value::Null),
            agent_info: started.agent_info.clone(),
        };
        self.stores
            .sessions
            .record_start(session_id, &facts)
            .await
            .map_err(db_err)?;
        self.stores
            .sessions
            .transition(session_id, SessionState::Idle, None, fence)
            .await
            .map_err(db_err)?;
        tracing::info!(
            acp_session_id = %started.acp_session_id,
            elicitation = snapshot.acp_elicitation(),
            "session started"
        );
        let live = Arc::new(LiveSession::new(
            session_id,
            &task.id,
            &task.title,
            agent_id,
            link,
            fence,
        ));
        self.go_live(Arc::clone(&live), events, None);
        self.publisher.session_changed(session_id, &task.id);
        if let Some(text) = prompt.filter(|p| !p.trim().is_empty())
            && let Err(err) = self.prompt_live(&live, &text).await
        {
            tracing::warn!(error = %err, "the first prompt could not be sent");
            self.status_message(
                &live.id,
                &live.task_id,
                &format!("The first prompt could not be sent: {err}"),
            )
            .await;
        }
        Ok(())
    }

    /// The live session `id`, or why it cannot take a request.
    async fn require_live(&self, id: &str) -> Result<Arc<LiveSession>, AppError> {
        if let Some(live) = self.live(id) {
            return Ok(live);
        }
        match self.stores.sessions.session(id).await? {
            None => Err(AppError::not_found(format!("no session `{id}`"))),
            Some(row) => Err(refusal(id, row.state)),
        }
    }

    /// Sends a prompt to session `id`.
    pub async fn prompt(&self, id: &str, text: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        self.prompt_live(&live, text).await
    }

    /// Claims the turn and stores the prompt (one transaction), then hands it to agentctl;
    /// a prompt agentctl never took is taken back.
    async fn prompt_live(&self, live: &LiveSession, text: &str) -> Result<(), AppError> {
        if live.is_ended() {
            return Err(refusal(&live.id, SessionState::Completed));
        }
        let new = NewMessage::new(
            &live.id,
            &live.task_id,
            MessageKind::Message,
            author::USER,
            text,
        );
        let message = match self
            .stores
            .sessions
            .begin_turn(&live.id, &new, live.fence)
            .await?
        {
            TurnStart::Started(message) => message,
            TurnStart::Refused(state) => return Err(refusal(&live.id, state)),
            TurnStart::Missing => {
                return Err(AppError::not_found(format!("no session `{}`", live.id)));
            }
        };
        live.next_turn();
        let prompt = Prompt {
            text: text.to_owned(),
        };
        if let Err(err) = call(&*live.link, &prompt).await {
            self.stores
                .sessions
                .abandon_turn(&live.id, &message.id)
                .await?;
            return Err(err.into());
        }
        self.publisher.publish(Change::MessageCreated(*message));
        self.publisher.session_changed(&live.id, &live.task_id);
        Ok(())
    }

    /// Cancels the current turn of session `id`; agentctl answers its pending
    /// elicitations `cancel`, and the turn's end arrives as an event.
    pub async fn cancel(&self, id: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        call(&*live.link, &Cancel {}).await?;
        Ok(())
    }

    /// Stops session `id`: the agent and its agentctl are shut down, the session is
    /// `COMPLETED`, its pending clarifications withdrawn.
    pub async fn stop(&self, id: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        self.end_live(&live, SessionState::Completed, None).await
    }

    /// Ends every live session as `CANCELLED` (the backend is shutting down), all at once:
    /// each waits on its own agentctl, and one slow agentctl must not hold up the rest.
    pub async fn shutdown_all(&self) {
        let all = self.all_live();
        futures::future::join_all(all.iter().map(|live| async move {
            if let Err(err) = self
                .end_live(live, SessionState::Cancelled, Some("the backend shut down"))
                .await
            {
                tracing::error!(session_id = %live.id, error = %err, "cannot end session at shutdown");
            }
        }))
        .await;
    }

    /// Shuts the link down (agentctl answers its pendings `cancel`) and records the end.
    async fn end_live(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
    ) -> Result<(), AppError> {
        if !live.end() {
            return Err(refusal(&live.id, SessionState::Completed));
        }
        self.forget_live(&live.id);
        let span = tracing::info_span!("session", session_id = %live.id);
        async {
            live.link.shutdown().await;
            let withdrawn = Settlement::by_backend(
                crate::model::ClarificationStatus::Cancelled,
                crate::model::Outcome::Withdrawn,
            );
            self.record_end(live, state, error, &withdrawn).await
        }
        .instrument(span)
        .await?;
        Ok(())
    }

    /// The agent or agentctl is gone: pending records become `agent_disconnected`, the
    /// session `FAILED`. Ignored once the session has ended (a stop's own teardown).
    pub(crate) async fn lost(&self, live: &LiveSession, reason: &str) -> Result<(), StoreError> {
        if live.is_ended() {
            return Ok(());
        }
        if !self.still_owns(live).await {
            // Another replica took the session over (agentctl handed it the stream).
            self.ownership.forget(&live.id);
            self.detach_live(
                live,
                &format!("{reason}, and its lease is not this replica's"),
            );
            return Ok(());
        }
        if !live.end() {
            return Ok(());
        }
        tracing::warn!(%reason, "session lost its agent");
        self.forget_live(&live.id);
        self.status_message(
            &live.id,
            &live.task_id,
            &format!("Session ended: {reason}."),
        )
        .await;
        self.record_end(
            live,
            SessionState::Failed,
            Some(reason),
            &Settlement::disconnected(),
        )
        .await?;
        // A local agentctl whose agent died is still running: stop it.
        let link = Arc::clone(&live.link);
        tokio::spawn(async move { link.shutdown().await });
        Ok(())
    }

    /// Writes a session's end: its pending records, then its state.
    async fn record_end(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
        settlement: &Settlement,
    ) -> Result<(), StoreError> {
        self.clarifications
            .settle_all_pending(&live.id, &settlement.clone().fenced(live.fence))
            .await?;
        self.stores
            .sessions
            .transition(&live.id, state, error, live.fence)
            .await?;
        tracing::info!(state = %state, "session ended");
        if let Some(generation) = live.fence.generation() {
            self.ownership.forget(&live.id);
            self.stores.leases.release(&live.id, generation).await?;
        }
        self.publisher.session_changed(&live.id, &live.task_id);
        Ok(())
    }

    /// Gives up a lease of a session that ended here.
    pub(crate) async fn release(&self, lease: &SessionLease) {
        self.ownership.forget(&lease.session_id);
        if let Err(err) = self
            .stores
            .leases
            .release(&lease.session_id, lease.generation)
            .await
        {
            tracing::warn!(session_id = %lease.session_id, error = %err, "cannot release the lease");
        }
    }

    /// Whether the database still gives `live`'s lease to this replica. False when it
    /// cannot say: nothing could be written then anyway, and letting go leaves the
    /// session to whichever replica claims its lease once it runs out (which records
    /// the loss if the agent is really gone).
    async fn still_owns(&self, live: &LiveSession) -> bool {
        let Some(generation) = live.fence.generation() else {
            return true;
        };
        match self.stores.leases.lease(&live.id).await {
            Ok(Some(lease)) => {
                lease.generation == generation && lease.replica_id == self.ownership.replica_id
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Writes a status line into a session's chat (agent exited, turn failed, …).
    pub(crate) async fn status_message(&self, session_id: &str, task_id: &str, text: &str) {
        let new = NewMessage::new(
            session_id,
            task_id,
            MessageKind::Status,
            author::SYSTEM,
            text,
        );
        match self.stores.messages.insert_message(&new).await {
            Ok(message) => self.publisher.publish(Change::MessageCreated(message)),
            Err(err) => tracing::error!(error = %err, "cannot store a status message"),
        }
    }
}

/// Why session `id`, standing as `state`, takes no prompt (409).
fn refusal(id: &str, state: SessionState) -> AppError {
    if state.is_terminal() {
        AppError::Conflict {
            code: "SESSION_ENDED",
            message: format!("session `{id}` has ended ({state})"),
        }
    } else if matches!(state, SessionState::Running | SessionState::WaitingForInput) {
        AppError::Conflict {
            code: "TURN_IN_PROGRESS",
            message: "a turn is already running; wait for it or cancel it".into(),
        }
    } else {
        AppError::Conflict {
            code: "SESSION_NOT_READY",
            message: format!("session `{id}` is {state}; try again when it has started"),
        }
    }
}
