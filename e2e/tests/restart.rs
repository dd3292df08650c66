//! Restarting the backend (the harness's per-test environment overrides): the Settings
//! override lives in SQLite and survives a restart, the env var overrides and locks it;
//! a clarification pending when the backend dies is `agent_disconnected` afterwards and
//! a late answer is `not_delivered`; a graceful stop answers the agent `cancel`.

use kandev_testkit::process::{descendants, kill};
use kandev_testkit::{DEADLINE, Kandev, KandevOptions, TURN_DEADLINE, poll_until};
use serde_json::{Value, json};

#[tokio::test]
async fn flag_override_survives_a_restart_and_the_env_var_overrides_and_locks_it() {
    let mut kandev = Kandev::start_default().await;
    kandev.flag_on().await;

    kandev.restart(KandevOptions::new(), true).await;
    let flag = kandev.flag().await;
    assert_eq!(
        (&flag["value"], &flag["source"]),
        (&json!(true), &json!("override")),
        "{flag}"
    );

    kandev
        .restart(KandevOptions::new().flag_env(false), true)
        .await;
    let flag = kandev.flag().await;
    assert_eq!(flag["value"], false, "{flag}");
    assert_eq!(flag["source"], "env", "{flag}");
    assert_eq!(flag["locked"], true, "{flag}");
    let (_, session) = kandev.task_with_session("mock", "Pick a colour").await;
    let sid = session["id"].as_str().expect("id").to_owned();
    kandev
        .wait_agent_text(&sid, "I don't have the AskUserQuestion tool")
        .await;

    kandev.restart(KandevOptions::new(), true).await;
    let flag = kandev.flag().await;
    assert_eq!(
        (&flag["value"], &flag["source"]),
        (&json!(true), &json!("override")),
        "{flag}"
    );
}

#[tokio::test]
async fn backend_crash_with_a_pending_clarification_leaves_it_agent_disconnected_and_a_later_answer_not_delivered()
 {
    let mut kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    kandev
        .restart(KandevOptions::new().flag_env(true), false)
        .await;

    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "agent_disconnected", "{record}");
    let session = kandev.session(&asked.session_id).await;
    assert_eq!(session["state"], "FAILED", "{session}");
    assert_eq!(session["pending_action"], Value::Null, "{session}");
    let task = kandev.task_in_list(&asked.task_id).await;
    assert_eq!(task["pending_action"], Value::Null, "{task}");
    let messages = kandev.messages(&asked.session_id).await;
    let m = messages
        .iter()
        .find(|m| m["metadata"]["pending_id"] == asked.pending_id.as_str())
        .expect("the clarification message survives");
    assert_eq!(m["metadata"]["status"], "agent_disconnected", "{m}");

    let r = kandev
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    assert!(kandev.frames().elicitation_responses().is_empty());
}

#[tokio::test]
async fn backend_graceful_stop_answers_the_pending_elicitation_cancel_and_withdraws_the_surface() {
    let mut kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    kandev
        .restart(KandevOptions::new().flag_env(true), true)
        .await;

    let got = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(got, json!({"action": "cancel"}), "shutdown answers cancel");
    let record = kandev.clarification(&asked.pending_id).await;
    assert_ne!(record["status"], "pending", "{record}");
    let session = kandev.session(&asked.session_id).await;
    assert_eq!(session["state"], "CANCELLED", "{session}");
    assert_eq!(session["pending_action"], Value::Null, "{session}");
}

/// kandev SIGKILLed on its own (not its process group, so nothing else is signalled):
/// the local agentctl sees the stdin pipe kandev held close, answers the pending
/// elicitation `cancel` and exits with its agent — a dead backend leaves no orphans.
#[tokio::test]
async fn backend_sigkilled_alone_takes_its_local_agentctl_and_agent_with_it() {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let _asked = kandev.ask("mock", "/e2e:single").await;
    let children = descendants(kandev.pid());
    assert_eq!(kandev.agentctls().len(), 1, "{children:?}");
    assert!(
        children.iter().any(|(_, cmd)| cmd.contains("mock-agent")),
        "{children:?}"
    );

    kill(&kandev.pid().to_string(), "KILL");
    for (pid, cmd) in children {
        poll_until(&format!("{cmd} ({pid}) to exit"), DEADLINE, || async move {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            (stat.is_empty() || stat.contains(") Z")).then_some(())
        })
        .await;
    }
    assert_eq!(
        kandev.frames().elicitation_responses(),
        vec![json!({"action": "cancel"})],
        "the agent got exactly one answer: cancel"
    );
}
