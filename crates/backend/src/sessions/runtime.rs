//! The session runtime: starts sessions (flags resolved now, agentctl reached,
//! `agent.session.start`), sends prompts, cancels and stops, and consumes each
//! session's link events in order in one task per session.
//!
//! Lock order, to stay deadlock-free: a live session's `clarifications` lock is
//! always taken before its `inner` lock.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use kandev_agent_stream::action;
use kandev_agent_stream::request::{Empty, Prompt, SessionStart};
use kandev_agent_stream::response::{PromptAccepted, SessionStarted, Success};
use kandev_agent_stream::{AgentEvent, AskUserQuestionRequested, ElicitationRequested, ErrorCode};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

use crate::agent_link::{ExecutorConfig, LinkError, LinkEvent};
use crate::clarifications::ask_user_question;
use crate::clarifications::store::{
    self as clarification_store, Clarification, ClarificationRow, ClarificationStatus,
    SOURCE_ELICITATION, SettledBy,
};
use crate::config::{AgentConfig, Config};
use crate::db::Db;
use crate::error::{AppError, Origin};
use crate::events::{
    CLARIFICATION_CREATED, CLARIFICATION_SETTLED, EventHub, MESSAGE_CREATED, MESSAGE_UPDATED,
    SESSION_UPDATED, TASK_UPDATED,
};
use crate::flags::Flags;
use crate::messages::{
    self, NewMessage, TYPE_CLARIFICATION_REQUEST, TYPE_MESSAGE, TYPE_STATUS, author,
};
use crate::notifications::Notifier;
use crate::sessions::link::{AgentConnector, DynLink, call};
use crate::sessions::state::SessionState;
use crate::sessions::store::{self, Session};
use crate::sessions::transcript::{Target, Transcript};
use crate::tasks::Task;

/// Mutable state of a live session, guarded by one async mutex.
#[derive(Debug)]
pub(crate) struct LiveInner {
    /// The state last written.
    state: SessionState,
    /// A prompt is in flight.
    turn_active: bool,
    /// Stopped, failed or shut down: events are no longer applied.
    pub(crate) ended: bool,
    transcript: Transcript,
}

/// A session whose agentctl link is up (or re-attaching).
pub struct LiveSession {
    /// Session id.
    pub id: String,
    /// Its task.
    pub task_id: String,
    task_title: String,
    pub(crate) link: DynLink,
    pub(crate) inner: tokio::sync::Mutex<LiveInner>,
    /// Serializes clarification settlement (a respond in flight vs. agentctl's settled event).
    pub(crate) clarifications: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Maps a link failure of a session request to the API error.
pub fn link_error(err: LinkError) -> AppError {
    match err {
        LinkError::NotConnected => AppError::AgentStreamNotConnected(
            "the agent stream is not connected; nothing was sent to the agent".into(),
        ),
        LinkError::Interrupted => AppError::AgentStreamNotConnected(
            "the agent stream dropped before agentctl answered; the request may have reached \
             the agent, and its outcome arrives once the stream is back"
                .into(),
        ),
        LinkError::Unreachable(msg) => {
            AppError::AgentStreamNotConnected(format!("agentctl cannot be reached: {msg}"))
        }
        LinkError::Remote(payload) => match payload.code {
            ErrorCode::NotFound => AppError::NotFound {
                message: payload.message,
                origin: Some(Origin::Agentctl),
            },
            ErrorCode::InvalidAnswer => AppError::InvalidAnswer(payload.message),
            ErrorCode::BadRequest => AppError::BadRequest(payload.message),
            ErrorCode::UnknownAction | ErrorCode::Internal => {
                AppError::Agentctl(format!("agentctl: {}", payload.message))
            }
        },
        LinkError::Timeout(d) => {
            AppError::AgentctlTimeout(format!("agentctl did not answer within {d:?}"))
        }
        LinkError::Protocol(msg) => AppError::Agentctl(msg),
    }
}

/// Why a session left live by a previous process is failed at start-up.
const RESTARTED: &str = "the backend restarted while the session was live";

/// What start-up did with the sessions a previous process left live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Re-attached to the remote agentctl that still runs them: live again.
    pub resumed: usize,
    /// Marked `FAILED`, their pending clarifications `agent_disconnected`.
    pub failed: usize,
}

