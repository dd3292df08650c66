//! Clarification records: opening, the settlement rule, tool calls.

use kandev_agent_stream::SettleOutcome;
use kandev_elicitation::{Constraints, OperatorAnswer, Question, QuestionKind, QuestionOption};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Engine, on_every_engine, seeded};
use crate::model::clarification::Effect;
use crate::model::{
    Clarification, ClarificationStatus, Message, MessageKind, NewClarification, NewMessage,
    Notification, Outcome, SettledBy, Settlement, Source, author,
};
use crate::store::{CallSettles, ClarificationFilter, QuestionOpened, Stores};

on_every_engine!(
    identical_questions_make_two_records_under_their_ids_and_a_replay_makes_none,
    an_open_returns_what_it_stored_and_racing_replays_store_one,
    settlement_happens_once_its_message_follows_and_agentctl_corrects_the_backend,
    an_answer_arriving_after_agentctls_settlement_is_still_recorded,
    an_accepted_answer_corrects_the_withdrawal_of_the_losing_respond,
    two_store_handles_on_one_database_settle_one_record_and_exactly_one_wins,
    settle_pending_keeps_what_it_is_told_to_and_filters_by_source,
    a_question_call_opens_joins_or_repeats_and_its_record_settles_with_its_last_call,
    an_operators_returned_call_settles_its_record_at_once_and_names_the_calls_still_waiting,
    the_sql_follows_the_settlement_rule,
    the_session_counts_its_pending_records_and_each_change_of_its_view_raises_view_seq,
);

fn question(prompt: &str) -> Question {
    Question {
        id: "question_0".into(),
        kind: QuestionKind::SingleSelect,
        title: Some("Colour".into()),
        prompt: prompt.into(),
        options: vec![QuestionOption {
            id: "Red".into(),
            label: "Red".into(),
            description: None,
            preview: None,
        }],
        custom_answer: None,
        required: false,
        default: None,
        constraints: Constraints::default(),
    }
}

fn new_record(id: &str, session: &str, task: &str, source: Source) -> NewClarification {
    NewClarification {
        pending_id: id.into(),
        source,
        task_id: task.into(),
        session_id: session.into(),
        tool_call_id: Some("tool-1".into()),
        message: "Pick a colour".into(),
        questions: vec![question("Pick a colour")],
        // Read back as written (the card's countdown, the board's order).
        expires_at: Some(crate::model::Timestamp::now().plus(std::time::Duration::from_secs(3600))),
        on_deadline: Some("cancel".into()),
    }
}

fn new_message(session: &str, task: &str, id: &str) -> NewMessage {
    NewMessage {
        requests_input: true,
        ..NewMessage::new(
            session,
            task,
            MessageKind::ClarificationRequest,
            author::AGENT,
            "Pick a colour",
        )
        .with_metadata(
            json!({"pending_id": id, "status": "pending"})
                .as_object()
                .cloned()
                .expect("object"),
        )
    }
}

pub(super) async fn open(
    s: &Stores,
    id: &str,
    session: &str,
    task: &str,
) -> (Clarification, Message) {
    s.clarifications
        .open_clarification(
            &new_record(id, session, task, Source::Elicitation),
            &new_message(session, task, id),
            None,
            None,
        )
        .await
        .expect("open")
        .map(|opened| (opened.record, opened.message))
        .expect("new")
}

/// The notification announcing a record of `session`.
fn note(session: &str, task: &str) -> Notification {
    Notification::clarification_requested("T", task, session)
}

/// The session's stored `last_event_seq`.
async fn applied_seq(s: &Stores, session: &str) -> Option<u64> {
    s.sessions
        .session(session)
        .await
        .expect("session")
        .expect("row")
        .last_event_seq
}

/// How many notifications are stored.
async fn notes(s: &Stores) -> usize {
    s.notifications
        .notifications()
        .await
        .expect("notifications")
        .len()
}

fn answer() -> OperatorAnswer {
    OperatorAnswer {
        answers: vec![kandev_elicitation::Answer {
            question_id: "question_0".into(),
            selected_options: vec!["Red".into()],
            custom_text: String::new(),
        }],
        ..OperatorAnswer::default()
    }
}

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

