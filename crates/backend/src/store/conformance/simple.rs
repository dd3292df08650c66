//! Tasks, notifications, flag overrides and messages.

use std::collections::BTreeMap;

use serde_json::json;

use super::{Engine, on_every_engine, seeded};
use crate::model::{MessageKind, NewMessage, Notification, Task, author};

on_every_engine!(
    tasks_are_listed_newest_first,
    notifications_are_listed_newest_first,
    flag_overrides_set_replace_and_clear,
    messages_are_numbered_per_session_and_grow_in_place,
    appends_sent_together_each_land_on_their_own_message,
    a_streamed_message_reads_back_whole_and_merges_keep_or_replace_its_text,
    the_same_seq_twice_in_a_session_is_refused_by_the_database,
    two_handles_writing_one_session_never_share_a_seq,
    metadata_merges_keys_and_tool_calls_are_found_by_id,
    new_rows_get_ids_in_the_order_they_were_made,
);

async fn tasks_are_listed_newest_first(engine: &dyn Engine) {
    let s = engine.stores();
    assert!(s.tasks.tasks().await.expect("list").is_empty());
    let a = Task::new("First", "");
    s.tasks.create_task(&a).await.expect("a");
    let b = Task::new("Second", "more");
    s.tasks.create_task(&b).await.expect("b");
    assert_eq!(s.tasks.task(&a.id).await.expect("get"), Some(a.clone()));
    assert_eq!(s.tasks.task("nope").await.expect("get"), None);
    assert_eq!(s.tasks.tasks().await.expect("list"), vec![b, a]);
}

async fn notifications_are_listed_newest_first(engine: &dyn Engine) {
    let s = engine.stores();
    let a = Notification::clarification_requested("Fix the login page", "t1", "s1");
    s.notifications.insert_notification(&a).await.expect("a");
    let b = Notification::turn_finished("Fix the login page", "t1", "s1");
    s.notifications.insert_notification(&b).await.expect("b");
    assert_eq!(
        s.notifications.notifications().await.expect("list"),
        vec![b, a.clone()]
    );
    assert_eq!(
        s.notifications.notification(&a.id).await.expect("get"),
        Some(a)
    );
}

async fn flag_overrides_set_replace_and_clear(engine: &dyn Engine) {
    let s = engine.stores();
    assert!(s.flag_overrides.overrides().await.expect("read").is_empty());
    s.flag_overrides
        .set_override("features.a", Some(true))
        .await
        .expect("set");
    s.flag_overrides
        .set_override("features.a", Some(false))
        .await
        .expect("replace");
    // A second process sees the same rows: they are persisted.
    let other = engine.second().await.stores();
    assert_eq!(
        other.flag_overrides.overrides().await.expect("read"),
        BTreeMap::from([("features.a".to_owned(), false)])
    );
    other
        .flag_overrides
        .set_override("features.a", None)
        .await
        .expect("clear");
    other
        .flag_overrides
        .set_override("features.never", None)
        .await
        .expect("clear absent");
    assert!(s.flag_overrides.overrides().await.expect("read").is_empty());
}

/// Every kind of row kandev makes for a question gets a time-ordered id, so it goes at the
/// end of its key's index (docs/decisions/0023).
async fn new_rows_get_ids_in_the_order_they_were_made(engine: &dyn Engine) {
    let (s, task, first_session) = seeded(engine).await;
    let second_session = s
        .sessions
        .insert_session(&task, "mock")
        .await
        .expect("session");
    let first = s
        .messages
        .insert_message(&text(&first_session, &task, "a"))
        .await
        .expect("a");
    let second = s
        .messages
        .insert_message(&text(&first_session, &task, "b"))
        .await
        .expect("b");
    let note = Notification::turn_finished("T", &task, &first_session);
    let later_task = Task::new("Later", "");
    for (earlier, later) in [
        (first_session.as_str(), second_session.id.as_str()),
        (first.id.as_str(), second.id.as_str()),
        (task.as_str(), later_task.id.as_str()),
        (second.id.as_str(), note.id.as_str()),
    ] {
        for id in [earlier, later] {
            let parsed = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 7, "{id}");
        }
        assert!(earlier < later, "{earlier} before {later}");
    }
}

