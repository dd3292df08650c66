//! Streamed agent text (issue 29 §3) with the real `kandev`, `agentctl` and mock agent:
//! operators get a message's first text in `message.created` and the rest as
//! `message.appended` events of only the new text, which add up to the stored message.

use kandev_testkit::{DEADLINE, Kandev};
use serde_json::Value;

/// The text of the `kind` message (`message`, `thought`) of `id` as the operator
/// WebSocket built it: `message.created`'s content, then every append's text, each
/// checked against the length it announces (UTF-16 units).
fn rebuilt(events: &[Value], id: &str) -> String {
    let mine: Vec<&Value> = events.iter().filter(|e| e["data"]["id"] == id).collect();
    assert_eq!(mine[0]["type"], "message.created", "{:?}", mine[0]);
    let mut text = mine[0]["data"]["content"]
        .as_str()
        .expect("created content")
        .to_owned();
    for event in &mine[1..] {
        assert_eq!(
            event["type"], "message.appended",
            "only appends after: {event}"
        );
        let data = &event["data"];
        assert!(
            data.get("content").is_none(),
            "never the whole content: {data}"
        );
        text.push_str(data["text"].as_str().expect("appended text"));
        assert_eq!(
            data["length"].as_u64(),
            u64::try_from(text.encode_utf16().count()).ok(),
            "the length after each append"
        );
    }
    text
}

#[tokio::test]
async fn streamed_chunks_reach_operators_as_appends_that_add_up_to_the_stored_message() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let (_, session) = kandev.task_with_session("mock", "/e2e:e2e-stream").await;
    let sid = session["id"].as_str().expect("session id").to_owned();
    let answer: String = std::iter::once("Streaming: ".to_owned())
        .chain((1..=500).map(|i| format!("{i}:wörd 🙂 ")))
        .collect();
    let thought: String = (1..=50).map(|i| format!("{i}:hmm ")).collect();
    // ~7 KB cannot fit one 4 KiB append: its last append announces the whole length.
    let length = answer.encode_utf16().count();
    let last = ws
        .wait_for_type("message.appended", DEADLINE, |d| {
            d["session_id"] == sid.as_str() && d["length"].as_u64() == u64::try_from(length).ok()
        })
        .await;
    assert_eq!(
        [&last["data"]["type"], &last["data"]["author_type"]],
        ["message", "agent"]
    );
    let messages = kandev.messages(&sid).await;
    let stored = |kind: &str| {
        messages
            .iter()
            .find(|m| m["type"] == kind && m["author_type"] == "agent")
            .unwrap_or_else(|| panic!("the agent's {kind}: {messages:?}"))
    };
    let (answer_row, thought_row) = (stored("message"), stored("thought"));
    assert_eq!(answer_row["content"], answer.as_str());
    assert_eq!(thought_row["content"], thought.as_str());

    let events = ws.events();
    let answer_id = answer_row["id"].as_str().expect("id");
    assert_eq!(rebuilt(&events, answer_id), answer);
    let thought_id = thought_row["id"].as_str().expect("id");
    // The thought is complete on the socket once the answer's last append is there.
    assert_eq!(rebuilt(&events, thought_id), thought);
    let streamed_in_updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.updated" && e["data"]["session_id"] == sid.as_str())
        .filter(|e| e["data"]["type"] == "message" || e["data"]["type"] == "thought")
        .collect();
    assert!(
        streamed_in_updates.is_empty(),
        "no message.updated carries streamed text: {streamed_in_updates:?}"
    );
    // How much merged depends on timing (nothing waits for chunks), so it is only reported.
    let appends = ws.of_type("message.appended").len();
    eprintln!("549 streamed chunks after the two first: {appends} appends");
}
