//! The backend's side of the agent stream: starting or reaching an agentctl (the
//! [`ExecutorConfig`]), and one [`AgentLink`] per session that correlates requests
//! with responses, delivers agent events in order, and re-attaches after a drop.
//!
//! Handshake: [`AgentLink::connect`] only opens the stream. The session runtime then
//! sends `agent.session.start` itself through [`AgentLink::request`]. The link watches
//! for the first successful `agent.session.start` (or `agent.session.attach`) and from
//! then on knows which session to re-attach after a drop: it reconnects with backoff,
//! sends `agent.session.attach {session_id}` (then `agent.elicitations.list` and
//! `agent.questions.list`) on the new
//! stream before any other request may use it, delivers the events agentctl kept while
//! detached, and reports [`LinkEvent::Reattached`] with agentctl's still-open
//! elicitations and waiting `ask_user_question_kandev` calls. While the stream is down every request fails at once with
//! [`LinkError::NotConnected`] and nothing is sent (AC-20a); a request whose stream
//! dropped before the answer fails with [`LinkError::Interrupted`].
//!
//! Every agent event carries its per-session sequence number (the notification
//! envelope's `id`). The link remembers the last one it delivered and re-attaches with
//! `agent.session.attach {session_id, after_seq}`, so events agentctl handed to a stream
//! that died on the way are replayed; a replayed event already delivered is dropped
//! (`cursor`), so the runtime sees each event once, in order.
//! [`AgentLink::resume_with`] attaches a new link to a session another backend process
//! started (a restart under a remote agentctl).
//!
//! Submodules: `cursor` remembers the events delivered, `dial` opens one authenticated
//! WebSocket, `local` starts a sibling `agentctl serve`, `shared` is the correlation
//! table and connection state, and `supervisor` is the single task that reads the
//! stream and reconnects.

mod connector;
mod cursor;
mod dial;
mod local;
mod shared;
mod supervisor;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kandev_agent_stream::request::Shutdown;
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ElicitationRequested, ErrorPayload, FrameType,
    StreamRequest, action,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use self::dial::Endpoint;
use self::shared::Shared;

pub use self::connector::{AgentConnector, DynLink, SessionLink, StreamConnector, call};
pub use self::local::AGENTCTL_TOKEN_VAR;

/// Where agentctl runs. Its `Debug` output never shows the remote token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ExecutorConfig {
    /// Start the sibling `agentctl serve` per session, with a fresh random token.
    Local {
        /// The agentctl binary; by default the one beside `kandev`.
        // Left out when unset, so the built-in default layer adds no key that a file
        // switching to `kind = "remote"` would then carry as unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agentctl: Option<PathBuf>,
        /// Variables of kandev's environment the local agentctl gets besides the agent
        /// allowlist and its own settings: every agent's `inherit_env`. Not a config key;
        /// [`crate::config::Config`] fills it in.
        #[serde(skip)]
        pass_env: Vec<String>,
    },
    /// Connect to an agentctl deployed elsewhere: one (`url`, `token`), or several
    /// (`hosts`), a new session going to the one with the fewest live sessions.
    Remote {
        /// Base URL, e.g. `ws://10.0.0.5:7740` or `wss://agents.example.com:7740` (the
        /// stream path is appended). Empty when `hosts` lists them.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        url: String,
        /// Its bearer token.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        token: String,
        /// Several agentctl hosts, each with its own token (instead of `url`/`token`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<RemoteHost>,
        /// For `wss://`: the PEM CA certificate(s) to verify agentctl against, instead of
        /// the system's root certificates.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_cert: Option<PathBuf>,
    },
}

impl std::fmt::Debug for ExecutorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local { agentctl, pass_env } => f
                .debug_struct("Local")
                .field("agentctl", agentctl)
                .field("pass_env", pass_env)
                .finish(),
            Self::Remote {
                url,
                token: _,
                hosts,
                ca_cert,
            } => f
                .debug_struct("Remote")
                .field("url", url)
                .field("token", &"<redacted>")
                .field("hosts", hosts)
                .field("ca_cert", ca_cert)
                .finish(),
        }
    }
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self::local(None)
    }
}

