//! Precedence: env > override store > profile > registry default, with the tier
//! that decided each value recorded as its [`FlagSource`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::env::{EnvSource, EnvValueError, read_env_flag};
use crate::profile::{Profile, Profiles};
use crate::registry::{FlagDefinition, FlagKind, RiskLevel, Stability, definitions};

/// The tier that decided a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagSource {
    /// The registry default; nothing else set it.
    Default,
    /// `profiles.yaml` for the active profile.
    Profile,
    /// The Settings override stored by the backend.
    Override,
    /// The flag's env var; it locks the Settings toggle.
    Env,
}

/// The values each tier offers for one flag; `None` where a tier is silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tiers {
    /// The env var's parsed value.
    pub env: Option<bool>,
    /// The stored override.
    pub override_value: Option<bool>,
    /// The active profile's `profiles.yaml` value.
    pub profile: Option<bool>,
}

impl Tiers {
    /// The winning value and its source: the highest tier that has a value, else `default`.
    pub fn decide(self, default: bool) -> (bool, FlagSource) {
        if let Some(v) = self.env {
            (v, FlagSource::Env)
        } else if let Some(v) = self.override_value {
            (v, FlagSource::Override)
        } else if let Some(v) = self.profile {
            (v, FlagSource::Profile)
        } else {
            (default, FlagSource::Default)
        }
    }
}

/// One flag as the Settings API shows it: every registry field, the resolved
/// value, the tier it came from, and whether the env var locks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedFlag {
    /// Registry key.
    pub key: String,
    /// The env var that sets and locks it.
    pub env_var: String,
    /// What the flag is for.
    pub kind: FlagKind,
    /// Short name for the Settings page.
    pub label: String,
    /// What it does, for operators.
    pub description: String,
    /// How settled the capability is.
    pub stability: Stability,
    /// How much can go wrong when it is on.
    pub risk_level: RiskLevel,
    /// Whether a change needs a restart.
    pub restart_required: bool,
    /// Whether Settings may override it.
    pub mutable: bool,
    /// The registry default.
    pub default: bool,
    /// The resolved value.
    pub value: bool,
    /// Which tier decided `value`.
    pub source: FlagSource,
    /// True when the env var is set: the Settings toggle cannot change it.
    pub locked: bool,
}

impl ResolvedFlag {
    /// Builds the resolved view of `def` from the tiers' values.
    pub fn new(def: &FlagDefinition, tiers: Tiers) -> Self {
        let (value, source) = tiers.decide(def.default);
        Self {
            key: def.key.to_owned(),
            env_var: def.env_var.to_owned(),
            kind: def.kind,
            label: def.label.to_owned(),
            description: def.description.to_owned(),
            stability: def.stability,
            risk_level: def.risk_level,
            restart_required: def.restart_required,
            mutable: def.mutable,
            default: def.default,
            value,
            source,
            locked: tiers.env.is_some(),
        }
    }
}

/// Resolves one flag. An env var set to a non-boolean is an error, never silently
/// ignored: the operator meant to set it.
pub fn resolve_flag(
    def: &FlagDefinition,
    env: &dyn EnvSource,
    overrides: &BTreeMap<String, bool>,
    profiles: &Profiles,
    profile: Profile,
) -> Result<ResolvedFlag, EnvValueError> {
    let tiers = Tiers {
        env: read_env_flag(env, def.env_var).transpose()?,
        override_value: overrides.get(def.key).copied(),
        profile: profiles.value(def.key, profile),
    };
    Ok(ResolvedFlag::new(def, tiers))
}

/// Resolves every registered flag, in registry order. Overrides for keys no
/// longer registered are ignored.
pub fn resolve_all(
    env: &dyn EnvSource,
    overrides: &BTreeMap<String, bool>,
    profiles: &Profiles,
    profile: Profile,
) -> Result<Vec<ResolvedFlag>, EnvValueError> {
    resolve_definitions(definitions(), env, overrides, profiles, profile)
}

