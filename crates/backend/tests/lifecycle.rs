//! Sessions, flags, executors and failures through the operator API, with the real
//! `kandev`, `agentctl` and `mock-agent` processes.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::{Kandev, Options, Proxy, RemoteAgentctl, children_named, wait_for};

const PROSE: &str = "I don't have the AskUserQuestion tool available";

fn red() -> Value {
    json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]})
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn a_patch_applies_to_the_next_session_without_a_restart() {
    let kandev = Kandev::start().await;
    let task = kandev.create_task("Toggle").await;

    let off = kandev.start_session(&task, "mock", Some("Pick")).await;
    assert!(off["client_capabilities"].get("elicitation").is_none());
    kandev.wait_agent_text(&id(&off), PROSE).await;
    kandev.wait_state(&id(&off), "IDLE").await;

    let (status, flag) = kandev.set_flag(Some(true)).await;
    assert_eq!(status, 200);
    assert_eq!(
        (flag["value"].clone(), flag["source"].clone()),
        (json!(true), json!("override"))
    );
    let on = kandev.start_session(&task, "mock", Some("Pick")).await;
    assert_eq!(
        on["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let pending = kandev.wait_pending(&id(&on), 1).await;

    let (status, _) = kandev.set_flag(None).await;
    assert_eq!(status, 200);
    let back = kandev.start_session(&task, "mock", None).await;
    assert!(back["client_capabilities"].get("elicitation").is_none());

    // The running session keeps what it started with and can still be answered.
    let pending_id = pending[0]["pending_id"].as_str().expect("id");
    assert_eq!(kandev.respond(pending_id, red()).await.0, 200);
    kandev.wait_agent_text(&id(&on), "You picked Red.").await;
    assert_eq!(
        kandev.session(&id(&on)).await["flags"],
        json!({"features.acpElicitation": true})
    );
}

#[tokio::test]
async fn the_env_var_locks_the_flag_and_patch_is_409() {
    let kandev =
        Kandev::start_with(Options::default().env("KANDEV_FEATURES_ACP_ELICITATION", "true")).await;
    let flags = kandev.get("/api/v1/runtime-flags").await;
    let flag = &flags["flags"][0];
    assert_eq!(
        (
            flag["value"].clone(),
            flag["source"].clone(),
            flag["locked"].clone()
        ),
        (json!(true), json!("env"), json!(true))
    );
    let (status, v) = kandev.set_flag(Some(false)).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["error"]["code"], "FLAG_LOCKED");
    let (status, _) = kandev.set_flag(None).await;
    assert_eq!(status, 409);
    let task = kandev.create_task("Locked").await;
    let s = kandev.start_session(&task, "mock", None).await;
    assert_eq!(s["client_capabilities"]["elicitation"], json!({"form": {}}));
}

#[tokio::test]
async fn agentctl_killed_with_a_pending_disconnects_it_and_a_later_answer_is_not_delivered() {
    let kandev = Kandev::start().await;
    let ws = kandev.events().await;
    assert_eq!(kandev.set_flag(Some(true)).await.0, 200);
    let task = kandev.create_task("Crashy").await;
    let session = id(&kandev.start_session(&task, "mock", Some("Pick")).await);
    let pending = kandev.wait_pending(&session, 1).await;
    let pending_id = pending[0]["pending_id"].as_str().expect("id").to_owned();

    let agentctls = children_named(kandev.pid(), "agentctl");
    assert_eq!(agentctls.len(), 1, "one agentctl per session");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &agentctls[0].to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());

    let s = kandev.wait_state(&session, "FAILED").await;
    assert!(s["pending_action"].is_null());
    assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()));
    let rec = kandev.wait_status(&pending_id, "agent_disconnected").await;
    assert!(rec["settled_at"].is_string());
    ws.wait("clarification.settled", |c| {
        c["pending_id"] == pending_id.as_str() && c["status"] == "agent_disconnected"
    })
    .await;

    let (status, v) = kandev.respond(&pending_id, red()).await;
    assert_eq!((status, v), (200, json!({"status": "not_delivered"})));
    assert!(
        kandev.mock_log().elicitation_results().is_empty(),
        "nothing reached the agent"
    );
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "agent_disconnected");
    assert_eq!(
        ask["metadata"]["undelivered_answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    let (status, v) = kandev
        .http(
            "POST",
            &format!("/api/v1/sessions/{session}/prompt"),
            Some(json!({"text": "hi"})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (409, json!("SESSION_ENDED"))
    );
}

#[tokio::test]
async fn an_agent_that_exits_fails_the_session_and_disconnects_its_pending() {
    let kandev = Kandev::start().await;
    assert_eq!(kandev.set_flag(Some(true)).await.0, 200);
    let task = kandev.create_task("Exit 3").await;
    let session = id(&kandev
        .start_session(&task, "mock", Some("/e2e:crash"))
        .await);
    let s = kandev.wait_state(&session, "FAILED").await;
    assert!(s["error"].as_str().expect("error").contains('3'), "{s}");
    let recs = kandev
        .clarifications(&format!("session_id={session}"))
        .await;
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["status"], "agent_disconnected");
    let (status, v) = kandev
        .respond(recs[0]["pending_id"].as_str().expect("id"), red())
        .await;
    assert_eq!((status, v), (200, json!({"status": "not_delivered"})));
    // The session's agentctl is stopped too.
    wait_for("agentctl gone", || async {
        children_named(kandev.pid(), "agentctl")
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn stop_completes_the_session_and_stops_its_agentctl() {
    let kandev = Kandev::start().await;
    let task = kandev.create_task("Stop").await;
    let session = id(&kandev.start_session(&task, "mock", None).await);
    assert_eq!(children_named(kandev.pid(), "agentctl").len(), 1);
    let (status, _) = kandev
        .http("POST", &format!("/api/v1/sessions/{session}/stop"), None)
        .await;
    assert_eq!(status, 202);
    let s = kandev.session(&session).await;
    assert_eq!(s["state"], "COMPLETED");
    wait_for("agentctl gone", || async {
        children_named(kandev.pid(), "agentctl")
            .is_empty()
            .then_some(())
    })
    .await;
    let (status, v) = kandev
        .http("POST", &format!("/api/v1/sessions/{session}/stop"), None)
        .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (409, json!("SESSION_ENDED"))
    );
}

#[tokio::test]
async fn the_remote_executor_runs_a_session_on_an_agentctl_started_elsewhere() {
    let mut agentctl = RemoteAgentctl::start().await;
    let kandev =
        Kandev::start_with(Options::default().toml(&agentctl.executor_toml(agentctl.addr))).await;
    assert_eq!(kandev.set_flag(Some(true)).await.0, 200);
    let task = kandev.create_task("Remote").await;
    let session = kandev.start_session(&task, "mock", Some("Pick")).await;
    assert_eq!(
        session["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let sid = id(&session);
    let pending = kandev.wait_pending(&sid, 1).await;
    assert!(
        children_named(kandev.pid(), "agentctl").is_empty(),
        "no local agentctl"
    );
    let (status, v) = kandev
        .respond(pending[0]["pending_id"].as_str().expect("id"), red())
        .await;
    assert_eq!((status, v), (200, json!({"status": "answered"})));
    kandev.wait_agent_text(&sid, "You picked Red.").await;
    kandev.wait_state(&sid, "IDLE").await;
    assert!(agentctl.is_running());
}

#[tokio::test]
async fn ac20a_with_the_stream_down_an_answer_is_503_and_the_record_stays_open() {
    let agentctl = RemoteAgentctl::start().await;
    let proxy = Proxy::start(agentctl.addr).await;
    let kandev =
        Kandev::start_with(Options::default().toml(&agentctl.executor_toml(proxy.addr))).await;
    assert_eq!(kandev.set_flag(Some(true)).await.0, 200);
    let task = kandev.create_task("Flaky network").await;
    let session = id(&kandev.start_session(&task, "mock", Some("Pick")).await);
    let pending = kandev.wait_pending(&session, 1).await;
    let pending_id = pending[0]["pending_id"].as_str().expect("id").to_owned();

    proxy.cut();
    kandev.wait_log("agent stream dropped", 1).await;
    let (status, v) = kandev.respond(&pending_id, red()).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], "AGENT_STREAM_NOT_CONNECTED");
    assert_eq!(
        kandev.clarification(&pending_id).await["status"],
        "pending",
        "the record stays open"
    );
    assert_eq!(kandev.session(&session).await["state"], "WAITING_FOR_INPUT");
    assert!(
        kandev.mock_log().elicitation_results().is_empty(),
        "no ACP frame was sent"
    );

    // Back online: the stream re-attaches, the pending is still agentctl's, the answer goes through.
    proxy.heal();
    kandev.wait_log("agent stream re-attached", 1).await;
    assert_eq!(kandev.clarification(&pending_id).await["status"], "pending");
    let (status, v) = kandev.respond(&pending_id, red()).await;
    assert_eq!((status, v), (200, json!({"status": "answered"})));
    kandev.wait_agent_text(&session, "You picked Red.").await;
    assert_eq!(kandev.mock_log().elicitation_results().len(), 1);
}

#[tokio::test]
async fn shutdown_cancels_live_sessions_and_a_restart_keeps_the_data() {
    let data = tempfile::tempdir().expect("tempdir");
    let db = if support::on_postgres() {
        support::fresh_database(data.path()).await
    } else {
        let file = data.path().join("nested/kandev.db");
        format!("sqlite://{}", file.display())
    };
    let mut first = Kandev::start_with(Options::default().database(db.clone())).await;
    if let Some(file) = db.strip_prefix("sqlite://") {
        assert!(Path::new(file).is_file(), "database created on first start");
    }
    let task = first.create_task("Persisted").await;
    let session = id(&first.start_session(&task, "mock", None).await);
    assert_eq!(first.terminate().await, Some(0), "{}", first.stderr());

    let second = Kandev::start_with(Options::default().database(db)).await;
    let t = second.get(&format!("/api/v1/tasks/{task}")).await;
    assert_eq!(t["title"], "Persisted");
    assert_eq!(second.session(&session).await["state"], "CANCELLED");
}

#[tokio::test]
async fn help_documents_the_configuration_and_bad_values_exit_2_naming_the_key() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_kandev"))
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
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kandev"))
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
    let kandev = Kandev::start_with(
        Options::default().toml("[agents.ghost]\ncommand = [\"/nonexistent/agent-binary\"]\n"),
    )
    .await;
    let task = kandev.create_task("Ghost").await;
    let s = kandev.start_session(&task, "ghost", Some("hello")).await;
    assert_eq!(s["state"], "FAILED", "{s}");
    assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()), "{s}");
    let (status, v) = kandev
        .http(
            "POST",
            &format!("/api/v1/tasks/{task}/sessions"),
            Some(json!({"agent": "nobody"})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (400, json!("BAD_REQUEST"))
    );
    // The backend stays up and the next session works.
    let ok = kandev.start_session(&task, "mock", None).await;
    assert_eq!(ok["state"], "IDLE");
}