async fn settlement_happens_once_its_message_follows_and_agentctl_corrects_the_backend(
    engine: &dyn Engine,
) {
    let (db, task, session) = seeded(engine).await;
    open(&db, "p-1", &session, &task).await;
    let won = db
        .clarifications
        .settle("p-1", &Settlement::answered(answer(), "alice"))
        .await
        .expect("settle")
        .expect("won");
    assert_eq!(won.effect, Effect::Settle);
    assert_eq!(won.record.status, ClarificationStatus::Answered);
    assert_eq!(won.record.answered_by.as_deref(), Some("alice"));
    let message = won.message.expect("message");
    assert_eq!(
        db.messages
            .message(&message.id)
            .await
            .expect("read")
            .as_ref(),
        Some(&message),
        "the settlement returns the message it stored"
    );
    assert_eq!(message.metadata["settled_at"], json!(won.record.settled_at));
    assert_eq!(message.metadata["pending_id"], "p-1", "the rest of it kept");
    assert_eq!(message.metadata["status"], "answered");
    assert_eq!(message.metadata["outcome"], "answered");
    assert_eq!(message.metadata["answered_by"], "alice");
    assert_eq!(
        message.metadata["answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    assert!(
        db.clarifications
            .settle("p-1", &Settlement::from_agentctl(SettleOutcome::Answered))
            .await
            .expect("event")
            .is_none(),
        "agentctl's event arriving second changes nothing"
    );

    open(&db, "p-2", &session, &task).await;
    let provisional = Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn);
    db.clarifications
        .settle("p-2", &provisional)
        .await
        .expect("provisional")
        .expect("changed");
    assert!(
        db.clarifications
            .settle("p-2", &Settlement::disconnected())
            .await
            .expect("backend")
            .is_none(),
        "the backend never overwrites its own provisional status"
    );
    let fixed = db
        .clarifications
        .settle("p-2", &Settlement::from_agentctl(SettleOutcome::TimedOut))
        .await
        .expect("fix")
        .expect("changed");
    assert_eq!(fixed.record.status, ClarificationStatus::Expired);
    assert_eq!(fixed.record.outcome, Some(Outcome::TimedOut));
    assert!(
        db.clarifications
            .settle("p-2", &Settlement::from_agentctl(SettleOutcome::Answered))
            .await
            .expect("again")
            .is_none()
    );
    assert!(
        db.clarifications
            .settle("p-2", &Settlement::answered(answer(), "bob"))
            .await
            .expect("late answer")
            .is_none(),
        "agentctl's settlement stands"
    );
}

/// Two responds race: agentctl takes one and says `NOT_FOUND` to the other, whose
/// provisional withdrawal may land first. The accepted answer still wins, with its
/// answer and its operator, and agentctl's own event for it changes nothing after.
async fn an_accepted_answer_corrects_the_withdrawal_of_the_losing_respond(engine: &dyn Engine) {
    let (db, task, session) = seeded(engine).await;
    open(&db, "p-1", &session, &task).await;
    let losing = Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn);
    db.clarifications
        .settle("p-1", &losing)
        .await
        .expect("lose")
        .expect("provisional");
    let won = db
        .clarifications
        .settle("p-1", &Settlement::answered(answer(), "alice"))
        .await
        .expect("win")
        .expect("corrected");
    assert_eq!(won.effect, Effect::Settle);
    assert_eq!(
        (won.record.status, won.record.answered_by.as_deref()),
        (ClarificationStatus::Answered, Some("alice"))
    );
    assert_eq!(won.record.answer, Some(answer()));
    assert!(
        db.clarifications
            .settle("p-1", &Settlement::from_agentctl(SettleOutcome::Answered))
            .await
            .expect("event")
            .is_none()
    );
}

async fn an_answer_arriving_after_agentctls_settlement_is_still_recorded(engine: &dyn Engine) {
    let (db, task, session) = seeded(engine).await;
    open(&db, "p-1", &session, &task).await;
    db.clarifications
        .settle("p-1", &Settlement::from_agentctl(SettleOutcome::Answered))
        .await
        .expect("event")
        .expect("changed");
    let late = db
        .clarifications
        .settle("p-1", &Settlement::answered(answer(), "alice"))
        .await
        .expect("respond")
        .expect("recorded");
    assert_eq!(late.effect, Effect::RecordAnswer);
    assert_eq!(late.record.status, ClarificationStatus::Answered);
    assert_eq!(late.record.answer, Some(answer()));
    assert_eq!(
        late.message.expect("message").metadata["answered_by"],
        "alice"
    );
    assert!(
        db.clarifications
            .settle("p-1", &Settlement::answered(answer(), "bob"))
            .await
            .expect("again")
            .is_none(),
        "the first recorded answer stays"
    );
}

