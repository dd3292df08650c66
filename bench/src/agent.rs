//! `kandev-bench agent`: a minimal ACP agent (JSON-RPC lines on stdio) that elicits on
//! command and reports, over a loopback TCP connection to the bench (`BENCH_REPORT`),
//! what it sent and what it received. Every latency figure of the stack benches is
//! taken here, on the agent's side, so the agent's own receive is always included.
//!
//! Prompts (the first text block of `session/prompt`):
//! - `rt N TAG`: N sequential elicitations of the spec's two-question bridge form; each
//!   is timed from just before its `elicitation/create` is written to the moment its
//!   response line is parsed (one monotonic clock, one process) and reported as
//!   `{"kind": "rt", "tag", "seq", "rtt_ns", "sent_ns", "recv_ns", "action"}` (the last
//!   two on the wall clock, for the per-hop breakdown).
//! - `rt64 N TAG`: the same with a 64-question form mixing every kind of the vocabulary.
//! - `mcp N TAG`: N sequential calls of the `ask_user_question_kandev` tool on the MCP
//!   server `session/new` named `kandev` (streamable HTTP; the agent advertises
//!   `mcpCapabilities.http`), one question each, context `TAG/seq`, timed and reported like
//!   `rt` (`action` is `accept` when the tool answered).
//! - `load K TAG`: K concurrent elicitations of a one-text-question form whose message
//!   is `TAG/k`; reports `{"kind": "sent", "tag": "TAG/k", "sent_ns"}` for each and
//!   `{"kind": "recv", "tag", "recv_ns" (wall clock, when the line was read), "answer"}`
//!   for every response received — also a second one for the same request, which is how
//!   doubles are counted.
//!
//! - `serve TAG [PHASE]`: the sweep's pre-started session, whose schedules start `PHASE`
//!   (a fraction, 0 when absent) of an interval late. Reports `{"kind": "ready", "tag"}`,
//!   then takes commands from the bench over the report connection: `{"go": {"rate",
//!   "n", "round"}}` opens `n` elicitations of the load form (messages `TAG/round/i`)
//!   `rate` per second on a fixed schedule, whether or not earlier ones were answered
//!   (open loop), reporting each as `load` does; `{"stream": {"rate", "n", "round"}}`
//!   streams `n` 40-character `agent_message_chunk`s `rate` per second in the background
//!   (the last one carries `END:TAG/round`) and then reports `{"kind": "streamed", "tag":
//!   "TAG/round", "sent_ns"}` for that last chunk; `{"stop": true}` ends the turn.
//!
//! A response to an unknown id is reported as `{"kind": "stray", "id"}`.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

/// The spec's two-question bridge form (AskUserQuestion as claude-agent-acp 0.65.0 sends it).
const BRIDGE_FORM: &str =
    include_str!("../../crates/elicitation/tests/fixtures/askuserquestion-two-questions.json");

/// A 64-question form mixing every kind of the vocabulary (the mapping's limit).
const SIXTY_FOUR_FORM: &str = include_str!("../fixtures/sixty-four-form.json");

/// Characters in each streamed chunk.
pub const CHUNK_CHARS: usize = 40;

/// The environment variable naming the bench's report address (`127.0.0.1:port`).
pub const REPORT_ENV: &str = "BENCH_REPORT";

/// Wall-clock nanoseconds since the epoch: comparable across the bench's processes on
/// one machine (the load bench's answer-to-agent latency spans two processes).
pub fn wall_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// A response line and when it was read (wall-clock ns): stamped on arrival, so a
/// response that overtakes an earlier request's is not timed by the later await.
type Received = (Value, u128);

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Received>>>>;

#[derive(Clone)]
struct Agent {
    out: mpsc::UnboundedSender<String>,
    report: mpsc::UnboundedSender<Value>,
    waiters: Waiters,
    answered: Arc<Mutex<HashSet<String>>>,
    load_tags: Arc<Mutex<HashMap<String, String>>>,
    session_id: String,
    /// Commands from the bench (the `serve` prompt's), one JSON line each.
    commands: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>>,
    /// `mcpServers` as `session/new` gave them.
    mcp_servers: Arc<Mutex<Vec<Value>>>,
}

