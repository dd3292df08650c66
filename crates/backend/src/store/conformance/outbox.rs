//! The webhook outbox and the used answer links.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Engine, on_every_engine};
use crate::model::{Attempt, DeliveryStatus, NewDelivery, Timestamp};

on_every_engine!(
    a_delivery_is_written_once_per_key,
    two_processes_claiming_at_once_never_share_a_delivery,
    a_claim_holds_until_it_runs_out_and_only_its_holder_records_an_attempt,
    a_retried_delivery_waits_for_its_due_time_and_a_finished_one_is_never_claimed,
    an_answer_link_is_used_once,
);

fn row(key: &str, due_at: Timestamp) -> NewDelivery {
    NewDelivery {
        hook: "team".into(),
        event: "clarification_requested".into(),
        dedup_key: key.into(),
        pending_id: Some(format!("p-{key}")),
        body: format!("{{\"k\":\"{key}\"}}"),
        due_at,
        not_after: None,
    }
}

fn later(secs: u64) -> Timestamp {
    Timestamp::now().plus(Duration::from_secs(secs))
}

async fn a_delivery_is_written_once_per_key(engine: &dyn Engine) {
    let s = engine.stores();
    let now = Timestamp::now();
    assert_eq!(
        s.outbox
            .enqueue(&[row("a", now), row("b", now)])
            .await
            .expect("enqueue"),
        2
    );
    assert_eq!(s.outbox.enqueue(&[row("a", now)]).await.expect("again"), 0);
    let claimed = s
        .outbox
        .claim_due("me", later(1), later(60), 10)
        .await
        .expect("claim");
    let mut bodies: Vec<&str> = claimed.iter().map(|d| d.body.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["{\"k\":\"a\"}", "{\"k\":\"b\"}"]);
    assert!(claimed.iter().all(|d| d.attempts == 0));
}

async fn two_processes_claiming_at_once_never_share_a_delivery(engine: &dyn Engine) {
    let a = engine.stores();
    let other = engine.second().await;
    let b = other.stores();
    let now = Timestamp::now();
    let rows: Vec<NewDelivery> = (0..40).map(|i| row(&format!("k{i}"), now)).collect();
    a.outbox.enqueue(&rows).await.expect("enqueue");
    let at = later(1);
    let mut got: Vec<String> = Vec::new();
    loop {
        let (x, y) = tokio::join!(
            a.outbox.claim_due("a", at, later(60), 3),
            b.outbox.claim_due("b", at, later(60), 3),
        );
        let (x, y) = (x.expect("a claims"), y.expect("b claims"));
        if x.is_empty() && y.is_empty() {
            break;
        }
        got.extend(x.into_iter().chain(y).map(|d| d.id));
    }
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(got.len(), 40, "every row claimed");
    assert_eq!(unique.len(), 40, "none twice");
}

async fn a_claim_holds_until_it_runs_out_and_only_its_holder_records_an_attempt(
    engine: &dyn Engine,
) {
    let s = engine.stores();
    let now = Timestamp::now();
    s.outbox.enqueue(&[row("a", now)]).await.expect("enqueue");
    let [held] = s
        .outbox
        .claim_due("a", later(1), later(60), 10)
        .await
        .expect("claim")
        .try_into()
        .expect("one");
    assert!(
        s.outbox
            .claim_due("b", later(2), later(60), 10)
            .await
            .expect("claim")
            .is_empty(),
        "held"
    );
    // Its holder died: past its claim, another takes it over.
    let [taken] = s
        .outbox
        .claim_due("b", later(61), later(120), 10)
        .await
        .expect("claim")
        .try_into()
        .expect("taken over");
    assert_eq!(taken.id, held.id);
    let delivered = Attempt::Delivered { status: 200 };
    assert!(
        !s.outbox
            .finish(&held.id, "a", &delivered, now)
            .await
            .expect("finish"),
        "no longer a's"
    );
    assert!(
        s.outbox
            .finish(&held.id, "b", &delivered, now)
            .await
            .expect("finish")
    );
    let last = s.outbox.last_deliveries().await.expect("last");
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].status, DeliveryStatus::Delivered);
    assert_eq!(last[0].attempts, 1);
    assert_eq!(last[0].last_status, Some(200));
}

async fn a_retried_delivery_waits_for_its_due_time_and_a_finished_one_is_never_claimed(
    engine: &dyn Engine,
) {
    let s = engine.stores();
    let now = Timestamp::now();
    s.outbox
        .enqueue(&[row("a", now), row("later", later(30))])
        .await
        .expect("enqueue");
    let [d] = s
        .outbox
        .claim_due("a", later(1), later(60), 10)
        .await
        .expect("claim")
        .try_into()
        .expect("only the due one");
    let retry = Attempt::Retry {
        at: later(10),
        status: Some(503),
        error: "the receiver answered 503".into(),
    };
    assert!(
        s.outbox
            .finish(&d.id, "a", &retry, now)
            .await
            .expect("retry")
    );
    assert!(
        s.outbox
            .claim_due("a", later(5), later(60), 10)
            .await
            .expect("claim")
            .is_empty(),
        "not yet due"
    );
    let [again] = s
        .outbox
        .claim_due("a", later(11), later(60), 10)
        .await
        .expect("claim")
        .try_into()
        .expect("due again");
    assert_eq!(again.attempts, 1);
    let failed = Attempt::Failed {
        status: None,
        error: "could not connect".into(),
    };
    assert!(
        s.outbox
            .finish(&again.id, "a", &failed, now)
            .await
            .expect("fail")
    );
    let rest = s
        .outbox
        .claim_due("a", later(3600), later(3700), 10)
        .await
        .expect("claim");
    assert_eq!(rest.len(), 1, "only the later row, never the failed one");
    let dropped = Attempt::Dropped {
        reason: "the question is answered".into(),
    };
    assert!(
        s.outbox
            .finish(&rest[0].id, "a", &dropped, now)
            .await
            .expect("drop")
    );
    assert!(
        s.outbox
            .claim_due("a", later(7200), later(7300), 10)
            .await
            .expect("claim")
            .is_empty()
    );
    let rows = s.outbox.deliveries_for("p-a").await.expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].status, rows[0].attempts),
        (DeliveryStatus::Failed, 2)
    );
    let rows = s.outbox.deliveries_for("p-later").await.expect("rows");
    assert_eq!(
        (rows[0].status, rows[0].attempts),
        (DeliveryStatus::Dropped, 0)
    );
}

async fn an_answer_link_is_used_once(engine: &dyn Engine) {
    let s = engine.stores();
    let now = Timestamp::now();
    assert!(
        s.outbox
            .use_answer_link("n1", "p1", now)
            .await
            .expect("first")
    );
    assert!(
        !s.outbox
            .use_answer_link("n1", "p1", now)
            .await
            .expect("replay")
    );
    let other = engine.second().await;
    assert!(
        !other
            .stores()
            .outbox
            .use_answer_link("n1", "p1", now)
            .await
            .expect("elsewhere")
    );
    assert!(
        s.outbox
            .use_answer_link("n2", "p1", now)
            .await
            .expect("another link")
    );
}
