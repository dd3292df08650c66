//! [`HealthStore`] on PostgreSQL.

use async_trait::async_trait;

use super::{MIGRATOR, PostgresDb};
use sqlx::Row;

use crate::model::{SessionState, Source};
use crate::store::health::{LIVE_SESSIONS, PENDING_BY_SOURCE};
use crate::store::{Gauges, HealthStore, MigrationState, PoolUse, StoreError};

#[async_trait]
impl HealthStore for PostgresDb {
    async fn probe(&self) -> Result<MigrationState, StoreError> {
        // A pooled connection is checked by the pool before use, so a server that went
        // away fails here (the caller bounds how long that may take).
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&self.pool)
                .await?;
        Ok(MigrationState::of_migrator(&MIGRATOR, &applied))
    }

    fn pool_use(&self) -> PoolUse {
        PoolUse::of(&self.pool)
    }

    async fn gauges(&self) -> Result<Gauges, StoreError> {
        let mut gauges = Gauges::default();
        for row in sqlx::query(PENDING_BY_SOURCE).fetch_all(&self.pool).await? {
            let source = super::name(&row, "source", Source::parse)?;
            gauges.pending.push((source, count(row.try_get("n")?)));
        }
        for row in sqlx::query(LIVE_SESSIONS).fetch_all(&self.pool).await? {
            let state: SessionState = super::name(&row, "state", |s| s.parse().ok())?;
            gauges.add_sessions(state, row.try_get("waiting")?, count(row.try_get("n")?));
        }
        Ok(gauges)
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
