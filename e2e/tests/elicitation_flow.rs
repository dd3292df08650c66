//! The elicitation lifecycle through the operator API, with the real `kandev`,
//! `agentctl` and `mock-agent` processes (docs/architecture.md §3).

use kandev_testkit::{DEADLINE, Kandev, poll_until};
use serde_json::{Value, json};

/// A new task titled `title`; its id.
async fn task(kandev: &Kandev, title: &str) -> String {
    kandev.create_task(title).await["id"]
        .as_str()
        .expect("task id")
        .to_owned()
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
