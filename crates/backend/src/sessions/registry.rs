//! [`SessionRegistry`]: the sessions live in this process and the operator's verbs on them
//! (start, prompt, cancel, stop, shutdown), wired from the parts of this module, each with
//! its own dependencies: [`LiveSessions`], [`Hosts`], [`Consumers`], [`SessionEnds`],
//! [`Adoption`] and [`LeaseKeeper`].
//!
//! The map of live sessions is the only thing behind a lock, held for an insert, a
//! remove or a lookup and never across an await. What must hold across processes —
//! one turn at a time, the state machine — is a conditional update in the store.

use std::sync::Arc;

use kandev_agent_stream::request::{Cancel, Prompt, SessionStart};
use kandev_agent_stream::response::SessionStarted;
use serde_json::Value;
use tracing::Instrument;

use crate::agent_link::{AgentConnector, DynLink, call};
use crate::auto_answers::AutoAnswers;
use crate::clarifications::{Clarifications, SessionAgents};
use crate::config::{AgentConfig, Config};
use crate::events::{Change, Publisher};
use crate::flags::Flags;
use crate::model::{
    Fence, MessageKind, NewMessage, Session, SessionLease, SessionState, TakeOver, Task, author,
};
use crate::notifications::Notifier;
use crate::sessions::consumer::Consumers;
use crate::sessions::ends::SessionEnds;
use crate::sessions::error::SessionError;
use crate::sessions::hosts::Hosts;
use crate::sessions::keeper::LeaseKeeper;
use crate::sessions::live::{LiveSession, LiveSessions};
use crate::sessions::ownership::Ownership;
use crate::sessions::restart::{Adoption, Reconciled};
use crate::store::{StartFacts, StoreError, Stores, TurnStart};

/// Every session live in this process, and the verbs on them.
pub struct SessionRegistry {
    stores: Stores,
    publisher: Publisher,
    config: Arc<Config>,
    flags: Arc<Flags>,
    /// This replica and the leases it holds.
    pub ownership: Arc<Ownership>,
    live: Arc<LiveSessions>,
    hosts: Arc<Hosts>,
    consumers: Arc<Consumers>,
    ends: Arc<SessionEnds>,
    adoption: Arc<Adoption>,
    keeper: Arc<LeaseKeeper>,
}

impl std::fmt::Debug for SessionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRegistry").finish_non_exhaustive()
    }
}

impl SessionAgents for SessionRegistry {
    fn link_of(&self, session_id: &str) -> Option<(DynLink, Fence)> {
        self.live.link_of(session_id)
    }
}

impl SessionRegistry {
    /// A registry with no live session.
    pub fn new(
        stores: Stores,
        publisher: Publisher,
        notifier: Notifier,
        clarifications: Clarifications,
        config: Arc<Config>,
        flags: Arc<Flags>,
        connector: Arc<dyn AgentConnector>,
    ) -> Self {
        let ownership = Arc::new(Ownership::from_config(&config));
        // Every JSON log line names the replica it came from.
        kandev_log::set_process_field("replica_id", &ownership.replica_id);
        let live = Arc::new(LiveSessions::default());
        let hosts = Arc::new(Hosts::new(Arc::clone(&config), connector, stores.clone()));
        let ends = Arc::new(SessionEnds::new(
            stores.clone(),
            publisher.clone(),
            clarifications.clone(),
            Arc::clone(&ownership),
            Arc::clone(&live),
        ));
        let consumers = Arc::new(Consumers {
            stores: stores.clone(),
            publisher: publisher.clone(),
            notifier,
            clarifications,
            auto_answers: AutoAnswers::from_config(&config),
            live: Arc::clone(&live),
            ownership: Arc::clone(&ownership),
            ends: Arc::clone(&ends),
        });
        let adoption = Arc::new(Adoption::new(
            stores.clone(),
            Arc::clone(&ownership),
            Arc::clone(&hosts),
            Arc::clone(&live),
            Arc::clone(&consumers),
            Arc::clone(&ends),
        ));
        let keeper = Arc::new(LeaseKeeper::new(
            stores.clone(),
            Arc::clone(&ownership),
            Arc::clone(&hosts),
            Arc::clone(&live),
            Arc::clone(&ends),
            Arc::clone(&adoption),
        ));
        Self {
            stores,
            publisher,
            config,
            flags,
            ownership,
            live,
            hosts,
            consumers,
            ends,
            adoption,
            keeper,
        }
    }

    /// How many sessions are live here (their links held by this process).
    pub fn attached(&self) -> usize {
        self.live.count()
    }

