//! Link-level tests against a tiny in-test WebSocket server that plays agentctl:
//! every frame the link sends is read and answered by the test itself.
//! This file is the harness; the tests are in a file per area.

mod closing;
mod reattach;
mod requests;

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kandev_agent_stream::request::{AgentSpec, Empty, Prompt, SessionStart};
use kandev_agent_stream::response::{PromptAccepted, SessionAttached, SessionStarted, Success};
use kandev_agent_stream::{
    AgentEvent, ElicitationRequested, Envelope, ErrorCode, ErrorPayload, FrameType, action,
};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};

use super::*;

/// How long a test waits for anything before failing.
const WAIT: Duration = Duration::from_secs(5);
const SESSION: &str = "s-1";
const TOKEN: &str = "test-token";

type Events = mpsc::UnboundedReceiver<LinkEvent>;

/// Accepts TCP connections and hands them to the test, which decides when (and
/// whether) to complete the WebSocket upgrade.
struct TestServer {
    addr: SocketAddr,
    incoming: mpsc::UnboundedReceiver<TcpStream>,
    acceptor: JoinHandle<()>,
}

impl TestServer {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, incoming) = mpsc::unbounded_channel();
        let acceptor = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                if tx.send(tcp).is_err() {
                    return;
                }
            }
        });
        Self {
            addr,
            incoming,
            acceptor,
        }
    }

    fn executor(&self, token: &str) -> ExecutorConfig {
        ExecutorConfig::remote(format!("ws://{}", self.addr), token)
    }

    /// The next TCP connection, not yet upgraded.
    async fn next_tcp(&mut self) -> TcpStream {
        tokio::time::timeout(WAIT, self.incoming.recv())
            .await
            .expect("a connection within 5 s")
            .expect("acceptor running")
    }

    /// Completes the upgrade, answering 401 unless the bearer token is right.
    // The callback's error type is tungstenite's, not ours to shrink.
    #[allow(clippy::result_large_err)]
    async fn upgrade(tcp: TcpStream) -> Option<Conn> {
        let check = |request: &Request, response: Response| {
            let auth = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            let path_ok = request.uri().path() == kandev_agent_stream::STREAM_PATH;
            if auth == Some(&format!("Bearer {TOKEN}")) && path_ok {
                Ok(response)
            } else {
                let mut refusal = ErrorResponse::new(Some("bad token".into()));
                *refusal.status_mut() = StatusCode::UNAUTHORIZED;
                Err(refusal)
            }
        };
        tokio_tungstenite::accept_hdr_async(tcp, check)
            .await
            .ok()
            .map(|ws| Conn { ws })
    }

    async fn next_conn(&mut self) -> Conn {
        let tcp = self.next_tcp().await;
        Self::upgrade(tcp)
            .await
            .expect("the link sends the right token")
    }

    /// Drops `conn`, sees the link report `Disconnected`, and takes the connection it
    /// dials next.
    async fn redialed(&mut self, events: &mut Events, conn: Conn) -> Conn {
        drop(conn);
        assert_eq!(next_event(events).await, LinkEvent::Disconnected);
        self.next_conn().await
    }

    /// Stops listening: further connects are refused.
    async fn stop_listening(&mut self) {
        self.acceptor.abort();
        let _ = (&mut self.acceptor).await;
    }
}

/// The server side of one connection.
struct Conn {
    ws: WebSocketStream<TcpStream>,
}