impl Agent {
    fn send(&self, frame: Value) {
        let _ = self.out.send(frame.to_string());
    }

    fn report(&self, line: Value) {
        let _ = self.report.send(line);
    }

    /// Registers a waiter for request `id`, then writes the request.
    fn elicit(&self, id: &str, params: Value) -> oneshot::Receiver<Received> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned(), tx);
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": params}),
        );
        rx
    }

    /// A response line from the client: hand it to its waiter, or report it as a double
    /// (a second response to an answered request) or a stray.
    fn on_response(&self, frame: Value) {
        let recv_ns = wall_ns();
        let id = match &frame["id"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let waiter = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(waiter) = waiter {
            self.answered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id);
            let _ = waiter.send((frame, recv_ns));
            return;
        }
        let again = self
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id);
        if again {
            let tag = self
                .load_tags
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&id)
                .cloned()
                .unwrap_or_default();
            // A double: counted by the bench from this line.
            self.report(
                json!({"kind": "recv", "tag": tag, "id": id, "recv_ns": recv_ns.to_string(),
                "answer": frame["result"]["content"]["answer"].clone(), "double": true}),
            );
        } else {
            self.report(json!({"kind": "stray", "id": id}));
        }
    }

    async fn run_prompt(&self, text: &str) {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["rt", n, tag] => {
                self.round_trips(BRIDGE_FORM, n.parse().unwrap_or(0), tag)
                    .await
            }
            ["rt64", n, tag] => {
                self.round_trips(SIXTY_FOUR_FORM, n.parse().unwrap_or(0), tag)
                    .await
            }
            ["mcp", n, tag] => self.tool_round_trips(n.parse().unwrap_or(0), tag).await,
            ["load", k, tag] => self.load(k.parse().unwrap_or(0), tag).await,
            ["serve", tag] => self.serve(tag, 0.0).await,
            ["serve", tag, phase] => self.serve(tag, phase.parse().unwrap_or(0.0)).await,
            _ => self.report(json!({"kind": "unknown_prompt", "text": text})),
        }
    }

    async fn round_trips(&self, form: &str, n: usize, tag: &str) {
        let mut form: Value = serde_json::from_str(form).unwrap_or(Value::Null);
        form["sessionId"] = json!(self.session_id);
        for seq in 0..n {
            form["message"] = json!(format!("{tag}/{seq}"));
            let id = format!("rt-{tag}-{seq}");
            let sent_ns = wall_ns();
            let start = Instant::now();
            let rx = self.elicit(&id, form.clone());
            let Ok((response, recv_ns)) = rx.await else {
                return;
            };
            let rtt = start.elapsed();
            self.report(
                json!({"kind": "rt", "tag": tag, "seq": seq, "rtt_ns": rtt.as_nanos().to_string(),
                "sent_ns": sent_ns.to_string(), "recv_ns": recv_ns.to_string(),
                "action": response["result"]["action"].clone()}),
            );
        }
    }

    async fn tool_round_trips(&self, n: usize, tag: &str) {
        let servers = self
            .mcp_servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let service = match crate::mcp::connect(&servers).await {
            Ok(service) => service,
            Err(err) => {
                self.report(json!({"kind": "unknown_prompt", "text": err}));
                return;
            }
        };
        for seq in 0..n {
            let sent_ns = wall_ns();
            let start = Instant::now();
            let answered = crate::mcp::ask(&service, &format!("{tag}/{seq}")).await;
            let rtt = start.elapsed();
            let recv_ns = wall_ns();
            self.report(
                json!({"kind": "rt", "tag": tag, "seq": seq, "rtt_ns": rtt.as_nanos().to_string(),
                "sent_ns": sent_ns.to_string(), "recv_ns": recv_ns.to_string(),
                "action": if answered.is_ok() { json!("accept") } else { json!(answered.err()) }}),
            );
        }
        let _ = service.cancel().await;
    }

    /// Opens one elicitation of the load form with message `label`, reporting it sent.
    fn open(&self, label: &str) -> oneshot::Receiver<Received> {
        let id = format!("load-{label}");
        self.load_tags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), label.to_owned());
        let params = json!({
            "mode": "form", "sessionId": self.session_id, "message": label,
            "requestedSchema": {"type": "object", "properties": {
                "answer": {"type": "string", "title": "Answer", "description": "Echo the tag."}
            }}
        });
        let sent_ns = wall_ns();
        let rx = self.elicit(&id, params);
        self.report(json!({"kind": "sent", "tag": label, "sent_ns": sent_ns.to_string()}));
        rx
    }

    /// Reports the response to `label` once it comes.
    async fn received(&self, label: &str, rx: oneshot::Receiver<Received>) {
        let Ok((response, recv_ns)) = rx.await else {
            return;
        };
        self.report(
            json!({"kind": "recv", "tag": label, "recv_ns": recv_ns.to_string(),
            "answer": response["result"]["content"]["answer"].clone(), "double": false}),
        );
    }

    async fn load(&self, k: usize, tag: &str) {
        let receivers: Vec<_> = (0..k)
            .map(|i| {
                let label = format!("{tag}/{i}");
                let rx = self.open(&label);
                (label, rx)
            })
            .collect();
        for (label, rx) in receivers {
            self.received(&label, rx).await;
        }
    }

    /// Serves the bench's commands; `phase` (a fraction of an interval) shifts every
    /// schedule this session runs.
    async fn serve(&self, tag: &str, phase: f64) {
        let phase = if (0.0..1.0).contains(&phase) {
            phase
        } else {
            0.0
        };
        self.report(json!({"kind": "ready", "tag": tag}));
        let mut commands = self.commands.lock().await;
        while let Some(command) = commands.recv().await {
            if command["stop"] == true {
                return;
            }
            if let Some(stream) = command.get("stream") {
                let (Some(rate), Some(n), Some(round)) = (
                    stream["rate"].as_f64(),
                    stream["n"].as_u64(),
                    stream["round"].as_u64(),
                ) else {
                    self.report(json!({"kind": "unknown_command", "command": command}));
                    continue;
                };
                let agent = self.clone();
                let tag = format!("{tag}/{round}");
                tokio::spawn(async move { agent.stream(&tag, rate, n as usize, phase).await });
                continue;
            }
            let go = &command["go"];
            let (Some(rate), Some(n), Some(round)) =
                (go["rate"].as_f64(), go["n"].as_u64(), go["round"].as_u64())
            else {
                self.report(json!({"kind": "unknown_command", "command": command}));
                continue;
            };
            self.open_at_rate(&format!("{tag}/{round}"), rate, n as usize, phase)
                .await;
        }
    }

    /// Streams `n` chunks of [`CHUNK_CHARS`] characters, `rate` per second from `phase` of
    /// an interval on; the last one carries `END:<tag>`.
    async fn stream(&self, tag: &str, rate: f64, n: usize, phase: f64) {
        if !(rate > 0.0 && rate.is_finite()) || n == 0 {
            self.report(json!({"kind": "unknown_command", "rate": rate, "n": n}));
            return;
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        let start = tokio::time::Instant::now() + interval.mul_f64(phase);
        for i in 0..n {
            tokio::time::sleep_until(start + interval.mul_f64(i as f64)).await;
            let text = if i + 1 == n {
                format!("{:<CHUNK_CHARS$}", format!("END:{tag} "))
            } else {
                format!("{:<CHUNK_CHARS$}", format!("chunk {i} of {tag}, "))
            };
            let sent_ns = wall_ns();
            self.send(
                json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": self.session_id, "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text}}}}),
            );
            if i + 1 == n {
                self.report(
                    json!({"kind": "streamed", "tag": tag, "sent_ns": sent_ns.to_string()}),
                );
            }
        }
    }

    /// Opens `n` elicitations `rate` per second on a fixed schedule (open loop), starting at
    /// `phase` of an interval, so the bench's agents do not all send at the same instant.
    async fn open_at_rate(&self, tag: &str, rate: f64, n: usize, phase: f64) {
        if !(rate > 0.0 && rate.is_finite()) {
            self.report(json!({"kind": "unknown_command", "rate": rate}));
            return;
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        let start = tokio::time::Instant::now() + interval.mul_f64(phase);
        for i in 0..n {
            tokio::time::sleep_until(start + interval.mul_f64(i as f64)).await;
            let label = format!("{tag}/{i}");
            let rx = self.open(&label);
            let agent = self.clone();
            tokio::spawn(async move { agent.received(&label, rx).await });
        }
    }
}