/// Resolves each of `defs`, in order.
pub fn resolve_definitions(
    defs: &[FlagDefinition],
    env: &dyn EnvSource,
    overrides: &BTreeMap<String, bool>,
    profiles: &Profiles,
    profile: Profile,
) -> Result<Vec<ResolvedFlag>, EnvValueError> {
    defs.iter()
        .map(|def| resolve_flag(def, env, overrides, profiles, profile))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{ACP_ELICITATION, definition};
    use proptest::prelude::*;

    const VAR: &str = "KANDEV_FEATURES_ACP_ELICITATION";

    fn def() -> &'static FlagDefinition {
        definition(ACP_ELICITATION).expect("registered")
    }

    fn env(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| (VAR.to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    fn overrides(value: Option<bool>) -> BTreeMap<String, bool> {
        value
            .map(|v| (ACP_ELICITATION.to_owned(), v))
            .into_iter()
            .collect()
    }

    fn profiles(dev: Option<bool>) -> Profiles {
        let mut p = Profiles::empty();
        if let Some(v) = dev {
            p.set(ACP_ELICITATION, Profile::Dev, v).expect("known key");
        }
        p
    }

    fn resolve(e: Option<&str>, o: Option<bool>, p: Option<bool>) -> ResolvedFlag {
        resolve_flag(def(), &env(e), &overrides(o), &profiles(p), Profile::Dev).expect("resolves")
    }

    #[test]
    fn default_tier_when_nothing_is_set() {
        let f = resolve(None, None, None);
        assert_eq!(
            (f.value, f.source, f.locked),
            (false, FlagSource::Default, false)
        );
    }

    #[test]
    fn profile_tier_beats_default() {
        let f = resolve(None, None, Some(true));
        assert_eq!(
            (f.value, f.source, f.locked),
            (true, FlagSource::Profile, false)
        );
    }

    #[test]
    fn profile_tier_reads_only_the_active_profile() {
        let f = resolve_flag(
            def(),
            &env(None),
            &overrides(None),
            &profiles(Some(true)),
            Profile::Prod,
        )
        .expect("resolves");
        assert_eq!((f.value, f.source), (false, FlagSource::Default));
    }

    #[test]
    fn override_tier_beats_profile() {
        let f = resolve(None, Some(false), Some(true));
        assert_eq!(
            (f.value, f.source, f.locked),
            (false, FlagSource::Override, false)
        );
        let f = resolve(None, Some(true), None);
        assert_eq!((f.value, f.source), (true, FlagSource::Override));
    }

    #[test]
    fn env_tier_beats_override_and_locks() {
        let f = resolve(Some("on"), Some(false), Some(false));
        assert_eq!((f.value, f.source, f.locked), (true, FlagSource::Env, true));
        let f = resolve(Some("0"), Some(true), Some(true));
        assert_eq!(
            (f.value, f.source, f.locked),
            (false, FlagSource::Env, true)
        );
    }

    #[test]
    fn blank_env_is_unset_and_does_not_lock() {
        let f = resolve(Some(""), Some(true), None);
        assert_eq!(
            (f.value, f.source, f.locked),
            (true, FlagSource::Override, false)
        );
    }

    #[test]
    fn bad_env_value_is_an_error() {
        let err = resolve_flag(
            def(),
            &env(Some("maybe")),
            &overrides(None),
            &profiles(None),
            Profile::Dev,
        )
        .expect_err("maybe");
        assert_eq!((err.var.as_str(), err.value.as_str()), (VAR, "maybe"));
        let err = resolve_all(
            &env(Some("maybe")),
            &BTreeMap::new(),
            &Profiles::empty(),
            Profile::Prod,
        )
        .expect_err("maybe");
        assert!(
            err.to_string()
                .contains("KANDEV_FEATURES_ACP_ELICITATION=`maybe`")
        );
    }

    #[test]
    fn resolve_all_covers_the_registry_and_ignores_stale_overrides() {
        let stale: BTreeMap<String, bool> = [("features.removedLongAgo".to_owned(), true)].into();
        let all = resolve_all(&env(None), &stale, &Profiles::empty(), Profile::E2e).expect("ok");
        let keys: Vec<_> = all.iter().map(|f| f.key.as_str()).collect();
        let registry: Vec<_> = definitions().iter().map(|d| d.key).collect();
        assert_eq!(keys, registry);
    }

    #[test]
    fn resolved_flag_serializes_every_field_the_settings_api_lists() {
        let f = resolve(Some("yes"), None, None);
        let json = serde_json::to_value(&f).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "key": "features.acpElicitation",
                "env_var": "KANDEV_FEATURES_ACP_ELICITATION",
                "kind": "feature",
                "label": def().label,
                "description": def().description,
                "stability": "experimental",
                "risk_level": "medium",
                "restart_required": false,
                "mutable": true,
                "default": false,
                "value": true,
                "source": "env",
                "locked": true
            })
        );
        let back: ResolvedFlag = serde_json::from_value(json).expect("round-trips");
        assert_eq!(back, f);
    }

    #[test]
    fn sources_serialize_lowercase() {
        for (s, name) in [
            (FlagSource::Default, "default"),
            (FlagSource::Profile, "profile"),
            (FlagSource::Override, "override"),
            (FlagSource::Env, "env"),
        ] {
            assert_eq!(serde_json::to_value(s).expect("serializes"), name);
        }
    }

    /// The rule, restated independently of [`Tiers::decide`]: collect the present
    /// tiers with their rank and take the highest-ranked one.
    fn highest_present(t: Tiers, default: bool) -> (bool, FlagSource) {
        [
            (t.env, FlagSource::Env),
            (t.override_value, FlagSource::Override),
            (t.profile, FlagSource::Profile),
            (Some(default), FlagSource::Default),
        ]
        .into_iter()
        .filter_map(|(v, s)| v.map(|v| (v, s)))
        .max_by_key(|(_, s)| *s)
        .expect("default is always present")
    }

    proptest! {
        #[test]
        fn the_highest_present_tier_wins(
            env in proptest::option::of(any::<bool>()),
            override_value in proptest::option::of(any::<bool>()),
            profile in proptest::option::of(any::<bool>()),
            default in any::<bool>(),
        ) {
            let tiers = Tiers { env, override_value, profile };
            prop_assert_eq!(tiers.decide(default), highest_present(tiers, default));
        }

        #[test]
        fn resolution_through_every_real_tier_obeys_precedence(
            env_value in proptest::option::of(prop_oneof![
                Just("true"), Just("FALSE"), Just("1"), Just("0"), Just("Yes"), Just("no"), Just("ON"), Just("off")
            ]),
            override_value in proptest::option::of(any::<bool>()),
            profile_value in proptest::option::of(any::<bool>()),
        ) {
            let f = resolve(env_value, override_value, profile_value);
            let env_bool = env_value.map(|raw| crate::env::parse_env_bool(VAR, raw).expect("valid spelling"));
            let tiers = Tiers { env: env_bool, override_value, profile: profile_value };
            prop_assert_eq!((f.value, f.source), highest_present(tiers, def().default));
            prop_assert_eq!(f.locked, env_value.is_some());
        }
    }
}