impl ExecutorConfig {
    /// A local executor running `agentctl` (the one beside kandev when `None`).
    pub fn local(agentctl: Option<PathBuf>) -> Self {
        Self::Local {
            agentctl,
            pass_env: Vec::new(),
        }
    }

    /// A remote executor at `url` over plain `ws://` or against the system roots.
    pub fn remote(url: impl Into<String>, token: impl Into<String>) -> Self {
        Self::Remote {
            url: url.into(),
            token: token.into(),
            hosts: Vec::new(),
            ca_cert: None,
        }
    }

    /// Whether agentctl runs elsewhere (and so outlives this process).
    pub fn is_remote(&self) -> bool {
        matches!(self, Self::Remote { .. })
    }

    /// One executor per agentctl host, each a single-host remote (`url`, `token`); the
    /// local executor, or a single remote host, is its own only one.
    pub fn hosts(&self) -> Vec<ExecutorConfig> {
        match self {
            Self::Remote { hosts, ca_cert, .. } if !hosts.is_empty() => hosts
                .iter()
                .map(|h| Self::Remote {
                    url: h.url.clone(),
                    token: h.token.clone(),
                    hosts: Vec::new(),
                    ca_cert: ca_cert.clone(),
                })
                .collect(),
            other => vec![other.clone()],
        }
    }

    /// The agentctl URL of a single-host remote executor.
    pub fn remote_url(&self) -> Option<&str> {
        match self {
            Self::Remote { url, .. } if !url.is_empty() => Some(url),
            _ => None,
        }
    }
}

/// One agentctl host of a remote executor, `executor.hosts = [{url, token}, …]`. Its
/// `Debug` output never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteHost {
    /// Base URL, `ws://…` or `wss://…`.
    pub url: String,
    /// Its bearer token.
    pub token: String,
}

impl std::fmt::Debug for RemoteHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteHost")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// What the link tells the session runtime, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    /// An event from agentctl.
    Agent(AgentEvent),
    /// The stream dropped; the link is trying to re-attach.
    Disconnected,
    /// The stream is back; `pending` is agentctl's list of still-open elicitations.
    ///
    /// The events agentctl kept while the stream was down are delivered *before* this
    /// event, in their original order, and `pending` is a snapshot taken after all of
    /// them (the link asks `agent.elicitations.list` once the attach is answered, and
    /// that answer queues behind the flushed events). So a clarification that is open
    /// locally but absent from `pending` really is gone; one settled while detached has
    /// already been reported by its `elicitation_settled`. Events after this one are
    /// newer than the snapshot. When the stream dropped before any session was started
    /// on it, nothing is re-attached and `pending` is empty.
    Reattached {
        /// Elicitations still waiting for an answer.
        pending: Vec<ElicitationRequested>,
        /// `ask_user_question_kandev` calls agentctl still holds (`agent.questions.list`,
        /// asked right after the elicitation list, same ordering rule): a call waiting
        /// locally but absent here has returned and its settlement was lost. Events that
        /// arrived between the two list answers are delivered right after this event.
        /// `None` when agentctl did not answer the list usably: nothing is reconciled.
        questions: Option<Vec<AskUserQuestionRequested>>,
    },
    /// agentctl is gone for good (died, re-attaching failed or was refused, or another
    /// stream took the session over): nothing pending can be delivered through this link.
    /// It is the last event; the receiver ends after it.
    Lost {
        /// Why.
        reason: String,
    },
}

/// Why a request over the link failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The stream is down right now (`AGENT_STREAM_NOT_CONNECTED`); nothing was sent.
    #[error("agent stream is not connected")]
    NotConnected,
    /// The stream dropped after the request was sent and before its answer arrived:
    /// agentctl may have carried it out. Its effects, if any, reach the session as the
    /// events agentctl replays once the link has re-attached.
    #[error("agent stream dropped before agentctl answered")]
    Interrupted,
    /// agentctl answered with an error frame.
    #[error("agentctl refused: {0}")]
    Remote(ErrorPayload),
    /// No answer within the timeout.
    #[error("agentctl did not answer within {0:?}")]
    Timeout(Duration),
    /// agentctl could not be started or reached.
    #[error("could not start or reach agentctl: {0}")]
    Unreachable(String),
    /// The answer did not decode.
    #[error("unexpected answer from agentctl: {0}")]
    Protocol(String),
}