/// Every live session, and what they share.
pub struct SessionRuntime {
    db: Db,
    hub: EventHub,
    notifier: Notifier,
    config: Arc<Config>,
    flags: Arc<Flags>,
    connector: Arc<dyn AgentConnector>,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
}

impl std::fmt::Debug for SessionRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRuntime").finish_non_exhaustive()
    }
}

impl SessionRuntime {
    /// A runtime with no live session.
    pub fn new(
        db: Db,
        hub: EventHub,
        config: Arc<Config>,
        flags: Arc<Flags>,
        connector: Arc<dyn AgentConnector>,
    ) -> Self {
        let notifier = Notifier::new(db.clone(), hub.clone(), config.notifications);
        Self {
            db,
            hub,
            notifier,
            config,
            flags,
            connector,
            live: Mutex::new(HashMap::new()),
        }
    }

    fn live_map(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        // The map is only inserted into and removed from; a poisoned lock still holds a valid map.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live session `id`, if its link is up.
    pub fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.live_map().get(id).cloned()
    }

    /// Deals with the sessions a previous process left live (a crash: a graceful stop
    /// ends them).
    ///
    /// With a remote executor the agentctl outlives the backend and may still run such
    /// a session: the runtime re-attaches to it (`agent.session.attach`), and the session
    /// is live again. Its pending clarifications are then reconciled against agentctl's
    /// list by the `Reattached` event, after the events agentctl kept: a pending it still
    /// holds stays answerable, one settled meanwhile takes the status its replayed
    /// `elicitation_settled` gives, and one nothing accounts for is `agent_disconnected`.
    /// Every other session (local executor: its agentctl exited with the previous
    /// process; never started; agentctl unreachable or no longer holding it) is marked
    /// `FAILED` with its pending clarifications `agent_disconnected`.
    pub async fn reconcile_after_restart(self: &Arc<Self>) -> Result<Reconciled, sqlx::Error> {
        let stale = store::list_live(&self.db).await?;
        let remote = matches!(self.config.executor, ExecutorConfig::Remote { .. });
        let attempts = stale.into_iter().map(|row| async move {
            let resumable = row.acp_session_id.is_some()
                && matches!(
                    row.state(),
                    SessionState::Running | SessionState::Idle | SessionState::WaitingForInput
                );
            if !remote || !resumable {
                return (row, Err(RESTARTED.to_owned()));
            }
            let span = tracing::info_span!("session", session_id = %row.id);
            // Everything after the last event the previous process applied is replayed.
            let resumed = self
                .connector
                .resume(&self.config.executor, &row.id, row.after_seq())
                .instrument(span)
                .await
                .map_err(|err| format!("{RESTARTED}, and re-attaching to agentctl failed: {err}"));
            (row, resumed)
        });
        let mut reconciled = Reconciled::default();
        for (row, attempt) in futures::future::join_all(attempts).await {
            let reason = match attempt {
                Ok((link, events)) => match crate::tasks::get(&self.db, &row.task_id).await? {
                    Some(task) => {
                        self.resume_live(&row, &task, link, events);
                        reconciled.resumed += 1;
                        continue;
                    }
                    None => {
                        link.shutdown().await;
                        format!("{RESTARTED}, and its task is gone")
                    }
                },
                Err(reason) => reason,
            };
            tracing::warn!(session_id = %row.id, %reason, "session left live by a previous run failed");
            self.fail_stale(&row.id, &reason).await?;
            reconciled.failed += 1;
        }
        Ok(reconciled)
    }

