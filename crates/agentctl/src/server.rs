//! The agent-stream server: `GET /api/v1/agent/stream` (WebSocket, bearer token) and
//! `GET /healthz`.
//!
//! Each connection reads JSON text frames ([`Envelope`]s) and handles every request in
//! its own task, so a slow action never holds up another. A connection is bound to one
//! session by `agent.session.start` or `agent.session.attach`; the session's events then
//! flow to it through the session's [`crate::outbox::Outbox`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use kandev_agent_stream::request::{
    Cancel, ElicitationsCancel, ElicitationsList, ElicitationsRespond, Prompt, QuestionsCancel,
    QuestionsList, QuestionsRespond, SessionAttach, SessionStart, Shutdown,
};
use kandev_agent_stream::response::{
    PendingList, PromptAccepted, QuestionList, SessionAttached, SessionStarted, Success,
};
use kandev_agent_stream::{
    Envelope, ErrorCode, ErrorPayload, FrameType, STREAM_PATH, StreamRequest,
};
use serde_json::Value;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::config::Timeouts;
use crate::outbox::{Outgoing, StreamSink};
use crate::session::Session;

/// The environment variable holding the agent-stream bearer token.
pub const TOKEN_ENV: &str = "AGENTCTL_TOKEN";

/// Largest frame or message accepted on the agent stream.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;
/// How long shutdown waits for each stream to write its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Server-wide state: the token, the timeouts, the sessions and the open streams.
pub struct AgentCtl {
    token: Option<String>,
    timeouts: Timeouts,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    starting: Mutex<HashSet<String>>,
    connections: Mutex<HashMap<u64, ConnectionHandle>>,
    next_connection: AtomicU64,
}

struct ConnectionHandle {
    tx: mpsc::UnboundedSender<Outgoing>,
    done: oneshot::Receiver<()>,
}

enum Binding {
    Unbound,
    Starting,
    Bound(Arc<Session>),
}

struct Connection {
    id: u64,
    tx: mpsc::UnboundedSender<Outgoing>,
    binding: Mutex<Binding>,
}

impl Connection {
    fn session(&self) -> Result<Arc<Session>, ErrorPayload> {
        match &*lock(&self.binding) {
            Binding::Bound(session) => {
                tracing::Span::current().record("session_id", session.id());
                Ok(Arc::clone(session))
            }
            _ => Err(ErrorPayload::new(
                ErrorCode::BadRequest,
                "no session is bound to this stream: send agent.session.start or agent.session.attach first",
            )),
        }
    }

