//! The database as a service: the readiness probe, the pool, the gauges.

use super::{Engine, on_every_engine, seeded};
use crate::model::{ClarificationStatus, Fence, Outcome, SessionState, Settlement, Source};

on_every_engine!(
    a_migrated_database_probes_complete_and_reports_its_pool,
    gauges_count_pending_records_and_live_sessions_as_shown,
);

async fn a_migrated_database_probes_complete_and_reports_its_pool(engine: &dyn Engine) {
    let stores = engine.stores();
    let migrations = stores.health.probe().await.expect("probe");
    assert!(migrations.expected > 0);
    assert!(migrations.complete(), "{migrations:?}");
    let pool = stores.health.pool_use();
    assert!(pool.max >= 1, "{pool:?}");
    assert!(pool.open >= 1 && pool.idle <= pool.open, "{pool:?}");
}

async fn gauges_count_pending_records_and_live_sessions_as_shown(engine: &dyn Engine) {
    let (stores, task, session) = seeded(engine).await;
    let gauges = stores.health.gauges().await.expect("gauges");
    assert!(gauges.pending.is_empty(), "{gauges:?}");
    assert_eq!(gauges.sessions, [(SessionState::Created, 1)]);

    super::clarifications::open(&stores, "p-1", &session, &task).await;
    let gauges = stores.health.gauges().await.expect("gauges");
    assert_eq!(gauges.pending, [(Source::Elicitation, 1)]);
    assert_eq!(gauges.sessions, [(SessionState::WaitingForInput, 1)]);

    let withdrawn = Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn);
    stores
        .clarifications
        .settle("p-1", &withdrawn)
        .await
        .expect("settle")
        .expect("settled");
    let gauges = stores.health.gauges().await.expect("gauges");
    assert!(gauges.pending.is_empty(), "{gauges:?}");
    assert_eq!(gauges.sessions, [(SessionState::Created, 1)]);

    stores
        .sessions
        .transition(&session, SessionState::Failed, Some("gone"), Fence::NONE)
        .await
        .expect("fail");
    let gauges = stores.health.gauges().await.expect("gauges");
    assert!(
        gauges.sessions.is_empty(),
        "ended sessions are not live: {gauges:?}"
    );
}
