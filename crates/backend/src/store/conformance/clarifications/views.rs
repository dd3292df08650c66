//! The session row a record's writes keep: its `pending` count and its `view_seq`.

use super::super::{Engine, on_every_engine, seeded};
use super::{answer, new_message, new_record};
use crate::model::{ClarificationStatus, Outcome, SettledBy, Settlement, Source};
use crate::store::{ClarificationFilter, Stores};

on_every_engine!(
    the_session_counts_its_pending_records_and_each_change_of_its_view_raises_view_seq,
);

/// The session row's `pending` and `view_seq` after each kind of write (the triggers of
/// migration 0008/0005 and the session updates): `pending` is always the number of
/// pending records, and `view_seq` rises exactly when what the session shows changes.
async fn the_session_counts_its_pending_records_and_each_change_of_its_view_raises_view_seq(
    engine: &dyn Engine,
) {
    use crate::model::{Fence, SessionState};
    let (db, task, session) = seeded(engine).await;
    let row = || async {
        let row = db
            .sessions
            .session(&session)
            .await
            .expect("s")
            .expect("row");
        let counted = db
            .clarifications
            .clarifications(&ClarificationFilter {
                session_id: Some(session.clone()),
                status: Some(ClarificationStatus::Pending),
            })
            .await
            .expect("records")
            .len();
        assert_eq!(row.pending, counted, "the count follows the records");
        (row.pending, row.view_seq)
    };
    let (_, mut seq) = row().await;
    let mut expect = |pending: usize, raised: bool, got: (usize, u64)| {
        assert_eq!(got.0, pending);
        if raised {
            assert!(got.1 > seq, "view_seq rises: {} then {}", seq, got.1);
        } else {
            assert_eq!(got.1, seq, "view_seq stays");
        }
        seq = got.1;
    };
    for (id, pending) in [("a", 1), ("b", 2)] {
        let (record, message) = (
            new_record(id, &session, &task, Source::Elicitation),
            new_message(&session, &task, id),
        );
        let opened = db
            .clarifications
            .open_clarification(&record, &message, None, None);
        as_left(
            engine,
            &db,
            opened.await.expect("open").expect("new").session,
        )
        .await;
        expect(pending, true, row().await);
    }
    // A replayed open writes nothing.
    let (record, message) = (
        new_record("a", &session, &task, Source::Elicitation),
        new_message(&session, &task, "a"),
    );
    let replay = db
        .clarifications
        .open_clarification(&record, &message, None, None);
    assert!(replay.await.expect("replay").is_none());
    expect(2, false, row().await);
    let answered = Settlement::answered(answer(), "op");
    let settled = db.clarifications.settle("a", &answered).await;
    as_left(
        engine,
        &db,
        settled.expect("settle").expect("settled").session,
    )
    .await;
    expect(1, true, row().await);
    // From one settled status to another: the count stands.
    engine
        .stand(
            "a",
            ClarificationStatus::Cancelled,
            Outcome::Cancelled,
            SettledBy::Backend,
            None,
        )
        .await;
    expect(1, false, row().await);
    let gone = Settlement::disconnected();
    let all = db
        .clarifications
        .settle_pending(&session, None, &[], &gone)
        .await;
    let mut all = all.expect("settle all");
    assert_eq!(all.len(), 1);
    as_left(engine, &db, all.pop().and_then(|done| done.session)).await;
    expect(0, true, row().await);
    let moved = db
        .sessions
        .transition(&session, SessionState::Starting, None, Fence::NONE);
    assert!(moved.await.expect("transition"));
    expect(0, true, row().await);
    let refused = db
        .sessions
        .transition(&session, SessionState::Created, None, Fence::NONE);
    assert!(!refused.await.expect("transition"));
    expect(0, false, row().await);
    db.sessions
        .set_last_event_seq(&session, 7)
        .await
        .expect("seq");
    expect(0, false, row().await);
}

/// What a write returns of its session, when its engine returns it, is the row as it
/// left it.
async fn as_left(engine: &dyn Engine, db: &Stores, written: Option<crate::model::SessionRecord>) {
    assert_eq!(written.is_some(), engine.returns_sessions());
    if let Some(written) = written {
        let stored = db.sessions.session(&written.id).await.expect("s");
        assert_eq!(Some(written), stored, "the session as the write left it");
    }
}