    /// Makes a re-attached session live again and consumes its link's events, which
    /// begin with the kept events and the `Reattached` that reconciles its records.
    fn resume_live(
        self: &Arc<Self>,
        row: &store::SessionRow,
        task: &Task,
        link: DynLink,
        events: UnboundedReceiver<LinkEvent>,
    ) {
        let state = row.state();
        // A clarification is asked inside a turn: a waiting session's turn is still on.
        let turn_active = matches!(state, SessionState::Running | SessionState::WaitingForInput);
        let live = Arc::new(LiveSession {
            id: row.id.clone(),
            task_id: task.id.clone(),
            task_title: task.title.clone(),
            link,
            inner: tokio::sync::Mutex::new(LiveInner {
                state,
                turn_active,
                ended: false,
                transcript: Transcript::default(),
            }),
            clarifications: tokio::sync::Mutex::new(()),
        });
        self.live_map().insert(row.id.clone(), Arc::clone(&live));
        let span = tracing::info_span!("session", session_id = %row.id);
        span.in_scope(|| tracing::info!(state = %state, "session re-attached after a restart"));
        tokio::spawn(
            Arc::clone(self)
                .consume_from(live, events, row.after_seq())
                .instrument(span),
        );
    }

    /// Ends a session a previous process left live: `FAILED`, its pending
    /// clarifications `agent_disconnected`.
    async fn fail_stale(&self, session_id: &str, reason: &str) -> Result<(), sqlx::Error> {
        for rec in clarification_store::list(
            &self.db,
            Some(session_id),
            Some(ClarificationStatus::Pending),
        )
        .await?
        {
            if let Some(rec) = clarification_store::settle(
                &self.db,
                &rec.pending_id,
                ClarificationStatus::AgentDisconnected,
                SettledBy::Backend,
                None,
            )
            .await?
            {
                self.mark_message_settled(&rec).await?;
            }
        }
        store::set_state(&self.db, session_id, SessionState::Failed, Some(reason)).await
    }

    /// Starts a session of `agent_id` on `task`, sending `prompt` first when given.
    /// Returns once the start has finished (the session is then live, or `FAILED`).
    pub async fn start_session(
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
        let row = store::insert(&self.db, &task.id, agent_id).await?;
        self.publish_session(&row.id).await;
        let span = tracing::info_span!("session", session_id = %row.id, agent = agent_id);
        let this = Arc::clone(self);
        let task = task.clone();
        let session_id = row.id.clone();
        let agent_id = agent_id.to_owned();
        // Its own task, so a client hanging up cannot abort a half-started session.
        let started = tokio::spawn(
            async move {
                if let Err(reason) = this
                    .try_start(&task, &session_id, &agent_id, &agent, prompt)
                    .await
                {
                    tracing::warn!(%reason, "session start failed");
                    if let Err(err) =
                        store::set_state(&this.db, &session_id, SessionState::Failed, Some(&reason))
                            .await
                    {
                        tracing::error!(error = %err, "cannot record the failed start");
                    }
                    this.publish_session(&session_id).await;
                }
            }
            .instrument(span),
        );
        if let Err(err) = started.await {
            tracing::error!(error = %err, "session start task panicked");
        }
        store::view(&self.db, &row.id)
            .await?
            .ok_or_else(|| AppError::Internal("session vanished during start".into()))
    }

