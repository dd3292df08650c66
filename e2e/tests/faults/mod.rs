//! The fault suite (issue 8, docs/architecture.md §8 "every `elicitation/create` gets exactly one
//! response"): things that try to break that promise at full stack — a hundred operators
//! on one pending, the agent's `$/cancel_request` racing an answer, agentctl and the agent
//! SIGKILLed with pendings, the agent stream cut and restored again and again while
//! elicitations arrive, kandev restarted under a remote agentctl, a burst of a thousand
//! malformed requests, a wrong agent-stream token, and oversized bodies on every operator
//! route.
//!
//! The scenarios are written by each test into its own directory (agent `fault`, a
//! mock-agent with `--scenario-dir` there and its own frame log), so what the agent sent
//! and received is counted per JSON-RPC id.

use std::path::PathBuf;

use kandev_testkit::process::descendants;
use kandev_testkit::{DEADLINE, FrameLog, Kandev, KandevOptions, bins, poll_until};
use serde_json::{Value, json};
use tempfile::TempDir;

// The faults, by what they attack.
mod answers;
mod bad_input;
mod crashes;
mod stream;

// ---- scenarios of this suite ------------------------------------------------------

/// A directory of generated mock-agent scenarios and the frame log of the agents that
/// play them (agent id `fault`).
struct Scenarios {
    dir: TempDir,
}

impl Scenarios {
    fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("kandev-faults-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// Writes scenario `name` with `steps`.
    fn add(&self, name: &str, steps: Vec<Value>) -> &Self {
        let scenario = json!({"name": name, "description": "fault suite", "steps": steps});
        std::fs::write(
            self.dir.path().join(format!("{name}.json")),
            scenario.to_string(),
        )
        .expect("write scenario");
        self
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("fault-agent-frames.jsonl")
    }

    fn frames(&self) -> FrameLog {
        FrameLog::new(self.log_path())
    }

    /// The `[agents.fault]` table.
    fn toml(&self) -> String {
        format!(
            "[agents.fault]\ncommand = [{}, \"--scenario\", \"plain\", \"--scenario-dir\", {}]\nenv = {{ MOCK_AGENT_LOG = {} }}\n",
            json!(bins::mock_agent().display().to_string()),
            json!(self.dir.path().display().to_string()),
            json!(self.log_path().display().to_string()),
        )
    }

    /// Options for a kandev with the flag on and the `fault` agent.
    fn options(&self) -> KandevOptions {
        KandevOptions::new().flag_env(true).toml(&self.toml())
    }
}

/// A one-text-question form whose message is `tag` (the answer echoes it, so a crossed
/// answer is visible at the agent).
fn text_form(tag: &str) -> Value {
    json!({"mode": "form", "sessionId": "$SESSION_ID", "message": tag,
        "requestedSchema": {"type": "object", "properties": {
            "answer": {"type": "string", "title": "Answer", "description": "Echo the tag."}}}})
}

/// The §C single-select form (question_0: Postgres / SQLite / DynamoDB), message `tag`.
fn single_form(tag: &str) -> Value {
    json!({"mode": "form", "sessionId": "$SESSION_ID", "toolCallId": "tool-f",
        "message": tag,
        "requestedSchema": {"type": "object", "properties": {
            "question_0": {"type": "string", "title": "Datastore", "oneOf": [
                {"const": "Postgres", "title": "Postgres"},
                {"const": "SQLite", "title": "SQLite"},
                {"const": "DynamoDB", "title": "DynamoDB"}]}}}})
}

fn elicit(id: &str, params: Value) -> Value {
    json!({"elicit": {"id": id, "params": params}})
}

fn await_step(id: &str) -> Value {
    json!({"await": {"id": id}})
}

/// Every response the agent received to its `elicitation/create` whose message is
/// `tag` (results, or `{"error"}`); the mock agent picks its own JSON-RPC ids, so the
/// request is found by its message and its responses by the id it went out with.
fn responses_to(frames: &FrameLog, tag: &str) -> Vec<Value> {
    let all = frames.frames();
    let ids: Vec<Value> = all
        .iter()
        .filter(|f| f.dir == "send" && f.method() == Some("elicitation/create"))
        .filter(|f| f.frame["params"]["message"] == tag)
        .map(|f| f.frame["id"].clone())
        .collect();
    assert_eq!(ids.len(), 1, "one request with message {tag:?}");
    all.into_iter()
        .filter(|f| f.dir == "recv" && f.method().is_none() && f.frame["id"] == ids[0])
        .map(|f| {
            f.frame
                .get("result")
                .cloned()
                .unwrap_or_else(|| json!({"error": f.frame.get("error").cloned()}))
        })
        .collect()
}

fn requests_sent(frames: &FrameLog) -> usize {
    frames.elicitation_requests().len()
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

/// The session's pending id of the clarification whose message is `message`.
async fn pending_by_message(kandev: &Kandev, session_id: &str, message: &str) -> String {
    poll_until(
        &format!("a clarification {message:?}"),
        DEADLINE,
        || async {
            kandev
                .clarifications(session_id, None)
                .await
                .into_iter()
                .find(|c| c["message"] == message)
                .and_then(|c| c["pending_id"].as_str().map(str::to_owned))
        },
    )
    .await
}

fn agent_pids(kandev: &Kandev) -> Vec<u32> {
    descendants(kandev.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("mock-agent"))
        .map(|(pid, _)| pid)
        .collect()
}

async fn wait_gone(what: &str, pid: u32) {
    poll_until(&format!("{what} ({pid}) to exit"), DEADLINE, || async {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z")).then_some(())
    })
    .await;
}

fn vm_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0)
}
