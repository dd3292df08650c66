//! Sessions: the state machine enforced in the update, the turn claim, the views.

use serde_json::json;

use super::{Engine, on_every_engine, seeded};
use crate::model::{Fence, MessageKind, NewMessage, Session, SessionState, Task, author};
use crate::store::{StartFacts, TurnStart};

on_every_engine!(
    the_state_machine_is_enforced_in_the_update,
    one_turn_at_a_time_and_an_abandoned_prompt_leaves_no_trace,
    two_handles_racing_for_the_turn_start_one,
    the_last_applied_event_is_stored_without_touching_updated_at,
    streamed_text_can_store_how_far_events_are_applied_with_it,
    the_board_reads_every_task_with_its_sessions,
);

async fn the_state_machine_is_enforced_in_the_update(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let row = s.sessions.session(&id).await.expect("get").expect("row");
    assert_eq!(row.state, SessionState::Created);
    assert!(
        !s.sessions
            .transition(&id, SessionState::Running, None, Fence::NONE)
            .await
            .expect("t")
    );
    assert!(
        s.sessions
            .transition(&id, SessionState::Starting, None, Fence::NONE)
            .await
            .expect("t")
    );
    assert_eq!(s.sessions.live_sessions().await.expect("live").len(), 1);
    let facts = StartFacts {
        acp_session_id: "acp-1".into(),
        // Keys out of alphabetical order: the record keeps them as exchanged.
        client_capabilities: json!({"terminal": true, "fs": {"writeTextFile": false}, "elicitation": {"form": {}}}),
        flags: json!({"features.acpElicitation": true}),
        agent_info: Some(json!({"name": "mock-agent", "version": "0.1.0"})),
    };
    s.sessions.record_start(&id, &facts).await.expect("started");
    assert!(
        !s.sessions
            .transition(&id, SessionState::WaitingForInput, None, Fence::NONE)
            .await
            .expect("t"),
        "waiting is shown, never stored"
    );
    assert!(
        s.sessions
            .transition(&id, SessionState::Failed, Some("agent exited"), Fence::NONE)
            .await
            .expect("t")
    );
    assert!(
        !s.sessions
            .transition(&id, SessionState::Idle, None, Fence::NONE)
            .await
            .expect("t"),
        "terminal states go nowhere"
    );
    let view = Session::from(s.sessions.session(&id).await.expect("get").expect("row"));
    assert_eq!(view.state, SessionState::Failed);
    assert_eq!(
        view.client_capabilities.to_string(),
        facts.client_capabilities.to_string(),
        "capabilities come back byte for byte"
    );
    assert_eq!(view.agent_info["name"], "mock-agent");
    assert_eq!(view.error.as_deref(), Some("agent exited"));
    assert!(s.sessions.live_sessions().await.expect("live").is_empty());
    assert_eq!(
        s.sessions
            .sessions_of_tasks(&[task])
            .await
            .expect("list")
            .len(),
        1
    );
    assert!(
        s.sessions
            .sessions_of_tasks(&[])
            .await
            .expect("none")
            .is_empty()
    );
}

async fn idle(engine: &dyn Engine) -> (crate::store::Stores, String, String) {
    let (s, task, id) = seeded(engine).await;
    s.sessions
        .transition(&id, SessionState::Starting, None, Fence::NONE)
        .await
        .expect("t");
    s.sessions
        .transition(&id, SessionState::Idle, None, Fence::NONE)
        .await
        .expect("t");
    (s, task, id)
}

async fn one_turn_at_a_time_and_an_abandoned_prompt_leaves_no_trace(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let prompt = NewMessage::new(&id, &task, MessageKind::Message, author::USER, "go");
    assert_eq!(
        s.sessions
            .begin_turn(&id, &prompt, Fence::NONE)
            .await
            .expect("turn"),
        TurnStart::Refused(SessionState::Created)
    );
    s.sessions
        .transition(&id, SessionState::Starting, None, Fence::NONE)
        .await
        .expect("t");
    s.sessions
        .transition(&id, SessionState::Idle, None, Fence::NONE)
        .await
        .expect("t");
    let TurnStart::Started(message) = s
        .sessions
        .begin_turn(&id, &prompt, Fence::NONE)
        .await
        .expect("turn")
    else {
        panic!("the turn should start");
    };
    assert_eq!(
        s.sessions
            .begin_turn(&id, &prompt, Fence::NONE)
            .await
            .expect("turn"),
        TurnStart::Refused(SessionState::Running)
    );
    s.sessions
        .abandon_turn(&id, &message.id)
        .await
        .expect("abandon");
    let row = s.sessions.session(&id).await.expect("get").expect("row");
    assert_eq!(row.state, SessionState::Idle);
    assert!(s.messages.messages(&id).await.expect("list").is_empty());
    assert!(matches!(
        s.sessions
            .begin_turn(&id, &prompt, Fence::NONE)
            .await
            .expect("turn"),
        TurnStart::Started(_)
    ));
    assert!(s.sessions.end_turn(&id, Fence::NONE).await.expect("end"));
    assert!(
        !s.sessions.end_turn(&id, Fence::NONE).await.expect("end"),
        "only a running turn ends"
    );
    assert_eq!(
        s.sessions
            .begin_turn("nope", &prompt, Fence::NONE)
            .await
            .expect("turn"),
        TurnStart::Missing
    );
}