    async fn try_start(
        self: &Arc<Self>,
        task: &Task,
        session_id: &str,
        agent_id: &str,
        agent: &AgentConfig,
        prompt: Option<String>,
    ) -> Result<(), String> {
        let db_err = |e: sqlx::Error| format!("database error: {e}");
        store::set_state(&self.db, session_id, SessionState::Starting, None)
            .await
            .map_err(db_err)?;
        self.publish_session(session_id).await;
        // Resolved now, so a Settings change applies to every session started after it.
        let snapshot = self
            .flags
            .snapshot()
            .await
            .map_err(|e| format!("cannot resolve runtime flags: {e}"))?;
        let (link, events) = self
            .connector
            .connect(&self.config.executor, session_id)
            .await
            .map_err(|e| e.to_string())?;
        let start = SessionStart {
            session_id: session_id.to_owned(),
            agent: agent.spec(agent_id),
            flags: snapshot.as_map().clone(),
        };
        let started: SessionStarted = match call(&*link, action::SESSION_START, &start).await {
            Ok(started) => started,
            Err(err) => {
                link.shutdown().await;
                return Err(format!("agent.session.start failed: {err}"));
            }
        };
        let flags = serde_json::to_value(&snapshot).unwrap_or(Value::Null);
        store::set_started(
            &self.db,
            session_id,
            &started.acp_session_id,
            &started.client_capabilities,
            &flags,
        )
        .await
        .map_err(db_err)?;
        tracing::info!(
            acp_session_id = %started.acp_session_id,
            elicitation = snapshot.acp_elicitation(),
            "session started"
        );
        let live = Arc::new(LiveSession {
            id: session_id.to_owned(),
            task_id: task.id.clone(),
            task_title: task.title.clone(),
            link,
            inner: tokio::sync::Mutex::new(LiveInner {
                state: SessionState::Starting,
                turn_active: false,
                ended: false,
                transcript: Transcript::default(),
            }),
            clarifications: tokio::sync::Mutex::new(()),
        });
        self.live_map()
            .insert(session_id.to_owned(), Arc::clone(&live));
        tokio::spawn(
            Arc::clone(self)
                .consume(Arc::clone(&live), events)
                .instrument(tracing::Span::current()),
        );
        match prompt.filter(|p| !p.trim().is_empty()) {
            Some(text) => {
                if let Err(err) = self.prompt_live(&live, &text).await {
                    tracing::warn!(error = %err, "the first prompt could not be sent");
                    self.status_message(
                        &live,
                        &format!("The first prompt could not be sent: {err}"),
                    )
                    .await;
                }
            }
            None => {
                let mut inner = live.inner.lock().await;
                self.refresh(&live, &mut inner).await.map_err(db_err)?;
            }
        }
        Ok(())
    }

    /// The live session `id`, or why it cannot take a request.
    async fn require_live(&self, id: &str) -> Result<Arc<LiveSession>, AppError> {
        if let Some(live) = self.live(id) {
            return Ok(live);
        }
        match store::get(&self.db, id).await? {
            None => Err(AppError::not_found(format!("no session `{id}`"))),
            Some(row) if row.state().is_terminal() => Err(AppError::Conflict {
                code: "SESSION_ENDED",
                message: format!("session `{id}` has ended ({})", row.state()),
            }),
            Some(row) => Err(AppError::Conflict {
                code: "SESSION_NOT_READY",
                message: format!(
                    "session `{id}` is {}; try again when it has started",
                    row.state()
                ),
            }),
        }
    }

    /// Sends a prompt to session `id`.
    pub async fn prompt(&self, id: &str, text: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        self.prompt_live(&live, text).await
    }

    async fn prompt_live(&self, live: &LiveSession, text: &str) -> Result<(), AppError> {
        let mut inner = live.inner.lock().await;
        if inner.ended {
            return Err(AppError::Conflict {
                code: "SESSION_ENDED",
                message: format!("session `{}` has ended", live.id),
            });
        }
        if inner.turn_active {
            return Err(AppError::Conflict {
                code: "TURN_IN_PROGRESS",
                message: "a turn is already running; wait for it or cancel it".into(),
            });
        }
        let prompt = Prompt {
            text: text.to_owned(),
        };
        let _: PromptAccepted = call(&*live.link, action::PROMPT, &prompt)
            .await
            .map_err(link_error)?;
        // Stored after agentctl accepted it; the consumer cannot write agent replies in
        // between because it needs `inner`, which this call holds.
        let message = messages::insert(
            &self.db,
            NewMessage {
                session_id: &live.id,
                task_id: &live.task_id,
                message_type: TYPE_MESSAGE,
                author_type: author::USER,
                content: text,
                requests_input: false,
                metadata: json!({}),
            },
        )
        .await?;
        self.hub.publish(MESSAGE_CREATED, &message);
        inner.transcript.close();
        inner.turn_active = true;
        self.refresh(live, &mut inner).await?;
        Ok(())
    }

    /// Cancels the current turn of session `id`; agentctl answers its pending
    /// elicitations `cancel`, and the turn's end arrives as an event.
    pub async fn cancel(&self, id: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        let _: Success = call(&*live.link, action::CANCEL, &Empty {})
            .await
            .map_err(link_error)?;
        Ok(())
    }

