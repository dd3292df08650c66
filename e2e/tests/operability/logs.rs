//! `--log-format json` / `KANDEV_LOG_FORMAT` and agentctl's `AGENTCTL_LOG_FORMAT`: every
//! stderr line is one JSON object, and the ids of the spans (and kandev's `replica_id`) are
//! top-level fields.

use kandev_testkit::{Kandev, KandevOptions, RemoteAgentctl};
use serde_json::{Value, json};

/// Every line of `text` as JSON; fails naming the first line that is not an object.
fn json_lines(who: &str, text: &str) -> Vec<Value> {
    let lines: Vec<Value> = text
        .lines()
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => v,
            _ => panic!("{who}: a stderr line that is not a JSON object: {line:?}"),
        })
        .collect();
    assert!(!lines.is_empty(), "{who} logged nothing");
    for line in &lines {
        for key in ["timestamp", "level", "target"] {
            assert!(line[key].is_string(), "{who}: no {key} in {line}");
        }
    }
    lines
}

fn with_ids<'a>(lines: &'a [Value], session: &str, pending: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["session_id"] == session && l["pending_id"] == pending)
        .collect()
}

#[tokio::test]
async fn both_binaries_log_json_lines_carrying_session_and_pending_ids() {
    // agentctl by flag, kandev by environment variable.
    let agentctl = RemoteAgentctl::start_with_args(&["--log-format", "json"], &[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let kandev = Kandev::start(
        KandevOptions::new()
            .remote(&url, agentctl.token())
            .env("KANDEV_LOG_FORMAT", "json")
            .flag_env(true),
    )
    .await;
    let asked = kandev.ask("mock", "Pick").await;
    let (session, pending_id) = (asked.session_id, asked.pending_id);
    let answer = json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]});
    assert_eq!(kandev.respond(&pending_id, &answer).await.status, 200);
    kandev.wait_agent_text(&session, "You picked Red.").await;

    let lines = json_lines("kandev", &kandev.log());
    let ids = with_ids(&lines, &session, &pending_id);
    assert!(
        ids.iter()
            .any(|l| l["message"] == "clarification requested" && l["source"] == "elicitation"),
        "kandev: the request, with both ids: {ids:#?}"
    );
    assert!(
        ids.iter().any(|l| l["message"] == "answer delivered"),
        "kandev: the delivery, with both ids: {ids:#?}"
    );
    // Every line from the sessions' work names this process's replica, the same one.
    let replicas: std::collections::BTreeSet<&str> = ids
        .iter()
        .filter_map(|l| l["replica_id"].as_str())
        .collect();
    assert_eq!(
        replicas.len(),
        1,
        "one replica_id on every id line: {ids:#?}"
    );
    assert!(
        ids.iter().all(|l| l["replica_id"].is_string()),
        "kandev: replica_id on every line: {ids:#?}"
    );

    let text = agentctl.log();
    let lines = json_lines("agentctl", &text);
    let ids = with_ids(&lines, &session, &pending_id);
    assert!(
        ids.iter().any(|l| l["message"] == "elicitation pending"),
        "agentctl: the pending, with both ids: {ids:#?}"
    );
    // The question's text is never logged at info (F9).
    assert!(!text.contains("Pick a colour"), "{text}");
}

#[tokio::test]
async fn a_local_agentctl_s_lines_reach_kandev_s_json_log_under_the_session() {
    let kandev = Kandev::start(KandevOptions::new().env("KANDEV_LOG_FORMAT", "json")).await;
    let task = kandev.create_task("Local logs").await;
    let task = task["id"].as_str().expect("task id");
    let session = kandev.start_session(task, "mock", None).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    kandev.wait_session_state(&session, "IDLE").await;
    let lines = json_lines("kandev", &kandev.log());
    assert!(
        lines
            .iter()
            .any(|l| l["target"] == "kandev::agentctl" && l["session_id"] == session.as_str()),
        "agentctl's own lines, under the session: {lines:#?}"
    );
}
