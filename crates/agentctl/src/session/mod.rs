//! One agent session: the agent, its pending elicitations, its event outbox.
//!
//! A session outlives the agent-stream connection that started it: when the stream
//! drops, the agent keeps running, pending elicitations stay answerable and events are
//! buffered until `agent.session.attach`.
//!
//! This file starts the session, runs its turns and shuts it down; its modules:
//! `elicitations` (pending `elicitation/create` requests and their settlement),
//! `questions` (`ask_user_question_kandev` calls) and `permission` (the
//! permission policy).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use kandev_agent_stream::request::{AgentSpec, PermissionPolicy, SessionStart};
use kandev_agent_stream::{
    AgentEvent, DoorDecline, ElicitationRequested, ErrorCode, ErrorPayload, SettleOutcome,
};
use kandev_elicitation::ElicitationResponse;
use kandev_flags::FlagSnapshot;
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::Instrument;

use crate::agent::{AcpResponder, AgentHandler, AgentLink, SpawnError};
use crate::capabilities::client_capabilities;
use crate::config::Timeouts;
use crate::mcp::McpEndpoint;
use crate::outbox::{DEFAULT_CAPACITY, Outbox};
use crate::pending::PendingSet;
use crate::questions::QuestionSet;

mod elicitations;
mod permission;
mod questions;

pub use permission::permission_outcome;

/// How long `initialize` + `session/new` may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping agent gets between its stdin closing and being killed.
pub const STOP_GRACE: Duration = Duration::from_secs(3);
/// ACP protocol version agentctl speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Why `agent.session.start` failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The agent could not be spawned.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// `initialize` or `session/new` failed.
    #[error("ACP handshake with agent `{agent}` failed: {message}")]
    Handshake {
        /// The agent id.
        agent: String,
        /// What failed.
        message: String,
    },
}

impl StartError {
    /// The agent-stream error for this failure.
    pub fn to_payload(&self) -> ErrorPayload {
        let code = match self {
            Self::Spawn(_) => ErrorCode::BadRequest,
            Self::Handshake { .. } => ErrorCode::Internal,
        };
        ErrorPayload::new(code, self.to_string())
    }
}

/// One running (or finished) agent session.
pub struct Session {
    id: String,
    agent_id: String,
    elicitation_enabled: bool,
    permission_policy: PermissionPolicy,
    /// What an elicitation's answer deadline sends (`agents.<id>.on_deadline`).
    on_deadline: kandev_agent_stream::request::OnDeadline,
    timeouts: Timeouts,
    client_capabilities: Value,
    outbox: Outbox,
    pending: PendingSet<AcpResponder>,
    questions: QuestionSet,
    mcp: OnceLock<McpEndpoint>,
    link: OnceLock<AgentLink>,
    acp_session_id: OnceLock<String>,
    agent_info: OnceLock<Value>,
    turn_running: AtomicBool,
    closed: AtomicBool,
    last_activity: Mutex<Instant>,
    me: Weak<Session>,
}

/// The [`AgentHandler`] of a session; weak, so the agent's tasks never keep it alive.
struct SessionHandler(Weak<Session>);

impl AgentHandler for SessionHandler {
    fn activity(&self) {
        if let Some(session) = self.0.upgrade() {
            *lock(&session.last_activity) = Instant::now();
        }
    }

    fn session_update(&self, params: Value) {
        if let Some(session) = self.0.upgrade()
            && let Some(run) = session.outbox.emit_update(params)
        {
            // The run's text goes out at the latest a window after its first chunk.
            let session = Arc::downgrade(&session);
            tokio::spawn(async move {
                tokio::time::sleep(crate::streamed_text::WINDOW).await;
                if let Some(session) = session.upgrade() {
                    session.outbox.flush_run(run);
                }
            });
        }
    }

    fn declined(&self, reason: DoorDecline) {
        if let Some(session) = self.0.upgrade() {
            session.declined(reason);
        }
    }

    fn elicitation(&self, params: Value, responder: AcpResponder) {
        match self.0.upgrade() {
            Some(session) => session.on_elicitation(params, responder),
            None => respond_or_log(responder, ElicitationResponse::Decline.to_json()),
        }
    }

