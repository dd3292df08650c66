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
//! - `load K TAG`: K concurrent elicitations of a one-text-question form whose message
//!   is `TAG/k`; reports `{"kind": "sent", "tag": "TAG/k", "sent_ns"}` for each and
//!   `{"kind": "recv", "tag", "recv_ns" (wall clock, when the line was read), "answer"}`
//!   for every response received — also a second one for the same request, which is how
//!   doubles are counted.
//!
//! A response to an unknown id is reported as `{"kind": "stray", "id"}`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// The spec's two-question bridge form (AskUserQuestion as claude-agent-acp 0.65.0 sends it).
const BRIDGE_FORM: &str =
    include_str!("../../crates/elicitation/tests/fixtures/askuserquestion-two-questions.json");

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
            ["rt", n, tag] => self.round_trips(n.parse().unwrap_or(0), tag).await,
            ["load", k, tag] => self.load(k.parse().unwrap_or(0), tag).await,
            _ => self.report(json!({"kind": "unknown_prompt", "text": text})),
        }
    }

    async fn round_trips(&self, n: usize, tag: &str) {
        let mut form: Value = serde_json::from_str(BRIDGE_FORM).unwrap_or(Value::Null);
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

    async fn load(&self, k: usize, tag: &str) {
        let mut receivers = Vec::with_capacity(k);
        for i in 0..k {
            let label = format!("{tag}/{i}");
            let id = format!("load-{label}");
            self.load_tags
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.clone(), label.clone());
            let params = json!({
                "mode": "form", "sessionId": self.session_id, "message": label,
                "requestedSchema": {"type": "object", "properties": {
                    "answer": {"type": "string", "title": "Answer", "description": "Echo the tag."}
                }}
            });
            let rx = self.elicit(&id, params);
            self.report(json!({"kind": "sent", "tag": label, "sent_ns": wall_ns().to_string()}));
            receivers.push((label, rx));
        }
        for (label, rx) in receivers {
            let Ok((response, recv_ns)) = rx.await else {
                return;
            };
            self.report(
                json!({"kind": "recv", "tag": label, "recv_ns": recv_ns.to_string(),
                "answer": response["result"]["content"]["answer"].clone(), "double": false}),
            );
        }
    }
}

/// Runs the agent until stdin closes.
pub async fn run() -> std::process::ExitCode {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err()
                || stdout.write_all(b"\n").await.is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let (report_tx, mut report_rx) = mpsc::unbounded_channel::<Value>();
    let report_addr = std::env::var(REPORT_ENV).unwrap_or_default();
    tokio::spawn(async move {
        let Ok(mut socket) = TcpStream::connect(&report_addr).await else {
            eprintln!("kandev-bench agent: cannot reach {REPORT_ENV}={report_addr}");
            return;
        };
        let _ = socket.set_nodelay(true);
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
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(frame) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = frame["method"].as_str().map(str::to_owned);
        let id = frame.get("id").cloned();
        match (method.as_deref(), id) {
            (None, Some(_)) => agent.on_response(frame),
            (Some("initialize"), Some(id)) => agent
                .send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})),
            (Some("session/new"), Some(id)) => agent.send(
                json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": agent.session_id}}),
            ),
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
        let (out, out_rx) = mpsc::unbounded_channel();
        let (report, report_rx) = mpsc::unbounded_channel();
        let agent = Agent {
            out,
            report,
            waiters: Arc::default(),
            answered: Arc::default(),
            load_tags: Arc::default(),
            session_id: "s".into(),
        };
        (agent, out_rx, report_rx)
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
