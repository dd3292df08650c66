//! Link-level tests against a tiny in-test WebSocket server that plays agentctl:
//! every frame the link sends is read and answered by the test itself.

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

#[tokio::test]
async fn concurrent_requests_each_get_their_own_answer() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let ask = |text: &'static str| {
        let link = link.clone();
        async move {
            link.request::<_, Value>(action::PROMPT, &Prompt { text: text.into() })
                .await
        }
    };
    let server_side = async {
        let mut requests = Vec::new();
        for _ in 0..3 {
            requests.push(conn.recv().await);
        }
        // Answer in reverse order, echoing each request's own text.
        for request in requests.iter().rev() {
            conn.reply(request, &json!({"echo": request.payload["text"]}))
                .await;
        }
    };
    let (a, b, c, ()) = tokio::join!(ask("a"), ask("b"), ask("c"), server_side);
    assert_eq!(a.expect("a"), json!({"echo": "a"}));
    assert_eq!(b.expect("b"), json!({"echo": "b"}));
    assert_eq!(c.expect("c"), json!({"echo": "c"}));
}

#[tokio::test]
async fn an_error_frame_is_a_remote_error_carrying_its_payload() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let respond = json!({"pending_id": "p-1"});
    let (answer, ()) = tokio::join!(
        link.request::<_, Success>(action::ELICITATIONS_RESPOND, &respond),
        async {
            let request = conn.recv().await;
            conn.refuse(&request, ErrorCode::InvalidAnswer, "not an option")
                .await;
        }
    );
    match answer {
        Err(LinkError::Remote(error)) => {
            assert_eq!(
                error,
                ErrorPayload::new(ErrorCode::InvalidAnswer, "not an option")
            );
        }
        other => panic!("expected Remote, got {other:?}"),
    }
    assert!(
        link.is_connected(),
        "an error frame does not disturb the stream"
    );
}

#[tokio::test]
async fn an_undecodable_answer_is_a_protocol_error() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let prompt = Prompt { text: "hi".into() };
    let (answer, ()) = tokio::join!(
        link.request::<_, PromptAccepted>(action::PROMPT, &prompt),
        async {
            let request = conn.recv().await;
            conn.reply(&request, &json!({"accepted": "maybe"})).await;
        }
    );
    assert!(matches!(answer, Err(LinkError::Protocol(_))), "{answer:?}");
}

#[tokio::test]
async fn an_unanswered_request_times_out_and_its_late_answer_is_ignored() {
    let options = LinkOptions {
        request_timeout: Duration::from_millis(200),
        ..quick()
    };
    let (_server, link, _events, mut conn) = linked(options).await;

    let slow = link
        .request::<_, Value>(
            action::PROMPT,
            &Prompt {
                text: "slow".into(),
            },
        )
        .await;
    assert!(matches!(slow, Err(LinkError::Timeout(t)) if t == Duration::from_millis(200)));
    let unanswered = conn.recv().await;

    let prompt = Prompt {
        text: "next".into(),
    };
    let (next, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        let next = conn.recv().await;
        // The late answer first: it must not be taken for the second request's.
        conn.reply(&unanswered, &json!({"which": "late"})).await;
        conn.reply(&next, &json!({"which": "next"})).await;
    });
    assert_eq!(next.expect("next answered"), json!({"which": "next"}));
}

#[tokio::test]
async fn events_arrive_in_order_interleaved_with_answers() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    let (answer, ()) = tokio::join!(
        link.request::<_, Value>(action::ELICITATIONS_LIST, &Empty {}),
        async {
            conn.events(&updates(0..100)).await;
            let request = conn.recv().await;
            conn.reply(&request, &json!({"pending": []})).await;
            conn.events(&updates(100..200)).await;
            // A notification of another action and an undecodable event are skipped.
            conn.send(&Envelope::notification("x", "agent.other", &json!({})))
                .await;
            conn.send(&Envelope::notification(
                "y",
                action::AGENT_EVENT,
                &json!({"event": "?"}),
            ))
            .await;
            conn.event(200, &update(200)).await;
        }
    );
    assert_eq!(answer.expect("list"), json!({"pending": []}));
    next_events(&mut events, agent_updates(0..=200)).await;
}

