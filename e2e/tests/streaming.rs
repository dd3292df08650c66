//! Streamed agent text (issue 29 §3) with the real `kandev`, `agentctl` and mock agent:
//! operators get a message's first text in `message.created` and the rest as
//! `message.appended` events of only the new text, which add up to the stored message; a
//! socket that watches some sessions gets their transcripts whole and no other.

use kandev_testkit::{DEADLINE, Kandev, OperatorWs};
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

/// Whether `event` is part of a transcript (`message.*`), and whose.
fn transcript_of(event: &Value) -> Option<&str> {
    let kind = event["type"].as_str()?;
    kind.starts_with("message.")
        .then(|| event["data"]["session_id"].as_str())
        .flatten()
}

/// One socket watches with a frame (`none`), one from its connect (`one`, `?watch=`).
#[tokio::test]
async fn a_socket_that_watches_one_transcript_gets_it_whole_and_every_board_event() {
    let kandev = Kandev::start_default().await;
    let (every, none) = (kandev.ws().await, kandev.ws().await);
    let mut sids = Vec::new();
    for n in 1..=2 {
        let task = kandev.create_task(&format!("e2e: watched {n}")).await;
        let task_id = task["id"].as_str().expect("task id");
        let session = kandev.start_session(task_id, "mock", None).await;
        sids.push(session["id"].as_str().expect("session id").to_owned());
    }
    let (watched, other) = (sids[0].as_str(), sids[1].as_str());
    let one = kandev.ws_watching(&[watched]).await;
    none.watch(Some(&[]), DEADLINE).await;
    for sid in &sids {
        kandev.wait_session_state(sid, "IDLE").await;
        let r = kandev
            .api()
            .post(
                &format!("/api/v1/sessions/{sid}/prompt"),
                &serde_json::json!({"text": "/e2e:e2e-stream"}),
            )
            .await;
        assert_eq!(r.status, 202, "{r}");
    }
    for sid in &sids {
        kandev.wait_session_state(sid, "IDLE").await;
        kandev.wait_agent_text(sid, "500:wörd").await;
    }
    // A board event after both turns: once a socket has it, it has all it will get.
    let barrier = kandev.create_task("e2e: barrier").await;
    for ws in [&every, &one, &none] {
        ws.wait_for_type("task.created", DEADLINE, |d| d["id"] == barrier["id"])
            .await;
    }

    let of = |ws: &OperatorWs, sid: &str| -> usize {
        ws.events()
            .iter()
            .filter(|e| transcript_of(e) == Some(sid))
            .count()
    };
    assert!(of(&every, watched) > 0 && of(&every, other) > 0);
    assert_eq!(
        one.events().first(),
        Some(&serde_json::json!({"type": "watching", "data": {"sessions": [watched]}})),
        "a watch from the connect is acknowledged first"
    );
    assert_eq!(
        of(&one, watched),
        of(&every, watched),
        "the watched transcript whole"
    );
    assert_eq!(of(&one, other), 0, "no other transcript");
    let none_transcripts: Vec<Value> = none
        .events()
        .into_iter()
        .filter(|e| transcript_of(e).is_some())
        .collect();
    assert!(none_transcripts.is_empty(), "{none_transcripts:?}");
    let answer = kandev
        .messages(watched)
        .await
        .into_iter()
        .find(|m| m["type"] == "message" && m["author_type"] == "agent")
        .expect("the agent's answer");
    let id = answer["id"].as_str().expect("id");
    assert_eq!(
        rebuilt(&one.events(), id),
        answer["content"].as_str().expect("text")
    );
    // Board events reach every socket, whatever it watches.
    for ws in [&one, &none] {
        for sid in &sids {
            assert!(
                ws.of_type("session.updated")
                    .iter()
                    .any(|e| e["data"]["id"] == sid.as_str() && e["data"]["state"] == "RUNNING"),
                "{sid} running: {:?}",
                ws.summary()
            );
        }
    }

    // A frame the socket cannot apply is answered with an error and changes nothing.
    none.send(&serde_json::json!({"type": "subscribe", "data": {}}));
    let error = none
        .wait_for_type("error", DEADLINE, |d| d["code"] == "INVALID_FRAME")
        .await;
    assert!(
        error["data"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("watch")),
        "{error}"
    );
    none.watch(None, DEADLINE).await;
}

#[tokio::test]
async fn a_socket_that_watches_none_from_its_connect_gets_no_transcript_and_a_bad_watch_is_refused()
{
    let kandev = Kandev::start_default().await;
    let (_, session) = kandev.task_with_session("mock", "/e2e:e2e-stream").await;
    let sid = session["id"].as_str().expect("session id").to_owned();
    // Connected while the session streams: not one of its events reaches it.
    let none = kandev.ws_watching(&[]).await;
    kandev.wait_session_state(&sid, "IDLE").await;
    let barrier = kandev.create_task("e2e: barrier").await;
    none.wait_for_type("task.created", DEADLINE, |d| d["id"] == barrier["id"])
        .await;
    let events = none.events();
    assert_eq!(
        events.first(),
        Some(&serde_json::json!({"type": "watching", "data": {"sessions": []}}))
    );
    let transcripts: Vec<&Value> = events
        .iter()
        .filter(|e| transcript_of(e).is_some())
        .collect();
    assert!(transcripts.is_empty(), "{transcripts:?}");

    let ids: Vec<String> = (0..=64).map(|i| format!("s{i}")).collect();
    let refused = kandev
        .api()
        .get(&format!("/api/v1/ws?watch={}", ids.join(",")))
        .await;
    assert_eq!(refused.status, 400, "{refused}");
    assert_eq!(refused.body["error"]["code"], "BAD_REQUEST", "{refused}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 64")),
        "{refused}"
    );
}
