//! The agent's side of the wire: the mock agent's `MOCK_AGENT_LOG`, one
//! `{"dir": "recv"|"send", "frame": <JSON-RPC message>}` per line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::wait::{DEADLINE, poll, poll_until};

/// One logged frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// `recv` (agent received it) or `send` (agent sent it).
    pub dir: String,
    /// The JSON-RPC message.
    pub frame: Value,
}

impl Frame {
    /// Its `method`, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        self.frame.get("method").and_then(Value::as_str)
    }
}

/// A frame log file (it may not exist yet: the agent creates it on start).
#[derive(Debug, Clone)]
pub struct FrameLog {
    path: PathBuf,
    /// The temp directory holding the log, when the log owns one ([`FrameLog::in_temp_dir`]).
    _dir: Option<Arc<tempfile::TempDir>>,
}

impl FrameLog {
    /// The log at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            _dir: None,
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every complete line so far (a line being written is skipped).
    pub fn frames(&self) -> Vec<Frame> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|entry| Frame {
                dir: entry["dir"].as_str().unwrap_or_default().to_owned(),
                frame: entry["frame"].clone(),
            })
            .collect()
    }

    /// The `elicitation/create` requests the agent sent, in order.
    pub fn elicitation_requests(&self) -> Vec<Value> {
        self.sent_requests("elicitation/create")
    }

    /// The responses the agent received to its `elicitation/create` requests, in
    /// order of arrival: the `result`, or `{"error": …}`.
    pub fn elicitation_responses(&self) -> Vec<Value> {
        let ids: Vec<Value> = self
            .elicitation_requests()
            .into_iter()
            .map(|request| request["id"].clone())
            .collect();
        self.messages("recv")
            .into_iter()
            .filter(|f| f.get("method").is_none() && f.get("id").is_some_and(|id| ids.contains(id)))
            .map(|f| {
                f.get("result")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"error": f.get("error").cloned()}))
            })
            .collect()
    }

    /// The JSON-RPC method names in wire order (responses are skipped).
    pub fn methods(&self) -> Vec<String> {
        self.frames()
            .iter()
            .filter_map(|f| f.method().map(|m| format!("{} {m}", f.dir)))
            .collect()
    }

    /// How many `session/prompt` requests the agent received.
    pub fn prompt_requests(&self) -> Vec<Value> {
        self.received_requests("session/prompt")
    }

    /// The `initialize` request the agent received.
    pub fn initialize(&self) -> Option<Value> {
        self.received_requests("initialize").into_iter().next()
    }

    /// Waits until the agent has received its `n`-th elicitation response (1-based).
    pub async fn wait_for_elicitation_response(&self, n: usize, deadline: Duration) -> Value {
        poll_until(
            &format!(
                "elicitation response #{n} at the agent ({})",
                self.path.display()
            ),
            deadline,
            || async { self.elicitation_responses().get(n - 1).cloned() },
        )
        .await
    }

    /// Waits until the agent has sent its `n`-th `elicitation/create` (1-based).
    pub async fn wait_for_elicitation_request(&self, n: usize, deadline: Duration) -> Value {
        poll_until(
            &format!("elicitation/create #{n} from the agent"),
            deadline,
            || async { self.elicitation_requests().get(n - 1).cloned() },
        )
        .await
    }

    /// The last `lines` frames, compactly, for failure output.
    pub fn tail(&self, lines: usize) -> String {
        let frames = self.frames();
        let start = frames.len().saturating_sub(lines);
        frames[start..]
            .iter()
            .map(|f| {
                let text = f.frame.to_string();
                let cut: String = text.chars().take(400).collect();
                format!("{} {cut}", f.dir)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A fresh, empty log location in a temp directory of its own (removed when the last
    /// clone is dropped), for an agent the test starts itself (its `MOCK_AGENT_LOG`).
    pub fn in_temp_dir() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        Self {
            path: dir.path().join("mock-agent.jsonl"),
            _dir: Some(Arc::new(dir)),
        }
    }

    /// The JSON-RPC messages in one direction (`recv` or `send`), in wire order.
    pub fn messages(&self, dir: &str) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| f.dir == dir)
            .map(|f| f.frame)
            .collect()
    }

    /// The requests with `method` the agent received (client → agent), in order.
    pub fn received_requests(&self, method: &str) -> Vec<Value> {
        self.requests("recv", method)
    }

    /// The requests with `method` the agent sent (agent → client), in order.
    pub fn sent_requests(&self, method: &str) -> Vec<Value> {
        self.requests("send", method)
    }

    fn requests(&self, dir: &str, method: &str) -> Vec<Value> {
        self.messages(dir)
            .into_iter()
            .filter(|f| f["method"] == method && f.get("id").is_some())
            .collect()
    }

    /// The responses the agent received to its request `id`.
    pub fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.messages("recv")
            .into_iter()
            .filter(|f| f.get("method").is_none() && f.get("id") == Some(id))
            .collect()
    }

    /// Waits for the first request with `method` the agent received; returns it.
    ///
    /// # Panics
    /// When [`DEADLINE`] passes first.
    pub async fn wait_for_received(&self, method: &str) -> Value {
        poll_until(
            &format!("{method} at the agent ({})", self.path.display()),
            DEADLINE,
            || async { self.received_requests(method).into_iter().next() },
        )
        .await
    }

    /// Waits until the agent has received at least `n` elicitation responses and returns
    /// them all, in order of arrival.
    pub async fn wait_for_elicitation_responses(&self, n: usize, deadline: Duration) -> Vec<Value> {
        poll_until(
            &format!("{n} elicitation response(s) at the agent"),
            deadline,
            || async {
                let responses = self.elicitation_responses();
                (responses.len() >= n).then_some(responses)
            },
        )
        .await
    }

    /// Polls until `ready` holds for the log.
    ///
    /// # Panics
    /// When [`DEADLINE`] passes first, naming `what` and showing the log's tail.
    pub async fn wait_until(&self, what: &str, ready: impl Fn(&FrameLog) -> bool) {
        if poll(DEADLINE, || async { ready(self).then_some(()) })
            .await
            .is_none()
        {
            panic!(
                "the frame log never showed {what}; its tail:\n{}",
                self.tail(40)
            );
        }
    }

    /// Waits for the agent's `n`-th (1-based) `elicitation/create` and its response;
    /// returns `(request, the response's result)`.
    ///
    /// # Panics
    /// When the deadline passes first, or the agent received more than one response to it.
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

    /// The responses the agent sent to the request `id` it received (its answer to a
    /// `session/prompt`).
    pub fn answers_to(&self, id: &Value) -> Vec<Value> {
        self.messages("send")
            .into_iter()
            .filter(|f| f.get("method").is_none() && f.get("id") == Some(id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_elicitation_requests_with_their_responses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("frames.jsonl");
        let lines = [
            r#"{"dir":"recv","frame":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}}"#,
            r#"{"dir":"send","frame":{"jsonrpc":"2.0","id":0,"result":{}}}"#,
            r#"{"dir":"send","frame":{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{}}}"#,
            r#"{"dir":"recv","frame":{"jsonrpc":"2.0","id":"e1","result":{"action":"decline"}}}"#,
            r#"{"dir":"recv","frame":{"jsonrpc"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let log = FrameLog::new(&path);
        assert_eq!(log.elicitation_requests().len(), 1);
        assert_eq!(
            log.elicitation_responses(),
            vec![serde_json::json!({"action": "decline"})]
        );
        assert_eq!(
            log.methods(),
            vec!["recv initialize", "send elicitation/create"]
        );
        assert!(log.initialize().is_some());
    }

    #[tokio::test]
    async fn a_temp_dir_log_finds_requests_and_the_one_answer_to_each() {
        let log = FrameLog::in_temp_dir();
        let lines = [
            r#"{"dir":"recv","frame":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}}"#,
            r#"{"dir":"recv","frame":{"jsonrpc":"2.0","method":"session/cancel","params":{}}}"#,
            r#"{"dir":"send","frame":{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{}}}"#,
            r#"{"dir":"recv","frame":{"jsonrpc":"2.0","id":"e1","result":{"action":"cancel"}}}"#,
        ];
        std::fs::write(log.path(), lines.join("\n")).expect("write");
        let copy = log.clone();
        drop(log);
        assert!(copy.path().is_file(), "a clone keeps the temp dir");
        assert_eq!(copy.messages("recv").len(), 3);
        assert_eq!(copy.received_requests("initialize").len(), 1);
        assert!(
            copy.received_requests("session/cancel").is_empty(),
            "a notification"
        );
        let initialize = copy.wait_for_received("initialize").await;
        assert_eq!(initialize["id"], 0);
        let (request, result) = copy.elicitation_answer(1).await;
        assert_eq!(copy.sent_requests("elicitation/create"), vec![request]);
        assert_eq!(result, serde_json::json!({"action": "cancel"}));
        copy.wait_until("the cancel", |log| !log.messages("recv").is_empty())
            .await;
    }
}