impl Conn {
    async fn recv(&mut self) -> Envelope {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a frame within 5 s")
            {
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(text.as_str()).expect("an envelope");
                }
                Some(Ok(_)) => {}
                other => panic!("the link closed the stream: {other:?}"),
            }
        }
    }

    /// The next frame, which must be a request of `action` (`why` otherwise).
    async fn expect(&mut self, action: &str, why: &str) -> Envelope {
        let request = self.recv().await;
        assert_eq!(request.action, action, "{why}");
        request
    }

    async fn send(&mut self, envelope: &Envelope) {
        self.ws
            .send(Message::text(envelope.to_text()))
            .await
            .expect("send");
    }

    /// Answers `request` with `payload`.
    async fn reply(&mut self, request: &Envelope, payload: &impl Serialize) {
        self.send(&Envelope::response_to(request, payload)).await;
    }

    /// Answers `request` with an error frame.
    async fn refuse(&mut self, request: &Envelope, code: ErrorCode, message: &str) {
        self.send(&Envelope::error_to(request, code, message)).await;
    }

    async fn event(&mut self, seq: u64, event: &AgentEvent) {
        self.send(&Envelope::notification(
            seq.to_string(),
            action::AGENT_EVENT,
            event,
        ))
        .await;
    }

    /// Sends each `(sequence, event)`.
    async fn events(&mut self, events: &[(u64, AgentEvent)]) {
        for (seq, event) in events {
            self.event(*seq, event).await;
        }
    }

    /// Waits until the link closes this stream, failing on any further text frame.
    async fn expect_closed(&mut self) {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("closed within 5 s")
            {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(Message::Text(text))) => panic!("unexpected frame {text}"),
                Some(Ok(_)) => {}
            }
        }
    }
}

fn update(n: u64) -> AgentEvent {
    AgentEvent::SessionUpdate {
        update: json!({"n": n}),
    }
}

/// `(n, update(n))` for each `n`.
fn updates(ns: impl IntoIterator<Item = u64>) -> Vec<(u64, AgentEvent)> {
    ns.into_iter().map(|n| (n, update(n))).collect()
}

fn pending(id: &str) -> ElicitationRequested {
    ElicitationRequested {
        pending_id: id.into(),
        acp_session_id: "acp-1".into(),
        tool_call_id: None,
        message: "Pick a colour".into(),
        questions: Vec::new(),
        expires_at: None,
        on_deadline: None,
    }
}

fn attached(pending: Vec<ElicitationRequested>) -> SessionAttached {
    SessionAttached {
        acp_session_id: "acp-1".into(),
        pending,
    }
}

/// The `Reattached` of a link whose elicitation list held `pending_ids` and whose
/// question list held no call.
fn reattached(pending_ids: &[&str]) -> LinkEvent {
    LinkEvent::Reattached {
        pending: pending_ids.iter().map(|id| pending(id)).collect(),
        questions: Some(Vec::new()),
    }
}

async fn next_event(events: &mut Events) -> LinkEvent {
    tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event within 5 s")
        .expect("the event channel is open")
}

/// Asserts the next events are `expected`, in order.
async fn next_events(events: &mut Events, expected: impl IntoIterator<Item = LinkEvent>) {
    for event in expected {
        assert_eq!(next_event(events).await, event);
    }
}

/// `Agent(update(n))` for each `n`.
fn agent_updates(ns: impl IntoIterator<Item = u64>) -> Vec<LinkEvent> {
    ns.into_iter()
        .map(|n| LinkEvent::Agent(update(n)))
        .collect()
}

/// Waits until the receiver ends (the supervisor has stopped).
async fn expect_end(events: &mut Events) {
    let next = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("the link ends within 5 s");
    assert_eq!(next, None, "no event after the end");
}

/// The next event is `Lost`, with a reason naming `why`; nothing follows it.
async fn expect_lost(events: &mut Events, why: &str) {
    match next_event(events).await {
        LinkEvent::Lost { reason } => assert!(reason.contains(why), "{reason}"),
        other => panic!("expected Lost, got {other:?}"),
    }
    expect_end(events).await;
}

/// A request of `action` fails `NotConnected`: the link has given up for good.
async fn refused(link: &AgentLink, action: &str, payload: &impl Serialize) {
    let refused = link.request::<_, Value>(action, payload).await;
    assert!(
        matches!(refused, Err(LinkError::NotConnected)),
        "{refused:?}"
    );
}

fn quick() -> LinkOptions {
    LinkOptions {
        request_timeout: Duration::from_secs(5),
        ..LinkOptions::default()
    }
}

