//! Leases: one owner per session, takeover only after expiry, and the fence — a write
//! under an older generation changes nothing, on the session and on its records.

use std::time::Duration;

use super::{Engine, on_every_engine, seeded};
use crate::model::{
    Fence, NewClarification, NewMessage, SessionLease, SessionState, Settlement, Source, TakeOver,
    author,
};
use crate::store::{Claimant, SettledRecord, Stores};
use crate::testing::eventually;

on_every_engine!(
    one_claim_wins_and_takeover_waits_for_expiry,
    renewal_keeps_only_the_leases_still_held,
    a_write_under_a_taken_over_lease_changes_nothing,
    claimable_sessions_and_host_loads,
    a_handed_over_lease_is_claimable_at_once_and_keeps_its_host,
);

const LONG: Duration = Duration::from_secs(60);
/// A lease that has run out as soon as it is taken: it expires at the engine's own
/// `now`, and a lease may be taken over once `expires_at <= now`, so the next statement
/// finds it expired without the test waiting for any clock.
const RUN_OUT: Duration = Duration::ZERO;

/// `replica` claims session `id` for `lease` under `take_over`: the lease, or `None`
/// when another replica holds it.
async fn claim(
    s: &Stores,
    id: &str,
    replica: &str,
    lease: Duration,
    take_over: TakeOver,
) -> Option<SessionLease> {
    let by = Claimant {
        replica_id: replica,
        advertise_url: "http://127.0.0.1:1",
        lease,
    };
    s.leases.claim(id, by, take_over).await.expect("claim")
}

/// The sessions `replica` may claim under `take_over`, unowned ones once `unowned_after`
/// old.
async fn claimable(
    s: &Stores,
    replica: &str,
    take_over: TakeOver,
    unowned_after: Duration,
) -> Vec<String> {
    s.leases
        .claimable(replica, take_over, unowned_after)
        .await
        .expect("claimable")
}

async fn one_claim_wins_and_takeover_waits_for_expiry(engine: &dyn Engine) {
    let (s, _task, id) = seeded(engine).await;
    let second = engine.second().await.stores();
    let a = claim(&s, &id, "a", LONG, TakeOver::Expired)
        .await
        .expect("a new session's lease is free");
    assert_eq!((a.generation, a.replica_id.as_str()), (1, "a"));
    assert!(
        claim(&second, &id, "b", LONG, TakeOver::Expired)
            .await
            .is_none(),
        "a running lease is not taken"
    );
    let own = claim(&s, &id, "a", LONG, TakeOver::ExpiredOrOwn)
        .await
        .expect("a replica may reclaim its own after a restart");
    assert_eq!(own.generation, 2);

    claim(&s, &id, "a", RUN_OUT, TakeOver::ExpiredOrOwn)
        .await
        .expect("own");
    let (b, c) = tokio::join!(
        claim(&second, &id, "b", LONG, TakeOver::Expired),
        claim(&s, &id, "c", LONG, TakeOver::Expired),
    );
    let winners: Vec<_> = [b, c].into_iter().flatten().collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(winners[0].generation, 4);
    let stored = s.leases.lease(&id).await.expect("get").expect("row");
    assert_eq!(stored, winners[0]);
}

async fn renewal_keeps_only_the_leases_still_held(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let other = s.sessions.insert_session(&task, "mock").await.expect("s2");
    let a = claim(&s, &id, "a", RUN_OUT, TakeOver::Expired)
        .await
        .expect("free");
    let a2 = claim(&s, &other.id, "a", LONG, TakeOver::Expired)
        .await
        .expect("free");
    claim(&s, &id, "b", LONG, TakeOver::Expired)
        .await
        .expect("expired: b takes it");
    let held = vec![
        (id.clone(), a.generation),
        (other.id.clone(), a2.generation),
    ];
    let still = s.leases.renew("a", &held, LONG).await.expect("renew");
    assert_eq!(still, vec![other.id.clone()]);
    let none = s.leases.renew("a", &[], LONG).await.expect("none");
    assert!(none.is_empty());
    s.leases
        .release(&other.id, a2.generation)
        .await
        .expect("release");
    assert_eq!(s.leases.lease(&other.id).await.expect("get"), None);
}