#[tokio::test]
async fn a_drop_fails_in_flight_requests_refuses_new_ones_then_reattaches() {
    let (mut server, link, mut events, mut conn) = started().await;

    // A request is sent, then the stream dies before its answer.
    let prompt = Prompt {
        text: "lost".into(),
    };
    let (in_flight, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        conn.expect(action::PROMPT, "the prompt").await;
        drop(conn);
    });
    assert!(
        matches!(in_flight, Err(LinkError::Interrupted)),
        "a request lost with its stream may have been carried out: {in_flight:?}"
    );
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);

    // The link dials again; hold its upgrade so the stream stays down meanwhile.
    let held = server.next_tcp().await;
    assert!(!link.is_connected());
    let prompt = Prompt {
        text: "while down".into(),
    };
    refused(&link, action::PROMPT, &prompt).await;

    let mut conn = TestServer::upgrade(held).await.expect("upgrade");
    // The first frame on the new stream is the attach: the refused prompt was never sent.
    answer_attach(&mut conn, &[update(1)], &[update(2)], &["p-1"]).await;
    // The kept events first, then the snapshot taken after them, then live events.
    let mut expected = agent_updates(1..=2);
    expected.push(reattached(&["p-1"]));
    next_events(&mut events, expected).await;
    conn.event(300, &update(3)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(3)));

    assert!(link.is_connected());
    let prompt = Prompt {
        text: "again".into(),
    };
    let accepted = PromptAccepted { accepted: true };
    let (again, ()) = tokio::join!(
        link.request::<_, PromptAccepted>(action::PROMPT, &prompt),
        async {
            let request = conn.recv().await;
            assert_eq!(request.payload, json!({"text": "again"}));
            conn.reply(&request, &accepted).await;
        }
    );
    assert_eq!(again.expect("answered after re-attach"), accepted);
}

#[tokio::test]
async fn a_stream_with_no_session_reconnects_without_attaching() {
    let (mut server, link, mut events, conn) = linked(quick()).await;
    let mut conn = server.redialed(&mut events, conn).await;
    let unknown = LinkEvent::Reattached {
        pending: vec![],
        questions: None,
    };
    assert_eq!(next_event(&mut events).await, unknown);
    let (answer, ()) = tokio::join!(link.request::<_, Value>(action::CANCEL, &Empty {}), async {
        let request = conn
            .expect(action::CANCEL, "no attach without a started session")
            .await;
        conn.reply(&request, &Success::OK).await;
    });
    assert_eq!(answer.expect("cancel"), json!({"success": true}));
}

#[tokio::test]
async fn a_refused_reattach_loses_the_link() {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.refuse(&attach, ErrorCode::NotFound, "no such session")
        .await;
    expect_lost(&mut events, "no such session").await;
    assert!(!link.is_connected());
    refused(&link, action::PROMPT, &Prompt { text: "x".into() }).await;
}

#[tokio::test]
async fn giving_up_reconnecting_loses_the_link() {
    let options = LinkOptions {
        reconnect_window: Duration::from_millis(300),
        ..quick()
    };
    let (mut server, link, mut events, mut conn) = linked(options).await;
    start_session(&link, &mut conn).await;
    server.stop_listening().await;
    drop(conn);
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    expect_lost(&mut events, "within 300ms").await;
    refused(&link, action::CANCEL, &Empty {}).await;
}

#[tokio::test]
async fn shutdown_asks_agentctl_to_stop_then_closes_for_good() {
    let (_server, link, mut events, mut conn) = started().await;
    let ((), ()) = tokio::join!(link.shutdown(), async {
        let request = conn.expect(action::SHUTDOWN, "the shutdown").await;
        conn.reply(&request, &Success::OK).await;
        conn.expect_closed().await;
    });
    // No Disconnected, no reconnect: the receiver simply ends.
    expect_end(&mut events).await;
    assert!(!link.is_connected());
    refused(&link, action::CANCEL, &Empty {}).await;
    link.shutdown().await; // a second call is harmless
}

#[tokio::test]
async fn shutdown_before_any_session_sends_nothing() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    let ((), ()) = tokio::join!(link.shutdown(), conn.expect_closed());
    expect_end(&mut events).await;
}

#[tokio::test]
async fn dropping_every_clone_closes_the_stream() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    drop(link);
    conn.expect_closed().await;
    expect_end(&mut events).await;
}