    fn send(&self, frame: Envelope) {
        let _ = self.tx.send(Outgoing::Frame(frame.to_text()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AgentCtl {
    /// Server state; `token: None` disables authentication (`--insecure-no-token`).
    pub fn new(token: Option<String>, timeouts: Timeouts) -> Arc<Self> {
        Arc::new(Self {
            token,
            timeouts,
            sessions: Mutex::new(HashMap::new()),
            starting: Mutex::new(HashSet::new()),
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(1),
        })
    }

    /// The router: the agent stream (behind the token) and `/healthz`.
    pub fn router(self: &Arc<Self>) -> Router {
        let stream = Router::new()
            .route(STREAM_PATH, get(stream_upgrade))
            .route_layer(middleware::from_fn_with_state(
                Arc::clone(self),
                require_token,
            ));
        Router::new()
            .route("/healthz", get(healthz))
            .merge(stream)
            .with_state(Arc::clone(self))
    }

    /// The sessions held and their elicitations waiting for an answer (for the metrics).
    pub fn load(&self) -> (usize, usize) {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).values().cloned().collect();
        let open = sessions.iter().map(|s| s.pending_count()).sum();
        (sessions.len(), open)
    }

    /// Whether `headers` carry the right bearer token (constant-time compare).
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or("");
        bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
    }

    fn session(&self, session_id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(session_id).cloned()
    }

    /// Shuts every session down (pending elicitations answered `cancel`, agents stopped),
    /// then closes every stream after its last events are written.
    pub async fn shutdown_all(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).values().cloned().collect();
        futures::future::join_all(sessions.iter().map(|session| session.shutdown())).await;
        let connections: Vec<ConnectionHandle> = lock(&self.connections)
            .drain()
            .map(|(_, handle)| handle)
            .collect();
        let waits = connections.into_iter().map(|handle| {
            let _ = handle
                .tx
                .send(Outgoing::Close("agentctl is shutting down".to_owned()));
            tokio::time::timeout(CLOSE_GRACE, handle.done)
        });
        futures::future::join_all(waits).await;
    }

    /// The typed table: each arm decodes its request type, runs its handler and encodes
    /// that type's response, so an action cannot be answered with another's payload.
    async fn dispatch(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        request: &Envelope,
    ) -> Result<Option<Value>, ErrorPayload> {
        match request.action.as_str() {
            SessionStart::ACTION => {
                answer::<SessionStart>(self.start(connection, request, decode(request)?).await)
            }
            SessionAttach::ACTION => {
                answer::<SessionAttach>(self.attach(connection, request, decode(request)?))
            }
            Prompt::ACTION => {
                let prompt: Prompt = decode(request)?;
                connection.session()?.prompt(prompt.text)?;
                answer::<Prompt>(Ok(Reply::Send(PromptAccepted { accepted: true })))
            }
            Cancel::ACTION => {
                let Cancel {} = decode(request)?;
                connection.session()?.cancel_turn()?;
                answer::<Cancel>(Ok(Reply::Send(Success::OK)))
            }
            ElicitationsRespond::ACTION => {
                let respond: ElicitationsRespond = decode(request)?;
                tracing::Span::current().record("pending_id", respond.pending_id.as_str());
                // The success goes out before `elicitation_settled` (see `Session::respond`).
                connection.session()?.respond(&respond, || {
                    connection.send(response_frame::<ElicitationsRespond>(request, &Success::OK));
                })?;
                answer::<ElicitationsRespond>(Ok(Reply::Sent))
            }
            ElicitationsCancel::ACTION => {
                let cancel: ElicitationsCancel = decode(request)?;
                tracing::Span::current().record("pending_id", cancel.pending_id.as_str());
                connection.session()?.cancel_elicitation(&cancel)?;
                answer::<ElicitationsCancel>(Ok(Reply::Send(Success::OK)))
            }
            ElicitationsList::ACTION => {
                let ElicitationsList {} = decode(request)?;
                // Snapshot and answer in one step of the stream's order.
                connection.session()?.pending_in_order(|pending| {
                    let list = PendingList { pending };
                    connection.send(response_frame::<ElicitationsList>(request, &list));
                });
                answer::<ElicitationsList>(Ok(Reply::Sent))
            }
            QuestionsRespond::ACTION => {
                let respond: QuestionsRespond = decode(request)?;
                connection.session()?.respond_questions(&respond)?;
                answer::<QuestionsRespond>(Ok(Reply::Send(Success::OK)))
            }
            QuestionsCancel::ACTION => {
                let cancel: QuestionsCancel = decode(request)?;
                connection.session()?.cancel_questions(&cancel)?;
                answer::<QuestionsCancel>(Ok(Reply::Send(Success::OK)))
            }
            QuestionsList::ACTION => {
                let QuestionsList {} = decode(request)?;
                connection.session()?.pending_questions_in_order(|pending| {
                    let list = QuestionList { pending };
                    connection.send(response_frame::<QuestionsList>(request, &list));
                });
                answer::<QuestionsList>(Ok(Reply::Sent))
            }
            Shutdown::ACTION => {
                let Shutdown {} = decode(request)?;
                answer::<Shutdown>(self.shut_down(connection).await)
            }
            other => Err(ErrorPayload::new(
                ErrorCode::UnknownAction,
                format!("unknown action `{other}`"),
            )),
        }
    }

    /// `agent.shutdown`: stops the bound session and forgets it.
    async fn shut_down(&self, connection: &Connection) -> Result<Reply<Success>, ErrorPayload> {
        let session = connection.session()?;
        session.shutdown().await;
        // Its last events (settlements, agent_exited) went out before this reply;
        // the backend is done with it, so the id may be started afresh.
        let mut sessions = lock(&self.sessions);
        if sessions
            .get(session.id())
            .is_some_and(|s| Arc::ptr_eq(s, &session))
        {
            sessions.remove(session.id());
        }
        Ok(Reply::Send(Success::OK))
    }

    async fn start(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        request: &Envelope,
        start: SessionStart,
    ) -> Result<Reply<SessionStarted>, ErrorPayload> {
        let session_id = start.session_id.clone();
        {
            let mut binding = lock(&connection.binding);
            if !matches!(*binding, Binding::Unbound) {
                return Err(ErrorPayload::new(
                    ErrorCode::BadRequest,
                    "this stream is already bound to a session",
                ));
            }
            if self.session(&session_id).is_some_and(|s| !s.is_closed())
                || !lock(&self.starting).insert(session_id.clone())
            {
                return Err(ErrorPayload::new(
                    ErrorCode::BadRequest,
                    format!("session `{session_id}` is already running; use agent.session.attach"),
                ));
            }
            *binding = Binding::Starting;
        }
        let started = Session::start(start, self.timeouts).await;
        lock(&self.starting).remove(&session_id);
        let session = match started {
            Ok(session) => session,
            Err(err) => {
                *lock(&connection.binding) = Binding::Unbound;
                tracing::warn!(session_id = %session_id, error = %err, "session start failed");
                return Err(err.to_payload());
            }
        };
        lock(&self.sessions).insert(session_id, Arc::clone(&session));
        let response = SessionStarted {
            acp_session_id: session.acp_session_id().to_owned(),
            client_capabilities: session.client_capabilities().clone(),
            agent_info: session.agent_info().cloned(),
        };
        let response = response_frame::<SessionStart>(request, &response);
        self.bind(connection, &session, response, None);
        Ok(Reply::Sent)
    }

    fn attach(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        request: &Envelope,
        attach: SessionAttach,
    ) -> Result<Reply<SessionAttached>, ErrorPayload> {
        let session = self.session(&attach.session_id).ok_or_else(|| {
            ErrorPayload::new(
                ErrorCode::NotFound,
                format!("no session `{}`", attach.session_id),
            )
        })?;
        {
            let binding = lock(&connection.binding);
            match &*binding {
                Binding::Unbound => {}
                Binding::Bound(bound) if bound.id() == session.id() => {}
                _ => {
                    return Err(ErrorPayload::new(
                        ErrorCode::BadRequest,
                        "this stream is already bound to another session",
                    ));
                }
            }
        }
        let response = SessionAttached {
            acp_session_id: session.acp_session_id().to_owned(),
            pending: session.pending(),
        };
        tracing::info!(session_id = %session.id(), pending = response.pending.len(), "agent stream attached");
        let response = response_frame::<SessionAttach>(request, &response);
        self.bind(connection, &session, response, attach.after_seq);
        Ok(Reply::Sent)
    }

    /// Binds the connection and attaches it to the session's outbox, sending `response`
    /// first so it precedes the flushed events.
    fn bind(
        &self,
        connection: &Arc<Connection>,
        session: &Arc<Session>,
        response: Envelope,
        after_seq: Option<u64>,
    ) {
        *lock(&connection.binding) = Binding::Bound(Arc::clone(session));
        let sink = StreamSink {
            connection_id: connection.id,
            tx: connection.tx.clone(),
        };
        let flushed = session
            .outbox()
            .attach(sink, Some(response.to_text()), after_seq);
        if flushed > 0 {
            tracing::info!(session_id = %session.id(), flushed, "flushed buffered events");
        }
    }
}

/// What a handler answers: the response for [`AgentCtl::dispatch`] to send, or `Sent`
/// when the handler had to send it itself to order it before other frames.
enum Reply<R> {
    Send(R),
    Sent,
}

/// Decodes the request payload as `Q`; a mismatch is a `BAD_REQUEST`.
fn decode<Q: StreamRequest>(request: &Envelope) -> Result<Q, ErrorPayload> {
    request.decode_payload()
}

/// The `response` frame answering `request` with `Q`'s response type.
fn response_frame<Q: StreamRequest>(request: &Envelope, response: &Q::Response) -> Envelope {
    Envelope::response_to(request, response)
}

/// Encodes a handler's reply for `Q`, if it is still to be sent.
fn answer<Q: StreamRequest>(
    reply: Result<Reply<Q::Response>, ErrorPayload>,
) -> Result<Option<Value>, ErrorPayload> {
    match reply? {
        Reply::Send(response) => serde_json::to_value(response)
            .map(Some)
            .map_err(|err| ErrorPayload::new(ErrorCode::Internal, err.to_string())),
        Reply::Sent => Ok(None),
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

async fn require_token(State(app): State<Arc<AgentCtl>>, request: Request, next: Next) -> Response {
    if app.authorized(request.headers()) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response()
    }
}

async fn stream_upgrade(State(app): State<Arc<AgentCtl>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade
        .max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .read_buffer_size(kandev_agent_stream::READ_BUFFER_BYTES)
        .on_upgrade(move |socket| serve_connection(app, socket))
}

async fn serve_connection(app: Arc<AgentCtl>, socket: WebSocket) {
    let id = app.next_connection.fetch_add(1, Ordering::SeqCst);
    let span = tracing::info_span!("stream", connection = id);
    async move {
        tracing::info!("agent stream connected");
        let (mut ws_tx, mut ws_rx) = socket.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
        let (done_tx, done_rx) = oneshot::channel();
        lock(&app.connections).insert(
            id,
            ConnectionHandle {
                tx: tx.clone(),
                done: done_rx,
            },
        );
        let connection = Arc::new(Connection {
            id,
            tx,
            binding: Mutex::new(Binding::Unbound),
        });

        let mut writer = tokio::spawn(async move {
            while let Some(outgoing) = rx.recv().await {
                match outgoing {
                    Outgoing::Frame(text) => {
                        if ws_tx.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                    Outgoing::Close(reason) => {
                        let frame = CloseFrame {
                            code: close_code::NORMAL,
                            reason: reason.into(),
                        };
                        let _ = ws_tx.send(Message::Close(Some(frame))).await;
                        break;
                    }
                }
            }
            let _ = ws_tx.close().await;
            let _ = done_tx.send(());
        });

        loop {
            let message = tokio::select! {
                message = ws_rx.next() => message,
                _ = &mut writer => break,
            };
            match message {
                Some(Ok(Message::Text(text))) => {
                    let app = Arc::clone(&app);
                    let connection = Arc::clone(&connection);
                    tokio::spawn(
                        async move { handle_frame(app, connection, text.as_str()).await }
                            .in_current_span(),
                    );
                }
                Some(Ok(Message::Binary(_))) => {
                    connection.send(bad_frame(
                        "",
                        "binary frames are not accepted; send JSON text",
                    ));
                }
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(err)) => {
                    tracing::info!(error = %err, "agent stream read failed");
                    break;
                }
            }
        }

        if let Ok(session) = connection.session() {
            session.outbox().detach(id);
        }
        lock(&app.connections).remove(&id);
        tracing::info!("agent stream disconnected");
    }
    .instrument(span)
    .await;
}

fn bad_frame(id: &str, message: impl Into<String>) -> Envelope {
    Envelope {
        id: id.to_owned(),
        frame_type: FrameType::Error,
        action: String::new(),
        payload: serde_json::to_value(ErrorPayload::new(ErrorCode::BadRequest, message))
            .unwrap_or(Value::Null),
    }
}

async fn handle_frame(app: Arc<AgentCtl>, connection: Arc<Connection>, text: &str) {
    let request: Envelope = match serde_json::from_str(text) {
        Ok(request) => request,
        Err(err) => {
            // Echo whatever id we can find so the sender can correlate the refusal.
            let id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            connection.send(bad_frame(&id, format!("undecodable frame: {err}")));
            return;
        }
    };
    if request.frame_type != FrameType::Request {
        connection.send(Envelope::error_to(
            &request,
            ErrorCode::BadRequest,
            "only request frames are accepted",
        ));
        return;
    }
    let span = tracing::info_span!(
        "request",
        action = %request.action,
        id = %request.id,
        session_id = tracing::field::Empty,
        pending_id = tracing::field::Empty,
    );
    let result = app.dispatch(&connection, &request).instrument(span).await;
    match result {
        Ok(Some(payload)) => connection.send(Envelope::response_to(&request, &payload)),
        Ok(None) => {}
        Err(err) => {
            tracing::debug!(action = %request.action, code = ?err.code, message = %err.message, "request refused");
            connection.send(Envelope::error_to(&request, err.code, err.message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = value {
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(value).expect("header"),
            );
        }
        headers
    }

    #[test]
    fn bearer_token_must_match_exactly() {
        let app = AgentCtl::new(Some("s3cret".to_owned()), Timeouts::default());
        assert!(app.authorized(&headers(Some("Bearer s3cret"))));
        assert!(!app.authorized(&headers(Some("Bearer s3cre"))));
        assert!(!app.authorized(&headers(Some("Bearer s3cret2"))));
        assert!(!app.authorized(&headers(Some("s3cret"))));
        assert!(!app.authorized(&headers(None)));
    }

    #[test]
    fn no_token_means_open() {
        let app = AgentCtl::new(None, Timeouts::default());
        assert!(app.authorized(&headers(None)));
    }
}