    fn permission(&self, params: Value, responder: AcpResponder) {
        let policy = self
            .0
            .upgrade()
            .map(|s| s.permission_policy)
            .unwrap_or(PermissionPolicy::Cancel);
        let (outcome, option_id) = permission_outcome(&params, policy);
        let Some(session) = self.0.upgrade() else {
            respond_or_log(responder, outcome);
            return;
        };
        let tool_call_id = params
            .pointer("/toolCall/toolCallId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        tracing::info!(session_id = %session.id, ?tool_call_id, ?option_id, "permission answered by policy");
        // Answered and reported in one outbox step: the report precedes what the agent does next.
        session.outbox.emit_made(|| {
            respond_or_log(responder, outcome);
            Some(AgentEvent::PermissionResolved {
                tool_call_id,
                option_id,
            })
        });
    }

    fn stderr_line(&self, line: String) {
        if let Some(session) = self.0.upgrade() {
            tracing::debug!(session_id = %session.id, line = %line, "agent stderr");
            session.emit(AgentEvent::AgentStderr { line });
        }
    }

    fn exited(&self, code: Option<i32>) {
        if let Some(session) = self.0.upgrade() {
            session.on_agent_exit(code);
        }
    }
}

impl Session {
    /// Spawns the agent of `start`, runs `initialize` (raw params, capabilities from
    /// [`client_capabilities`]) and `session/new`.
    pub async fn start(
        start: SessionStart,
        timeouts: Timeouts,
    ) -> Result<Arc<Session>, StartError> {
        let SessionStart {
            session_id,
            agent,
            flags,
        } = start;
        let span = tracing::info_span!("session", session_id = %session_id, agent = %agent.id);
        async move {
            // The backend resolved the flags at session start (F5); agentctl reads none itself.
            let flags = FlagSnapshot::from(flags);
            let client_capabilities = client_capabilities(&agent.id, &flags);
            let session = Arc::new_cyclic(|me| Session {
                id: session_id.clone(),
                agent_id: agent.id.clone(),
                elicitation_enabled: flags.acp_elicitation(),
                permission_policy: agent.permission_policy,
                on_deadline: agent.on_deadline,
                timeouts,
                client_capabilities,
                outbox: Outbox::new(session_id.clone(), DEFAULT_CAPACITY),
                pending: PendingSet::default(),
                questions: QuestionSet::default(),
                mcp: OnceLock::new(),
                link: OnceLock::new(),
                acp_session_id: OnceLock::new(),
                agent_info: OnceLock::new(),
                turn_running: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                last_activity: Mutex::new(Instant::now()),
                me: me.clone(),
            });
            // The ask_user_question_kandev tool; without it the agent can still elicit.
            match McpEndpoint::start(Arc::downgrade(&session)).await {
                Ok(endpoint) => {
                    tracing::info!(url = %endpoint.url(), "MCP server for ask_user_question_kandev listening");
                    let _ = session.mcp.set(endpoint);
                }
                Err(err) => tracing::warn!(error = %err, "cannot start the MCP server; the agent gets no ask_user_question_kandev tool"),
            }
            let link = AgentLink::spawn(&agent, Arc::new(SessionHandler(Arc::downgrade(&session))))
                .await?;
            let link = session.link.get_or_init(|| link);
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, session.handshake(link, &agent)).await {
                Ok(Ok(acp_session_id)) => {
                    let _ = session.acp_session_id.set(acp_session_id);
                    tracing::info!(elicitation = session.elicitation_enabled, "session started");
                    Ok(session)
                }
                Ok(Err(message)) => {
                    session.shutdown().await;
                    Err(StartError::Handshake {
                        agent: agent.id.clone(),
                        message,
                    })
                }
                Err(_) => {
                    session.shutdown().await;
                    Err(StartError::Handshake {
                        agent: agent.id.clone(),
                        message: format!(
                            "no answer within {}",
                            humantime::format_duration(HANDSHAKE_TIMEOUT)
                        ),
                    })
                }
            }
        }
        .instrument(span)
        .await
    }

