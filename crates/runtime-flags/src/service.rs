//! [`FlagService`]: the backend's view of the flags — resolve all of them for
//! the Settings API or a session start, and validate and apply a Settings PATCH.

use crate::env::{EnvSource, EnvValueError, read_env_flag};
use crate::profile::{Profile, Profiles};
use crate::registry::{FlagDefinition, definitions};
use crate::resolve::{ResolvedFlag, resolve_definitions, resolve_flag};
use crate::snapshot::FlagSnapshot;
use crate::store::OverrideStore;

/// Why a flag could not be resolved or changed. Each variant maps to its own
/// HTTP status: [`FlagError::UnknownKey`] 404, [`FlagError::EnvLocked`] and
/// [`FlagError::Immutable`] 409, the rest 500.
#[derive(Debug, thiserror::Error)]
pub enum FlagError<E: std::error::Error + 'static> {
    /// No registered flag has this key.
    #[error("unknown runtime flag `{key}`")]
    UnknownKey {
        /// The key given.
        key: String,
    },
    /// The flag's env var is set, which locks it against Settings changes.
    #[error("runtime flag `{key}` is locked by the environment variable {env_var}")]
    EnvLocked {
        /// The flag.
        key: String,
        /// The env var that locks it.
        env_var: String,
    },
    /// The registry marks the flag as not changeable at runtime.
    #[error("runtime flag `{key}` cannot be changed at runtime")]
    Immutable {
        /// The flag.
        key: String,
    },
    /// A flag env var holds a non-boolean.
    #[error(transparent)]
    Env(#[from] EnvValueError),
    /// The override store failed.
    #[error("runtime-flag override store failed: {0}")]
    Store(#[source] E),
}

/// Resolves flags from the environment, an [`OverrideStore`], `profiles.yaml`
/// and the registry, for one active [`Profile`].
pub struct FlagService<S> {
    registry: &'static [FlagDefinition],
    profile: Profile,
    profiles: Profiles,
    env: Box<dyn EnvSource + Send + Sync>,
    store: S,
}

impl<S: std::fmt::Debug> std::fmt::Debug for FlagService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagService")
            .field("profile", &self.profile)
            .field("profiles", &self.profiles)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl<S: OverrideStore> FlagService<S> {
    /// A service for `profile`, reading env vars from `env` (use
    /// [`crate::ProcessEnv`] in production) and overrides from `store`.
    pub fn new(
        profile: Profile,
        profiles: Profiles,
        env: impl EnvSource + Send + Sync + 'static,
        store: S,
    ) -> Self {
        Self {
            registry: definitions(),
            profile,
            profiles,
            env: Box::new(env),
            store,
        }
    }

    /// Replaces the registry the service resolves (for tools and tests that need
    /// flags the built-in [`crate::REGISTRY`] does not have).
    pub fn with_registry(mut self, registry: &'static [FlagDefinition]) -> Self {
        self.registry = registry;
        self
    }

    /// The active profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The override store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Every registered flag, resolved now, in registry order.
    pub async fn resolve_all(&self) -> Result<Vec<ResolvedFlag>, FlagError<S::Error>> {
        let overrides = self.store.overrides().await.map_err(FlagError::Store)?;
        Ok(resolve_definitions(
            self.registry,
            &*self.env,
            &overrides,
            &self.profiles,
            self.profile,
        )?)
    }

    /// One flag, resolved now.
    pub async fn resolve(&self, key: &str) -> Result<ResolvedFlag, FlagError<S::Error>> {
        let def = self.known(key)?;
        let overrides = self.store.overrides().await.map_err(FlagError::Store)?;
        Ok(resolve_flag(
            def,
            &*self.env,
            &overrides,
            &self.profiles,
            self.profile,
        )?)
    }

    /// The snapshot to send with a session start.
    pub async fn snapshot(&self) -> Result<FlagSnapshot, FlagError<S::Error>> {
        Ok(FlagSnapshot::from_resolved(&self.resolve_all().await?))
    }

    /// Checks that a Settings PATCH of `key` is allowed: the key is registered,
    /// the flag is mutable, and its env var is not set (set means locked, even
    /// to a value that does not parse).
    pub fn check_patch(&self, key: &str) -> Result<&'static FlagDefinition, FlagError<S::Error>> {
        let def = self.known(key)?;
        if !def.mutable {
            return Err(FlagError::Immutable {
                key: def.key.to_owned(),
            });
        }
        if read_env_flag(&*self.env, def.env_var).is_some() {
            return Err(FlagError::EnvLocked {
                key: def.key.to_owned(),
                env_var: def.env_var.to_owned(),
            });
        }
        Ok(def)
    }

    /// Applies a Settings PATCH: `Some(v)` stores an override, `None` clears it.
    /// Returns the flag as resolved afterwards.
    pub async fn set_override(
        &self,
        key: &str,
        value: Option<bool>,
    ) -> Result<ResolvedFlag, FlagError<S::Error>> {
        let def = self.check_patch(key)?;
        self.store
            .set_override(def.key, value)
            .await
            .map_err(FlagError::Store)?;
        self.resolve(def.key).await
    }

    fn known(&self, key: &str) -> Result<&'static FlagDefinition, FlagError<S::Error>> {
        self.registry
            .iter()
            .find(|d| d.key == key)
            .ok_or_else(|| FlagError::UnknownKey {
                key: key.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ACP_ELICITATION;
    use crate::resolve::FlagSource;
    use crate::store::InMemoryOverrideStore;
    use std::collections::BTreeMap;

    const VAR: &str = "KANDEV_FEATURES_ACP_ELICITATION";

    fn env(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| (VAR.to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    fn service(env_value: Option<&str>, profile_yaml: &str) -> FlagService<InMemoryOverrideStore> {
        FlagService::new(
            Profile::Dev,
            Profiles::parse(profile_yaml).expect("valid yaml"),
            env(env_value),
            InMemoryOverrideStore::new(),
        )
    }

    const DEV_ON: &str = "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n";

    #[tokio::test]
    async fn each_tier_shows_up_as_the_source() {
        let s = service(None, "");
        assert_eq!(
            s.resolve(ACP_ELICITATION).await.expect("ok").source,
            FlagSource::Default
        );

        let s = service(None, DEV_ON);
        let f = s.resolve(ACP_ELICITATION).await.expect("ok");
        assert_eq!((f.value, f.source), (true, FlagSource::Profile));

        let f = s
            .set_override(ACP_ELICITATION, Some(false))
            .await
            .expect("patch");
        assert_eq!(
            (f.value, f.source, f.locked),
            (false, FlagSource::Override, false)
        );

        let f = s.set_override(ACP_ELICITATION, None).await.expect("clear");
        assert_eq!((f.value, f.source), (true, FlagSource::Profile));

        let s = service(Some("off"), DEV_ON);
        s.store()
            .set_override(ACP_ELICITATION, Some(true))
            .await
            .expect("infallible");
        let f = s.resolve(ACP_ELICITATION).await.expect("ok");
        assert_eq!(
            (f.value, f.source, f.locked),
            (false, FlagSource::Env, true)
        );
    }

    #[tokio::test]
    async fn snapshot_reflects_an_override_made_after_construction() {
        // A Settings toggle applies to the next session start without a restart.
        let s = service(None, "");
        assert!(!s.snapshot().await.expect("ok").acp_elicitation());
        s.set_override(ACP_ELICITATION, Some(true))
            .await
            .expect("patch");
        let snap = s.snapshot().await.expect("ok");
        assert!(snap.acp_elicitation());
        assert_eq!(
            serde_json::to_string(&snap).expect("ok"),
            r#"{"features.acpElicitation":true}"#
        );
    }

    #[tokio::test]
    async fn patch_of_an_unknown_key_is_unknown_key() {
        let s = service(None, "");
        let err = s
            .set_override("features.teleport", Some(true))
            .await
            .expect_err("unknown");
        assert!(matches!(&err, FlagError::UnknownKey { key } if key == "features.teleport"));
        assert_eq!(err.to_string(), "unknown runtime flag `features.teleport`");
        assert!(
            s.store().overrides().await.expect("ok").is_empty(),
            "nothing stored"
        );
        assert!(matches!(
            s.resolve("features.teleport").await,
            Err(FlagError::UnknownKey { .. })
        ));
    }

    #[tokio::test]
    async fn patch_of_an_env_locked_flag_is_env_locked_and_stores_nothing() {
        for raw in ["true", "maybe"] {
            let s = service(Some(raw), "");
            for value in [Some(true), Some(false), None] {
                let err = s
                    .set_override(ACP_ELICITATION, value)
                    .await
                    .expect_err("locked");
                assert!(
                    matches!(&err, FlagError::EnvLocked { key, env_var } if key == ACP_ELICITATION && env_var == VAR),
                    "{err:?}"
                );
                assert!(err.to_string().contains(VAR));
            }
            assert!(s.store().overrides().await.expect("ok").is_empty());
        }
    }

    #[tokio::test]
    async fn bad_env_value_fails_resolution_with_the_variable_named() {
        let s = service(Some("maybe"), "");
        let err = s.resolve_all().await.expect_err("maybe");
        assert!(matches!(&err, FlagError::Env(e) if e.var == VAR && e.value == "maybe"));
        assert!(
            err.to_string()
                .contains("KANDEV_FEATURES_ACP_ELICITATION=`maybe`")
        );
        assert!(matches!(s.snapshot().await, Err(FlagError::Env(_))));
    }

    /// The registry has no immutable flag today, so the check runs against one
    /// built for the purpose.
    static FROZEN: &[FlagDefinition] = &[FlagDefinition {
        key: "features.frozen",
        env_var: "KANDEV_FEATURES_FROZEN",
        kind: crate::FlagKind::Feature,
        label: "Frozen",
        description: "Cannot be changed from Settings.",
        stability: crate::Stability::Stable,
        risk_level: crate::RiskLevel::High,
        restart_required: true,
        mutable: false,
        default: true,
    }];

    #[tokio::test]
    async fn patch_of_an_immutable_flag_is_immutable_and_stores_nothing() {
        let s = service(None, "").with_registry(FROZEN);
        let err = s
            .set_override("features.frozen", Some(false))
            .await
            .expect_err("immutable");
        assert!(
            matches!(&err, FlagError::Immutable { key } if key == "features.frozen"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "runtime flag `features.frozen` cannot be changed at runtime"
        );
        assert!(s.store().overrides().await.expect("ok").is_empty());
        // Resolution still works for it, and the custom registry replaces the built-in one.
        let all = s.resolve_all().await.expect("ok");
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].value, all[0].source, all[0].mutable),
            (true, FlagSource::Default, false)
        );
        assert!(matches!(
            s.set_override(ACP_ELICITATION, Some(true)).await,
            Err(FlagError::UnknownKey { .. })
        ));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("disk on fire")]
    struct Broken;

    struct BrokenStore;

    impl OverrideStore for BrokenStore {
        type Error = Broken;

        async fn overrides(&self) -> Result<BTreeMap<String, bool>, Broken> {
            Err(Broken)
        }

        async fn set_override(&self, _key: &str, _value: Option<bool>) -> Result<(), Broken> {
            Err(Broken)
        }
    }

    #[tokio::test]
    async fn store_failures_surface_as_store_errors() {
        let s = FlagService::new(Profile::Prod, Profiles::empty(), env(None), BrokenStore);
        let err = s.resolve_all().await.expect_err("broken");
        assert!(matches!(err, FlagError::Store(Broken)));
        assert_eq!(
            err.to_string(),
            "runtime-flag override store failed: disk on fire"
        );
        assert!(matches!(
            s.set_override(ACP_ELICITATION, Some(true)).await,
            Err(FlagError::Store(Broken))
        ));
    }

    #[test]
    fn futures_are_send() {
        fn assert_send<T: Send>(_: T) {}
        let s = service(None, "");
        assert_send(s.resolve_all());
        assert_send(s.snapshot());
        assert_send(s.set_override(ACP_ELICITATION, Some(true)));
    }

    #[tokio::test]
    async fn process_env_and_closures_plug_in() {
        let s = FlagService::new(
            Profile::E2e,
            Profiles::empty(),
            |name: &str| (name == VAR).then(|| "YES".to_owned()),
            InMemoryOverrideStore::new(),
        );
        assert!(s.snapshot().await.expect("ok").acp_elicitation());
        let s = FlagService::new(
            Profile::E2e,
            Profiles::empty(),
            crate::ProcessEnv,
            InMemoryOverrideStore::new(),
        );
        assert_eq!(s.profile(), Profile::E2e);
    }
}