/// The check: two independent handles (two processes' pools) on one database
/// settle the same record at once, again and again; exactly one wins each time.
async fn two_store_handles_on_one_database_settle_one_record_and_exactly_one_wins(
    engine: &dyn Engine,
) {
    let (db, task, session) = seeded(engine).await;
    let other = engine.second().await.stores();
    for round in 0..20 {
        let id = format!("p-{round}");
        open(&db, &id, &session, &task).await;
        let a = Settlement::answered(answer(), "alice");
        let b = Settlement::answered(
            OperatorAnswer {
                rejected: true,
                ..OperatorAnswer::default()
            },
            "bob",
        );
        let (x, y) = tokio::join!(
            db.clarifications.settle(&id, &a),
            other.clarifications.settle(&id, &b)
        );
        let wins = [x.expect("x"), y.expect("y")]
            .into_iter()
            .flatten()
            .filter(|s| s.effect == Effect::Settle)
            .count();
        assert_eq!(wins, 1, "round {round}");
    }
}

async fn settle_pending_keeps_what_it_is_told_to_and_filters_by_source(engine: &dyn Engine) {
    let (db, task, session) = seeded(engine).await;
    open(&db, "a", &session, &task).await;
    open(&db, "b", &session, &task).await;
    db.clarifications
        .open_question(
            "r1",
            "k",
            &new_record("q", &session, &task, Source::AskUserQuestion),
            &new_message(&session, &task, "q"),
            None,
            None,
        )
        .await
        .expect("question");
    let gone = db
        .clarifications
        .settle_pending(
            &session,
            Some(Source::Elicitation),
            &["b".to_owned()],
            &Settlement::disconnected(),
        )
        .await
        .expect("settle");
    assert_eq!(
        gone.iter()
            .map(|s| s.record.pending_id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    let all = db
        .clarifications
        .settle_pending(&session, None, &[], &Settlement::disconnected())
        .await
        .expect("settle all");
    assert_eq!(all.len(), 2);
    assert_eq!(
        db.sessions
            .session(&session)
            .await
            .expect("s")
            .expect("row")
            .pending,
        0
    );
}

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

/// The SQL does exactly what [`Settlement::effect_on`] says, from any standing: 200
/// cases drawn by proptest (deterministically), each on a record of its own.
async fn the_sql_follows_the_settlement_rule(engine: &dyn Engine) {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let (db, task, session) = seeded(engine).await;
    let cases = (
        (0usize..6, 0usize..6, 0usize..3, any::<bool>()),
        (1usize..6, 0usize..6, 0usize..3),
    );
    let mut runner = TestRunner::deterministic();
    for case in 0..200 {
        let ((status, outcome, by, has_op), (new_status, new_outcome, new_by)) =
            cases.new_tree(&mut runner).expect("case").current();
        let id = format!("p-{case}");
        open(&db, &id, &session, &task).await;
        let st = ClarificationStatus::ALL[status];
        if st != ClarificationStatus::Pending {
            engine
                .stand(
                    &id,
                    st,
                    Outcome::ALL[outcome],
                    SettledBy::ALL[by],
                    has_op.then_some("someone"),
                )
                .await;
        }
        let before = db
            .clarifications
            .clarification(&id)
            .await
            .expect("get")
            .expect("row");
        let s = Settlement {
            status: ClarificationStatus::ALL[new_status],
            outcome: Outcome::ALL[new_outcome],
            by: SettledBy::ALL[new_by],
            answer: None,
            answered_by: (SettledBy::ALL[new_by] == SettledBy::Operator).then(|| "op".to_owned()),
            fence: crate::model::Fence::NONE,
        };
        let expected = s.effect_on(before.standing());
        let got = db
            .clarifications
            .settle(&id, &s)
            .await
            .expect("settle")
            .map(|r| r.effect)
            .unwrap_or(Effect::Nothing);
        assert_eq!(got, expected, "{before:?} with {s:?}");
    }
}

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
