//! Leases: one owner per session, takeover only after expiry, and the fence — a write
//! under an older generation changes nothing, on the session and on its records.

use std::time::Duration;

use super::{Engine, on_every_engine, seeded};
use crate::model::{
    Fence, NewClarification, NewMessage, SessionState, Settlement, Source, TakeOver, author,
};
use crate::store::{Claimant, SettledRecord, Stores};

on_every_engine!(
    one_claim_wins_and_takeover_waits_for_expiry,
    renewal_keeps_only_the_leases_still_held,
    a_write_under_a_taken_over_lease_changes_nothing,
    claimable_sessions_and_host_loads,
    a_handed_over_lease_is_claimable_at_once_and_keeps_its_host,
);

fn replica(id: &str, lease: Duration) -> Claimant<'_> {
    Claimant {
        replica_id: id,
        advertise_url: "http://127.0.0.1:1",
        lease,
    }
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(1);

async fn one_claim_wins_and_takeover_waits_for_expiry(engine: &dyn Engine) {
    let (s, _task, id) = seeded(engine).await;
    let second = engine.second().await.stores();
    let a = s
        .leases
        .claim(&id, replica("a", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("a new session's lease is free");
    assert_eq!((a.generation, a.replica_id.as_str()), (1, "a"));
    assert!(
        second
            .leases
            .claim(&id, replica("b", LONG), TakeOver::Expired)
            .await
            .expect("claim")
            .is_none(),
        "a running lease is not taken"
    );
    let own = s
        .leases
        .claim(&id, replica("a", LONG), TakeOver::ExpiredOrOwn)
        .await
        .expect("claim")
        .expect("a replica may reclaim its own after a restart");
    assert_eq!(own.generation, 2);

    s.leases
        .claim(&id, replica("a", SHORT), TakeOver::ExpiredOrOwn)
        .await
        .expect("claim")
        .expect("own");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (b, c) = tokio::join!(
        second
            .leases
            .claim(&id, replica("b", LONG), TakeOver::Expired),
        s.leases.claim(&id, replica("c", LONG), TakeOver::Expired),
    );
    let winners: Vec<_> = [b.expect("b"), c.expect("c")]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(winners[0].generation, 4);
    let stored = s.leases.lease(&id).await.expect("get").expect("row");
    assert_eq!(stored, winners[0]);
}

async fn renewal_keeps_only_the_leases_still_held(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let other = s.sessions.insert_session(&task, "mock").await.expect("s2");
    let a = s
        .leases
        .claim(&id, replica("a", SHORT), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    let a2 = s
        .leases
        .claim(&other.id, replica("a", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.leases
        .claim(&id, replica("b", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("expired: b takes it");
    let held = vec![
        (id.clone(), a.generation),
        (other.id.clone(), a2.generation),
    ];
    let still = s.leases.renew("a", &held, LONG).await.expect("renew");
    assert_eq!(still, vec![other.id.clone()]);
    assert!(
        s.leases
            .renew("a", &[], LONG)
            .await
            .expect("none")
            .is_empty()
    );
    s.leases
        .release(&other.id, a2.generation)
        .await
        .expect("release");
    assert_eq!(s.leases.lease(&other.id).await.expect("get"), None);
}

async fn a_handed_over_lease_is_claimable_at_once_and_keeps_its_host(engine: &dyn Engine) {
    let (s, _task, id) = seeded(engine).await;
    let a = s
        .leases
        .claim(&id, replica("a", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    s.leases
        .set_agent_host(&id, a.generation, "ws://agents-1:7740")
        .await
        .expect("host");
    assert!(
        !s.leases
            .hand_over(&id, a.generation + 1)
            .await
            .expect("hand"),
        "only the holder's generation hands over"
    );
    assert!(
        s.leases
            .claimable("b", TakeOver::Expired, LONG)
            .await
            .expect("claimable")
            .is_empty(),
        "still running"
    );
    assert!(s.leases.hand_over(&id, a.generation).await.expect("hand"));
    assert_eq!(
        s.leases
            .claimable("b", TakeOver::Expired, LONG)
            .await
            .expect("claimable"),
        vec![id.clone()],
        "claimable without waiting for the lease to run out"
    );
    let b = s
        .leases
        .claim(&id, replica("b", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("b takes it");
    assert_eq!(
        (b.generation, b.replica_id.as_str()),
        (a.generation + 1, "b")
    );
    assert_eq!(b.agent_host.as_deref(), Some("ws://agents-1:7740"));
}

async fn open_one(s: &Stores, task: &str, id: &str, pending: &str) {
    let record = NewClarification {
        pending_id: pending.into(),
        source: Source::Elicitation,
        task_id: task.into(),
        session_id: id.into(),
        tool_call_id: None,
        message: "q".into(),
        questions: vec![],
        expires_at: None,
        on_deadline: None,
    };
    let message = NewMessage::new(
        id,
        task,
        crate::model::MessageKind::ClarificationRequest,
        author::AGENT,
        "q",
    );
    s.clarifications
        .open_clarification(&record, &message)
        .await
        .expect("open")
        .expect("new");
}

async fn a_write_under_a_taken_over_lease_changes_nothing(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let old = s
        .leases
        .claim(&id, replica("a", SHORT), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    assert!(
        s.sessions
            .transition(&id, SessionState::Starting, None, old.fence())
            .await
            .expect("t"),
        "the owner writes"
    );
    open_one(&s, &task, &id, "p-1").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = s
        .leases
        .claim(&id, replica("b", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("taken over");
    let fenced_out = s
        .sessions
        .transition(&id, SessionState::Failed, Some("old owner"), old.fence())
        .await
        .expect("t");
    assert!(!fenced_out, "the old owner's state write is refused");
    let settled: Option<SettledRecord> = s
        .clarifications
        .settle("p-1", &Settlement::disconnected().fenced(old.fence()))
        .await
        .expect("settle");
    assert!(settled.is_none(), "the old owner's settlement is refused");
    let swept = s
        .clarifications
        .settle_pending(
            &id,
            None,
            &[],
            &Settlement::disconnected().fenced(old.fence()),
        )
        .await
        .expect("sweep");
    assert!(swept.is_empty());
    let row = s.sessions.session(&id).await.expect("get").expect("row");
    assert_eq!((row.state, row.pending), (SessionState::Starting, 1));

    assert!(
        s.sessions
            .transition(&id, SessionState::Failed, Some("new owner"), new.fence())
            .await
            .expect("t")
    );
    assert!(
        s.clarifications
            .settle("p-1", &Settlement::disconnected().fenced(new.fence()))
            .await
            .expect("settle")
            .is_some(),
        "the new owner's writes apply"
    );
    assert!(
        !s.sessions
            .transition(&id, SessionState::Failed, None, Fence::lease(99))
            .await
            .expect("t"),
        "a generation that never was is fenced out too"
    );
}

async fn claimable_sessions_and_host_loads(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let fresh = s.sessions.insert_session(&task, "mock").await.expect("s2");
    let ended = s.sessions.insert_session(&task, "mock").await.expect("s3");
    s.sessions
        .transition(&ended.id, SessionState::Failed, None, Fence::NONE)
        .await
        .expect("t");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let all = s
        .leases
        .claimable("b", TakeOver::Expired, SHORT)
        .await
        .expect("claimable");
    assert_eq!(
        all,
        vec![id.clone(), fresh.id.clone()],
        "live sessions without a lease"
    );
    let a = s
        .leases
        .claim(&id, replica("a", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    let later = s
        .leases
        .claimable("b", TakeOver::Expired, LONG)
        .await
        .expect("claimable");
    assert!(
        later.is_empty(),
        "owned, or too young to be an orphan: {later:?}"
    );
    let own = s
        .leases
        .claimable("a", TakeOver::ExpiredOrOwn, LONG)
        .await
        .expect("claimable");
    assert_eq!(own, vec![id.clone()]);
    let any = s
        .leases
        .claimable("b", TakeOver::Any, LONG)
        .await
        .expect("claimable");
    assert_eq!(any, vec![id.clone()]);

    s.leases
        .set_agent_host(&id, a.generation, "ws://h1:1")
        .await
        .expect("host");
    let b = s
        .leases
        .claim(&fresh.id, replica("a", LONG), TakeOver::Expired)
        .await
        .expect("claim")
        .expect("free");
    s.leases
        .set_agent_host(&fresh.id, b.generation, "ws://h1:1")
        .await
        .expect("host");
    assert_eq!(
        s.leases.host_loads().await.expect("loads"),
        vec![("ws://h1:1".to_owned(), 2)]
    );
    assert_eq!(
        s.leases
            .lease(&id)
            .await
            .expect("get")
            .and_then(|l| l.agent_host),
        Some("ws://h1:1".to_owned())
    );
}
