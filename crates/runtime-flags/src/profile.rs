//! Deployment profiles and the per-profile flag values of `profiles.yaml`.
//!
//! ```yaml
//! features:
//!   KANDEV_FEATURES_ACP_ELICITATION:
//!     prod: "false"
//!     dev: "false"
//!     e2e: "false"
//! ```
//!
//! Entries are keyed by the flag's env var (so the file reads like the env a
//! deployment would set); values are the strings `"true"`/`"false"` (YAML booleans
//! are accepted too). A profile missing from an entry falls back to the registry
//! default.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::registry::{FlagDefinition, definition, definition_by_env_var};

/// The deployment profile selecting a column of `profiles.yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Profile {
    /// A developer's machine.
    Dev,
    /// A production deployment.
    Prod,
    /// The end-to-end test harness.
    E2e,
}

impl Profile {
    /// Every profile, in the order error messages list them.
    pub const ALL: [Profile; 3] = [Profile::Dev, Profile::Prod, Profile::E2e];

    /// The lowercase name used in config and `profiles.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Dev => "dev",
            Profile::Prod => "prod",
            Profile::E2e => "e2e",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A profile name that is none of `dev`, `prod`, `e2e`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile `{given}`; valid profiles are dev, prod, e2e")]
pub struct UnknownProfile {
    /// The name given.
    pub given: String,
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    /// Parses a profile name exactly (lowercase, no surrounding whitespace).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProfile {
                given: s.to_owned(),
            })
    }
}

impl TryFrom<String> for Profile {
    type Error = UnknownProfile;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// Why `profiles.yaml` could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfilesError {
    /// The file could not be read.
    #[error("cannot read profiles file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not YAML of the expected shape.
    #[error("profiles.yaml is not valid: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    /// An entry names an env var no registered flag uses.
    #[error("profiles.yaml sets `{env_var}`, which is not the env var of any registered flag")]
    UnknownEnvVar {
        /// The env var named.
        env_var: String,
    },
    /// A column names a profile other than dev, prod, e2e.
    #[error("profiles.yaml entry `{env_var}`: {source}")]
    UnknownProfile {
        /// The entry.
        env_var: String,
        /// The bad profile name.
        source: UnknownProfile,
    },
    /// A value is neither `"true"` nor `"false"`.
    #[error(
        "profiles.yaml entry `{env_var}`, profile `{profile}`: `{value}` is not \"true\" or \"false\""
    )]
    BadValue {
        /// The entry.
        env_var: String,
        /// The profile column.
        profile: Profile,
        /// The value found, as YAML.
        value: String,
    },
}

/// The raw shape of the file; unknown top-level keys are typos, so they are refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfilesFile {
    #[serde(default)]
    features: Option<BTreeMap<String, Option<BTreeMap<String, serde_yaml_ng::Value>>>>,
}

/// Per-profile flag values parsed from `profiles.yaml`, keyed by flag key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profiles {
    values: BTreeMap<&'static str, BTreeMap<Profile, bool>>,
}

impl Profiles {
    /// No profile values: every flag falls to its registry default.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses the text of a `profiles.yaml`. Empty text is an empty file.
    pub fn parse(text: &str) -> Result<Self, ProfilesError> {
        if text.trim().is_empty() {
            return Ok(Self::empty());
        }
        let file: ProfilesFile = serde_yaml_ng::from_str(text)?;
        let mut values = BTreeMap::new();
        for (env_var, columns) in file.features.unwrap_or_default() {
            let def =
                definition_by_env_var(&env_var).ok_or_else(|| ProfilesError::UnknownEnvVar {
                    env_var: env_var.clone(),
                })?;
            let mut per_profile = BTreeMap::new();
            for (name, raw) in columns.unwrap_or_default() {
                let profile =
                    name.parse::<Profile>()
                        .map_err(|source| ProfilesError::UnknownProfile {
                            env_var: env_var.clone(),
                            source,
                        })?;
                let value = yaml_bool(&raw).ok_or_else(|| ProfilesError::BadValue {
                    env_var: env_var.clone(),
                    profile,
                    value: yaml_text(&raw),
                })?;
                per_profile.insert(profile, value);
            }
            values.insert(def.key, per_profile);
        }
        Ok(Self { values })
    }

    /// Reads and parses a `profiles.yaml` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ProfilesError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ProfilesError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// The value the file gives flag `key` under `profile`, if it gives one.
    pub fn value(&self, key: &str, profile: Profile) -> Option<bool> {
        self.values.get(key)?.get(&profile).copied()
    }

    /// Sets a value programmatically (tests, embedded defaults). Unknown keys are refused.
    pub fn set(&mut self, key: &str, profile: Profile, value: bool) -> Result<(), UnknownFlagKey> {
        let def: &FlagDefinition = definition(key).ok_or_else(|| UnknownFlagKey {
            key: key.to_owned(),
        })?;
        self.values
            .entry(def.key)
            .or_default()
            .insert(profile, value);
        Ok(())
    }
}

/// A flag key that is not in the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown runtime flag `{key}`")]
pub struct UnknownFlagKey {
    /// The key given.
    pub key: String,
}