    /// The live session `id`, if its link is up here.
    pub fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.live.get(id)
    }

    /// Start-up: adopts the sessions a previous process left live
    /// ([`restart`](super::restart)).
    pub async fn reconcile_after_restart(&self) -> Result<Reconciled, StoreError> {
        self.adoption.reconcile_after_restart().await
    }

    /// Starts the lease keeper ([`keeper`](super::keeper)); it runs as long as the process.
    pub fn spawn_lease_keeper(&self) {
        self.keeper.spawn();
    }

    /// The drain's hand-over of every session live here to another replica; how many were
    /// handed on (`None`: no replica could take them). See [`LeaseKeeper::hand_over_all`].
    pub async fn hand_over_all(&self) -> Option<usize> {
        self.keeper.hand_over_all().await
    }

    /// Starts a session of `agent_id` on `task`, sending `prompt` first when given.
    /// Returns once the start has finished (the session is then live, or `FAILED`).
    pub async fn start(
        self: &Arc<Self>,
        task: &Task,
        agent_id: &str,
        prompt: Option<String>,
    ) -> Result<Session, SessionError> {
        let Some(agent) = self.config.agents.get(agent_id).cloned() else {
            let known: Vec<&str> = self.config.agents.keys().map(String::as_str).collect();
            return Err(SessionError::UnknownAgent {
                agent: agent_id.to_owned(),
                known: known.join(", "),
            });
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
            .ok_or_else(|| {
                SessionError::Internal("a new session's lease is held elsewhere".into())
            })?;
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
                    this.ends.release(&lease).await;
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
            .ok_or_else(|| SessionError::Internal("session vanished during start".into()))
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
        let (link, events) = self.hosts.connect(lease).await?;
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
        self.consumers.go_live(Arc::clone(&live), events, None);
        self.publisher.session_changed(session_id, &task.id);
        if let Some(text) = prompt.filter(|p| !p.trim().is_empty())
            && let Err(err) = self.prompt_live(&live, &text).await
        {
            tracing::warn!(error = %err, "the first prompt could not be sent");
            self.ends
                .status_message(
                    &live.id,
                    &live.task_id,
                    &format!("The first prompt could not be sent: {err}"),
                )
                .await;
        }
        Ok(())
    }

    /// The live session `id`, or why it cannot take a request.
    async fn require_live(&self, id: &str) -> Result<Arc<LiveSession>, SessionError> {
        if let Some(live) = self.live(id) {
            return Ok(live);
        }
        match self.stores.sessions.session(id).await? {
            None => Err(SessionError::NotFound(id.to_owned())),
            Some(row) => Err(SessionError::refusal(id, row.state)),
        }
    }

    /// Sends a prompt to session `id`.
    pub async fn prompt(&self, id: &str, text: &str) -> Result<(), SessionError> {
        let live = self.require_live(id).await?;
        self.prompt_live(&live, text).await
    }

    /// Claims the turn and stores the prompt (one transaction), then hands it to agentctl;
    /// a prompt agentctl never took is taken back.
    async fn prompt_live(&self, live: &LiveSession, text: &str) -> Result<(), SessionError> {
        if live.is_ended() {
            return Err(SessionError::refusal(&live.id, SessionState::Completed));
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
            TurnStart::Refused(state) => return Err(SessionError::refusal(&live.id, state)),
            TurnStart::Missing => {
                return Err(SessionError::NotFound(live.id.clone()));
            }
        };
        live.next_turn();
        let message_id = message.id.clone();
        live.hold_prompt(*message);
        let prompt = Prompt {
            text: text.to_owned(),
        };
        if let Err(err) = call(&*live.link, &prompt).await {
            live.forget_prompt();
            self.stores
                .sessions
                .abandon_turn(&live.id, &message_id)
                .await?;
            return Err(err.into());
        }
        live.announce_prompt(|message| self.publisher.publish(Change::MessageCreated(message)));
        self.publisher.session_changed(&live.id, &live.task_id);
        Ok(())
    }

    /// Cancels the current turn of session `id`; agentctl answers its pending
    /// elicitations `cancel`, and the turn's end arrives as an event.
    pub async fn cancel(&self, id: &str) -> Result<(), SessionError> {
        let live = self.require_live(id).await?;
        call(&*live.link, &Cancel {}).await?;
        Ok(())
    }

    /// Stops session `id`: the agent and its agentctl are shut down, the session is
    /// `COMPLETED`, its pending clarifications withdrawn.
    pub async fn stop(&self, id: &str) -> Result<(), SessionError> {
        let live = self.require_live(id).await?;
        match self.ends.stop(&live, SessionState::Completed, None).await? {
            true => Ok(()),
            false => Err(SessionError::refusal(&live.id, SessionState::Completed)),
        }
    }

    /// Ends every live session as `CANCELLED` (the backend is shutting down), all at once:
    /// each waits on its own agentctl, and one slow agentctl must not hold up the rest.
    pub async fn shutdown_all(&self) {
        let all = self.live.all();
        futures::future::join_all(all.iter().map(|live| async move {
            let ended = self
                .ends
                .stop(live, SessionState::Cancelled, Some("the backend shut down"))
                .await;
            if let Err(err) = ended {
                tracing::error!(session_id = %live.id, error = %err, "cannot end session at shutdown");
            }
        }))
        .await;
    }
}
