//! A foreign agent from the real world: `e2e/foreign-agent` speaks ACP through the
//! official `@agentclientprotocol/sdk` and asks with the REAL AskUserQuestion builders of
//! `@agentclientprotocol/claude-agent-acp` 0.65.0 and 0.101.0, then folds kandev's answer
//! back with that version's real `applyAskElicitationResponse` and reports what the tool
//! recorded. The recorded answers must equal the operator's choices, custom text and
//! multi-select included.
//!
//! The two versions differ (see crates/elicitation/tests/bridge_conformance.rs):
//! - 0.65.0 marks `question_<n>_custom` as the companion of `question_<n>`: one question
//!   with an "Other" box; typed text wins over a selection (trimmed); a multi-select
//!   records its picks comma-space joined in declaration order.
//! - 0.101.0 sends no marker, so each "Other" field is a free-text question of its own
//!   (rule 4). A single-select records the pick and keeps the text as
//!   `annotations[question].notes` (text only when nothing is picked); a multi-select
//!   records the picks followed by the text.

use std::process::Command;
use std::sync::OnceLock;

use kandev_testkit::bins::repo_root;
use kandev_testkit::{DEADLINE, Kandev, KandevOptions, poll_until};
use serde_json::{Value, json};

const DB_Q: &str = "Which database should the new service use?";
const ENV_Q: &str = "Which environments should it deploy to?";

