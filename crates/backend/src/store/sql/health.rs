//! [`HealthStore`]: the probe (`engine::…`: where each engine proves it answers), the
//! pool, and the gauges' two grouped queries.

use async_trait::async_trait;

use super::engine::{self, Db};
use crate::model::{SessionState, Source};
use crate::store::{Gauges, HealthStore, MigrationState, PoolUse, StoreError};

/// Pending clarifications per source.
const PENDING_BY_SOURCE: &str =
    "SELECT source, COUNT(*) AS n FROM clarifications WHERE status = 'pending' GROUP BY source";

/// Live sessions per stored state and whether one of their clarifications is pending.
const LIVE_SESSIONS: &str = "SELECT s.state AS state, \
     EXISTS (SELECT 1 FROM clarifications c WHERE c.session_id = s.id AND c.status = 'pending') AS waiting, \
     COUNT(*) AS n FROM sessions s \
     WHERE s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') GROUP BY 1, 2";

#[async_trait]
impl HealthStore for Db {
    async fn probe(&self) -> Result<MigrationState, StoreError> {
        let applied = self.applied_migrations().await?;
        Ok(MigrationState::of_migrator(&engine::MIGRATOR, &applied))
    }

    fn pool_use(&self) -> PoolUse {
        PoolUse::of(self.pool())
    }

    async fn gauges(&self) -> Result<Gauges, StoreError> {
        let mut gauges = Gauges::default();
        let pending: Vec<(Source, i64)> = sqlx::query_as(PENDING_BY_SOURCE)
            .fetch_all(self.pool())
            .await?;
        for (source, n) in pending {
            gauges.pending.push((source, count(n)));
        }
        let live: Vec<(SessionState, bool, i64)> =
            sqlx::query_as(LIVE_SESSIONS).fetch_all(self.pool()).await?;
        for (state, waiting, n) in live {
            gauges.add_sessions(state, waiting, count(n));
        }
        Ok(gauges)
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
