//! The environment tier: reading `KANDEV_FEATURES_*` through [`EnvSource`] so
//! tests never touch the process environment, and parsing their values.

use std::collections::{BTreeMap, HashMap};

/// Where env vars are read from.
pub trait EnvSource {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The real process environment. Values that are not valid Unicode read as unset.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl EnvSource for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl EnvSource for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl<F> EnvSource for F
where
    F: Fn(&str) -> Option<String>,
{
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// An env var whose value is not a boolean.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}=`{value}` is not a boolean; use true/false, 1/0, yes/no or on/off (any case)")]
pub struct EnvValueError {
    /// The variable.
    pub var: String,
    /// Its value, verbatim.
    pub value: String,
}

/// Reads flag env var `var`: `None` when unset or blank (so `VAR=` in a compose
/// file means "not set"), else the parsed boolean or a clear error.
pub fn read_env_flag(env: &dyn EnvSource, var: &str) -> Option<Result<bool, EnvValueError>> {
    let raw = env.var(var)?;
    if raw.trim().is_empty() {
        return None;
    }
    Some(parse_env_bool(var, &raw))
}

/// Parses `true/false`, `1/0`, `yes/no`, `on/off` in any case, ignoring
/// surrounding whitespace.
pub fn parse_env_bool(var: &str, raw: &str) -> Result<bool, EnvValueError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(EnvValueError {
            var: var.to_owned(),
            value: raw.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VAR: &str = "KANDEV_FEATURES_ACP_ELICITATION";

    #[test]
    fn accepts_every_spelling_in_any_case() {
        for raw in [
            "true", "TRUE", "True", "1", "yes", "YES", "on", "On", " true\n",
        ] {
            assert_eq!(parse_env_bool(VAR, raw), Ok(true), "{raw:?}");
        }
        for raw in ["false", "FALSE", "0", "no", "No", "off", "OFF", "\tfalse "] {
            assert_eq!(parse_env_bool(VAR, raw), Ok(false), "{raw:?}");
        }
    }

    #[test]
    fn maybe_is_an_error_naming_the_variable_and_the_value() {
        let err = parse_env_bool(VAR, "maybe").expect_err("not a boolean");
        assert_eq!(err.var, VAR);
        assert_eq!(err.value, "maybe");
        assert_eq!(
            err.to_string(),
            "KANDEV_FEATURES_ACP_ELICITATION=`maybe` is not a boolean; use true/false, 1/0, yes/no or on/off (any case)"
        );
        for raw in ["2", "enabled", "t", "y", "tru"] {
            assert!(parse_env_bool(VAR, raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn unset_and_blank_read_as_unset() {
        let mut env = BTreeMap::new();
        assert_eq!(read_env_flag(&env, VAR), None);
        env.insert(VAR.to_owned(), "  ".to_owned());
        assert_eq!(read_env_flag(&env, VAR), None);
        env.insert(VAR.to_owned(), "on".to_owned());
        assert_eq!(read_env_flag(&env, VAR), Some(Ok(true)));
    }

    #[test]
    fn closures_and_hash_maps_are_env_sources() {
        let closure = |name: &str| (name == VAR).then(|| "no".to_owned());
        assert_eq!(read_env_flag(&closure, VAR), Some(Ok(false)));
        assert_eq!(read_env_flag(&closure, "OTHER"), None);
        let map: HashMap<String, String> = [(VAR.to_owned(), "maybe".to_owned())].into();
        assert!(matches!(read_env_flag(&map, VAR), Some(Err(_))));
    }

    #[test]
    fn process_env_reads_a_variable_that_is_always_set() {
        // PATH is set for every test runner; no mutation of the environment needed.
        assert!(ProcessEnv.var("PATH").is_some());
        assert_eq!(
            ProcessEnv.var("KANDEV_FLAGS_TEST_SURELY_UNSET_VARIABLE"),
            None
        );
    }
}
