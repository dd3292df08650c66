//! Settling a record: once, by the rule, whoever races.

use kandev_agent_stream::SettleOutcome;
use kandev_elicitation::OperatorAnswer;
use proptest::prelude::*;
use serde_json::json;

use super::super::{Engine, on_every_engine, seeded};
use super::{answer, new_message, new_record, open};
use crate::model::settlement::Effect;
use crate::model::{ClarificationStatus, Outcome, SettledBy, Settlement, Source};

on_every_engine!(
    settlement_happens_once_its_message_follows_and_agentctl_corrects_the_backend,
    an_accepted_answer_corrects_the_withdrawal_of_the_losing_respond,
    an_answer_arriving_after_agentctls_settlement_is_still_recorded,
    two_store_handles_on_one_database_settle_one_record_and_exactly_one_wins,
    settle_pending_keeps_what_it_is_told_to_and_filters_by_source,
    the_sql_follows_the_settlement_rule,
);

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
        let s = Settlement::drawn(new_status, new_outcome, new_by);
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