/// Timeouts and limits of one link. [`LinkOptions::default`] is what
/// [`AgentLink::connect`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkOptions {
    /// How long [`AgentLink::request`] waits for a response (default 30 s).
    pub request_timeout: Duration,
    /// How long the link keeps trying to reconnect after a drop before it reports
    /// [`LinkEvent::Lost`] (default 30 s). Backoff starts at 50 ms and doubles to 1 s.
    pub reconnect_window: Duration,
    /// How long one WebSocket connect (TCP plus upgrade) may take (default 5 s).
    pub connect_timeout: Duration,
    /// How long a local agentctl may take to print `AGENTCTL_LISTENING` (default 20 s).
    pub listen_timeout: Duration,
    /// How long [`AgentLink::shutdown`] waits for `agent.shutdown` to be answered, and
    /// then for the local agentctl to exit (default 5 s each).
    pub shutdown_timeout: Duration,
    /// How often the link pings agentctl (default 15 s). A stream that delivers no
    /// frame at all, pongs included, for three intervals counts as dropped.
    pub heartbeat_interval: Duration,
}

impl Default for LinkOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            reconnect_window: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            listen_timeout: Duration::from_secs(20),
            shutdown_timeout: Duration::from_secs(5),
            heartbeat_interval: Duration::from_secs(15),
        }
    }
}

/// One session's connection to its agentctl. Cheap to clone.
///
/// Dropping every clone closes the stream and stops a local agentctl (SIGTERM, so it
/// still cancels its pendings and stops the agent), like [`AgentLink::shutdown`] but
/// without `agent.shutdown` and without waiting.
#[derive(Debug, Clone)]
pub struct AgentLink {
    inner: Arc<LinkInner>,
}

struct LinkInner {
    shared: Arc<Shared>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Set by the first `shutdown`, so a second one does nothing.
    shutting_down: AtomicBool,
}

impl std::fmt::Debug for LinkInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLink")
            .field("session_id", &self.shared.session_id)
            .field("connected", &self.shared.is_connected())
            .finish_non_exhaustive()
    }
}

impl Drop for LinkInner {
    fn drop(&mut self) {
        // The supervisor holds only `Shared`; closing it ends the task, which drops the
        // last `Shared` and with it the local agentctl (killed on drop).
        self.shared.close();
    }
}

impl AgentLink {
    /// Starts (local) or reaches (remote) an agentctl for `session_id` and opens the
    /// stream. Events arrive on the returned receiver, in order, until `Lost`.
    pub async fn connect(
        executor: &ExecutorConfig,
        session_id: &str,
    ) -> Result<(AgentLink, mpsc::UnboundedReceiver<LinkEvent>), LinkError> {
        Self::connect_with(executor, session_id, LinkOptions::default()).await
    }

    /// [`AgentLink::connect`] with explicit timeouts.
    pub async fn connect_with(
        executor: &ExecutorConfig,
        session_id: &str,
        options: LinkOptions,
    ) -> Result<(AgentLink, mpsc::UnboundedReceiver<LinkEvent>), LinkError> {
        let span = tracing::info_span!("agent_link", session_id = %session_id);
        let (endpoint, process, ws) = open(executor, &options).instrument(span.clone()).await?;
        let shared = Arc::new(Shared::new(session_id, options, process));
        let outgoing = shared.publish().ok_or(LinkError::NotConnected)?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let supervisor = supervisor::Supervisor::new(Arc::clone(&shared), endpoint, events_tx);
        let task = tokio::spawn(supervisor.run(ws, outgoing).instrument(span));
        Ok((AgentLink::assemble(shared, task), events_rx))
    }

