//! Declines that never reach the operator, flag on: AC-16 (url mode), AC-17 (request
//! scope), AC-18 (empty, only unrecognized, or absent properties) and a malformed body —
//! each answered `{"action":"decline"}` with no record, message, notification or event.

use kandev_testkit::{Kandev, KandevOptions, TURN_DEADLINE};
use serde_json::{Value, json};

/// Runs each scenario in its own session of one kandev, one after the other, and checks
/// that every elicitation was declined without any operator surface.
async fn assert_declined_silently(scenarios: &[&str]) {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let ws = kandev.ws().await;
    for (n, scenario) in scenarios.iter().enumerate() {
        let (task, session) = kandev
            .task_with_session("mock", &format!("/e2e:{scenario}"))
            .await;
        let sid = session["id"].as_str().expect("id").to_owned();
        let got = kandev
            .frames()
            .wait_for_elicitation_response(n + 1, TURN_DEADLINE)
            .await;
        assert_eq!(got, json!({"action": "decline"}), "{scenario}");
        let session = kandev.wait_session_state(&sid, "IDLE").await;
        assert_eq!(session["pending_action"], Value::Null, "{scenario}");
        assert!(
            kandev.clarifications(&sid, None).await.is_empty(),
            "{scenario}: no record"
        );
        let messages = kandev.messages(&sid).await;
        assert!(
            messages
                .iter()
                .all(|m| m["type"] != "clarification_request" && m["requests_input"] != true),
            "{scenario}: no clarification message: {messages:?}"
        );
        let task = kandev.task(task["id"].as_str().expect("id")).await;
        assert_eq!(task["pending_action"], Value::Null, "{scenario}");
        let text = kandev.wait_agent_text(&sid, "elicitation e1 result").await;
        assert!(
            text.contains("decline"),
            "{scenario}: the turn went on: {text}"
        );
    }
    assert!(kandev.notifications().await.is_empty(), "no notification");
    assert!(
        ws.of_type("clarification.created").is_empty(),
        "no operator event"
    );
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        scenarios.len(),
        "exactly one response per request"
    );
}

#[tokio::test]
async fn ac_16_url_mode_elicitation_is_declined_and_creates_no_clarification() {
    assert_declined_silently(&["url-mode"]).await;
}

#[tokio::test]
async fn ac_17_request_scoped_elicitation_is_declined() {
    assert_declined_silently(&["request-scope"]).await;
}

#[tokio::test]
async fn ac_18_empty_unrecognized_or_absent_properties_are_declined_with_no_operator_surface() {
    assert_declined_silently(&["no-questions", "e2e-unrecognized", "e2e-no-properties"]).await;
}

#[tokio::test]
async fn malformed_elicitation_params_are_declined_never_a_json_rpc_error() {
    assert_declined_silently(&["malformed"]).await;
}