    /// Stops session `id`: the agent and its agentctl are shut down, the session is `COMPLETED`.
    pub async fn stop(&self, id: &str) -> Result<(), AppError> {
        let live = self.require_live(id).await?;
        self.end_live(
            &live,
            SessionState::Completed,
            None,
            ClarificationStatus::Cancelled,
        )
        .await
    }

    /// Ends every live session as `CANCELLED` (the backend is shutting down).
    pub async fn shutdown_all(&self) {
        let all: Vec<Arc<LiveSession>> = self.live_map().values().cloned().collect();
        for live in all {
            if let Err(err) = self
                .end_live(
                    &live,
                    SessionState::Cancelled,
                    Some("the backend shut down"),
                    ClarificationStatus::Cancelled,
                )
                .await
            {
                tracing::error!(session_id = %live.id, error = %err, "cannot end session at shutdown");
            }
        }
    }

    /// Shuts the link down and records the end: still-pending clarifications get
    /// `pending_status` (agentctl answers them `cancel` on shutdown).
    async fn end_live(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
        pending_status: ClarificationStatus,
    ) -> Result<(), AppError> {
        {
            let mut inner = live.inner.lock().await;
            if inner.ended {
                return Err(AppError::Conflict {
                    code: "SESSION_ENDED",
                    message: format!("session `{}` has ended", live.id),
                });
            }
            inner.ended = true;
        }
        self.live_map().remove(&live.id);
        let span = tracing::info_span!("session", session_id = %live.id);
        async {
            live.link.shutdown().await;
            self.record_end(live, state, error, pending_status).await
        }
        .instrument(span)
        .await?;
        Ok(())
    }

    /// Writes a session's end: its pending records and its state.
    async fn record_end(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
        pending_status: ClarificationStatus,
    ) -> Result<(), sqlx::Error> {
        {
            let _settling = live.clarifications.lock().await;
            let pending = clarification_store::list(
                &self.db,
                Some(&live.id),
                Some(ClarificationStatus::Pending),
            )
            .await?;
            for rec in pending {
                if let Some(rec) = clarification_store::settle(
                    &self.db,
                    &rec.pending_id,
                    pending_status,
                    SettledBy::Backend,
                    None,
                )
                .await?
                {
                    self.announce_settled(&rec).await?;
                }
            }
        }
        let mut inner = live.inner.lock().await;
        inner.state = state;
        store::set_state(&self.db, &live.id, state, error).await?;
        drop(inner);
        tracing::info!(state = %state, "session ended");
        self.publish_session(&live.id).await;
        Ok(())
    }

    /// Consumes the link's events in order until the link is lost or the session ends.
    async fn consume(
        self: Arc<Self>,
        live: Arc<LiveSession>,
        events: UnboundedReceiver<LinkEvent>,
    ) {
        self.consume_from(live, events, None).await;
    }

    /// [`SessionRuntime::consume`], `stored` being the `last_event_seq` already stored.
    async fn consume_from(
        self: Arc<Self>,
        live: Arc<LiveSession>,
        mut events: UnboundedReceiver<LinkEvent>,
        mut stored: Option<u64>,
    ) {
        while let Some(event) = events.recv().await {
            let last = matches!(event, LinkEvent::Lost { .. });
            if let Err(err) = self.handle(&live, event).await {
                tracing::error!(error = %err, "cannot apply an agent event");
            }
            if last {
                return;
            }
            self.store_progress(&live, &events, &mut stored).await;
        }
        if let Err(err) = self.on_gone(&live, "the agent stream closed").await {
            tracing::error!(error = %err, "cannot record the lost link");
        }
    }

    /// Stores how far the session's events are applied, once the queue is drained: the
    /// link hands an event over together with counting it, so with the queue empty every
    /// event up to `delivered_seq` read before has been applied. (Written when idle, not
    /// per event, to spare a burst of updates a write each.)
    async fn store_progress(
        &self,
        live: &LiveSession,
        events: &UnboundedReceiver<LinkEvent>,
        stored: &mut Option<u64>,
    ) {
        let Some(seq) = live.link.delivered_seq() else {
            return;
        };
        if *stored == Some(seq) || !events.is_empty() {
            return;
        }
        match store::set_last_event_seq(&self.db, &live.id, seq).await {
            Ok(()) => *stored = Some(seq),
            Err(err) => tracing::warn!(error = %err, "cannot store the last applied event"),
        }
    }

