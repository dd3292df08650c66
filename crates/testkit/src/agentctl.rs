//! agentctl on its own, the harness of agentctl's integration tests
//! (`crates/agentctl/tests`): a real `agentctl serve` ([`AgentCtl`]), its agent stream as
//! the backend speaks it ([`Stream`]), and a session of the real mock agent
//! ([`Harness`], [`start_payload`]) whose wire is read from its [`FrameLog`].
//!
//! Nothing here sleeps and hopes: every wait is for a frame, a log line or a process exit,
//! with [`DEADLINE`]; conditions that cannot be awaited are polled by [`poll`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::bins;
use crate::frames::FrameLog;
use crate::wait::{DEADLINE, poll, poll_until};

/// The token every [`AgentCtl`] is started with (`AGENTCTL_TOKEN`).
pub const TOKEN: &str = "test-token-7f3a";

/// `crates/agentctl/tests/scenarios`: the extra mock-agent scenarios of agentctl's tests
/// (`--scenario-dir` of every [`start_payload`]).
pub fn scenario_dir() -> PathBuf {
    bins::repo_root()
        .join("crates")
        .join("agentctl")
        .join("tests")
        .join("scenarios")
}

/// A running `agentctl serve` on `127.0.0.1:0`, killed on drop.
#[derive(Debug)]
pub struct AgentCtl {
    child: Child,
    /// The bound address (`host:port`).
    pub addr: String,
    /// Where its stderr goes (for failure messages).
    pub stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl AgentCtl {
    /// Starts agentctl with [`TOKEN`] and `env` added to its environment.
    ///
    /// # Panics
    /// When it does not print its `AGENTCTL_LISTENING` line within [`DEADLINE`].
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with(env, &[])
    }