/// `"true"`/`"false"` in any case, or a YAML boolean.
fn yaml_bool(raw: &serde_yaml_ng::Value) -> Option<bool> {
    match raw {
        serde_yaml_ng::Value::Bool(b) => Some(*b),
        serde_yaml_ng::Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        serde_yaml_ng::Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

fn yaml_text(raw: &serde_yaml_ng::Value) -> String {
    match raw {
        serde_yaml_ng::Value::String(s) => s.clone(),
        other => serde_yaml_ng::to_string(other)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_else(|_| format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ACP_ELICITATION;

    #[test]
    fn profile_parses_each_valid_name_and_round_trips() {
        for p in Profile::ALL {
            assert_eq!(p.as_str().parse::<Profile>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
            let json = serde_json::to_string(&p).expect("serializes");
            assert_eq!(serde_json::from_str::<Profile>(&json).expect("parses"), p);
        }
    }

    #[test]
    fn unknown_profile_error_names_the_valid_ones() {
        let err = "staging".parse::<Profile>().expect_err("unknown");
        assert_eq!(err.given, "staging");
        assert_eq!(
            err.to_string(),
            "unknown profile `staging`; valid profiles are dev, prod, e2e"
        );
        // Exact names only: config is lowercase everywhere.
        assert!("Prod".parse::<Profile>().is_err());
        assert!(" dev".parse::<Profile>().is_err());
        let serde_err = serde_json::from_str::<Profile>("\"qa\"").expect_err("unknown");
        assert!(
            serde_err
                .to_string()
                .contains("valid profiles are dev, prod, e2e")
        );
    }

    #[test]
    fn the_repository_profiles_yaml_parses_and_keeps_the_flag_off_everywhere() {
        let profiles = Profiles::parse(include_str!("../../../profiles.yaml")).expect("parses");
        for p in Profile::ALL {
            assert_eq!(profiles.value(ACP_ELICITATION, p), Some(false), "{p}");
        }
    }

    #[test]
    fn values_are_read_per_profile_and_missing_columns_are_absent() {
        let profiles = Profiles::parse(
            "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n    prod: \"FALSE\"\n",
        )
        .expect("parses");
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::Dev), Some(true));
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::Prod), Some(false));
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::E2e), None);
        assert_eq!(profiles.value("features.other", Profile::Dev), None);
    }

    #[test]
    fn yaml_booleans_are_accepted_too() {
        let profiles =
            Profiles::parse("features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    e2e: true\n")
                .expect("parses");
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::E2e), Some(true));
    }

    #[test]
    fn empty_text_and_empty_sections_are_empty_profiles() {
        for text in ["", "  \n", "features:\n", "features: {}\n"] {
            assert_eq!(
                Profiles::parse(text).expect("parses"),
                Profiles::empty(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn invalid_yaml_is_a_yaml_error() {
        let err = Profiles::parse("features: [unclosed").expect_err("bad yaml");
        assert!(matches!(err, ProfilesError::Yaml(_)), "{err:?}");
        assert!(err.to_string().starts_with("profiles.yaml is not valid"));
    }

    #[test]
    fn unknown_top_level_key_is_a_yaml_error() {
        let err = Profiles::parse("feature:\n  X: {}\n").expect_err("typo");
        assert!(matches!(err, ProfilesError::Yaml(_)), "{err:?}");
        assert!(err.to_string().contains("feature"), "{err}");
    }

    #[test]
    fn bad_value_names_entry_profile_and_value() {
        let err =
            Profiles::parse("features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    prod: \"maybe\"\n")
                .expect_err("bad value");
        assert!(
            matches!(&err, ProfilesError::BadValue { env_var, profile: Profile::Prod, value }
                if env_var == "KANDEV_FEATURES_ACP_ELICITATION" && value == "maybe"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "profiles.yaml entry `KANDEV_FEATURES_ACP_ELICITATION`, profile `prod`: `maybe` is not \"true\" or \"false\""
        );
        let err = Profiles::parse("features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: 1\n")
            .expect_err("number");
        assert!(
            matches!(&err, ProfilesError::BadValue { value, .. } if value == "1"),
            "{err:?}"
        );
    }

    #[test]
    fn unknown_env_var_is_refused_by_name() {
        let err = Profiles::parse("features:\n  KANDEV_FEATURES_TELEPORT:\n    dev: \"true\"\n")
            .expect_err("unknown");
        assert!(
            matches!(&err, ProfilesError::UnknownEnvVar { env_var } if env_var == "KANDEV_FEATURES_TELEPORT")
        );
        assert!(err.to_string().contains("KANDEV_FEATURES_TELEPORT"));
    }

    #[test]
    fn unknown_profile_column_is_refused() {
        let err = Profiles::parse(
            "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    staging: \"true\"\n",
        )
        .expect_err("unknown profile");
        assert!(
            matches!(&err, ProfilesError::UnknownProfile { source, .. } if source.given == "staging")
        );
        assert!(
            err.to_string()
                .contains("valid profiles are dev, prod, e2e"),
            "{err}"
        );
    }

    #[test]
    fn from_file_reads_and_reports_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("profiles.yaml");
        std::fs::write(
            &file,
            "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n",
        )
        .expect("write");
        let profiles = Profiles::from_file(&file).expect("reads");
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::Dev), Some(true));
        let missing = dir.path().join("missing.yaml");
        let err = Profiles::from_file(&missing).expect_err("missing");
        assert!(matches!(err, ProfilesError::Io { .. }));
        assert!(err.to_string().contains("missing.yaml"));
    }

    #[test]
    fn set_refuses_unknown_keys() {
        let mut profiles = Profiles::empty();
        profiles
            .set(ACP_ELICITATION, Profile::Dev, true)
            .expect("known");
        assert_eq!(profiles.value(ACP_ELICITATION, Profile::Dev), Some(true));
        let err = profiles
            .set("features.nope", Profile::Dev, true)
            .expect_err("unknown");
        assert_eq!(err.to_string(), "unknown runtime flag `features.nope`");
    }
}