    /// Applies one link event.
    pub(crate) async fn handle(
        &self,
        live: &LiveSession,
        event: LinkEvent,
    ) -> Result<(), sqlx::Error> {
        match event {
            LinkEvent::Agent(AgentEvent::SessionUpdate { update }) => {
                let mut inner = live.inner.lock().await;
                if inner.ended {
                    return Ok(());
                }
                let to = Target {
                    db: &self.db,
                    hub: &self.hub,
                    session_id: &live.id,
                    task_id: &live.task_id,
                };
                inner.transcript.apply(to, &update).await
            }
            LinkEvent::Agent(AgentEvent::TurnCompleted { stop_reason, error }) => {
                {
                    let mut inner = live.inner.lock().await;
                    if inner.ended {
                        return Ok(());
                    }
                    inner.transcript.close();
                    inner.turn_active = false;
                    self.refresh(live, &mut inner).await?;
                }
                tracing::info!(%stop_reason, "turn completed");
                if let Some(error) = error {
                    self.status_message(live, &format!("The turn failed: {error}"))
                        .await;
                }
                self.notifier
                    .turn_finished(&live.task_title, &live.task_id, &live.id)
                    .await?;
                Ok(())
            }
            LinkEvent::Agent(AgentEvent::ElicitationRequested(request)) => {
                self.on_elicitation_requested(live, &request).await
            }
            LinkEvent::Agent(AgentEvent::ElicitationSettled {
                pending_id,
                outcome,
                ..
            }) => {
                let span = tracing::info_span!("clarification", pending_id = %pending_id);
                async {
                    let _settling = live.clarifications.lock().await;
                    let status = ClarificationStatus::from_outcome(outcome);
                    if let Some(rec) = clarification_store::settle(
                        &self.db,
                        &pending_id,
                        status,
                        SettledBy::Agentctl,
                        None,
                    )
                    .await?
                    {
                        tracing::info!(
                            status = status.as_str(),
                            "clarification settled by agentctl"
                        );
                        self.announce_settled(&rec).await?;
                        let mut inner = live.inner.lock().await;
                        self.refresh(live, &mut inner).await?;
                    }
                    Ok(())
                }
                .instrument(span)
                .await
            }
            LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(request)) => {
                ask_user_question::on_requested(self, live, &request).await
            }
            LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
                request_id,
                outcome,
            }) => ask_user_question::on_settled(self, live, &request_id, outcome).await,
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
                self.on_gone(live, &reason).await
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
                self.on_reattached(live, &pending, questions.as_deref())
                    .await
            }
            LinkEvent::Lost { reason } => self.on_gone(live, &reason).await,
        }
    }

    async fn on_elicitation_requested(
        &self,
        live: &LiveSession,
        request: &ElicitationRequested,
    ) -> Result<(), sqlx::Error> {
        let span = tracing::info_span!("clarification", pending_id = %request.pending_id);
        async {
            let _settling = live.clarifications.lock().await;
            if live.inner.lock().await.ended {
                return Ok(());
            }
            // The same event twice (replayed after a re-attach) is one record.
            if clarification_store::get(&self.db, &request.pending_id)
                .await?
                .is_some()
            {
                return Ok(());
            }
            // The message first, so a visible pending record always has its message.
            let message = messages::insert(
                &self.db,
                NewMessage {
                    session_id: &live.id,
                    task_id: &live.task_id,
                    message_type: TYPE_CLARIFICATION_REQUEST,
                    author_type: author::AGENT,
                    content: &request.message,
                    requests_input: true,
                    metadata: json!({
                        "pending_id": request.pending_id,
                        "source": SOURCE_ELICITATION,
                        "tool_call_id": request.tool_call_id,
                        "questions": request.questions,
                        "status": ClarificationStatus::Pending.as_str(),
                        "answer": null,
                    }),
                },
            )
            .await?;
            // agentctl's id verbatim, no deduplication by content (AC-60, D4).
            clarification_store::insert_pending(
                &self.db,
                request,
                &live.task_id,
                &live.id,
                Some(&message.id),
            )
            .await?;
            if let Some(rec) = clarification_store::get(&self.db, &request.pending_id).await? {
                self.hub
                    .publish(CLARIFICATION_CREATED, Clarification::from(rec));
            }
            self.hub.publish(MESSAGE_CREATED, &message);
            {
                let mut inner = live.inner.lock().await;
                inner.transcript.close();
                self.refresh(live, &mut inner).await?;
            }
            // Never the question text: only counts at info (F9, logs alike).
            tracing::info!(
                questions = request.questions.len(),
                "clarification requested"
            );
            self.notifier
                .clarification_requested(&live.task_title, &live.task_id, &live.id)
                .await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// After a clarification record of any source was created: ends the open text
    /// message, refreshes the session state, notifies the operator.
    pub(crate) async fn clarification_opened(&self, live: &LiveSession) -> Result<(), sqlx::Error> {
        {
            let mut inner = live.inner.lock().await;
            inner.transcript.close();
            self.refresh(live, &mut inner).await?;
        }
        self.notifier
            .clarification_requested(&live.task_title, &live.task_id, &live.id)
            .await?;
        Ok(())
    }

    /// After a re-attach: records agentctl no longer holds can never be answered.
    /// `questions` is agentctl's list of waiting ask_user_question calls; `None`
    /// (agentctl did not answer it) leaves that source's records as they are.
    async fn on_reattached(
        &self,
        live: &LiveSession,
        pending: &[ElicitationRequested],
        questions: Option<&[AskUserQuestionRequested]>,
    ) -> Result<(), sqlx::Error> {
        tracing::info!(pending = pending.len(), "agent stream re-attached");
        for request in pending {
            self.on_elicitation_requested(live, request).await?;
        }
        if let Some(held) = questions {
            ask_user_question::reconcile(self, live, held).await?;
        }
        let open: HashSet<&str> = pending.iter().map(|p| p.pending_id.as_str()).collect();
        let _settling = live.clarifications.lock().await;
        let ours =
            clarification_store::list(&self.db, Some(&live.id), Some(ClarificationStatus::Pending))
                .await?;
        // This list holds elicitations only; ask_user_question calls were reconciled above.
        for rec in ours
            .iter()
            .filter(|r| r.source == SOURCE_ELICITATION && !open.contains(r.pending_id.as_str()))
        {
            if let Some(rec) = clarification_store::settle(
                &self.db,
                &rec.pending_id,
                ClarificationStatus::AgentDisconnected,
                SettledBy::Backend,
                None,
            )
            .await?
            {
                self.announce_settled(&rec).await?;
            }
        }
        let mut inner = live.inner.lock().await;
        self.refresh(live, &mut inner).await
    }

    /// The agent or agentctl is gone: pending records become `agent_disconnected`,
    /// the session `FAILED`. Ignored once the session has ended (a stop's own teardown).
    async fn on_gone(&self, live: &LiveSession, reason: &str) -> Result<(), sqlx::Error> {
        {
            let mut inner = live.inner.lock().await;
            if inner.ended {
                return Ok(());
            }
            inner.ended = true;
        }
        tracing::warn!(%reason, "session lost its agent");
        self.live_map().remove(&live.id);
        self.status_message(live, &format!("Session ended: {reason}."))
            .await;
        self.record_end(
            live,
            SessionState::Failed,
            Some(reason),
            ClarificationStatus::AgentDisconnected,
        )
        .await?;
        // A local agentctl whose agent died is still running: stop it.
        let link = Arc::clone(&live.link);
        tokio::spawn(async move { link.shutdown().await });
        Ok(())
    }

    /// Recomputes a live session's state from its turn and its pending records;
    /// writes and pushes it when it changed.
    pub(crate) async fn refresh(
        &self,
        live: &LiveSession,
        inner: &mut LiveInner,
    ) -> Result<(), sqlx::Error> {
        if inner.ended {
            return Ok(());
        }
        let pending = clarification_store::count_pending(&self.db, &live.id).await?;
        let next = SessionState::live(inner.turn_active, pending);
        if next != inner.state {
            store::set_state(&self.db, &live.id, next, None).await?;
            inner.state = next;
            self.publish_session(&live.id).await;
        }
        Ok(())
    }

    /// Pushes `clarification.settled` and updates the record's message (F7).
    pub(crate) async fn announce_settled(&self, rec: &ClarificationRow) -> Result<(), sqlx::Error> {
        self.mark_message_settled(rec).await?;
        self.hub
            .publish(CLARIFICATION_SETTLED, Clarification::from(rec.clone()));
        Ok(())
    }

    async fn mark_message_settled(&self, rec: &ClarificationRow) -> Result<(), sqlx::Error> {
        let Some(message_id) = &rec.message_id else {
            return Ok(());
        };
        let view = Clarification::from(rec.clone());
        let mut patch = Map::new();
        patch.insert("status".into(), json!(view.status));
        patch.insert("settled_at".into(), json!(view.settled_at));
        if !view.answer.is_null() {
            patch.insert("answer".into(), view.answer.clone());
        }
        let message = messages::merge_metadata(&self.db, message_id, &patch, None).await?;
        self.hub.publish(MESSAGE_UPDATED, &message);
        Ok(())
    }

    /// Writes the operator's answer on a record's message without delivering it
    /// (the agent is gone: `not_delivered`).
    pub(crate) async fn record_undelivered(
        &self,
        rec: &ClarificationRow,
        answer: &Value,
    ) -> Result<(), sqlx::Error> {
        let Some(message_id) = &rec.message_id else {
            return Ok(());
        };
        let mut patch = Map::new();
        patch.insert("undelivered_answer".into(), answer.clone());
        let message = messages::merge_metadata(&self.db, message_id, &patch, None).await?;
        self.hub.publish(MESSAGE_UPDATED, &message);
        Ok(())
    }

    /// Refreshes a live session's state after a settlement made outside its consumer.
    pub(crate) async fn refresh_by_id(&self, session_id: &str) -> Result<(), sqlx::Error> {
        if let Some(live) = self.live(session_id) {
            let mut inner = live.inner.lock().await;
            self.refresh(&live, &mut inner).await?;
        } else {
            self.publish_session(session_id).await;
        }
        Ok(())
    }

    async fn status_message(&self, live: &LiveSession, text: &str) {
        let stored = messages::insert(
            &self.db,
            NewMessage {
                session_id: &live.id,
                task_id: &live.task_id,
                message_type: TYPE_STATUS,
                author_type: author::SYSTEM,
                content: text,
                requests_input: false,
                metadata: json!({}),
            },
        )
        .await;
        match stored {
            Ok(message) => self.hub.publish(MESSAGE_CREATED, &message),
            Err(err) => tracing::error!(error = %err, "cannot store a status message"),
        }
    }

    /// Pushes `session.updated` with the session as the API returns it, then
    /// `task.updated` with its task (whose summary state follows its sessions).
    pub(crate) async fn publish_session(&self, id: &str) {
        let task_id = match store::view(&self.db, id).await {
            Ok(Some(view)) => {
                let task_id = view.task_id.clone();
                self.hub.publish(SESSION_UPDATED, &view);
                task_id
            }
            Ok(None) => return,
            Err(err) => {
                tracing::error!(error = %err, "cannot read a session to publish");
                return;
            }
        };
        let task = match crate::tasks::get(&self.db, &task_id).await {
            Ok(Some(task)) => crate::tasks::view(&self.db, task).await,
            Ok(None) => return,
            Err(err) => Err(err),
        };
        match task {
            Ok(view) => self.hub.publish(TASK_UPDATED, &view),
            Err(err) => tracing::error!(error = %err, "cannot read a task to publish"),
        }
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The event hub.
    pub fn hub(&self) -> &EventHub {
        &self.hub
    }
}