#[tokio::test]
async fn a_wrong_token_is_unreachable_with_a_clear_message() {
    let mut server = TestServer::start().await;
    let executor = server.executor("not-the-token");
    let (link, refused) = tokio::join!(
        AgentLink::connect_with(&executor, SESSION, quick()),
        async {
            let tcp = server.next_tcp().await;
            TestServer::upgrade(tcp).await.is_none()
        }
    );
    assert!(refused, "the server refused the upgrade");
    match link {
        Err(LinkError::Unreachable(message)) => {
            assert!(message.contains("rejected the token"), "{message}");
            assert!(message.contains("401"), "{message}");
            assert!(
                !message.contains("not-the-token"),
                "the token is never echoed: {message}"
            );
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn frames_carry_the_envelope_shape() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let prompt = Prompt {
        text: "shape".into(),
    };
    let (_, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        let request = conn.recv().await;
        assert_eq!(request.frame_type, FrameType::Request);
        assert!(!request.id.is_empty());
        assert_eq!(request.payload, json!({"text": "shape"}));
        conn.reply(&request, &json!({})).await;
    });
}

#[tokio::test]
async fn a_silent_peer_is_dropped_after_missed_heartbeats() {
    let options = LinkOptions {
        heartbeat_interval: Duration::from_millis(50),
        ..quick()
    };
    let (_server, _link, mut events, mut conn) = linked(options).await;
    // The server never reads, so it never answers the pings.
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    let mut pings = 0;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(WAIT, conn.ws.next()).await {
        if frame.is_ping() {
            pings += 1;
        }
    }
    assert!(pings >= 1, "the link pinged before giving up");
}

#[tokio::test]
async fn a_replaced_stream_is_lost_without_reconnecting() {
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    let (_server, link, mut events, mut conn) = started().await;
    let close = CloseFrame {
        code: CloseCode::Normal,
        reason: supervisor::REPLACED_REASON.into(),
    };
    conn.ws
        .send(Message::Close(Some(close)))
        .await
        .expect("close");
    expect_lost(&mut events, "took over").await;
    assert!(!link.is_connected());
}

#[test]
fn the_remote_token_never_shows_in_debug_output() {
    let executor = ExecutorConfig::remote("ws://h:1", "s3cr3t");
    let shown = format!("{executor:?}");
    assert!(shown.contains("ws://h:1"));
    assert!(!shown.contains("s3cr3t"), "{shown}");
}

/// The attach's own pending list is older than the events agentctl flushes after it, so a
/// record one of them opened is missing from it: reconciling against it would settle a
/// record whose request agentctl still holds. Without a usable `agent.elicitations.list`
/// the link attaches again instead; a refused question list is only "unknown".
#[tokio::test]
async fn a_refused_pending_list_attaches_again_instead_of_trusting_the_older_attach_list() {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let stale = attached(vec![pending("p-9")]);
    // On each stream: the attach, answered with the stale list; then the pending list.
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &stale).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.refuse(&list, ErrorCode::UnknownAction, "unknown action")
        .await;
    // A second stream, whose list is answered.
    let mut conn = server.next_conn().await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &stale).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.reply(
        &list,
        &json!({"pending": [pending("p-9"), pending("p-10")]}),
    )
    .await;
    let questions = conn.expect(action::QUESTIONS_LIST, "the questions").await;
    conn.refuse(&questions, ErrorCode::UnknownAction, "unknown action")
        .await;
    // Nothing was reported for the first stream: the only snapshot is the list's. No
    // question list is "unknown", never "none held": nothing may be withdrawn on it.
    assert_eq!(
        next_event(&mut events).await,
        LinkEvent::Reattached {
            pending: vec![pending("p-9"), pending("p-10")],
            questions: None,
        }
    );
    assert!(link.is_connected());
}

#[tokio::test]
async fn shutdown_while_reconnecting_stops_for_good() {
    let (mut server, link, mut events, conn) = started().await;
    server.stop_listening().await;
    drop(conn);
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    // The link is now retrying against a closed port within a 30 s window.
    tokio::time::timeout(WAIT, link.shutdown())
        .await
        .expect("shutdown returns promptly");
    // No Lost, no Reattached: the receiver just ends.
    expect_end(&mut events).await;
    assert!(!link.is_connected());
}

/// Drops `conn` and plays agentctl's side of the re-attach that follows: checks the
/// attach names `after_seq`, answers it, replays `replay` (sequence, event) behind the
/// answer and answers the pending list with `pending_ids`.
async fn reattach_with_replay(
    server: &mut TestServer,
    events: &mut Events,
    conn: Conn,
    after_seq: Option<u64>,
    replay: &[(u64, AgentEvent)],
    pending_ids: &[&str],
) -> Conn {
    let mut conn = server.redialed(events, conn).await;
    answer_attach_after(&mut conn, after_seq, replay, pending_ids).await;
    conn
}

/// Answers an `agent.session.attach` that must carry `after_seq`, replays `replay`
/// behind its answer, then answers the pending list that must follow.
async fn answer_attach_after(
    conn: &mut Conn,
    after_seq: Option<u64>,
    replay: &[(u64, AgentEvent)],
    pending_ids: &[&str],
) {
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    let mut expected = json!({"session_id": SESSION});
    if let Some(after) = after_seq {
        expected["after_seq"] = json!(after);
    }
    assert_eq!(
        attach.payload, expected,
        "the attach names the last delivered event"
    );
    conn.reply(&attach, &attached(Vec::new())).await;
    conn.events(replay).await;
    answer_lists(conn, "the list", pending_ids).await;
}