fn text(session: &str, task: &str, content: &str) -> NewMessage {
    NewMessage::new(session, task, MessageKind::Message, author::AGENT, content)
}

async fn messages_are_numbered_per_session_and_grow_in_place(engine: &dyn Engine) {
    let (s, task, session) = seeded(engine).await;
    let a = s
        .messages
        .insert_message(&text(&session, &task, "Hel"))
        .await
        .expect("a");
    let b = s
        .messages
        .insert_message(&text(&session, &task, "second"))
        .await
        .expect("b");
    assert_eq!((a.seq, b.seq), (1, 2));
    let a2 = s
        .messages
        .append_content(&a.id, "lo", None)
        .await
        .expect("append");
    assert_eq!(a2.content, "Hello");
    let all = s.messages.messages(&session).await.expect("list");
    assert_eq!(
        all.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [a.id.as_str(), b.id.as_str()]
    );
    assert_eq!(
        serde_json::to_value(&all[0]).expect("json")["type"],
        "message"
    );
    assert_eq!(s.messages.message(&a.id).await.expect("get"), Some(a2));
    assert!(
        s.messages
            .insert_message(&text("nope", &task, "x"))
            .await
            .is_err()
    );
}

/// Streamed text from many sessions arrives at once (on SQLite the appends then share a
/// commit): each lands on its own message, and one for a missing message is refused alone.
async fn appends_sent_together_each_land_on_their_own_message(engine: &dyn Engine) {
    let (s, task, session) = seeded(engine).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let message = text(&session, &task, &format!("m{i}:"));
        ids.push(
            s.messages
                .insert_message(&message)
                .await
                .expect("insert")
                .id,
        );
    }
    let appended = futures::future::join_all(
        ids.iter()
            .map(|id| s.messages.append_content(id, "x", None)),
    )
    .await;
    for (i, message) in appended.into_iter().enumerate() {
        assert_eq!(message.expect("append").content, format!("m{i}:x"));
    }
    let (missing, kept) = tokio::join!(
        s.messages.append_content("nope", "y", None),
        s.messages.append_content(&ids[0], "y", None)
    );
    assert!(missing.is_err(), "{missing:?}");
    assert_eq!(kept.expect("kept").content, "m0:xy");
    let stored = s.messages.message(&ids[3]).await.expect("get");
    assert_eq!(stored.map(|m| m.content), Some("m3:x".to_owned()));
}

/// A streamed message's text reads back whole and in order through every read (each
/// append's return, the message, the session's list); a merge keeps it, by either path,
/// and new content replaces all of it, after which appends go on from the new text.
async fn a_streamed_message_reads_back_whole_and_merges_keep_or_replace_its_text(
    engine: &dyn Engine,
) {
    let (s, task, session) = seeded(engine).await;
    let message = s
        .messages
        .insert_message(&text(&session, &task, "0"))
        .await
        .expect("insert");
    let read = async || {
        let read = s.messages.message(&message.id).await.expect("get");
        read.expect("row")
    };
    let mut expected = String::from("0");
    for i in 1..=12 {
        let chunk = format!(" {i}é😀");
        let appended = s
            .messages
            .append_content(&message.id, &chunk, None)
            .await
            .expect("append");
        expected.push_str(&chunk);
        assert_eq!(appended.content, expected);
    }
    let whole = read().await;
    assert_eq!(whole.content, expected);
    let listed = s.messages.messages(&session).await.expect("list");
    assert_eq!(listed, [whole]);

    let mut patch = serde_json::Map::new();
    patch.insert("seen".into(), serde_json::json!(true));
    let merged = s
        .messages
        .merge_metadata(&message.id, &patch, None)
        .await
        .expect("merge");
    assert_eq!(merged.content, expected, "a merge returns the whole text");
    // A key SQLite cannot name in a path: its merge writes the row back, text and all.
    let mut odd = serde_json::Map::new();
    odd.insert("we\"ird.$key".into(), serde_json::json!(1));
    let rewritten = s
        .messages
        .merge_metadata(&message.id, &odd, None)
        .await
        .expect("merge by rewrite");
    assert_eq!(rewritten.content, expected);
    s.messages
        .append_content(&message.id, "!", None)
        .await
        .expect("append after the rewrite");
    expected.push('!');
    assert_eq!(read().await.content, expected);
    let replaced = s
        .messages
        .merge_metadata(&message.id, &patch, Some("new"))
        .await
        .expect("replace");
    assert_eq!(replaced.content, "new");
    s.messages
        .append_content(&message.id, "er", None)
        .await
        .expect("append after");
    assert_eq!(read().await.content, "newer", "the old text went");
}

