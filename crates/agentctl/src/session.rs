//! One agent session: the agent, its pending elicitations, its event outbox.
//!
//! A session outlives the agent-stream connection that started it: when the stream
//! drops, the agent keeps running, pending elicitations stay answerable and events are
//! buffered until `agent.session.attach`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use kandev_agent_stream::request::{
    AgentSpec, ElicitationsRespond, PermissionPolicy, QuestionsRespond, SessionStart,
};
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, DoorDecline, ElicitationRequested, ErrorCode,
    ErrorPayload, SettleOutcome,
};
use kandev_elicitation::{ElicitationResponse, build_response, map_request};
use kandev_flags::FlagSnapshot;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::agent::{AcpResponder, AgentHandler, AgentLink, SpawnError};
use crate::capabilities::client_capabilities;
use crate::config::Timeouts;
use crate::mcp::McpEndpoint;
use crate::outbox::{DEFAULT_CAPACITY, Outbox};
use crate::pending::{PendingElicitation, PendingSet, TakeRefused};
use crate::questions::{AskInput, QuestionSet, QuestionVerdict};

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
        if let Some(session) = self.0.upgrade() {
            session.emit(AgentEvent::SessionUpdate { update: params });
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
        respond_or_log(responder, outcome);
        if let Some(session) = self.0.upgrade() {
            let tool_call_id = params
                .pointer("/toolCall/toolCallId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            tracing::info!(session_id = %session.id, ?tool_call_id, ?option_id, "permission answered by policy");
            session.emit(AgentEvent::PermissionResolved {
                tool_call_id,
                option_id,
            });
        }
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

    // ---- elicitations -------------------------------------------------------------------

    /// Counts a decline at the door and tells the backend why (the reason only: the
    /// request itself never leaves agentctl).
    fn declined(&self, reason: DoorDecline) {
        crate::metrics::elicitation_declined(reason);
        self.emit(AgentEvent::ElicitationDeclined { reason });
    }

    fn on_elicitation(&self, params: Value, responder: AcpResponder) {
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
        let pending_id = uuid::Uuid::new_v4().to_string();
        let span =
            tracing::info_span!("elicitation", session_id = %self.id, pending_id = %pending_id);
        let _entered = span.enter();
        let requested = ElicitationRequested {
            pending_id: pending_id.clone(),
            acp_session_id: mapped.session_id.clone(),
            tool_call_id: mapped.tool_call_id.clone(),
            message: mapped.message.clone(),
            questions: mapped.questions.clone(),
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
        tracing::info!(questions, seq = announced, "elicitation pending");

        let me = self.me.clone();
        let answer_timeout = self.timeouts.answer;
        tokio::spawn(
            async move {
                tokio::select! {
                    _ = tokio::time::sleep(answer_timeout) => {
                        if let Some(session) = me.upgrade() {
                            session.settle_by_id(&pending_id, SettleOutcome::TimedOut, Some(ElicitationResponse::Decline));
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

    fn settle_by_id(
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
    fn settle(
        &self,
        entry: PendingElicitation<AcpResponder>,
        outcome: SettleOutcome,
        response: Option<ElicitationResponse>,
    ) -> bool {
        let PendingElicitation {
            requested,
            responder,
            ..
        } = entry;
        let span = tracing::info_span!("settle", session_id = %self.id, pending_id = %requested.pending_id);
        let _entered = span.enter();
        let (outcome, sent) = match response {
            Some(response) => {
                let json = response.to_json();
                match responder.respond(json.clone()) {
                    Ok(()) => (outcome, json),
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
        // The content is the operator's answer and may hold a secret (an MCP server asking
        // for an API key), so only the action is logged; the backend gets it on the stream.
        let action = sent.get("action").and_then(Value::as_str).unwrap_or("none");
        tracing::info!(?outcome, action, "elicitation settled");
        let delivered = !sent.is_null();
        self.emit(AgentEvent::ElicitationSettled {
            pending_id: requested.pending_id,
            outcome,
            response: sent,
        });
        delivered
    }

    /// `agent.elicitations.respond`: validate (F10), then answer exactly once.
    pub fn respond(&self, respond: &ElicitationsRespond) -> Result<(), ErrorPayload> {
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
        if self.settle(entry, outcome, Some(response)) {
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
    pub fn cancel_elicitation(&self, pending_id: &str) -> Result<(), ErrorPayload> {
        let Some(entry) = self.pending.take(pending_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!("no pending elicitation `{pending_id}` (unknown or already settled)"),
            ));
        };
        if self.settle(
            entry,
            SettleOutcome::OperatorCancelled,
            Some(ElicitationResponse::Cancel),
        ) {
            Ok(())
        } else {
            Err(ErrorPayload::new(
                ErrorCode::Internal,
                "the agent connection is closed; the cancel was not delivered",
            ))
        }
    }

    fn settle_all(&self, outcome: SettleOutcome, response: Option<ElicitationResponse>) {
        for entry in self.pending.drain() {
            self.settle(entry, outcome, response.clone());
        }
    }

    // ---- ask_user_question_kandev -----------------------------------------------------------

    /// One `ask_user_question_kandev` call: announces it, then waits until the backend
    /// returns a verdict, the turn is cancelled, the deadline passes
    /// (`KANDEV_ASK_USER_QUESTION_TIMEOUT`), the caller goes away (`cancelled`) or the
    /// session ends.
    pub async fn ask_user_question(
        &self,
        input: AskInput,
        cancelled: CancellationToken,
    ) -> QuestionVerdict {
        let request_id = uuid::Uuid::new_v4().to_string();
        let span = tracing::info_span!("ask_user_question", session_id = %self.id, request_id = %request_id);
        async {
            if self.is_closed() {
                return QuestionVerdict::Ended(SettleOutcome::Shutdown);
            }
            let requested = AskUserQuestionRequested {
                request_id: request_id.clone(),
                acp_session_id: self.acp_session_id().to_owned(),
                questions: input.questions,
                context: input.context,
            };
            let event = AgentEvent::AskUserQuestionRequested(requested.clone());
            let mut verdict = None;
            // Parked and announced in one step, so no settlement can be reported before it.
            self.outbox.emit_if(&event, || {
                verdict = Some(self.questions.insert(requested));
                true
            });
            let Some(mut verdict) = verdict else {
                return QuestionVerdict::Ended(SettleOutcome::Shutdown);
            };
            *lock(&self.last_activity) = Instant::now();
            tracing::info!("ask_user_question_kandev waiting for the operator");
            let ended = tokio::select! {
                result = &mut verdict => return result.unwrap_or(QuestionVerdict::Ended(SettleOutcome::Shutdown)),
                () = tokio::time::sleep(self.timeouts.ask) => SettleOutcome::TimedOut,
                () = cancelled.cancelled() => SettleOutcome::AgentCancelled,
            };
            match self.questions.take(&request_id) {
                Some(call) => {
                    call.finish(QuestionVerdict::Ended(ended));
                    tracing::info!(outcome = ?ended, "ask_user_question_kandev returned without an answer");
                    self.emit(AgentEvent::AskUserQuestionSettled { request_id: request_id.clone(), outcome: ended });
                    QuestionVerdict::Ended(ended)
                }
                // Someone else took it at the same moment; its verdict is on the way.
                None => verdict.await.unwrap_or(QuestionVerdict::Ended(ended)),
            }
        }
        .instrument(span)
        .await
    }

    /// `agent.questions.respond`: returns a waiting call with the backend's verdict.
    pub fn respond_questions(&self, respond: &QuestionsRespond) -> Result<(), ErrorPayload> {
        let Some(call) = self.questions.take(&respond.request_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!(
                    "no waiting ask_user_question_kandev call `{}` (unknown or already returned)",
                    respond.request_id
                ),
            ));
        };
        let outcome = if respond.result.rejected {
            SettleOutcome::Declined
        } else {
            SettleOutcome::Answered
        };
        if !call.finish(QuestionVerdict::Responded(respond.result.clone())) {
            tracing::warn!(request_id = %respond.request_id, "the caller stopped waiting just now");
        }
        tracing::info!(session_id = %self.id, request_id = %respond.request_id, ?outcome, "ask_user_question_kandev answered");
        self.emit(AgentEvent::AskUserQuestionSettled {
            request_id: respond.request_id.clone(),
            outcome,
        });
        Ok(())
    }

    /// `agent.questions.cancel`: the operator aborts a waiting call; it returns as cancelled.
    pub fn cancel_question(&self, request_id: &str) -> Result<(), ErrorPayload> {
        let Some(call) = self.questions.take(request_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!(
                    "no waiting ask_user_question_kandev call `{request_id}` (unknown or already returned)"
                ),
            ));
        };
        let outcome = SettleOutcome::OperatorCancelled;
        if !call.finish(QuestionVerdict::Ended(outcome)) {
            tracing::warn!(request_id, "the caller stopped waiting just now");
        }
        tracing::info!(session_id = %self.id, request_id, "ask_user_question_kandev cancelled by the operator");
        self.emit(AgentEvent::AskUserQuestionSettled {
            request_id: request_id.to_owned(),
            outcome,
        });
        Ok(())
    }

    /// `ask_user_question_kandev` calls still waiting, oldest first.
    pub fn pending_questions(&self) -> Vec<AskUserQuestionRequested> {
        self.questions.list()
    }

    fn end_questions(&self, outcome: SettleOutcome) {
        for call in self.questions.drain() {
            let request_id = call.requested.request_id.clone();
            call.finish(QuestionVerdict::Ended(outcome));
            self.emit(AgentEvent::AskUserQuestionSettled {
                request_id,
                outcome,
            });
        }
    }

    // ---- turns ---------------------------------------------------------------------------

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

/// The `session/request_permission` result for `policy`, and the option chosen.
pub fn permission_outcome(params: &Value, policy: PermissionPolicy) -> (Value, Option<String>) {
    let preferred: &[&str] = match policy {
        PermissionPolicy::AllowOnce => &["allow_once", "allow_always"],
        PermissionPolicy::AllowAlways => &["allow_always", "allow_once"],
        PermissionPolicy::RejectOnce => &["reject_once", "reject_always"],
        PermissionPolicy::Cancel => &[],
    };
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let chosen = preferred.iter().find_map(|kind| {
        options
            .iter()
            .find(|option| option.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|option| option.get("optionId").and_then(Value::as_str))
    });
    match chosen {
        Some(id) => (
            json!({"outcome": {"outcome": "selected", "optionId": id}}),
            Some(id.to_owned()),
        ),
        None => (json!({"outcome": {"outcome": "cancelled"}}), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Value {
        json!({"sessionId": "s", "toolCall": {"toolCallId": "t1"}, "options": [
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "once", "name": "Once", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ]})
    }

    #[test]
    fn permission_policy_picks_by_kind_never_by_position() {
        let (outcome, id) = permission_outcome(&params(), PermissionPolicy::AllowOnce);
        assert_eq!(id.as_deref(), Some("once"));
        assert_eq!(
            outcome,
            json!({"outcome": {"outcome": "selected", "optionId": "once"}})
        );
        assert_eq!(
            permission_outcome(&params(), PermissionPolicy::AllowAlways)
                .1
                .as_deref(),
            Some("always")
        );
        assert_eq!(
            permission_outcome(&params(), PermissionPolicy::RejectOnce)
                .1
                .as_deref(),
            Some("no")
        );
    }

    #[test]
    fn permission_without_a_matching_option_is_cancelled() {
        let (outcome, id) = permission_outcome(&params(), PermissionPolicy::Cancel);
        assert_eq!(
            (outcome, id),
            (json!({"outcome": {"outcome": "cancelled"}}), None)
        );
        let only_reject = json!({"options": [{"optionId": "no", "kind": "reject_once"}]});
        assert_eq!(
            permission_outcome(&only_reject, PermissionPolicy::AllowOnce).1,
            None
        );
        assert_eq!(
            permission_outcome(&json!("garbage"), PermissionPolicy::AllowOnce).1,
            None
        );
    }

    #[test]
    fn allow_once_falls_back_to_allow_always() {
        let only_always = json!({"options": [{"optionId": "a", "kind": "allow_always"}]});
        assert_eq!(
            permission_outcome(&only_always, PermissionPolicy::AllowOnce)
                .1
                .as_deref(),
            Some("a")
        );
    }
}
