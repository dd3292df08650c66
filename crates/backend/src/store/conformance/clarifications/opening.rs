//! Opening a record: one statement, its own id, replays that store nothing.

use serde_json::Value;

use super::super::{Engine, on_every_engine, seeded};
use super::{applied_seq, new_message, new_record, note, notes, open};
use crate::model::{ClarificationStatus, Source};
use crate::store::{ClarificationFilter, Stores};

on_every_engine!(
    identical_questions_make_two_records_under_their_ids_and_a_replay_makes_none,
    an_open_returns_what_it_stored_and_racing_replays_store_one,
);

async fn identical_questions_make_two_records_under_their_ids_and_a_replay_makes_none(
    engine: &dyn Engine,
) {
    let (db, task, session) = seeded(engine).await;
    let (a, message) = open(&db, "6f1c0a52-0000-4000-8000-000000000001", &session, &task).await;
    assert_eq!(a.message_id.as_deref(), Some(message.id.as_str()));
    assert_eq!(message.metadata["pending_id"], a.pending_id);
    open(&db, "6f1c0a52-0000-4000-8000-000000000002", &session, &task).await;
    let replay = db
        .clarifications
        .open_clarification(
            &new_record(&a.pending_id, &session, &task, Source::Elicitation),
            &new_message(&session, &task, &a.pending_id),
            Some(&note(&session, &task)),
            Some(9),
        )
        .await
        .expect("replay");
    assert!(replay.is_none());
    assert_eq!(notes(&db).await, 0, "no notification with a replay");
    assert_eq!(
        applied_seq(&db, &session).await,
        None,
        "nor the stream position"
    );
    assert_eq!(
        db.messages
            .messages(&session)
            .await
            .expect("messages")
            .len(),
        2,
        "no message for the replay"
    );
    let all = db
        .clarifications
        .clarifications(&ClarificationFilter {
            session_id: Some(session.clone()),
            status: Some(ClarificationStatus::Pending),
        })
        .await
        .expect("list");
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].pending_id, a.pending_id);
    assert_eq!(
        db.sessions
            .session(&session)
            .await
            .expect("s")
            .expect("row")
            .pending,
        2
    );
    let view = serde_json::to_value(&all[0]).expect("json");
    assert_eq!(view["source"], "elicitation");
    assert_eq!(view["questions"][0]["id"], "question_0");
    assert_eq!(view["answer"], Value::Null);
    let third = db
        .clarifications
        .open_clarification(
            &new_record("p-3", &session, &task, Source::Elicitation),
            &new_message(&session, &task, "p-3"),
            None,
            Some(12),
        )
        .await
        .expect("open");
    assert!(third.is_some());
    assert_eq!(
        applied_seq(&db, &session).await,
        Some(12),
        "a new record's open stores the stream position in its commit"
    );
}

/// The one-statement open returns the record and message it built, not read back: they
/// must equal what a read finds. Replays racing from two processes store one of each, and
/// an unknown session is an error that writes nothing.
async fn an_open_returns_what_it_stored_and_racing_replays_store_one(engine: &dyn Engine) {
    let (db, task, session) = seeded(engine).await;
    open(&db, "p-0", &session, &task).await;
    let (record, message) = open(&db, "p-1", &session, &task).await;
    assert_eq!(message.seq, 2, "the session's next number");
    assert_eq!(
        db.clarifications.clarification("p-1").await.expect("read"),
        Some(record)
    );
    assert_eq!(
        db.messages.message(&message.id).await.expect("read"),
        Some(message)
    );

    let second = engine.second().await.stores();
    let race = |s: Stores| {
        let (session, task) = (session.clone(), task.clone());
        tokio::spawn(async move {
            s.clarifications
                .open_clarification(
                    &new_record("p-2", &session, &task, Source::Elicitation),
                    &new_message(&session, &task, "p-2"),
                    Some(&note(&session, &task)),
                    None,
                )
                .await
                .expect("open or replay")
        })
    };
    let (a, b) = (race(db.clone()), race(second));
    let opened = [a.await.expect("task"), b.await.expect("task")];
    assert_eq!(opened.iter().filter(|o| o.is_some()).count(), 1);
    assert_eq!(
        notes(&db).await,
        1,
        "the notification commits with the one record"
    );
    let messages = db.messages.messages(&session).await.expect("messages");
    assert_eq!(messages.len(), 3, "one message for the two opens of p-2");
    assert_eq!(messages.last().map(|m| m.seq), Some(3));

    let unknown = db
        .clarifications
        .open_clarification(
            &new_record("p-3", "no-such-session", &task, Source::Elicitation),
            &new_message("no-such-session", &task, "p-3"),
            None,
            None,
        )
        .await;
    assert!(
        matches!(&unknown, Err(err) if err.to_string().contains("no-such-session")),
        "{unknown:?}"
    );
    assert_eq!(
        db.clarifications.clarification("p-3").await.expect("read"),
        None
    );
}
