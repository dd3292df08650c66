//! Which operator answered: named in the record, its message and the history.

use kandev_testkit::{DEADLINE, poll_until};
use serde_json::json;

use super::{ALICE, BOB, as_operator, with_auth};

#[tokio::test]
async fn answered_by_names_the_operator_in_the_record_its_message_and_the_history() {
    let kandev = with_auth().await;
    let flag = as_operator(
        &kandev,
        ALICE,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
    )
    .await;
    assert_eq!(flag.status, 200);
    let task = as_operator(
        &kandev,
        BOB,
        "POST",
        "/api/v1/tasks",
        Some(json!({"title": "Paint"})),
    )
    .await;
    let task = task.body["id"].as_str().expect("task").to_owned();
    let session = as_operator(
        &kandev,
        BOB,
        "POST",
        &format!("/api/v1/tasks/{task}/sessions"),
        Some(json!({"agent": "mock", "prompt": "Pick for me"})),
    )
    .await
    .expect_status(201, "start session");
    let session = session["id"].as_str().expect("session").to_owned();
    let list = format!("/api/v1/clarifications?session_id={session}&status=pending");
    let pending = poll_until("the demo question", DEADLINE, || async {
        let got = as_operator(&kandev, BOB, "GET", &list, None).await;
        got.body["clarifications"][0]["pending_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let answer = json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]});
    let respond = format!("/api/v1/clarifications/{pending}/respond");
    let got = as_operator(&kandev, ALICE, "POST", &respond, Some(answer)).await;
    assert_eq!((got.status, got.body), (200, json!({"status": "answered"})));
    let record = as_operator(
        &kandev,
        BOB,
        "GET",
        &format!("/api/v1/clarifications/{pending}"),
        None,
    )
    .await
    .body;
    assert_eq!(
        (record["answered_by"].as_str(), record["outcome"].as_str()),
        (Some("alice"), Some("answered")),
        "who answered, not who asked or who reads: {record}"
    );
    let messages = as_operator(
        &kandev,
        BOB,
        "GET",
        &format!("/api/v1/sessions/{session}/messages"),
        None,
    )
    .await
    .body;
    let card = messages["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["metadata"]["pending_id"] == pending.as_str())
        .expect("the clarification message")
        .clone();
    assert_eq!(card["metadata"]["answered_by"], "alice");
    assert_eq!(card["metadata"]["status"], "answered");
}
