//! `ask_user_question` calls: they open, join or repeat a record, and settle with it.

use kandev_agent_stream::SettleOutcome;

use super::super::{Engine, on_every_engine, seeded};
use super::{answer, applied_seq, new_message, new_record, note, notes};
use crate::model::{ClarificationStatus, Settlement, Source};
use crate::store::{CallSettles, QuestionOpened};

on_every_engine!(
    a_question_call_opens_joins_or_repeats_and_its_record_settles_with_its_last_call,
    an_operators_returned_call_settles_its_record_at_once_and_names_the_calls_still_waiting,
);

async fn a_question_call_opens_joins_or_repeats_and_its_record_settles_with_its_last_call(
    engine: &dyn Engine,
) {
    let (db, task, session) = seeded(engine).await;
    let rec = new_record("q1", &session, &task, Source::AskUserQuestion);
    let first = db
        .clarifications
        .open_question(
            "r1",
            "key",
            &rec,
            &new_message(&session, &task, "q1"),
            Some(&note(&session, &task)),
            Some(5),
        )
        .await
        .expect("r1");
    assert!(matches!(first, QuestionOpened::Opened { .. }));
    assert_eq!(notes(&db).await, 1, "stored with the record it announces");
    assert_eq!(
        applied_seq(&db, &session).await,
        Some(5),
        "and the position"
    );
    let QuestionOpened::Opened { record, .. } = &first else {
        unreachable!("matched above")
    };
    let stored = db
        .notifications
        .notifications()
        .await
        .expect("notifications");
    assert_eq!(
        stored[0].created_at, record.created_at,
        "at the record's own time"
    );
    let other = new_record("q2", &session, &task, Source::AskUserQuestion);
    assert_eq!(
        db.clarifications
            .open_question(
                "r2",
                "key",
                &other,
                &new_message(&session, &task, "q2"),
                Some(&note(&session, &task)),
                Some(6),
            )
            .await
            .expect("r2"),
        QuestionOpened::Joined {
            pending_id: "q1".into()
        }
    );
    assert_eq!(notes(&db).await, 1, "none for a call that joined");
    assert_eq!(
        applied_seq(&db, &session).await,
        Some(6),
        "a joining call's position is stored with it"
    );
    assert_eq!(
        db.clarifications
            .open_question(
                "r1",
                "key",
                &rec,
                &new_message(&session, &task, "q1"),
                Some(&note(&session, &task)),
                Some(8),
            )
            .await
            .expect("again"),
        QuestionOpened::Duplicate
    );
    assert_eq!(notes(&db).await, 1, "none for a repeated call");
    assert_eq!(
        applied_seq(&db, &session).await,
        Some(6),
        "nor a position: nothing was written"
    );
    let cancelled = Settlement::from_agentctl(SettleOutcome::AgentCancelled);
    let first = db
        .clarifications
        .call_returned("r1", "agent_cancelled", &cancelled, CallSettles::IfLast)
        .await
        .expect("r1")
        .expect("r1 was waiting");
    assert_eq!(
        (first.pending_id.as_str(), first.settled, first.waiting),
        ("q1", None, vec!["r2".to_owned()]),
        "r2 still waits"
    );
    let done = db
        .clarifications
        .call_returned(
            "r2",
            "timed_out",
            &Settlement::from_agentctl(SettleOutcome::TimedOut),
            CallSettles::IfLast,
        )
        .await
        .expect("r2")
        .and_then(|returned| returned.settled)
        .expect("settled");
    assert_eq!(done.record.status, ClarificationStatus::Expired);
    assert!(
        db.clarifications
            .call_returned("r2", "timed_out", &cancelled, CallSettles::IfLast)
            .await
            .expect("again")
            .is_none()
    );
    assert!(
        db.clarifications
            .waiting_calls_of_session(&session)
            .await
            .expect("calls")
            .is_empty()
    );
}

/// An operator's verb reaches the calls of a record that wait when it is sent; one that
/// joined later is sent the same verb by the consumer, named here.
async fn an_operators_returned_call_settles_its_record_at_once_and_names_the_calls_still_waiting(
    engine: &dyn Engine,
) {
    let (db, task, session) = seeded(engine).await;
    for (call, record) in [("r1", "q1"), ("r2", "q-joins")] {
        let rec = new_record(record, &session, &task, Source::AskUserQuestion);
        let message = new_message(&session, &task, record);
        db.clarifications
            .open_question(call, "key", &rec, &message, None, None)
            .await
            .expect("open or join");
    }
    assert_eq!(
        db.clarifications.waiting_calls("q1").await.expect("calls"),
        ["r1", "r2"]
    );
    let answered = Settlement::answered(answer(), "alice");
    let first = db
        .clarifications
        .call_returned("r1", "answered", &answered, CallSettles::Record)
        .await
        .expect("r1")
        .expect("r1 was waiting");
    let settled = first
        .settled
        .expect("the operator's answer settles the record");
    assert_eq!(
        (settled.record.status, settled.record.answered_by.as_deref()),
        (ClarificationStatus::Answered, Some("alice"))
    );
    assert_eq!(first.waiting, ["r2"], "r2 is sent the same answer next");
    // The record answered, the same questions open a new one.
    let next = new_record("q2", &session, &task, Source::AskUserQuestion);
    let reopened = db
        .clarifications
        .open_question(
            "r3",
            "key",
            &next,
            &new_message(&session, &task, "q2"),
            None,
            None,
        )
        .await
        .expect("r3");
    assert!(matches!(reopened, QuestionOpened::Opened { .. }));
    // r2's own settlement changes nothing more, and a replayed one nothing at all.
    let second = db
        .clarifications
        .call_returned("r2", "answered", &answered, CallSettles::Record)
        .await
        .expect("r2")
        .expect("r2 was waiting");
    assert_eq!((second.settled, second.waiting), (None, vec![]));
    assert!(
        db.clarifications
            .call_returned("r1", "answered", &answered, CallSettles::Record)
            .await
            .expect("replay")
            .is_none()
    );
    assert!(
        db.clarifications
            .waiting_calls("q1")
            .await
            .expect("calls")
            .is_empty()
    );
}