    /// Reaches the agentctl that already runs session `session_id` (the backend
    /// restarted under a remote agentctl) and attaches to it with `after_seq`: the
    /// receiver first yields the events agentctl kept, then [`LinkEvent::Reattached`]
    /// with its still-open elicitations, then live events; afterwards the link behaves
    /// like one from [`AgentLink::connect`] (it re-attaches after a drop, and
    /// [`AgentLink::shutdown`] sends `agent.shutdown`). An agentctl that cannot be reached
    /// or does not hold the session is [`LinkError::Unreachable`].
    pub async fn resume_with(
        executor: &ExecutorConfig,
        session_id: &str,
        after_seq: Option<u64>,
        options: LinkOptions,
    ) -> Result<(AgentLink, mpsc::UnboundedReceiver<LinkEvent>), LinkError> {
        let span = tracing::info_span!("agent_link", session_id = %session_id);
        let (endpoint, process, mut ws) = open(executor, &options).instrument(span.clone()).await?;
        let shared = Arc::new(Shared::new(session_id, options, process));
        shared.resume_after(after_seq);
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let supervisor = supervisor::Supervisor::new(Arc::clone(&shared), endpoint, events_tx);
        let outgoing = supervisor
            .resume(&mut ws, session_id)
            .instrument(span.clone())
            .await?;
        let task = tokio::spawn(supervisor.run(ws, outgoing).instrument(span));
        Ok((AgentLink::assemble(shared, task), events_rx))
    }

    fn assemble(shared: Arc<Shared>, task: JoinHandle<()>) -> AgentLink {
        AgentLink {
            inner: Arc::new(LinkInner {
                shared,
                supervisor: Mutex::new(Some(task)),
                shutting_down: AtomicBool::new(false),
            }),
        }
    }

    /// Sends one request and waits for its response payload.
    pub async fn request<P: Serialize, R: DeserializeOwned>(
        &self,
        action: &str,
        payload: &P,
    ) -> Result<R, LinkError> {
        let timeout = self.inner.shared.options.request_timeout;
        self.request_with_timeout(action, payload, timeout).await
    }

    /// [`AgentLink::request`] with its own timeout (e.g. a longer one for
    /// `agent.session.start`, which waits for the agent's `initialize`).
    pub async fn request_with_timeout<P: Serialize, R: DeserializeOwned>(
        &self,
        action: &str,
        payload: &P,
        timeout: Duration,
    ) -> Result<R, LinkError> {
        let payload = serde_json::to_value(payload).map_err(|err| {
            LinkError::Protocol(format!("could not encode the `{action}` payload: {err}"))
        })?;
        let shared = &self.inner.shared;
        let span = tracing::info_span!(
            "agent_request",
            session_id = %shared.session_id,
            action,
            pending_id = tracing::field::Empty,
        );
        if let Some(pending_id) = payload.get("pending_id").and_then(Value::as_str) {
            span.record("pending_id", pending_id);
        }
        let bound_session = binds_session(action).then(|| {
            payload
                .get("session_id")
                .and_then(Value::as_str)
                .map_or_else(|| shared.session_id.clone(), str::to_owned)
        });

        async move {
            let (id, reply) = shared.send_request(action, payload)?;
            let reply = match tokio::time::timeout(timeout, reply).await {
                Ok(Ok(envelope)) => envelope,
                // The waiter was dropped: the stream went down with this request in flight.
                Ok(Err(_)) => {
                    tracing::warn!("agent stream dropped before the answer arrived");
                    return Err(LinkError::Interrupted);
                }
                Err(_) => {
                    shared.forget(&id);
                    tracing::warn!(?timeout, "agentctl did not answer in time");
                    return Err(LinkError::Timeout(timeout));
                }
            };
            match reply.frame_type {
                FrameType::Response => {
                    if let Some(session_id) = bound_session {
                        shared.mark_bound(session_id);
                    }
                    decode_payload(action, reply.payload)
                }
                FrameType::Error => {
                    let error: ErrorPayload =
                        serde_json::from_value(reply.payload).map_err(|err| {
                            LinkError::Protocol(format!(
                                "error frame for `{action}` does not decode: {err}"
                            ))
                        })?;
                    tracing::debug!(code = ?error.code, "agentctl answered with an error");
                    Err(LinkError::Remote(error))
                }
                other => Err(LinkError::Protocol(format!(
                    "a `{other:?}` frame answered `{action}`"
                ))),
            }
        }
        .instrument(span)
        .await
    }

    /// The sequence number of the last agent event handed to the receiver (the
    /// `after_seq` of the next re-attach); `None` before the first numbered event.
    pub fn delivered_seq(&self) -> Option<u64> {
        self.inner.shared.after_seq()
    }

    /// Whether the stream is up right now.
    pub fn is_connected(&self) -> bool {
        self.inner.shared.is_connected()
    }

