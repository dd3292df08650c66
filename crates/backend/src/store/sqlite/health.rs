//! [`HealthStore`] on SQLite.

use async_trait::async_trait;
use sqlx::{Connection, SqliteConnection};

use super::{MIGRATOR, SqliteDb};
use sqlx::Row;

use crate::model::{SessionState, Source};
use crate::store::health::{LIVE_SESSIONS, PENDING_BY_SOURCE};
use crate::store::{Gauges, HealthStore, MigrationState, PoolUse, StoreError};

const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success";

#[async_trait]
impl HealthStore for SqliteDb {
    async fn probe(&self) -> Result<MigrationState, StoreError> {
        let applied: Vec<i64> = match &self.probe {
            // A fresh connection: pooled ones keep a deleted or moved file open and
            // would report it fine, while the next connection would find nothing there.
            Some(options) => {
                let mut conn = SqliteConnection::connect_with(options)
                    .await
                    .map_err(|err| StoreError::Unavailable(err.to_string()))?;
                let applied = sqlx::query_scalar(APPLIED).fetch_all(&mut conn).await?;
                conn.close().await?;
                applied
            }
            None => sqlx::query_scalar(APPLIED).fetch_all(&self.pool).await?,
        };
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
