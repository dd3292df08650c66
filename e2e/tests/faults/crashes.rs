//! Processes killed or restarted with pendings: agentctl and the agent SIGKILLed, kandev
//! restarted under a remote agentctl.

use kandev_testkit::process::kill;
use kandev_testkit::{DEADLINE, Kandev, RemoteAgentctl, TURN_DEADLINE};
use serde_json::json;

use super::{
    Scenarios, agent_pids, await_step, elicit, id_of, pending_by_message, responses_to, text_form,
    wait_gone,
};

#[tokio::test]
async fn agentctl_sigkilled_with_three_pendings_disconnects_them_all_and_kandev_keeps_serving() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "three",
        vec![
            elicit("k1", text_form("k1")),
            elicit("k2", text_form("k2")),
            elicit("k3", text_form("k3")),
            await_step("k1"),
            await_step("k2"),
            await_step("k3"),
        ],
    );
    scenarios.add("one", vec![elicit("k4", text_form("k4")), await_step("k4")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let (_, session) = kandev.task_with_session("fault", "/e2e:three").await;
    let sid = id_of(&session);
    let pendings: Vec<String> = kandev
        .wait_pending(&sid, 3)
        .await
        .iter()
        .map(|c| c["pending_id"].as_str().expect("id").to_owned())
        .collect();
    let agentctls = kandev.agentctls();
    assert_eq!(agentctls.len(), 1, "{agentctls:?}");
    let agents = agent_pids(&kandev);
    kill(&agentctls[0].0.to_string(), "KILL");

    for pending in &pendings {
        kandev
            .wait_clarification_status(pending, "agent_disconnected")
            .await;
    }
    kandev.wait_session_state(&sid, "FAILED").await;
    for agent in agents {
        wait_gone("the orphaned agent", agent).await;
    }
    for pending in &pendings {
        let r = kandev.answer(pending, &[("answer", &[], "late")]).await;
        assert_eq!(r.status, 200, "{r}");
        assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    }
    for id in ["k1", "k2", "k3"] {
        assert!(
            responses_to(&scenarios.frames(), id).is_empty(),
            "{id}: no agent got an answer"
        );
    }
    // The backend keeps serving: a new session asks and is answered.
    let asked = kandev.ask("fault", "/e2e:one").await;
    let r = kandev
        .answer(&asked.pending_id, &[("answer", &[], "k4")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = scenarios
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"answer": "k4"}})
    );
}

#[tokio::test]
async fn the_agent_sigkilled_mid_turn_disconnects_its_pendings_and_nothing_is_delivered() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "two",
        vec![
            elicit("a1", text_form("a1")),
            elicit("a2", text_form("a2")),
            await_step("a1"),
            await_step("a2"),
        ],
    );
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    let (_, session) = kandev.task_with_session("fault", "/e2e:two").await;
    let sid = id_of(&session);
    let pendings: Vec<String> = kandev
        .wait_pending(&sid, 2)
        .await
        .iter()
        .map(|c| c["pending_id"].as_str().expect("id").to_owned())
        .collect();
    let agents = agent_pids(&kandev);
    assert_eq!(agents.len(), 1, "one agent process");
    kill(&agents[0].to_string(), "KILL");

    for pending in &pendings {
        kandev
            .wait_clarification_status(pending, "agent_disconnected")
            .await;
        ws.wait_for_type("clarification.settled", DEADLINE, |d| {
            d["pending_id"] == pending.as_str()
        })
        .await;
    }
    let session = kandev.wait_session_state(&sid, "FAILED").await;
    assert!(session["pending_action"].is_null(), "{session}");
    for pending in &pendings {
        let r = kandev.answer(pending, &[("answer", &[], "late")]).await;
        assert_eq!(r.status, 200, "{r}");
        assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    }
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the dead agent"
    );
}

/// Issue 8: kandev SIGKILLed under a remote agentctl that holds the session and two
/// parked elicitations. The next kandev finds the session live in its database, re-attaches
/// to agentctl (`agent.session.attach`, `SessionRuntime::reconcile_after_restart`) instead
/// of failing it, reconciles the records against agentctl's pending list (both still
/// pending), and the operator's answer reaches the agent exactly once. (A local agentctl
/// exits with its kandev, so there the session is FAILED as before.)
#[tokio::test]
async fn kandev_restarted_under_a_remote_agentctl_holding_pendings_can_answer_them_after() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "held",
        vec![
            elicit("r1", text_form("r1")),
            elicit("r2", text_form("r2")),
            await_step("r1"),
            await_step("r2"),
        ],
    );
    let agentctl = RemoteAgentctl::start(&[]).await;
    let db_dir = tempfile::tempdir().expect("db dir");
    let db = kandev_testkit::fresh_database(db_dir.path()).await;
    let options = || {
        scenarios
            .options()
            .remote(&format!("ws://{}", agentctl.addr()), agentctl.token())
            .database(&db)
    };
    let first = Kandev::start(options()).await;
    let (_, session) = first.task_with_session("fault", "/e2e:held").await;
    let sid = id_of(&session);
    first.wait_pending(&sid, 2).await;
    // A crash, not a graceful stop (a graceful stop ends its sessions on purpose).
    kill(&first.pid().to_string(), "KILL");

    let second = Kandev::start(options()).await;
    let r1 = pending_by_message(&second, &sid, "r1").await;
    let record = second.clarification(&r1).await;
    assert_eq!(
        record["status"], "pending",
        "the pending agentctl still holds is still answerable after the restart: {record}"
    );
    let r = second.answer(&r1, &[("answer", &[], "r1")]).await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "answered"}), "{r}");
    let got = scenarios
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"answer": "r1"}})
    );
    drop(first);
}