/// The bridge builders are fetched into target/bridge-cache by the elicitation crate's
/// driver (`ensure` is idempotent: a marker check once fetched); the agent's locked npm
/// dependencies are installed with `npm ci --ignore-scripts` when missing (`just e2e`
/// installs them up front).
fn ensure_foreign_agent() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let root = repo_root();
        let agent_dir = root.join("e2e/foreign-agent");
        if !agent_dir
            .join("node_modules/@agentclientprotocol/sdk")
            .is_dir()
        {
            // A clean clone under plain `cargo test`: install the locked packages.
            let out = Command::new("npm")
                .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
                .current_dir(&agent_dir)
                .output()
                .expect("npm must be on PATH for the foreign agent");
            assert!(
                out.status.success(),
                "`npm ci --ignore-scripts` in e2e/foreign-agent failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for version in ["0.65.0", "0.101.0"] {
            let out = Command::new("node")
                .arg(root.join("crates/elicitation/tests/bridge/bridge.mjs"))
                .args(["ensure", version])
                .output()
                .expect("node must be on PATH for the foreign agent");
            assert!(
                out.status.success(),
                "bridge.mjs ensure {version}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
}

/// The foreign agent's report of turn `n` (1-based): `{bridge, set, response, result}`.
async fn report(kandev: &Kandev, session_id: &str, n: usize) -> Value {
    poll_until(
        &format!("the foreign agent's report #{n}"),
        DEADLINE,
        || async {
            let reports: Vec<Value> = kandev
                .messages(session_id)
                .await
                .iter()
                .filter(|m| m["author_type"] == "agent")
                .filter_map(|m| m["content"].as_str())
                .filter_map(|text| serde_json::from_str::<Value>(text).ok())
                .filter(|v| v.get("bridge").is_some())
                .collect();
            reports.get(n - 1).cloned()
        },
    )
    .await
}

/// Starts a session of `agent` on `prompt`, waits for its clarification.
async fn ask(kandev: &Kandev, agent: &str, prompt: &str) -> kandev_testkit::Asked {
    ensure_foreign_agent();
    kandev.ask(agent, prompt).await
}

/// The next pending clarification of a session other than `done`.
async fn next_pending(kandev: &Kandev, session_id: &str, done: &[String]) -> Value {
    poll_until("the next pending clarification", DEADLINE, || async {
        kandev
            .clarifications(session_id, Some("pending"))
            .await
            .into_iter()
            .find(|c| !done.iter().any(|d| c["pending_id"] == d.as_str()))
    })
    .await
}

fn question_ids(record: &Value) -> Vec<String> {
    record["questions"]
        .as_array()
        .expect("questions")
        .iter()
        .map(|q| q["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
#[ignore = "needs node and npm (`just e2e-deps`); `just test` runs it"]
async fn foreign_agent_bridge_0_65_0_records_the_operators_choices_custom_text_winning_and_multi_select()
 {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let asked = ask(&kandev, "claude-bridge-065", "ask mixed").await;
    assert_eq!(question_ids(&asked.record), ["question_0", "question_1"]);
    assert_eq!(
        asked.record["questions"][0]["custom_answer"]["key"],
        "question_0_custom"
    );
    assert_eq!(asked.record["questions"][1]["kind"], "multi_select");
    assert_eq!(
        asked.record["message"],
        "Please answer the following questions."
    );

    let r = kandev
        .answer(
            &asked.pending_id,
            &[
                ("question_0", &["SQLite"], "  CockroachDB  "),
                ("question_1", &["prod", "dev"], ""),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = report(&kandev, &asked.session_id, 1).await;
    assert_eq!(got["bridge"], "0.65.0");
    assert_eq!(
        got["response"],
        json!({"action": "accept", "content": {"question_0_custom": "CockroachDB", "question_1": ["dev", "prod"]}})
    );
    assert_eq!(got["result"]["action"], "answered", "{got}");
    assert_eq!(
        got["result"]["updatedInput"]["answers"],
        json!({DB_Q: "CockroachDB", ENV_Q: "dev, prod"}),
        "what the real bridge records: {got}"
    );
    kandev.wait_session_state(&asked.session_id, "IDLE").await;

    // A second turn in the same session: a plain pick, and a skip of the other question.
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{}/prompt", asked.session_id),
            &json!({"text": "ask mixed"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let next = next_pending(
        &kandev,
        &asked.session_id,
        std::slice::from_ref(&asked.pending_id),
    )
    .await;
    let next_id = next["pending_id"].as_str().expect("id");
    let r = kandev
        .answer(next_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = report(&kandev, &asked.session_id, 2).await;
    assert_eq!(
        got["result"]["updatedInput"]["answers"],
        json!({DB_Q: "Postgres"})
    );
}

#[tokio::test]
#[ignore = "needs node and npm (`just e2e-deps`); `just test` runs it"]
async fn foreign_agent_bridge_0_101_0_records_picks_with_other_text_as_separate_rule_4_questions() {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let asked = ask(&kandev, "claude-bridge-0101", "ask mixed").await;
    // No companion marker: each "Other" box is its own free-text question, listed after
    // the numbered ones (D1).
    assert_eq!(
        question_ids(&asked.record),
        [
            "question_0",
            "question_1",
            "question_0_custom",
            "question_1_custom"
        ]
    );
    assert_eq!(asked.record["questions"][0]["custom_answer"], Value::Null);
    assert_eq!(asked.record["questions"][2]["kind"], "text");
    assert_eq!(asked.record["questions"][2]["title"], "Other");

    let r = kandev
        .answer(
            &asked.pending_id,
            &[
                ("question_0", &["SQLite"], ""),
                ("question_0_custom", &[], "on RDS"),
                ("question_1", &["prod", "dev"], ""),
                ("question_1_custom", &[], "qa"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = report(&kandev, &asked.session_id, 1).await;
    assert_eq!(got["bridge"], "0.101.0");
    assert_eq!(
        got["response"],
        json!({"action": "accept", "content": {
            "question_0": "SQLite", "question_0_custom": "on RDS",
            "question_1": ["dev", "prod"], "question_1_custom": "qa"}})
    );
    let input = &got["result"]["updatedInput"];
    assert_eq!(got["result"]["action"], "answered", "{got}");
    assert_eq!(
        input["answers"],
        json!({DB_Q: "SQLite", ENV_Q: "dev, prod, qa"}),
        "0.101.0 keeps the pick and appends multi-select text: {got}"
    );
    assert_eq!(
        input["annotations"],
        json!({DB_Q: {"notes": "on RDS"}}),
        "0.101.0 keeps single-select text as a note: {got}"
    );
    kandev.wait_session_state(&asked.session_id, "IDLE").await;

    // Custom text alone is the answer.
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{}/prompt", asked.session_id),
            &json!({"text": "ask single"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let next = next_pending(
        &kandev,
        &asked.session_id,
        std::slice::from_ref(&asked.pending_id),
    )
    .await;
    let r = kandev
        .answer(
            next["pending_id"].as_str().expect("id"),
            &[("question_0_custom", &[], "  CockroachDB ")],
        )
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = report(&kandev, &asked.session_id, 2).await;
    assert_eq!(
        got["result"]["updatedInput"]["answers"],
        json!({DB_Q: "CockroachDB"})
    );
}

#[tokio::test]
#[ignore = "needs node and npm (`just e2e-deps`); `just test` runs it"]
async fn foreign_agent_without_the_capability_cannot_ask_and_falls_back_to_prose() {
    ensure_foreign_agent();
    let kandev = Kandev::start(KandevOptions::new().flag_env(false)).await;
    let (_, session) = kandev
        .task_with_session("claude-bridge-065", "ask single")
        .await;
    let sid = session["id"].as_str().expect("id").to_owned();
    kandev
        .wait_agent_text(&sid, "I don't have the AskUserQuestion tool")
        .await;
    kandev.wait_session_state(&sid, "IDLE").await;
    assert!(kandev.clarifications(&sid, None).await.is_empty());
}
