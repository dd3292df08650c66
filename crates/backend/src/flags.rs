//! The runtime-flag override tier on SQLite, and the backend's [`Flags`] service.

use std::collections::BTreeMap;

use kandev_flags::{FlagService, OverrideStore};

use crate::db::{Db, now};

/// The backend's flag service: env > SQLite override > profiles.yaml > default.
pub type Flags = FlagService<SqliteOverrideStore>;

/// Settings-page overrides in the `runtime_flag_overrides` table.
#[derive(Debug, Clone)]
pub struct SqliteOverrideStore {
    db: Db,
}

impl SqliteOverrideStore {
    /// A store on `db`.
    pub fn new(db: Db) -> Self {
        Self { db }
    }
}

impl OverrideStore for SqliteOverrideStore {
    type Error = sqlx::Error;

    async fn overrides(&self) -> Result<BTreeMap<String, bool>, sqlx::Error> {
        let rows: Vec<(String, bool)> =
            sqlx::query_as("SELECT key, value FROM runtime_flag_overrides")
                .fetch_all(&self.db)
                .await?;
        Ok(rows.into_iter().collect())
    }

    async fn set_override(&self, key: &str, value: Option<bool>) -> Result<(), sqlx::Error> {
        match value {
            Some(value) => {
                sqlx::query(
                    "INSERT INTO runtime_flag_overrides (key, value, updated_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                )
                .bind(key)
                .bind(value)
                .bind(now())
                .execute(&self.db)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM runtime_flag_overrides WHERE key = $1")
                    .bind(key)
                    .execute(&self.db)
                    .await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_flags::{ACP_ELICITATION, FlagSource, Profile, Profiles};

    const DEV_ON: &str = "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n";

    fn env(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| ("KANDEV_FEATURES_ACP_ELICITATION".to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    #[tokio::test]
    async fn set_replace_and_clear_persist_in_sqlite() {
        let db = crate::db::memory().await;
        let store = SqliteOverrideStore::new(db.clone());
        assert!(store.overrides().await.expect("read").is_empty());
        store
            .set_override("features.a", Some(true))
            .await
            .expect("set");
        store
            .set_override("features.a", Some(false))
            .await
            .expect("replace");
        store
            .set_override("features.b", Some(true))
            .await
            .expect("set");
        // A second store on the same database sees the same rows: they are persisted.
        let other = SqliteOverrideStore::new(db);
        let map = other.overrides().await.expect("read");
        assert_eq!(map.get("features.a"), Some(&false));
        assert_eq!(map.get("features.b"), Some(&true));
        other.set_override("features.a", None).await.expect("clear");
        other
            .set_override("features.never", None)
            .await
            .expect("clear absent");
        assert_eq!(store.overrides().await.expect("read").len(), 1);
    }

    #[tokio::test]
    async fn precedence_env_over_override_over_profile_over_default() {
        let db = crate::db::memory().await;
        let flags = |env_value: Option<&str>, yaml: &str| {
            FlagService::new(
                Profile::Dev,
                Profiles::parse(yaml).expect("yaml"),
                env(env_value),
                SqliteOverrideStore::new(db.clone()),
            )
        };
        let f = flags(None, "").resolve(ACP_ELICITATION).await.expect("ok");
        assert_eq!((f.value, f.source), (false, FlagSource::Default));

        let f = flags(None, DEV_ON)
            .resolve(ACP_ELICITATION)
            .await
            .expect("ok");
        assert_eq!((f.value, f.source), (true, FlagSource::Profile));

        let f = flags(None, DEV_ON)
            .set_override(ACP_ELICITATION, Some(false))
            .await
            .expect("patch");
        assert_eq!((f.value, f.source), (false, FlagSource::Override));

        let f = flags(Some("true"), DEV_ON)
            .resolve(ACP_ELICITATION)
            .await
            .expect("ok");
        assert_eq!((f.value, f.source, f.locked), (true, FlagSource::Env, true));

        // The snapshot at a session start reads the override stored a moment ago.
        let service = flags(None, "");
        service
            .set_override(ACP_ELICITATION, Some(true))
            .await
            .expect("patch");
        assert!(
            service
                .snapshot()
                .await
                .expect("snapshot")
                .acp_elicitation()
        );
        service
            .set_override(ACP_ELICITATION, None)
            .await
            .expect("clear");
        assert!(
            !service
                .snapshot()
                .await
                .expect("snapshot")
                .acp_elicitation()
        );
    }
}