    /// The process id of the local agentctl this link started; `None` for a remote
    /// executor. (Tests use it to kill agentctl and watch the link report `Lost`.)
    pub fn agentctl_pid(&self) -> Option<u32> {
        self.inner
            .shared
            .process
            .as_ref()
            .and_then(|process| process.pid())
    }

    /// Closes the stream without `agent.shutdown` and without reconnecting: a remote
    /// agentctl keeps the session detached, for another replica to attach (this one
    /// lost its lease). The event receiver ends. A later `shutdown` does nothing more.
    pub fn detach(&self) {
        if self.inner.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.shared.close();
        tracing::info!(session_id = %self.inner.shared.session_id, "agent link detached");
    }

    /// Asks agentctl to shut the agent down, closes the stream, and stops a local agentctl.
    ///
    /// `agent.shutdown` is sent only when the stream is up and a session was started on
    /// it. Afterwards every request fails with [`LinkError::NotConnected`], there is no
    /// reconnect, and the event receiver ends. Calling it again does nothing more.
    pub async fn shutdown(&self) {
        let shared = &self.inner.shared;
        if self.inner.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let grace = shared.options.shutdown_timeout;
        if shared.is_connected() && shared.bound_session().is_some() {
            let answer: Result<Value, LinkError> = self
                .request_with_timeout(Shutdown::ACTION, &Shutdown {}, grace)
                .await;
            if let Err(err) = answer {
                tracing::warn!(session_id = %shared.session_id, error = %err, "agent.shutdown failed");
            }
        }
        shared.close();
        let task = self
            .inner
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            // The supervisor sends a close frame and ends; don't wait forever on a dead peer.
            if tokio::time::timeout(grace, task).await.is_err() {
                tracing::warn!(session_id = %shared.session_id, "agent stream did not close in time");
            }
        }
        if let Some(process) = &shared.process {
            process.stop(grace).await;
        }
        tracing::info!(session_id = %shared.session_id, "agent link shut down");
    }
}

/// Starts (local) or reaches (remote) an agentctl and opens one authenticated stream.
async fn open(
    executor: &ExecutorConfig,
    options: &LinkOptions,
) -> Result<(Endpoint, Option<local::LocalAgentctl>, dial::WsStream), LinkError> {
    let (endpoint, process) = match executor {
        ExecutorConfig::Local { agentctl, pass_env } => {
            let binary = match agentctl {
                Some(path) => path.clone(),
                None => local::default_binary()?,
            };
            let started = local::start(&binary, pass_env, options.listen_timeout).await?;
            let endpoint = Endpoint::new(&format!("ws://{}", started.addr), &started.token);
            (endpoint, Some(started.process))
        }
        ExecutorConfig::Remote {
            url,
            token,
            ca_cert,
            ..
        } => {
            let endpoint = Endpoint::remote(url, token, ca_cert.as_deref())
                .map_err(|err| LinkError::Unreachable(err.to_string()))?;
            (endpoint, None)
        }
    };
    // On failure `process` is dropped here, which kills the agentctl just started.
    let ws = match tokio::time::timeout(options.connect_timeout, dial::open(&endpoint)).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(err)) => return Err(LinkError::Unreachable(err.to_string())),
        Err(_) => {
            return Err(LinkError::Unreachable(format!(
                "connecting to {} took longer than {:?}",
                endpoint.url(),
                options.connect_timeout
            )));
        }
    };
    tracing::info!(url = %endpoint.url(), "agent stream connected");
    Ok((endpoint, process, ws))
}

/// Actions whose successful response binds the stream to a session, so that a
/// reconnect must re-attach it.
fn binds_session(action: &str) -> bool {
    action == action::SESSION_START || action == action::SESSION_ATTACH
}

/// Decodes a response payload; a missing payload reads as `{}` for struct responses.
fn decode_payload<R: DeserializeOwned>(action: &str, payload: Value) -> Result<R, LinkError> {
    let missing = payload.is_null();
    match serde_json::from_value(payload) {
        Ok(decoded) => Ok(decoded),
        Err(_) if missing => serde_json::from_value(Value::Object(Default::default()))
            .map_err(|err| LinkError::Protocol(format!("`{action}` response: {err}"))),
        Err(err) => Err(LinkError::Protocol(format!("`{action}` response: {err}"))),
    }
}