/// stdout as the runtime's own pipe when it is one (under agentctl it always is), else
/// tokio's `Stdout`. `Stdout` hands every write to the blocking pool and back: with a
/// hundred agents streaming 50 lines a second each, those thread hand-offs cost the
/// machine more than agentctl spends on the lines, and the load generator must not.
fn stdout_writer() -> Box<dyn AsyncWrite + Send + Unpin> {
    match pipe_end(std::io::stdout().as_fd(), pipe::Sender::from_owned_fd) {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    }
}

/// stdin read the same way as [`stdout_writer`] writes.
fn stdin_reader() -> Box<dyn AsyncRead + Send + Unpin> {
    match pipe_end(std::io::stdin().as_fd(), pipe::Receiver::from_owned_fd) {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    }
}

/// `fd`, duplicated, as an end of a pipe the runtime drives; `None` when it is no pipe.
fn pipe_end<T>(fd: BorrowedFd<'_>, open: fn(OwnedFd) -> std::io::Result<T>) -> Option<T> {
    fd.try_clone_to_owned().ok().and_then(|fd| open(fd).ok())
}

/// Runs the agent until stdin closes.
pub async fn run() -> std::process::ExitCode {
    // The MCP client's reqwest is built without a provider of its own (the workspace picks
    // ring); without one installed, building its client panics.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stdout = stdout_writer();
        while let Some(line) = out_rx.recv().await {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let (report_tx, mut report_rx) = mpsc::unbounded_channel::<Value>();
    let (command_tx, command_rx) = mpsc::unbounded_channel::<Value>();
    let report_addr = std::env::var(REPORT_ENV).unwrap_or_default();
    tokio::spawn(async move {
        let Ok(socket) = TcpStream::connect(&report_addr).await else {
            eprintln!("kandev-bench agent: cannot reach {REPORT_ENV}={report_addr}");
            return;
        };
        let _ = socket.set_nodelay(true);
        let (read, mut socket) = socket.into_split();
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(command) = serde_json::from_str::<Value>(&line)
                    && command_tx.send(command).is_err()
                {
                    break;
                }
            }
        });
        while let Some(line) = report_rx.recv().await {
            let mut text = line.to_string();
            text.push('\n');
            if socket.write_all(text.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let agent = Agent {
        out: out_tx,
        report: report_tx,
        waiters: Arc::default(),
        answered: Arc::default(),
        load_tags: Arc::default(),
        session_id: format!("bench-{}", std::process::id()),
        commands: Arc::new(tokio::sync::Mutex::new(command_rx)),
        mcp_servers: Arc::default(),
    };
    let mut lines = BufReader::new(stdin_reader()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(frame) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = frame["method"].as_str().map(str::to_owned);
        let id = frame.get("id").cloned();
        match (method.as_deref(), id) {
            (None, Some(_)) => agent.on_response(frame),
            (Some("initialize"), Some(id)) => {
                agent.send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"http": true}},
                "authMethods": []}}))
            }
            (Some("session/new"), Some(id)) => {
                if let Some(servers) = frame["params"]["mcpServers"].as_array() {
                    *agent
                        .mcp_servers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = servers.clone();
                }
                agent.send(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": agent.session_id}}),
                );
            }
            (Some("session/prompt"), Some(id)) => {
                let text = frame["params"]["prompt"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let agent = agent.clone();
                tokio::spawn(async move {
                    agent.run_prompt(&text).await;
                    agent.send(
                        json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
                    );
                });
            }
            (Some(_), Some(id)) => agent.send(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}})),
            _ => {} // notifications (session/cancel): the bench never cancels
        }
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> (
        Agent,
        mpsc::UnboundedReceiver<String>,
        mpsc::UnboundedReceiver<Value>,
    ) {
        let (agent, out_rx, report_rx, _) = commanded_agent();
        (agent, out_rx, report_rx)
    }

    fn commanded_agent() -> (
        Agent,
        mpsc::UnboundedReceiver<String>,
        mpsc::UnboundedReceiver<Value>,
        mpsc::UnboundedSender<Value>,
    ) {
        let (out, out_rx) = mpsc::unbounded_channel();
        let (report, report_rx) = mpsc::unbounded_channel();
        let (commands, command_rx) = mpsc::unbounded_channel();
        let agent = Agent {
            out,
            report,
            waiters: Arc::default(),
            answered: Arc::default(),
            load_tags: Arc::default(),
            session_id: "s".into(),
            commands: Arc::new(tokio::sync::Mutex::new(command_rx)),
            mcp_servers: Arc::default(),
        };
        (agent, out_rx, report_rx, commands)
    }

    #[tokio::test]
    async fn a_serving_agent_opens_at_the_commanded_rate_without_waiting_for_answers() {
        let (agent, mut out, mut reports, commands) = commanded_agent();
        let runner = agent.clone();
        let run = tokio::spawn(async move { runner.run_prompt("serve t").await });
        assert_eq!(
            reports.recv().await.expect("ready"),
            json!({"kind": "ready", "tag": "t"})
        );
        commands
            .send(json!({"go": {"rate": 1000.0, "n": 3, "round": 4}}))
            .expect("go");
        // All three go out although none is answered yet: the schedule is open loop.
        let mut sent = Vec::new();
        for i in 0..3 {
            let frame: Value =
                serde_json::from_str(&out.recv().await.expect("frame")).expect("json");
            assert_eq!(frame["params"]["message"], format!("t/4/{i}"));
            let report = reports.recv().await.expect("sent");
            assert_eq!(
                (&report["kind"], &report["tag"]),
                (&json!("sent"), &frame["params"]["message"])
            );
            sent.push(frame);
        }
        for frame in &sent {
            let label = frame["params"]["message"].clone();
            agent.on_response(json!({"jsonrpc": "2.0", "id": frame["id"],
                "result": {"action": "accept", "content": {"answer": label}}}));
        }
        let mut answered: Vec<String> = Vec::new();
        for _ in 0..3 {
            let report = reports.recv().await.expect("recv");
            assert_eq!(report["kind"], "recv");
            assert_eq!(report["answer"], report["tag"]);
            answered.push(report["tag"].as_str().expect("tag").to_owned());
        }
        answered.sort();
        assert_eq!(answered, ["t/4/0", "t/4/1", "t/4/2"]);
        commands
            .send(json!({"stream": {"rate": 1000.0, "n": 3, "round": 5}}))
            .expect("stream");
        let mut texts = Vec::new();
        for _ in 0..3 {
            let frame: Value =
                serde_json::from_str(&out.recv().await.expect("chunk")).expect("json");
            assert_eq!(frame["method"], "session/update");
            let text = frame["params"]["update"]["content"]["text"]
                .as_str()
                .expect("text");
            assert_eq!(text.chars().count(), CHUNK_CHARS);
            texts.push(text.to_owned());
        }
        assert!(texts[2].starts_with("END:t/5 "), "{texts:?}");
        let streamed = reports.recv().await.expect("streamed");
        assert_eq!(
            (&streamed["kind"], &streamed["tag"]),
            (&json!("streamed"), &json!("t/5"))
        );
        commands.send(json!({"stop": true})).expect("stop");
        run.await.expect("the turn ends on stop");
    }

    #[tokio::test]
    async fn a_response_reaches_its_waiter_once_then_counts_as_a_double_and_unknown_ids_as_strays()
    {
        let (agent, mut out, mut reports) = agent();
        agent
            .load_tags
            .lock()
            .expect("lock")
            .insert("load-x/0".into(), "x/0".into());
        let rx = agent.elicit("load-x/0", json!({"mode": "form"}));
        let sent: Value = serde_json::from_str(&out.recv().await.expect("a frame")).expect("json");
        assert_eq!(sent["method"], "elicitation/create");
        assert_eq!(sent["id"], "load-x/0");

        let response = json!({"jsonrpc": "2.0", "id": "load-x/0",
            "result": {"action": "accept", "content": {"answer": "x/0"}}});
        agent.on_response(response.clone());
        assert_eq!(rx.await.expect("delivered").0, response);
        agent.on_response(response);
        let double = reports.recv().await.expect("report");
        assert_eq!(
            (&double["kind"], &double["tag"], &double["double"]),
            (&json!("recv"), &json!("x/0"), &json!(true))
        );
        agent.on_response(json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        assert_eq!(
            reports.recv().await.expect("report"),
            json!({"kind": "stray", "id": "7"})
        );
    }

    #[tokio::test]
    async fn a_response_is_timed_when_read_even_when_it_overtakes_an_earlier_request() {
        let (agent, _out, _reports) = agent();
        let first = agent.elicit("a", json!({}));
        let second = agent.elicit("b", json!({}));
        agent.on_response(json!({"jsonrpc": "2.0", "id": "b", "result": {}}));
        let between = wall_ns();
        agent.on_response(json!({"jsonrpc": "2.0", "id": "a", "result": {}}));
        let (_, a_ns) = first.await.expect("a");
        let (_, b_ns) = second.await.expect("b");
        assert!(
            b_ns <= between && between <= a_ns,
            "{b_ns} {between} {a_ns}"
        );
    }

    #[tokio::test]
    async fn the_large_round_trip_asks_all_sixty_four_questions() {
        let (agent, mut out, _reports) = agent();
        let runner = agent.clone();
        tokio::spawn(async move { runner.run_prompt("rt64 1 t").await });
        let sent: Value = serde_json::from_str(&out.recv().await.expect("frame")).expect("json");
        let properties = &sent["params"]["requestedSchema"]["properties"];
        assert_eq!(properties.as_object().map(|p| p.len()), Some(64));
        assert_eq!(sent["params"]["message"], "t/0");
    }

    #[tokio::test]
    async fn round_trips_use_the_bridge_form_and_report_each_rtt() {
        let (agent, mut out, mut reports) = agent();
        let runner = agent.clone();
        let run = tokio::spawn(async move { runner.run_prompt("rt 2 t").await });
        for seq in 0..2 {
            let sent: Value =
                serde_json::from_str(&out.recv().await.expect("frame")).expect("json");
            assert_eq!(sent["params"]["message"], format!("t/{seq}"));
            assert_eq!(sent["params"]["sessionId"], "s");
            assert!(sent["params"]["requestedSchema"]["properties"]["question_1"].is_object());
            agent.on_response(
                json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"action": "accept"}}),
            );
            let rt = reports.recv().await.expect("report");
            assert_eq!((&rt["kind"], &rt["seq"]), (&json!("rt"), &json!(seq)));
            assert!(
                rt["rtt_ns"]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .is_some()
            );
        }
        run.await.expect("join");
    }
}