async fn the_same_seq_twice_in_a_session_is_refused_by_the_database(engine: &dyn Engine) {
    let (s, task, session) = seeded(engine).await;
    let a = s
        .messages
        .insert_message(&text(&session, &task, "a"))
        .await
        .expect("a");
    assert!(
        !engine.duplicate_seq_accepted(&session, &task, a.seq).await,
        "UNIQUE (session_id, seq)"
    );
}

async fn two_handles_writing_one_session_never_share_a_seq(engine: &dyn Engine) {
    let (s, task, session) = seeded(engine).await;
    let other = engine.second().await.stores();
    let writes = (0..40).map(|i| {
        let store = if i % 2 == 0 { s.clone() } else { other.clone() };
        let new = text(&session, &task, &i.to_string());
        async move {
            store
                .messages
                .insert_message(&new)
                .await
                .expect("insert")
                .seq
        }
    });
    let mut seqs = futures::future::join_all(writes).await;
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=40).collect::<Vec<i64>>());
}

async fn metadata_merges_keys_and_tool_calls_are_found_by_id(engine: &dyn Engine) {
    let (s, task, session) = seeded(engine).await;
    let meta = json!({"tool_call_id": "t1", "status": "pending", "rawInput": {"path": "a.rs"}});
    let tool = s
        .messages
        .insert_message(
            &NewMessage::new(
                &session,
                &task,
                MessageKind::ToolCall,
                author::AGENT,
                "Read file",
            )
            .with_metadata(meta.as_object().cloned().expect("object")),
        )
        .await
        .expect("insert");
    let found = s
        .messages
        .latest_tool_call(&session, "t1")
        .await
        .expect("find");
    assert_eq!(found.map(|m| m.id), Some(tool.id.clone()));
    assert!(
        s.messages
            .latest_tool_call(&session, "t2")
            .await
            .expect("find")
            .is_none()
    );
    let patch = json!({"status": "completed", "rawInput": {"path": "b.rs"}});
    let updated = s
        .messages
        .merge_metadata(&tool.id, patch.as_object().expect("obj"), Some("Read b.rs"))
        .await
        .expect("merge");
    // A shallow merge: keys replaced whole, the others kept.
    assert_eq!(
        updated.metadata,
        json!({"tool_call_id": "t1", "status": "completed", "rawInput": {"path": "b.rs"}})
    );
    assert_eq!(updated.content, "Read b.rs");
    assert_eq!(
        s.messages.message(&tool.id).await.expect("get"),
        Some(updated)
    );
    // A null is kept as a value, a new key is added, and any key is one key (an agent's
    // tool-call fields name them).
    for patch in [
        json!({"status": null, "extra": {"a": [1, "x"]}}),
        json!({"we\"ird.$key[0]": true}),
    ] {
        s.messages
            .merge_metadata(&tool.id, patch.as_object().expect("obj"), None)
            .await
            .expect("merge");
    }
    let updated = s
        .messages
        .message(&tool.id)
        .await
        .expect("get")
        .expect("message");
    assert_eq!(
        updated.metadata,
        json!({"tool_call_id": "t1", "status": null, "rawInput": {"path": "b.rs"},
               "extra": {"a": [1, "x"]}, "we\"ird.$key[0]": true})
    );
    assert_eq!(updated.content, "Read b.rs", "no content given: kept");
}
