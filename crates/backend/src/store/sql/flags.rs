//! [`FlagOverrideStore`]: the `runtime_flag_overrides` table.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::engine::Db;
use crate::model::Timestamp;
use crate::store::{FlagOverrideStore, StoreError};

#[async_trait]
impl FlagOverrideStore for Db {
    async fn overrides(&self) -> Result<BTreeMap<String, bool>, StoreError> {
        let rows: Vec<(String, bool)> =
            sqlx::query_as("SELECT key, value FROM runtime_flag_overrides")
                .fetch_all(self.pool())
                .await?;
        Ok(rows.into_iter().collect())
    }

    async fn set_override(&self, key: &str, value: Option<bool>) -> Result<(), StoreError> {
        let query = match value {
            Some(value) => sqlx::query(
                "INSERT INTO runtime_flag_overrides (key, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(value)
            .bind(Timestamp::now()),
            None => sqlx::query("DELETE FROM runtime_flag_overrides WHERE key = $1").bind(key),
        };
        query.execute(&mut *self.writer().await?).await?;
        Ok(())
    }
}
