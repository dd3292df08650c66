//! The backend's runtime-flag service: env > stored Settings override > profiles.yaml >
//! default, the override tier being the [`FlagOverrideStore`](crate::store::FlagOverrideStore).

use kandev_flags::FlagService;

use crate::store::StoredOverrides;

/// The backend's flag service.
pub type Flags = FlagService<StoredOverrides>;

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_flags::{ACP_ELICITATION, FlagSource, Profile, Profiles};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    async fn overrides() -> StoredOverrides {
        StoredOverrides(Arc::new(
            crate::store::sqlite::SqliteDb::memory().await.expect("db"),
        ))
    }

    const DEV_ON: &str = "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n";

    fn env(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| ("KANDEV_FEATURES_ACP_ELICITATION".to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    #[tokio::test]
    async fn precedence_env_over_override_over_profile_over_default() {
        let store = overrides().await;
        let flags = |env_value: Option<&str>, yaml: &str| {
            FlagService::new(
                Profile::Dev,
                Profiles::parse(yaml).expect("yaml"),
                env(env_value),
                store.clone(),
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
