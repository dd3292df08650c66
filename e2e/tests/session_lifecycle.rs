//! Sessions, executors and failures through the operator API, with the real `kandev`,
//! `agentctl` and `mock-agent` processes: the transcript, stop, the remote executor,
//! shutdown and restart, configuration errors (was the backend's `tests/lifecycle.rs`; its
//! flag and settlement tests were folded into `flag.rs` and `settlement.rs`).

use std::path::Path;

use kandev_testkit::{
    DEADLINE, Kandev, KandevOptions, RemoteAgentctl, bins, fresh_database, kandev_command,
    on_postgres, poll_until,
};
use serde_json::{Value, json};

fn red() -> Value {
    json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]})
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

/// A new task titled `title`; its id.
async fn task(kandev: &Kandev, title: &str) -> String {
    id(&kandev.create_task(title).await)
}

#[tokio::test]
async fn stop_completes_the_session_and_stops_its_agentctl() {
    let kandev = Kandev::start_default().await;
    let task = task(&kandev, "Stop").await;
    let session = id(&kandev.start_session(&task, "mock", None).await);
    assert_eq!(kandev.agentctls().len(), 1);
    let stop = format!("/api/v1/sessions/{session}/stop");
    assert_eq!(kandev.api().request("POST", &stop, None).await.status, 202);
    let s = kandev.session(&session).await;
    assert_eq!(s["state"], "COMPLETED");
    kandev.wait_agentctls_gone().await;
    let r = kandev.api().request("POST", &stop, None).await;
    assert_eq!((r.status, r.error_code()), (409, "SESSION_ENDED"));
}

#[tokio::test]
async fn the_remote_executor_runs_a_session_on_an_agentctl_started_elsewhere() {
    let mut agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let kandev = Kandev::start(KandevOptions::new().remote(&url, agentctl.token())).await;
    kandev.flag_on().await;
    let task = task(&kandev, "Remote").await;
    let session = kandev.start_session(&task, "mock", Some("Pick")).await;
    assert_eq!(
        session["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let sid = id(&session);
    let pending = kandev.wait_pending(&sid, 1).await;
    assert!(kandev.agentctls().is_empty(), "no local agentctl");
    let r = kandev
        .respond(pending[0]["pending_id"].as_str().expect("id"), &red())
        .await;
    assert_eq!((r.status, r.body), (200, json!({"status": "answered"})));
    kandev.wait_agent_text(&sid, "You picked Red.").await;
    kandev.wait_session_state(&sid, "IDLE").await;
    assert!(agentctl.is_running());
}

#[tokio::test]
async fn shutdown_cancels_live_sessions_and_a_restart_keeps_the_data() {
    let data = tempfile::tempdir().expect("tempdir");
    let db = if on_postgres() {
        fresh_database(data.path()).await
    } else {
        let file = data.path().join("nested/kandev.db");
        format!("sqlite://{}", file.display())
    };
    let mut first = Kandev::start(KandevOptions::new().database(&db)).await;
    if let Some(file) = db.strip_prefix("sqlite://") {
        assert!(Path::new(file).is_file(), "database created on first start");
    }
    let task = task(&first, "Persisted").await;
    let session = id(&first.start_session(&task, "mock", None).await);
    assert_eq!(first.terminate().await, Some(0), "{}", first.log());

    let second = Kandev::start(KandevOptions::new().database(&db)).await;
    assert_eq!(second.task(&task).await["title"], "Persisted");
    assert_eq!(second.session(&session).await["state"], "CANCELLED");
}

#[tokio::test]
async fn help_documents_the_configuration_and_bad_values_exit_2_naming_the_key() {
    let help = std::process::Command::new(bins::kandev())
        .arg("--help")
        .output()
        .expect("kandev --help");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "serve",
        "--config",
        "KANDEV_CONFIG",
        "KANDEV_PROFILE",
        "listen",
        "database_url",
        "agents.<id>.command",
        "executor",
        "notifications.turn_finished",
        "KANDEV_FEATURES_ACP_ELICITATION",
    ] {
        assert!(text.contains(needle), "--help lacks {needle}:\n{text}");
    }

    for (var, value, key) in [
        ("KANDEV_PROFILE", "staging", "profile"),
        ("KANDEV_LISTEN", "nowhere", "listen"),
        (
            "KANDEV_FEATURES_ACP_ELICITATION",
            "maybe",
            "KANDEV_FEATURES_ACP_ELICITATION",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = kandev_command()
            .current_dir(dir.path())
            .env(var, value)
            .env(
                "KANDEV_DATABASE_URL",
                format!("sqlite://{}/k.db", dir.path().display()),
            )
            .output()
            .expect("run kandev");
        assert_eq!(out.status.code(), Some(2), "{var}={value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(
            lines[0].contains(key) && lines[0].contains(value),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn an_agent_that_cannot_start_fails_its_session_with_the_reason() {
    let kandev = Kandev::start(
        KandevOptions::new().toml("[agents.ghost]\ncommand = [\"/nonexistent/agent-binary\"]\n"),
    )
    .await;
    let task = task(&kandev, "Ghost").await;
    let s = kandev.start_session(&task, "ghost", Some("hello")).await;
    assert_eq!(s["state"], "FAILED", "{s}");
    assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()), "{s}");
    let r = kandev.try_start_session(&task, "nobody", None).await;
    assert_eq!((r.status, r.error_code()), (400, "BAD_REQUEST"));
    // The backend stays up and the next session works.
    let ok = kandev.start_session(&task, "mock", None).await;
    assert_eq!(ok["state"], "IDLE");
}

#[tokio::test]
async fn messages_hold_prompts_aggregated_text_and_tool_calls() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let task = task(&kandev, "Plain").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:plain"))
        .await;
    let id = session["id"].as_str().expect("id");
    kandev.wait_session_state(id, "IDLE").await;
    let messages = poll_until("the plain transcript", DEADLINE, || async {
        let m = kandev.messages(id).await;
        (m.len() >= 4).then_some(m)
    })
    .await;
    assert_eq!(messages[0]["author_type"], "user");
    assert_eq!(messages[0]["content"], "/e2e:plain");
    let tool = messages
        .iter()
        .find(|m| m["type"] == "tool_call")
        .expect("tool call");
    assert!(tool["metadata"]["tool_call_id"].is_string());
    assert_eq!(tool["metadata"]["status"], "completed", "updated in place");
    ws.wait_for_type("message.created", DEADLINE, |m| m["type"] == "tool_call")
        .await;
    let texts: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "message" && m["author_type"] == "agent")
        .collect();
    assert_eq!(texts.len(), 2, "{messages:?}");
    // A second prompt on the same session.
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{id}/prompt"),
            &json!({"text": "/e2e:plain"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    poll_until("second turn", DEADLINE, || async {
        let m = kandev.messages(id).await;
        (m.iter().filter(|m| m["author_type"] == "user").count() == 2 && m.len() >= 8).then_some(())
    })
    .await;
    kandev.wait_session_state(id, "IDLE").await;
}