async fn a_handed_over_lease_is_claimable_at_once_and_keeps_its_host(engine: &dyn Engine) {
    let (s, _task, id) = seeded(engine).await;
    let a = claim(&s, &id, "a", LONG, TakeOver::Expired)
        .await
        .expect("free");
    s.leases
        .set_agent_host(&id, a.generation, "ws://agents-1:7740")
        .await
        .expect("host");
    let handed = s.leases.hand_over(&id, a.generation + 1).await;
    assert!(
        !handed.expect("hand"),
        "only the holder's generation hands over"
    );
    assert!(
        claimable(&s, "b", TakeOver::Expired, LONG).await.is_empty(),
        "still running"
    );
    assert!(s.leases.hand_over(&id, a.generation).await.expect("hand"));
    assert_eq!(
        claimable(&s, "b", TakeOver::Expired, LONG).await,
        vec![id.clone()],
        "claimable without waiting for the lease to run out"
    );
    let b = claim(&s, &id, "b", LONG, TakeOver::Expired)
        .await
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
        .open_clarification(&record, &message, None, None)
        .await
        .expect("open")
        .expect("new");
}

/// Moves session `id` to `state` under `fence`: whether the write applied.
async fn transition(
    s: &Stores,
    id: &str,
    state: SessionState,
    error: Option<&str>,
    fence: Fence,
) -> bool {
    let applied = s.sessions.transition(id, state, error, fence).await;
    applied.expect("transition")
}

async fn a_write_under_a_taken_over_lease_changes_nothing(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    let old = claim(&s, &id, "a", RUN_OUT, TakeOver::Expired)
        .await
        .expect("free");
    assert!(
        transition(&s, &id, SessionState::Starting, None, old.fence()).await,
        "the owner writes"
    );
    open_one(&s, &task, &id, "p-1").await;
    let new = claim(&s, &id, "b", LONG, TakeOver::Expired)
        .await
        .expect("taken over");
    let fenced_out = transition(
        &s,
        &id,
        SessionState::Failed,
        Some("old owner"),
        old.fence(),
    );
    assert!(!fenced_out.await, "the old owner's state write is refused");
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

    let new_owner = Some("new owner");
    assert!(transition(&s, &id, SessionState::Failed, new_owner, new.fence()).await);
    assert!(
        s.clarifications
            .settle("p-1", &Settlement::disconnected().fenced(new.fence()))
            .await
            .expect("settle")
            .is_some(),
        "the new owner's writes apply"
    );
    assert!(
        !transition(&s, &id, SessionState::Failed, None, Fence::lease(99)).await,
        "a generation that never was is fenced out too"
    );
}

async fn claimable_sessions_and_host_loads(engine: &dyn Engine) {
    let (s, task, id) = seeded(engine).await;
    // The ended session is made before the fresh one, so by the time the fresh one is
    // old enough to be an orphan, the ended one is too: only its state keeps it out.
    let ended = s.sessions.insert_session(&task, "mock").await.expect("s3");
    transition(&s, &ended.id, SessionState::Failed, None, Fence::NONE).await;
    let fresh = s.sessions.insert_session(&task, "mock").await.expect("s2");
    // Unowned for no time at all is old enough once the engine's clock has passed the
    // fresh session's creation (its clock and the creation stamp may differ in
    // precision): waited for, not slept for.
    let all = eventually("the fresh session old enough to be an orphan", || async {
        let all = claimable(&s, "b", TakeOver::Expired, Duration::ZERO).await;
        all.contains(&fresh.id).then_some(all)
    })
    .await;
    assert_eq!(
        all,
        vec![id.clone(), fresh.id.clone()],
        "live sessions without a lease"
    );
    let a = claim(&s, &id, "a", LONG, TakeOver::Expired)
        .await
        .expect("free");
    let later = claimable(&s, "b", TakeOver::Expired, LONG).await;
    assert!(
        later.is_empty(),
        "owned, or too young to be an orphan: {later:?}"
    );
    let own = claimable(&s, "a", TakeOver::ExpiredOrOwn, LONG).await;
    assert_eq!(own, vec![id.clone()]);
    let any = claimable(&s, "b", TakeOver::Any, LONG).await;
    assert_eq!(any, vec![id.clone()]);

    s.leases
        .set_agent_host(&id, a.generation, "ws://h1:1")
        .await
        .expect("host");
    let b = claim(&s, &fresh.id, "a", LONG, TakeOver::Expired)
        .await
        .expect("free");
    s.leases
        .set_agent_host(&fresh.id, b.generation, "ws://h1:1")
        .await
        .expect("host");
    assert_eq!(
        s.leases.host_loads().await.expect("loads"),
        vec![("ws://h1:1".to_owned(), 2)]
    );
    let lease = s.leases.lease(&id).await.expect("get");
    assert_eq!(
        lease.and_then(|l| l.agent_host),
        Some("ws://h1:1".to_owned())
    );
}