async fn two_handles_racing_for_the_turn_start_one(engine: &dyn Engine) {
    let (s, task, id) = idle(engine).await;
    let other = engine.second().await.stores();
    for round in 0..10 {
        let prompt = NewMessage::new(&id, &task, MessageKind::Message, author::USER, "go");
        let (a, b) = tokio::join!(
            s.sessions.begin_turn(&id, &prompt, Fence::NONE),
            other.sessions.begin_turn(&id, &prompt, Fence::NONE)
        );
        let started = [a.expect("a"), b.expect("b")]
            .iter()
            .filter(|t| matches!(t, TurnStart::Started(_)))
            .count();
        assert_eq!(started, 1, "round {round}");
        assert!(s.sessions.end_turn(&id, Fence::NONE).await.expect("end"));
    }
}

async fn the_last_applied_event_is_stored_without_touching_updated_at(engine: &dyn Engine) {
    let (s, _task, id) = seeded(engine).await;
    let row = s.sessions.session(&id).await.expect("get").expect("row");
    s.sessions.set_last_event_seq(&id, 41).await.expect("seq");
    let after = s.sessions.session(&id).await.expect("get").expect("row");
    assert_eq!(after.last_event_seq, Some(41));
    assert_eq!(after.updated_at, row.updated_at);
}

/// An append given a stream position writes it to the message's session with the text;
/// one without leaves the position as it was; one to no message writes neither.
async fn streamed_text_can_store_how_far_events_are_applied_with_it(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let other = s
        .sessions
        .insert_session(&task, "mock")
        .await
        .expect("another session")
        .id;
    let new = NewMessage::new(&id, &task, MessageKind::Message, author::AGENT, "Hel");
    let message = s.messages.insert_message(&new).await.expect("message");
    let row = s.sessions.session(&id).await.expect("get").expect("row");
    let appended = s
        .messages
        .append_content(&message.id, "lo", Some(42))
        .await
        .expect("append");
    assert_eq!(appended.content, "Hello");
    let seq = async |session: &str| {
        let row = s.sessions.session(session).await.expect("get");
        row.expect("row").last_event_seq
    };
    assert_eq!(seq(&id).await, Some(42));
    assert_eq!(
        seq(&other).await,
        None,
        "only the message's own session moves"
    );
    let after = s.sessions.session(&id).await.expect("get").expect("row");
    assert_eq!(after.updated_at, row.updated_at);
    let appended = s
        .messages
        .append_content(&message.id, "!", None)
        .await
        .expect("append");
    assert_eq!(appended.content, "Hello!");
    assert_eq!(seq(&id).await, Some(42), "no position, no move");
    assert!(
        s.messages
            .append_content("nope", "x", Some(43))
            .await
            .is_err()
    );
    assert_eq!(seq(&id).await, Some(42));
    assert_eq!(seq(&other).await, None);
}

async fn the_board_reads_every_task_with_its_sessions(engine: &dyn Engine) {
    let (s, first, _) = seeded(engine).await;
    let second = Task::new("Second", "");
    s.tasks.create_task(&second).await.expect("task");
    let board = s.board().await.expect("board");
    assert_eq!(
        board
            .iter()
            .map(|v| (v.task.id.as_str(), v.sessions.len()))
            .collect::<Vec<_>>(),
        [(second.id.as_str(), 0), (first.as_str(), 1)]
    );
    let view = s.task_view(&first).await.expect("view").expect("task");
    assert_eq!(view.state, Some(SessionState::Created));
    assert!(s.task_view("nope").await.expect("view").is_none());
}
