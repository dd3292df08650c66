//! The elicitation lifecycle through the operator API, with the real `kandev`,
//! `agentctl` and `mock-agent` processes (docs/architecture.md §3).

use kandev_testkit::{DEADLINE, FrameLog, Kandev, KandevOptions, poll_until};
use serde_json::{Value, json};

fn red() -> Value {
    json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"], "custom_text": ""}],
           "rejected": false, "reject_reason": ""})
}

/// Switches the flag on through the Settings override.
async fn flag_on(kandev: &Kandev) {
    kandev
        .set_flag_override(json!(true))
        .await
        .expect_status(200, "flag on");
}

/// A new task titled `title`; its id.
async fn task(kandev: &Kandev, title: &str) -> String {
    kandev.create_task(title).await["id"]
        .as_str()
        .expect("task id")
        .to_owned()
}

/// Waits for the agent's `n`-th elicitation response; returns all it received.
async fn responses(frames: &FrameLog, n: usize) -> Vec<Value> {
    frames.wait_for_elicitation_responses(n, DEADLINE).await
}

/// A kandev with the flag switched on through the API, a task and a demo session
/// whose first prompt raises the "Pick a colour" form.
async fn demo_waiting(kandev: &Kandev) -> (String, String, Value) {
    flag_on(kandev).await;
    let task = task(kandev, "Paint the shed").await;
    let session = kandev
        .start_session(&task, "mock", Some("Pick for me"))
        .await;
    let id = session["id"].as_str().expect("id").to_owned();
    let pending = kandev.wait_pending(&id, 1).await.remove(0);
    (task, id, pending)
}

#[tokio::test]
async fn an_operator_cancel_reaches_the_agent_as_cancel_and_a_second_is_agentctls_404() {
    let kandev = Kandev::start_default().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let path = format!("/api/v1/clarifications/{pending_id}/cancel");
    let r = kandev.api().request("POST", &path, None).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "cancelled"})));
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "cancel"})]);
    let rec = kandev
        .wait_clarification_status(pending_id, "cancelled")
        .await;
    assert_eq!(
        (rec["outcome"].as_str(), rec["answered_by"].as_str()),
        (Some("cancelled"), Some("local"))
    );
    let s = kandev.session(&session).await;
    assert_eq!(s["pending_action"], Value::Null);
    // Forward first: agentctl adjudicates the second cancel, and an answer after it.
    for r in [
        kandev.api().request("POST", &path, None).await,
        kandev.respond(pending_id, &red()).await,
    ] {
        assert_eq!(
            (r.status, r.body["error"]["origin"].as_str()),
            (404, Some("agentctl")),
            "{r}"
        );
    }
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "one response, ever"
    );
    assert_eq!(
        kandev.clarification(pending_id).await["outcome"],
        "cancelled"
    );
}

#[tokio::test]
async fn ac15_cancelling_the_turn_answers_cancel_and_withdraws_the_surface() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let cancel = format!("/api/v1/sessions/{session}/cancel");
    assert_eq!(
        kandev.api().request("POST", &cancel, None).await.status,
        202
    );
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "cancel"})]);
    kandev
        .wait_clarification_status(pending_id, "cancelled")
        .await;
    let s = kandev.wait_session_state(&session, "IDLE").await;
    assert!(s["pending_action"].is_null());
    ws.wait_for_type("clarification.settled", DEADLINE, |c| {
        c["pending_id"] == pending_id && c["status"] == "cancelled"
    })
    .await;
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "cancelled");
}

#[tokio::test]
async fn ac64_the_answer_deadline_declines_and_the_turn_continues() {
    let kandev = Kandev::start(
        KandevOptions::new()
            .answer_timeout("1s")
            .env("KANDEV_ACP_IDLE_TIMEOUT", "1h"),
    )
    .await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let rec = kandev
        .wait_clarification_status(pending_id, "expired")
        .await;
    assert!(rec["settled_at"].is_string());
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(
        results,
        [json!({"action": "decline"})],
        "decline, not cancel"
    );
    kandev
        .wait_agent_text(&session, "You skipped the question.")
        .await;
    kandev.wait_session_state(&session, "IDLE").await;
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "expired");
}

#[tokio::test]
async fn f7_an_agent_cancelled_request_is_withdrawn() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    flag_on(&kandev).await;
    let task = task(&kandev, "Withdrawn").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:agent-cancel"))
        .await;
    let id = session["id"].as_str().expect("id");
    let settled = ws
        .wait_for_type("clarification.settled", DEADLINE, |c| {
            c["status"] == "cancelled"
        })
        .await;
    let pending_id = settled["data"]["pending_id"].as_str().expect("id");
    kandev.wait_session_state(id, "IDLE").await;
    let messages = kandev.messages(id).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["pending_id"], pending_id);
    assert_eq!(ask["metadata"]["status"], "cancelled");
    // Answering a withdrawn record: agentctl no longer holds it.
    let r = kandev.respond(pending_id, &red()).await;
    assert_eq!(
        (r.status, r.body["error"]["origin"].clone()),
        (404, json!("agentctl"))
    );
}

#[tokio::test]
async fn messages_hold_prompts_aggregated_text_and_tool_calls() {
    let kandev = Kandev::start_default().await;
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
