//! The agent's side of the wire: the mock agent's `MOCK_AGENT_LOG`, one
//! `{"dir": "recv"|"send", "frame": <JSON-RPC message>}` per line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::wait::poll_until;

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
}

impl FrameLog {
    /// The log at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
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
        self.frames()
            .into_iter()
            .filter(|f| f.dir == "send" && f.method() == Some("elicitation/create"))
            .map(|f| f.frame)
            .collect()
    }

    /// The responses the agent received to its `elicitation/create` requests, in
    /// order of arrival: the `result`, or `{"error": …}`.
    pub fn elicitation_responses(&self) -> Vec<Value> {
        let frames = self.frames();
        let ids: Vec<Value> = frames
            .iter()
            .filter(|f| f.dir == "send" && f.method() == Some("elicitation/create"))
            .map(|f| f.frame["id"].clone())
            .collect();
        frames
            .into_iter()
            .filter(|f| f.dir == "recv" && f.method().is_none() && ids.contains(&f.frame["id"]))
            .map(|f| {
                f.frame
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"error": f.frame.get("error").cloned()}))
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
        self.frames()
            .into_iter()
            .filter(|f| f.dir == "recv" && f.method() == Some("session/prompt"))
            .map(|f| f.frame)
            .collect()
    }

    /// The `initialize` request the agent received.
    pub fn initialize(&self) -> Option<Value> {
        self.frames()
            .into_iter()
            .find(|f| f.dir == "recv" && f.method() == Some("initialize"))
            .map(|f| f.frame)
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

    /// The responses the agent sent to the request `id` it received (its answer to a
    /// `session/prompt`).
    pub fn answers_to(&self, id: &Value) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| f.dir == "send" && f.method().is_none() && f.frame["id"] == *id)
            .map(|f| f.frame)
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
}
