//! [`HealthStore`] on PostgreSQL.

use async_trait::async_trait;

use super::{MIGRATOR, PostgresDb};
use crate::store::{HealthStore, MigrationState, PoolUse, StoreError};

#[async_trait]
impl HealthStore for PostgresDb {
    async fn probe(&self) -> Result<MigrationState, StoreError> {
        // A pooled connection is checked by the pool before use, so a server that went
        // away fails here (the caller bounds how long that may take).
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&self.pool)
                .await?;
        Ok(MigrationState::of(
            MIGRATOR
                .iter()
                .filter(|m| m.migration_type.is_up_migration())
                .map(|m| m.version),
            &applied,
        ))
    }

    fn pool_use(&self) -> PoolUse {
        PoolUse {
            open: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        }
    }
}
