//! Reminders in time or not at all: never written for a moment at or past the question's
//! deadline, dropped unsent when the sender only reaches one after the deadline (kandev was
//! down), and sent once across a restart: the next start neither writes nor sends it again.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, HookEvent};
use crate::model::{DeliveryStatus, NewDelivery, Timestamp};
use crate::reach::Webhooks;
use crate::reach::dispatch::Dispatcher;
use crate::reach::tests::{Receiver, delivery_reaches, elicited, hook, live, reminding};
use crate::testing::{memory_stores, within};

fn ago(by: Duration) -> Timestamp {
    Timestamp::from(Timestamp::now().instant() - chrono::Duration::from_std(by).expect("short"))
}

#[tokio::test]
async fn a_reminder_due_at_or_after_the_deadline_is_never_written() {
    let (receiver, config) = reminding(
        Duration::from_secs(60),
        &[HookEvent::ClarificationRequested, HookEvent::Reminder],
    )
    .await;
    let (state, _session, link) = live(config).await;
    // Declined after 30 s, reminded after 60 s: the reminder would come too late.
    link.push(elicited(
        "p-1",
        Timestamp::now().plus(Duration::from_secs(30)),
    ));
    let rows = within(
        "the question's deliveries",
        Duration::from_secs(10),
        || async {
            let rows = state.stores.outbox.deliveries_for("p-1").await.ok()?;
            (!rows.is_empty()).then_some(rows)
        },
    )
    .await;
    let events: Vec<&str> = rows.iter().map(|d| d.event.as_str()).collect();
    assert_eq!(events, ["clarification_requested"], "no reminder row");
    within(
        "the question delivered",
        Duration::from_secs(10),
        || async { (receiver.all().len() == 1).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_reminder_reached_only_after_the_deadline_is_dropped_unsent() {
    let (receiver, url) = Receiver::start(0).await;
    let stores = memory_stores().await;
    let mut config = Config::default();
    config.notifications.webhooks = vec![hook(&url, &[HookEvent::Reminder])];
    // Due two seconds ago, before its deadline a second ago: kandev was down meanwhile.
    let reminder = NewDelivery {
        hook: "team".into(),
        event: HookEvent::Reminder.as_str().into(),
        dedup_key: "team\u{1f}reminder\u{1f}p-1".into(),
        pending_id: Some("p-1".into()),
        body: "{}".into(),
        due_at: ago(Duration::from_secs(2)),
        not_after: Some(ago(Duration::from_secs(1))),
    };
    assert_eq!(
        stores.outbox.enqueue(&[reminder]).await.expect("enqueue"),
        1
    );
    let sender = Dispatcher::new(
        stores.clone(),
        Arc::new(config.notifications.clone()),
        "after-downtime",
    );
    assert_eq!(sender.once().await, 1, "the due row is claimed");
    assert!(receiver.all().is_empty(), "nothing sent after the deadline");
    let rows = stores.outbox.deliveries_for("p-1").await.expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, DeliveryStatus::Dropped);
    assert_eq!(
        rows[0].last_error.as_deref(),
        Some("the question's deadline has passed")
    );
    assert_eq!(sender.once().await, 0, "and it is not claimed again");
}

#[tokio::test]
async fn a_reminder_sent_before_a_restart_is_neither_written_nor_sent_again_after_it() {
    let (receiver, config) = reminding(Duration::from_millis(300), &[HookEvent::Reminder]).await;
    let (state, _session, link) = live(config.clone()).await;
    link.push(elicited(
        "p-1",
        Timestamp::now().plus(Duration::from_secs(3300)),
    ));
    delivery_reaches(&state, "p-1", "reminder", DeliveryStatus::Delivered).await;
    assert_eq!(receiver.of("reminder").len(), 1);

    // The next start over the same database: its catch-up and its own sender.
    let next_start = Webhooks::from_config(state.stores.clone(), &config);
    assert_eq!(
        next_start.catch_up().await.expect("catch up"),
        0,
        "nothing written again"
    );
    let sender = Dispatcher::new(
        state.stores.clone(),
        Arc::new(config.notifications.clone()),
        "restarted",
    );
    assert_eq!(sender.once().await, 0, "nothing left to send");
    assert_eq!(receiver.of("reminder").len(), 1, "sent once");
    let rows = state
        .stores
        .outbox
        .deliveries_for("p-1")
        .await
        .expect("rows");
    assert_eq!(rows.iter().filter(|d| d.event == "reminder").count(), 1);
}