/// A server, a link connected to it with `options`, the link's events and the server's
/// side of the stream.
async fn linked(options: LinkOptions) -> (TestServer, AgentLink, Events, Conn) {
    let mut server = TestServer::start().await;
    let executor = server.executor(TOKEN);
    let (link, conn) = tokio::join!(
        AgentLink::connect_with(&executor, SESSION, options),
        server.next_conn()
    );
    let (link, events) = link.expect("connect");
    (server, link, events, conn)
}

/// [`linked`] with [`quick`] options and a started session.
async fn started() -> (TestServer, AgentLink, Events, Conn) {
    let (server, link, events, mut conn) = linked(quick()).await;
    start_session(&link, &mut conn).await;
    (server, link, events, conn)
}

/// Sends `agent.session.start` through the link and answers it, binding the stream.
async fn start_session(link: &AgentLink, conn: &mut Conn) {
    let start = SessionStart {
        session_id: SESSION.into(),
        agent: AgentSpec {
            id: "mock".into(),
            command: vec!["mock-agent".into()],
            env: Default::default(),
            cwd: None,
            permission_policy: Default::default(),
            mcp_servers: Default::default(),
            inherit_env: Vec::new(),
            on_deadline: Default::default(),
        },
        flags: Default::default(),
    };
    let (started, ()) = tokio::join!(
        link.request::<_, SessionStarted>(action::SESSION_START, &start),
        async {
            let request = conn.expect(action::SESSION_START, "the start").await;
            let answer = SessionStarted {
                acp_session_id: "acp-1".into(),
                client_capabilities: json!({}),
                agent_info: None,
            };
            conn.reply(&request, &answer).await;
        }
    );
    assert_eq!(started.expect("started").acp_session_id, "acp-1");
}

/// Plays agentctl's re-attach: the next frame must be `agent.session.attach` for
/// [`SESSION`]; `before` events are sent ahead of its answer, `after` events behind it
/// (agentctl's real order: answer, then the kept events). The attach answer lists a
/// stale pending; the `agent.elicitations.list` that must follow is answered with
/// `pending_ids`.
async fn answer_attach(
    conn: &mut Conn,
    before: &[AgentEvent],
    after: &[AgentEvent],
    pending_ids: &[&str],
) {
    let attach = conn
        .expect(action::SESSION_ATTACH, "attach comes before anything else")
        .await;
    assert_eq!(attach.payload, json!({"session_id": SESSION}));
    for (seq, event) in before.iter().enumerate() {
        conn.event(100 + seq as u64, event).await;
    }
    conn.reply(&attach, &attached(vec![pending("stale")])).await;
    for (seq, event) in after.iter().enumerate() {
        conn.event(200 + seq as u64, event).await;
    }
    answer_lists(conn, "the fresh snapshot is asked next", pending_ids).await;
}

/// Answers the `agent.elicitations.list` that must come next (`why` otherwise) with
/// `pending_ids`, then the question list with no call.
async fn answer_lists(conn: &mut Conn, why: &str, pending_ids: &[&str]) {
    let list = conn.expect(action::ELICITATIONS_LIST, why).await;
    let pending: Vec<ElicitationRequested> = pending_ids.iter().map(|id| pending(id)).collect();
    conn.reply(&list, &json!({ "pending": pending })).await;
    answer_questions_list(conn, &[], &[]).await;
}

fn question(request_id: &str) -> AskUserQuestionRequested {
    AskUserQuestionRequested {
        request_id: request_id.into(),
        acp_session_id: "acp-1".into(),
        questions: Vec::new(),
        context: None,
        expires_at: None,
    }
}

/// Answers the `agent.questions.list` that must follow the elicitation list; `between`
/// events are sent ahead of the answer (after the elicitation snapshot).
async fn answer_questions_list(conn: &mut Conn, between: &[(u64, AgentEvent)], held: &[&str]) {
    let why = "the waiting tool calls are asked right after the elicitations";
    let list = conn.expect(action::QUESTIONS_LIST, why).await;
    conn.events(between).await;
    let pending: Vec<AskUserQuestionRequested> = held.iter().map(|id| question(id)).collect();
    conn.reply(&list, &json!({ "pending": pending })).await;
}