    /// Like [`AgentCtl::start`], with extra `serve` arguments.
    ///
    /// # Panics
    /// When it does not print its `AGENTCTL_LISTENING` line within [`DEADLINE`].
    pub fn start_with(env: &[(&str, &str)], args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("agentctl.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut command = Command::new(bins::agentctl());
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

    /// The agent stream's URL.
    pub fn url(&self) -> String {
        format!("ws://{}/api/v1/agent/stream", self.addr)
    }

    /// Opens a stream authenticated with [`TOKEN`].
    pub async fn connect(&self) -> Stream {
        Stream::connect(&self.url(), Some(TOKEN))
            .await
            .expect("stream connects")
    }

    /// Opens a stream and attaches it to session `s-1`, asking for a replay of the events
    /// after `after_seq` when given; returns the stream and the attach payload
    /// (`{"pending": [...]}`).
    pub async fn attach(&self, after_seq: Option<u64>) -> (Stream, Value) {
        let stream = self.connect().await;
        let mut payload = json!({"session_id": "s-1"});
        if let Some(after) = after_seq {
            payload["after_seq"] = json!(after);
        }
        let attached = stream.ok("agent.session.attach", payload).await;
        (stream, attached)
    }

    /// agentctl's stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }

    /// Polls agentctl's stderr until it contains `needle`.
    ///
    /// # Panics
    /// When [`DEADLINE`] passes first, showing the stderr.
    pub async fn wait_stderr(&self, needle: &str) {
        if poll(DEADLINE, || async {
            self.stderr().contains(needle).then_some(())
        })
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
    ///
    /// # Panics
    /// When kill(1) fails.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM {}", self.pid());
    }

    /// Waits for the process to exit; returns its exit code (`None`: killed by a signal).
    ///
    /// # Panics
    /// When it is still running after [`DEADLINE`].
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let child = &mut self.child;
        let exited = poll(DEADLINE, || {
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

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// An agent stream (the WebSocket the backend speaks to agentctl) with request/response
/// correlation and a queue of the events (`notification` frames).
#[derive(Debug)]
pub struct Stream {
    out: mpsc::UnboundedSender<Message>,
    waiters: Waiters,
    events: mpsc::UnboundedReceiver<Value>,
    /// Every event taken from the queue so far, in order.
    pub seen: Vec<Value>,
    parked: VecDeque<Value>,
    closed: Arc<Mutex<Option<String>>>,
    next_id: AtomicU64,
    arrivals: Arc<Mutex<Vec<String>>>,
}

impl Stream {
    /// Connects to `url` with `token` as bearer (none: no `Authorization` header).
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
        let waiters: Waiters = Arc::default();
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
                            let frame: Value =
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
    ///
    /// # Panics
    /// When no answer comes within [`DEADLINE`] or the stream closes first.
    pub async fn request(&self, action: &str, payload: Value) -> Value {
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
    ///
    /// # Panics
    /// When the answer is not a `response` to `action`.
    pub async fn ok(&self, action: &str, payload: Value) -> Value {
        let frame = self.request(action, payload).await;
        assert_eq!(frame["type"], "response", "{action} failed: {frame}");
        assert_eq!(frame["action"], action);
        frame["payload"].clone()
    }

    /// A request that must fail; returns its error payload `{code, message}`.
    ///
    /// # Panics
    /// When the answer is not an `error`.
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
    ///
    /// # Panics
    /// When none comes within [`DEADLINE`] or the stream closes first.
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
    ///
    /// # Panics
    /// When none comes within [`DEADLINE`] or the stream closes first.
    pub async fn error_frame(&mut self) -> Value {
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

    /// Waits for the next `name` event; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event_where`].
    pub async fn event(&mut self, name: &str) -> Value {
        self.event_where(name, |_| true).await
    }

    /// Collects every event (whole frames) that arrives until `name` arrives (inclusive),
    /// in order.
    ///
    /// # Panics
    /// When `name` does not come within [`DEADLINE`] or the stream closes first.
    pub async fn events_until(&mut self, name: &str) -> Vec<Value> {
        let mut got: Vec<Value> = self.parked.drain(..).collect();
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

    /// Waits for the next `turn_completed` and asserts its `stop_reason`; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event`], or when the stop reason differs.
    pub async fn turn_ends(&mut self, stop_reason: &str) -> Value {
        let turn = self.event("turn_completed").await;
        assert_eq!(turn["stop_reason"], stop_reason, "{turn}");
        turn
    }

    /// Waits for the next `elicitation_settled` and asserts it settles `pending_id` with
    /// `outcome`; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event`], or when it settles another pending or another way.
    pub async fn settled(&mut self, pending_id: &str, outcome: &str) -> Value {
        let settled = self.event("elicitation_settled").await;
        assert_eq!(
            (settled["pending_id"].as_str(), settled["outcome"].as_str()),
            (Some(pending_id), Some(outcome)),
            "{settled}"
        );
        settled
    }

    /// Every event received and not yet taken, without waiting.
    pub fn drain_now(&mut self) -> Vec<Value> {
        let mut got: Vec<Value> = self.parked.drain(..).collect();
        while let Ok(frame) = self.events.try_recv() {
            got.push(frame);
        }
        got
    }

    /// Waits until agentctl closes the stream; returns the close reason.
    ///
    /// # Panics
    /// When it is still open after [`DEADLINE`].
    pub async fn closed(&self) -> String {
        poll_until("the stream to close", DEADLINE, || async {
            self.closed.lock().expect("lock").clone()
        })
        .await
    }

    /// Closes the WebSocket from this side.
    pub fn close(self) {
        let _ = self.out.send(Message::Close(None));
    }
}

/// An `agent.session.start` payload for the mock agent (agent id `mock`) playing
/// `scenario` from [`scenario_dir`], with the elicitation flag set to `elicitation` and its
/// wire logged to `log`.
pub fn start_payload(session_id: &str, scenario: &str, elicitation: bool, log: &FrameLog) -> Value {
    start_payload_in(
        "mock",
        session_id,
        scenario,
        &scenario_dir(),
        elicitation,
        log,
    )
}

/// Like [`start_payload`], with agent id `agent_id` (client capabilities are scoped by it)
/// and extra scenarios loaded from `dir`.
pub fn start_payload_in(
    agent_id: &str,
    session_id: &str,
    scenario: &str,
    dir: &Path,
    elicitation: bool,
    log: &FrameLog,
) -> Value {
    json!({
        "session_id": session_id,
        "agent": {
            "id": agent_id,
            "command": [
                bins::mock_agent(), "--scenario", scenario,
                "--scenario-dir", dir,
            ],
            "env": {"MOCK_AGENT_LOG": log.path(), "RUST_LOG": "warn"},
        },
        "flags": {"features.acpElicitation": elicitation},
    })
}

/// A started session `s-1`: agentctl, the stream that started it, the mock agent's wire.
#[derive(Debug)]
pub struct Harness {
    /// agentctl.
    pub agentctl: AgentCtl,
    /// The stream that started the session.
    pub stream: Stream,
    /// The mock agent's wire log.
    pub log: FrameLog,
    /// The `agent.session.start` response payload.
    pub started: Value,
}

impl Harness {
    /// agentctl + a session playing `scenario` with the flag set to `elicitation`.
    pub async fn start(scenario: &str, elicitation: bool) -> Self {
        Self::start_env(scenario, elicitation, &[]).await
    }

    /// Like [`Harness::start`], with agentctl's environment extended by `env`.
    pub async fn start_env(scenario: &str, elicitation: bool, env: &[(&str, &str)]) -> Self {
        Self::start_on(AgentCtl::start(env), scenario, elicitation, |_| {}).await
    }

    /// A session on `agentctl` playing `scenario`, its [`start_payload`] changed by `edit`
    /// before it is sent (the agent's command, env, permission policy, MCP servers).
    ///
    /// # Panics
    /// When the start fails.
    pub async fn start_on(
        agentctl: AgentCtl,
        scenario: &str,
        elicitation: bool,
        edit: impl FnOnce(&mut Value),
    ) -> Self {
        let stream = agentctl.connect().await;
        let log = FrameLog::in_temp_dir();
        let mut payload = start_payload("s-1", scenario, elicitation, &log);
        edit(&mut payload);
        let started = stream.ok("agent.session.start", payload).await;
        Self {
            agentctl,
            stream,
            log,
            started,
        }
    }

    /// agentctl + the mock agent's `two-identical` scenario (flag on), prompted until both
    /// its elicitations are pending; returns the two `elicitation_requested` payloads.
    pub async fn two_identical() -> (Self, Value, Value) {
        let mut h = Self::start("two-identical", true).await;
        h.prompt("go").await;
        let first = h.stream.event("elicitation_requested").await;
        let second = h.stream.event("elicitation_requested").await;
        (h, first, second)
    }

    /// Sends `agent.prompt` and checks it was accepted at once.
    pub async fn prompt(&self, text: &str) {
        let accepted = self.stream.ok("agent.prompt", json!({"text": text})).await;
        assert_eq!(accepted, json!({"accepted": true}));
    }

    /// Prompts and waits for the first `elicitation_requested`; returns its payload.
    pub async fn prompt_until_elicitation(&mut self, text: &str) -> Value {
        self.prompt(text).await;
        self.stream.event("elicitation_requested").await
    }

    /// Prompts `go` and waits for the first `elicitation_requested`; returns its pending id.
    pub async fn elicit(&mut self) -> String {
        pending_id(&self.prompt_until_elicitation("go").await)
    }

    /// `agent.elicitations.respond` with `answers`; returns the whole answer frame.
    pub async fn respond(&self, pending_id: &str, answers: Value, rejected: bool) -> Value {
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

/// The `answers` of an `agent.elicitations.respond` choosing `option` for `question_0`
/// (the question of the mock agent's single-question scenarios).
pub fn choose(option: &str) -> Value {
    json!([{"question_id": "question_0", "selected_options": [option]}])
}

/// The text of every `agent_message_chunk` in `events` (whole frames).
pub fn message_texts(events: &[Value]) -> Vec<String> {
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
