//! Test harness: a real `agentctl serve` process, the real `mock-agent`, a real WebSocket.
//!
//! Nothing here sleeps and hopes: every wait is for a frame, a log line or a process exit,
//! with a deadline; conditions that cannot be awaited are polled by [`wait`] alone, and
//! HTTP goes through [`http`].

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod http;
pub mod wait;

pub use wait::{poll, wait_for};

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// How long any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// The token every harness agentctl is started with.
pub const TOKEN: &str = "test-token-7f3a";

/// The agentctl binary under test.
pub fn agentctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentctl"))
}

/// The mock-agent binary, a sibling of agentctl in the target dir.
pub fn mock_agent_bin() -> PathBuf {
    let path = agentctl_bin().with_file_name("mock-agent");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` (or `cargo build -p kandev-mock-agent`) first",
        path.display()
    );
    path
}

/// Extra scenarios of these tests.
pub fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// A running `agentctl serve`, killed on drop.
pub struct AgentCtl {
    child: Child,
    /// The bound address.
    pub addr: String,
    /// Where its stderr goes (for failure messages).
    pub stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl AgentCtl {
    /// Starts agentctl on 127.0.0.1:0 with the harness token and `env`.
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with(env, &[])
    }

    /// Same, with extra `serve` arguments.
    pub fn start_with(env: &[(&str, &str)], args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("agentctl.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut command = Command::new(agentctl_bin());
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("AGENTCTL_TOKEN", TOKEN)
            .env("RUST_LOG", "kandev_agentctl=debug,info")
            .env("NO_COLOR", "1")
            // Held open by `child` until `close_stdin` (see `--exit-on-stdin-eof`).
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn agentctl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so agentctl never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "agentctl printed no AGENTCTL_LISTENING line; stderr:\n{}",
                read(&stderr_path)
            )
        });
        let addr = line
            .strip_prefix("AGENTCTL_LISTENING ")
            .unwrap_or_else(|| panic!("unexpected first stdout line {line:?}"))
            .to_owned();
        Self {
            child,
            addr,
            stderr_path,
            _dir: dir,
        }
    }

    /// Closes agentctl's stdin, as the death of the backend that started it would.
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// The stream URL.
    pub fn url(&self) -> String {
        format!("ws://{}/api/v1/agent/stream", self.addr)
    }

    /// Opens an authenticated stream.
    pub async fn connect(&self) -> Stream {
        Stream::connect(&self.url(), Some(TOKEN))
            .await
            .expect("stream connects")
    }

    /// agentctl's stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }

    /// Polls agentctl's stderr (every 20 ms, up to the deadline) until it contains `needle`.
    pub async fn wait_stderr(&self, needle: &str) {
        if poll(|| async { self.stderr().contains(needle).then_some(()) })
            .await
            .is_none()
        {
            panic!(
                "agentctl never logged {needle:?}; stderr:\n{}",
                self.stderr()
            );
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit; returns its exit code.
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let child = &mut self.child;
        let exited = poll(|| {
            let status = child.try_wait().expect("try_wait");
            async move { status }
        })
        .await;
        match exited {
            Some(status) => status.code(),
            None => panic!("agentctl did not exit; stderr:\n{}", self.stderr()),
        }
    }
}

impl Drop for AgentCtl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// One frame from agentctl.
pub type Frame = Value;

/// A WebSocket agent stream with request/response correlation and an event queue.
pub struct Stream {
    out: mpsc::UnboundedSender<Message>,
    waiters: Arc<Mutex<HashMap<String, oneshot::Sender<Frame>>>>,
    events: mpsc::UnboundedReceiver<Frame>,
    /// Every event taken from the queue so far, in order.
    pub seen: Vec<Frame>,
    parked: VecDeque<Frame>,
    closed: Arc<Mutex<Option<String>>>,
    next_id: AtomicU64,
    arrivals: Arc<Mutex<Vec<String>>>,
}

impl Stream {
    /// Connects with `token` as bearer (none: no header).
    pub async fn connect(
        url: &str,
        token: Option<&str>,
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        let mut request = url.into_client_request()?;
        if let Some(token) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}").parse().expect("header value"),
            );
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        let (mut sink, mut source) = socket.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Arc<Mutex<HashMap<String, oneshot::Sender<Frame>>>> = Arc::default();
        let closed: Arc<Mutex<Option<String>>> = Arc::default();
        let arrivals: Arc<Mutex<Vec<String>>> = Arc::default();
        let (events_tx, events) = mpsc::unbounded_channel();
        {
            let waiters = Arc::clone(&waiters);
            let closed = Arc::clone(&closed);
            let arrivals = Arc::clone(&arrivals);
            tokio::spawn(async move {
                while let Some(message) = source.next().await {
                    match message {
                        Ok(Message::Text(text)) => {
                            let frame: Frame =
                                serde_json::from_str(&text).expect("agentctl sends JSON");
                            let id = frame["id"].as_str().unwrap_or("").to_owned();
                            let kind = frame["type"].as_str().unwrap_or("");
                            arrivals.lock().expect("lock").push(match kind {
                                "notification" => format!(
                                    "event {}",
                                    frame["payload"]["event"].as_str().unwrap_or("")
                                ),
                                other => format!("{other} {id}"),
                            });
                            if kind == "notification" {
                                let _ = events_tx.send(frame);
                            } else if let Some(waiter) = waiters.lock().expect("lock").remove(&id) {
                                let _ = waiter.send(frame);
                            } else {
                                // An uncorrelated error (undecodable frame): surface it as an event.
                                let _ = events_tx.send(frame);
                            }
                        }
                        Ok(Message::Close(frame)) => {
                            *closed.lock().expect("lock") =
                                Some(frame.map(|f| f.reason.to_string()).unwrap_or_default());
                            break;
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                closed.lock().expect("lock").get_or_insert_with(String::new);
            });
        }
        Ok(Self {
            out,
            waiters,
            events,
            seen: Vec::new(),
            parked: VecDeque::new(),
            closed,
            next_id: AtomicU64::new(1),
            arrivals,
        })
    }

    /// Every frame read so far, in arrival order: `event <name>` for a notification,
    /// `<type> <id>` for a response or an error.
    pub fn arrivals(&self) -> Vec<String> {
        self.arrivals.lock().expect("lock").clone()
    }

    /// Sends a raw text frame.
    pub fn send_text(&self, text: &str) {
        self.out
            .send(Message::Text(text.into()))
            .expect("writer alive");
    }

    /// Sends a request and waits for its `response` or `error` frame.
    pub async fn request(&self, action: &str, payload: Value) -> Frame {
        let id = format!("r{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().expect("lock").insert(id.clone(), tx);
        let frame = json!({"id": id, "type": "request", "action": action, "payload": payload});
        self.send_text(&frame.to_string());
        tokio::time::timeout(DEADLINE, rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {action} within {DEADLINE:?}"))
            .expect("stream closed before answering")
    }

    /// A request that must succeed; returns its payload.
    pub async fn ok(&self, action: &str, payload: Value) -> Value {
        let frame = self.request(action, payload).await;
        assert_eq!(frame["type"], "response", "{action} failed: {frame}");
        assert_eq!(frame["action"], action);
        frame["payload"].clone()
    }

    /// A request that must fail; returns its error payload `{code, message}`.
    pub async fn err(&self, action: &str, payload: Value) -> Value {
        let frame = self.request(action, payload).await;
        assert_eq!(
            frame["type"], "error",
            "{action} unexpectedly succeeded: {frame}"
        );
        frame["payload"].clone()
    }

    /// Waits for the next event (in stream order) whose `payload.event` is `name` and that
    /// satisfies `matches`; other events stay queued for later waits. Returns the payload.
    pub async fn event_where(&mut self, name: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self
            .parked
            .iter()
            .position(|f| f["payload"]["event"] == name && matches(&f["payload"]))
        {
            let frame = self.parked.remove(pos).expect("present");
            self.seen.push(frame.clone());
            return frame["payload"].clone();
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => panic!(
                    "stream closed while waiting for {name}; parked: {:?}",
                    self.parked
                ),
                Err(_) => panic!(
                    "no {name} event within {DEADLINE:?}; parked: {:#?}",
                    self.parked
                ),
            };
            if frame["payload"]["event"] == name && matches(&frame["payload"]) {
                self.seen.push(frame.clone());
                return frame["payload"].clone();
            }
            self.parked.push_back(frame);
        }
    }

    /// Waits for the next uncorrelated `error` frame (an undecodable request); returns it.
    pub async fn error_frame(&mut self) -> Frame {
        if let Some(pos) = self.parked.iter().position(|f| f["type"] == "error") {
            return self.parked.remove(pos).expect("present");
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) if frame["type"] == "error" => return frame,
                Ok(Some(frame)) => self.parked.push_back(frame),
                Ok(None) => panic!("stream closed while waiting for an error frame"),
                Err(_) => panic!("no error frame within {DEADLINE:?}"),
            }
        }
    }

    /// Waits for the next `name` event.
    pub async fn event(&mut self, name: &str) -> Value {
        self.event_where(name, |_| true).await
    }

    /// Collects every event that arrives until `name` arrives (inclusive), in order.
    pub async fn events_until(&mut self, name: &str) -> Vec<Frame> {
        let mut got: Vec<Frame> = self.parked.drain(..).collect();
        if let Some(pos) = got.iter().position(|f| f["payload"]["event"] == name) {
            let rest = got.split_off(pos + 1);
            self.parked.extend(rest);
            self.seen.extend(got.iter().cloned());
            return got;
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => panic!("stream closed while waiting for {name}; got {got:#?}"),
                Err(_) => panic!("no {name} event within {DEADLINE:?}; got {got:#?}"),
            };
            let done = frame["payload"]["event"] == name;
            got.push(frame);
            if done {
                self.seen.extend(got.iter().cloned());
                return got;
            }
        }
    }

    /// Every event received and not yet taken, without waiting.
    pub fn drain_now(&mut self) -> Vec<Frame> {
        let mut got: Vec<Frame> = self.parked.drain(..).collect();
        while let Ok(frame) = self.events.try_recv() {
            got.push(frame);
        }
        got
    }

    /// Waits until agentctl closes the stream; returns the close reason.
    pub async fn closed(&self) -> String {
        wait_for("the stream to close", || async {
            self.closed.lock().expect("lock").clone()
        })
        .await
    }

    /// Closes the WebSocket from this side.
    pub fn close(self) {
        let _ = self.out.send(Message::Close(None));
    }
}

/// The `MOCK_AGENT_LOG` file of one agent.
pub struct MockLog {
    /// The log's path.
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl MockLog {
    /// A fresh, empty log location.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        Self {
            path: dir.path().join("mock-agent.jsonl"),
            _dir: dir,
        }
    }

    /// Every entry so far: `{"dir": "recv"|"send", "frame": {...}}`.
    pub fn entries(&self) -> Vec<Value> {
        read(&self.path)
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).expect("mock log line is JSON"))
            .collect()
    }

    /// Frames in one direction.
    pub fn frames(&self, dir: &str) -> Vec<Value> {
        self.entries()
            .into_iter()
            .filter(|e| e["dir"] == dir)
            .map(|e| e["frame"].clone())
            .collect()
    }

    /// Requests the agent received with `method` (client → agent).
    pub fn received_requests(&self, method: &str) -> Vec<Value> {
        self.frames("recv")
            .into_iter()
            .filter(|f| f["method"] == method && f.get("id").is_some())
            .collect()
    }

    /// Requests the agent sent with `method` (agent → client).
    pub fn sent_requests(&self, method: &str) -> Vec<Value> {
        self.frames("send")
            .into_iter()
            .filter(|f| f["method"] == method && f.get("id").is_some())
            .collect()
    }

    /// Responses the agent received for its request `id`.
    pub fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.frames("recv")
            .into_iter()
            .filter(|f| f.get("method").is_none() && f.get("id") == Some(id))
            .collect()
    }

    /// The ordered JSON-RPC method names on the wire (both directions), responses skipped.
    pub fn method_sequence(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter_map(|e| {
                e["frame"]["method"]
                    .as_str()
                    .map(|m| format!("{}:{m}", e["dir"].as_str().unwrap_or("")))
            })
            .collect()
    }

    /// Polls (every 20 ms, up to the deadline) until `ready` holds for the entries.
    pub async fn wait_until(&self, what: &str, ready: impl Fn(&MockLog) -> bool) {
        if poll(|| async { ready(self).then_some(()) }).await.is_none() {
            panic!("mock log never showed {what}; log:\n{}", read(&self.path));
        }
    }

    /// Waits for the agent's `n`-th (1-based) `elicitation/create` and its single response;
    /// returns `(request, response result)`.
    pub async fn elicitation_answer(&self, n: usize) -> (Value, Value) {
        self.wait_until("an elicitation response", |log| {
            log.sent_requests("elicitation/create")
                .get(n - 1)
                .is_some_and(|req| !log.responses_to(&req["id"]).is_empty())
        })
        .await;
        let request = self.sent_requests("elicitation/create")[n - 1].clone();
        let responses = self.responses_to(&request["id"]);
        assert_eq!(
            responses.len(),
            1,
            "exactly one response per elicitation/create: {responses:?}"
        );
        (request, responses[0]["result"].clone())
    }
}

/// An `agent.session.start` payload for the mock agent playing `scenario`.
pub fn start_payload(session_id: &str, scenario: &str, elicitation: bool, log: &MockLog) -> Value {
    start_payload_for("mock", session_id, scenario, elicitation, log)
}

/// Same, with an explicit agent id (client capabilities are scoped by it).
pub fn start_payload_for(
    agent_id: &str,
    session_id: &str,
    scenario: &str,
    elicitation: bool,
    log: &MockLog,
) -> Value {
    start_payload_in(
        agent_id,
        session_id,
        scenario,
        &scenario_dir(),
        elicitation,
        log,
    )
}

/// Same, loading extra scenarios from `dir`.
pub fn start_payload_in(
    agent_id: &str,
    session_id: &str,
    scenario: &str,
    dir: &Path,
    elicitation: bool,
    log: &MockLog,
) -> Value {
    json!({
        "session_id": session_id,
        "agent": {
            "id": agent_id,
            "command": [
                mock_agent_bin(), "--scenario", scenario,
                "--scenario-dir", dir,
            ],
            "env": {"MOCK_AGENT_LOG": log.path, "RUST_LOG": "warn"},
        },
        "flags": {"features.acpElicitation": elicitation},
    })
}

/// A started session: agentctl, the stream bound to it, the mock log.
pub struct Harness {
    /// agentctl.
    pub agentctl: AgentCtl,
    /// The stream that started the session.
    pub stream: Stream,
    /// The mock agent's wire log.
    pub log: MockLog,
    /// The `agent.session.start` response payload.
    pub started: Value,
}

impl Harness {
    /// agentctl + a session playing `scenario` with the flag set to `elicitation`.
    pub async fn start(scenario: &str, elicitation: bool) -> Self {
        Self::start_env(scenario, elicitation, &[]).await
    }

    /// Same, with agentctl's environment extended by `env`.
    pub async fn start_env(scenario: &str, elicitation: bool, env: &[(&str, &str)]) -> Self {
        let agentctl = AgentCtl::start(env);
        let stream = agentctl.connect().await;
        let log = MockLog::new();
        let started = stream
            .ok(
                "agent.session.start",
                start_payload("s-1", scenario, elicitation, &log),
            )
            .await;
        Self {
            agentctl,
            stream,
            log,
            started,
        }
    }

    /// Sends `agent.prompt` and checks it was accepted at once.
    pub async fn prompt(&self, text: &str) {
        let accepted = self.stream.ok("agent.prompt", json!({"text": text})).await;
        assert_eq!(accepted, json!({"accepted": true}));
    }

    /// Prompts and waits for the first `elicitation_requested`.
    pub async fn prompt_until_elicitation(&mut self, text: &str) -> Value {
        self.prompt(text).await;
        self.stream.event("elicitation_requested").await
    }

    /// `agent.elicitations.respond` with `answers`; returns the whole answer frame.
    pub async fn respond(&self, pending_id: &str, answers: Value, rejected: bool) -> Frame {
        self.stream
            .request(
                "agent.elicitations.respond",
                json!({"pending_id": pending_id, "answers": answers, "rejected": rejected, "reject_reason": ""}),
            )
            .await
    }
}

/// The `pending_id` of an `elicitation_requested` payload.
pub fn pending_id(requested: &Value) -> String {
    requested["pending_id"]
        .as_str()
        .expect("pending_id")
        .to_owned()
}

/// The text of every `agent_message_chunk` in `events`.
pub fn message_texts(events: &[Frame]) -> Vec<String> {
    events
        .iter()
        .filter(|f| f["payload"]["event"] == "session_update")
        .filter(|f| f["payload"]["update"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| {
            f["payload"]["update"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}