#[tokio::test]
async fn a_reattach_asks_for_what_followed_the_last_delivered_event_and_drops_replays() {
    let (mut server, _link, mut events, mut conn) = started().await;
    for n in 1..=3 {
        conn.event(n, &update(n)).await;
        assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(n)));
    }
    // agentctl replays from further back than asked: 2 and 3 are not delivered again.
    let replay = updates(2..=5);
    let mut conn =
        reattach_with_replay(&mut server, &mut events, conn, Some(3), &replay, &["p-1"]).await;
    let mut expected = agent_updates(4..=5);
    expected.push(reattached(&["p-1"]));
    next_events(&mut events, expected).await;
    // A live duplicate is dropped as well; the next new event comes through.
    conn.events(&updates(5..=6)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(6)));
    // The next drop asks from the newest event delivered.
    let _conn = reattach_with_replay(&mut server, &mut events, conn, Some(6), &[], &[]).await;
    assert_eq!(next_event(&mut events).await, reattached(&[]));
}

#[tokio::test]
async fn an_event_swallowed_by_a_dying_stream_arrives_once_after_the_reattach() {
    let (mut server, _link, mut events, mut conn) = started().await;
    conn.event(1, &update(1)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(1)));
    // agentctl handed the settlement (seq 2) to this stream, which died before it
    // arrived; it is replayed after the answer to an attach with after_seq 1.
    let settled = AgentEvent::ElicitationSettled {
        pending_id: "p-1".into(),
        outcome: kandev_agent_stream::SettleOutcome::Answered,
        response: json!({"action": "accept"}),
        answer: None,
        answered_by: None,
    };
    let done = AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    };
    let replay = [(2, settled.clone()), (3, done.clone())];
    let _conn = reattach_with_replay(&mut server, &mut events, conn, Some(1), &replay, &[]).await;
    let expected = [
        LinkEvent::Agent(settled),
        LinkEvent::Agent(done),
        reattached(&[]),
    ];
    next_events(&mut events, expected).await;
}

#[tokio::test]
async fn resume_attaches_a_running_session_after_the_given_sequence() {
    let mut server = TestServer::start().await;
    let executor = server.executor(TOKEN);
    // The server side is returned, so the stream stays open for the rest of the test.
    let (resumed, _conn) = tokio::join!(
        AgentLink::resume_with(&executor, SESSION, Some(7), quick()),
        async {
            let mut conn = server.next_conn().await;
            answer_attach_after(&mut conn, Some(7), &updates(7..=8), &["p-1"]).await;
            conn
        }
    );
    let (link, mut events) = resumed.expect("resumed");
    let expected = [LinkEvent::Agent(update(8)), reattached(&["p-1"])];
    next_events(&mut events, expected).await;
    assert!(link.is_connected());
}

#[tokio::test]
async fn a_resume_agentctl_refuses_is_unreachable() {
    let mut server = TestServer::start().await;
    let executor = server.executor(TOKEN);
    let (resumed, ()) = tokio::join!(
        AgentLink::resume_with(&executor, SESSION, None, quick()),
        async {
            let mut conn = server.next_conn().await;
            let attach = conn.recv().await;
            assert_eq!(attach.payload, json!({"session_id": SESSION}));
            conn.refuse(&attach, ErrorCode::NotFound, "no session `s-1`")
                .await;
        }
    );
    match resumed {
        Err(LinkError::Unreachable(reason)) => {
            assert!(reason.contains("no session"), "{reason}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
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

#[tokio::test]
async fn reattached_carries_the_held_calls_and_events_newer_than_the_elicitation_snapshot_follow_it()
 {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &attached(Vec::new())).await;
    conn.event(1, &update(1)).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.reply(&list, &json!({ "pending": [] })).await;
    answer_questions_list(&mut conn, &[(2, update(2))], &["call-1"]).await;
    let with_the_call = LinkEvent::Reattached {
        pending: Vec::new(),
        questions: Some(vec![question("call-1")]),
    };
    // The update newer than the elicitation snapshot follows the `Reattached`: it must
    // not be reconciled against it.
    let expected = [
        LinkEvent::Agent(update(1)),
        with_the_call,
        LinkEvent::Agent(update(2)),
    ];
    next_events(&mut events, expected).await;
    assert!(link.is_connected());
}