    async fn handshake(&self, link: &AgentLink, agent: &AgentSpec) -> Result<String, String> {
        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": self.client_capabilities,
            "clientInfo": {"name": "kandev-agentctl", "version": env!("CARGO_PKG_VERSION")},
        });
        let initialized = link
            .request("initialize", initialize)
            .await
            .map_err(|err| err.to_string())?;
        if let Some(info) = initialized.get("agentInfo").filter(|v| v.is_object()) {
            let _ = self.agent_info.set(info.clone());
        }
        let http_mcp = initialized
            .pointer("/agentCapabilities/mcpCapabilities/http")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let cwd = match &agent.cwd {
            Some(cwd) => std::path::absolute(cwd),
            None => std::env::current_dir(),
        }
        .map_err(|err| format!("cannot resolve the working directory: {err}"))?;
        let mut servers = self.mcp_servers(http_mcp);
        let path = agent.env.get("PATH").map(std::ffi::OsString::from);
        let path = path.or_else(|| std::env::var_os("PATH"));
        let own =
            crate::mcp_servers::acp_entries(&agent.mcp_servers, http_mcp, &cwd, path.as_deref())
                .map_err(|err| err.to_string())?;
        if !own.is_empty() {
            let names: Vec<&str> = agent.mcp_servers.iter().map(|(name, _)| name).collect();
            tracing::info!(?names, "the agent's own MCP servers listed in session/new");
        }
        servers.extend(own);
        let new = link
            .request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
            .await
            .map_err(|err| err.to_string())?;
        new.get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("session/new returned no sessionId: {new}"))
    }

    /// Kandev's entry of `session/new`'s `mcpServers`: our MCP server over HTTP when the
    /// agent takes HTTP servers, else through the `agentctl mcp-stdio` bridge. The agent's
    /// own servers ([`crate::mcp_servers`]) follow it.
    fn mcp_servers(&self, http: bool) -> Vec<Value> {
        let Some(endpoint) = self.mcp.get() else {
            return Vec::new();
        };
        let bridge = std::env::current_exe()
            .map(|path| path.display().to_string())
            .unwrap_or_else(|_| "agentctl".to_owned());
        vec![endpoint.acp_server(http, &bridge)]
    }

    /// The session's MCP server, when it started.
    pub fn mcp(&self) -> Option<&McpEndpoint> {
        self.mcp.get()
    }

    /// The backend's session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The ACP session id from `session/new`.
    pub fn acp_session_id(&self) -> &str {
        self.acp_session_id.get().map(String::as_str).unwrap_or("")
    }

    /// The agent's `agentInfo` from its `initialize` result, when it sent one.
    pub fn agent_info(&self) -> Option<&Value> {
        self.agent_info.get()
    }

    /// The exact `clientCapabilities` sent in `initialize`.
    pub fn client_capabilities(&self) -> &Value {
        &self.client_capabilities
    }

    /// The session's event outbox.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Whether the agent has exited or the session was shut down.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Elicitations still waiting for an answer, oldest first.
    pub fn pending(&self) -> Vec<ElicitationRequested> {
        self.pending.list()
    }

    /// Hands the elicitations still waiting to `answer` in the stream's order (see
    /// [`Outbox::in_order`]): the answer `answer` sends lists every elicitation announced
    /// before it and still waiting, and one missing from it is announced after it. The
    /// backend reconciles its records against this list, so an elicitation announced
    /// before the answer but taken as "not listed" would be withdrawn while it waits.
    pub fn pending_in_order(&self, answer: impl FnOnce(Vec<ElicitationRequested>)) {
        self.outbox.in_order(|| answer(self.pending.list()));
    }

    /// How many elicitations wait for an answer.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    fn emit(&self, event: AgentEvent) {
        self.outbox.emit(&event);
    }

    fn link(&self) -> Result<&AgentLink, ErrorPayload> {
        match self.link.get() {
            Some(link) if !self.is_closed() => Ok(link),
            _ => Err(ErrorPayload::new(
                ErrorCode::BadRequest,
                "the agent of this session is not running",
            )),
        }
    }

    /// `agent.prompt`: starts a turn and returns at once; its end is `turn_completed`.
    pub fn prompt(&self, text: String) -> Result<(), ErrorPayload> {
        self.link()?;
        if self.turn_running.swap(true, Ordering::SeqCst) {
            return Err(ErrorPayload::new(
                ErrorCode::BadRequest,
                "a turn is already running in this session",
            ));
        }
        let Some(session) = self.me.upgrade() else {
            return Err(ErrorPayload::new(ErrorCode::Internal, "session is gone"));
        };
        let span = tracing::info_span!("turn", session_id = %self.id);
        tokio::spawn(async move { session.run_turn(text).await }.instrument(span));
        Ok(())
    }

    async fn run_turn(&self, text: String) {
        *lock(&self.last_activity) = Instant::now();
        let event = match self.link.get() {
            None => turn_error("the agent is not running".to_owned()),
            Some(link) => {
                let params = json!({
                    "sessionId": self.acp_session_id(),
                    "prompt": [{"type": "text", "text": text}],
                });
                let prompt = link.request("session/prompt", params);
                tokio::pin!(prompt);
                loop {
                    let deadline = *lock(&self.last_activity) + self.timeouts.idle;
                    tokio::select! {
                        result = &mut prompt => break match result {
                            Ok(result) => AgentEvent::TurnCompleted {
                                stop_reason: result
                                    .get("stopReason")
                                    .and_then(Value::as_str)
                                    .unwrap_or("end_turn")
                                    .to_owned(),
                                error: None,
                            },
                            Err(err) => turn_error(err.to_string()),
                        },
                        _ = tokio::time::sleep_until(deadline) => {
                            // A tool call waiting for the operator is the agent waiting on us.
                            if !self.questions.is_empty() {
                                *lock(&self.last_activity) = Instant::now();
                            } else if *lock(&self.last_activity) + self.timeouts.idle <= Instant::now() {
                                let idle = humantime::format_duration(self.timeouts.idle);
                                tracing::warn!(%idle, "agent idle past the ACP idle timeout; stopping it");
                                self.turn_running.store(false, Ordering::SeqCst);
                                self.emit(turn_error(format!("the agent sent nothing for {idle} (KANDEV_ACP_IDLE_TIMEOUT)")));
                                self.shutdown().await;
                                return;
                            }
                        }
                    }
                }
            }
        };
        // Cleared before the event, so a backend reacting to it can prompt again at once.
        self.turn_running.store(false, Ordering::SeqCst);
        tracing::info!(?event, "turn ended");
        self.emit(event);
    }

    /// `agent.cancel`: sends `session/cancel`, then answers every pending elicitation
    /// `cancel` (AC-15).
    pub fn cancel_turn(&self) -> Result<(), ErrorPayload> {
        let link = self.link()?;
        link.notify(
            "session/cancel",
            json!({"sessionId": self.acp_session_id()}),
        )
        .map_err(|err| ErrorPayload::new(ErrorCode::Internal, err.to_string()))?;
        self.settle_all(
            SettleOutcome::TurnCancelled,
            Some(ElicitationResponse::Cancel),
        );
        self.end_questions(SettleOutcome::TurnCancelled);
        Ok(())
    }

    /// `agent.shutdown`, SIGTERM: answers every pending `cancel`, then stops the agent
    /// (stdin closed, killed after a grace period). Idempotent.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.settle_all(SettleOutcome::Shutdown, Some(ElicitationResponse::Cancel));
        self.end_questions(SettleOutcome::Shutdown);
        if let Some(mcp) = self.mcp.get() {
            mcp.stop();
        }
        if let Some(link) = self.link.get() {
            if !link.has_exited() {
                tracing::info!(session_id = %self.id, "stopping the agent");
            }
            link.stop(STOP_GRACE).await;
        }
    }

    fn on_agent_exit(&self, code: Option<i32>) {
        self.closed.store(true, Ordering::SeqCst);
        // Nothing can reach the agent any more: settle with no response.
        self.settle_all(SettleOutcome::AgentExited, None);
        self.end_questions(SettleOutcome::AgentExited);
        if let Some(mcp) = self.mcp.get() {
            mcp.stop();
        }
        self.emit(AgentEvent::AgentExited { code });
    }
}

fn turn_error(message: String) -> AgentEvent {
    AgentEvent::TurnCompleted {
        stop_reason: "error".to_owned(),
        error: Some(message),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn respond_or_log(responder: AcpResponder, response: Value) {
    if let Err(err) = responder.respond(response) {
        tracing::warn!(error = %err, "could not answer the agent");
    }
}
