//! Strict configuration: an unknown key in `kandev.toml`, or a `KANDEV_*` variable that
//! is no setting, stops start-up with one line naming it and the nearest valid one.
//!
//! Every config struct denies unknown fields (serde), so figment reports the first
//! unknown key with the keys valid at its place; [`unknown_key`] turns that into the
//! line. Runtime-flag variables (`KANDEV_FEATURES_*`) are not config keys and are checked
//! against the flag registry by [`check_env_names`].

use super::ConfigError;

/// The `KANDEV_*` prefix of runtime-flag variables.
pub(super) const FLAG_ENV_PREFIX: &str = "features_";

/// The candidate nearest to `word` (edit distance, case-insensitive), if any.
fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .min_by_key(|candidate| strsim::damerau_levenshtein(&word, &candidate.to_ascii_lowercase()))
}

/// Refuses a `KANDEV_FEATURES_*` variable that names no registered flag.
pub(super) fn check_env_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), ConfigError> {
    for name in names {
        let Some(rest) = name.strip_prefix("KANDEV_") else {
            continue;
        };
        if !rest.to_ascii_lowercase().starts_with(FLAG_ENV_PREFIX)
            || kandev_flags::definition_by_env_var(name).is_some()
        {
            continue;
        }
        let known = kandev_flags::definitions().iter().map(|d| d.env_var);
        let hint = nearest(name, known)
            .map(|n| format!("; did you mean {n}?"))
            .unwrap_or_default();
        return Err(ConfigError::new(
            name,
            format!("unknown runtime-flag environment variable{hint}"),
        ));
    }
    Ok(())
}

/// The error for field `field` unknown at `path`, where `expected` are the valid keys.
/// `env` are the env layer's variables (dotted lower-case keys), to tell whether the key
/// came from one.
pub(super) fn unknown_key(
    path: &[String],
    field: &str,
    expected: &[&str],
    env: Option<&[(String, String)]>,
) -> ConfigError {
    // figment's path already ends with the unknown field.
    let mut key_path: Vec<&str> = path.iter().map(String::as_str).collect();
    if key_path.last() != Some(&field) {
        key_path.push(field);
    }
    let key = key_path.join(".");
    let suggestion = nearest(field, expected.iter().copied());
    let from_env = env.and_then(|vars| {
        vars.iter()
            .map(|(k, _)| k.as_str())
            .find(|k| *k == key || k.starts_with(&format!("{key}.")))
    });
    let valid = if expected.is_empty() {
        String::new()
    } else {
        format!(" (valid here: {})", expected.join(", "))
    };
    let message = match from_env {
        Some(env_key) => {
            let var = env_var_name(env_key);
            let hint = suggestion
                .map(|s| {
                    let mut fixed = key_path.clone();
                    if let Some(last) = fixed.last_mut() {
                        *last = s;
                    }
                    let rest = &env_key[key.len()..];
                    format!(
                        "; did you mean {}?",
                        env_var_name(&format!("{}{rest}", fixed.join(".")))
                    )
                })
                .unwrap_or_default();
            format!("unknown key (from environment variable {var}){hint}{valid}")
        }
        None => {
            let hint = suggestion
                .map(|s| {
                    let mut fixed = key_path.clone();
                    if let Some(last) = fixed.last_mut() {
                        *last = s;
                    }
                    format!("; did you mean `{}`?", fixed.join("."))
                })
                .unwrap_or_default();
            format!("unknown key in the config file{hint}{valid}")
        }
    };
    ConfigError::new(key, message)
}

/// `auth.required` → `KANDEV_AUTH__REQUIRED`.
fn env_var_name(dotted: &str) -> String {
    format!("KANDEV_{}", dotted.replace('.', "__").to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn load_toml(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("kandev.toml");
        std::fs::write(&file, text).expect("write");
        Config::load(Some(&file), env(&[]))
    }

    #[test]
    fn a_mistyped_auth_section_is_an_error_naming_auth() {
        let err = load_toml("[auht]\nrequired = true\n").expect_err("unknown section");
        assert_eq!(err.key, "auht");
        let line = err.to_string();
        assert!(line.contains("did you mean `auth`?"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn unknown_keys_at_every_depth_name_the_nearest_valid_one() {
        let cases = [
            ("lisen = \"127.0.0.1:1\"\n", "lisen", "`listen`"),
            (
                "[auth]\nrequird = true\n",
                "auth.requird",
                "`auth.required`",
            ),
            (
                "[[auth.operators]]\nname = \"a\"\ntoken_sha = \"x\"\n",
                "auth.operators.0.token_sha",
                "`auth.operators.0.token_sha256`",
            ),
            (
                "[server]\nallowed_host = [\"x\"]\n",
                "server.allowed_host",
                "`server.allowed_hosts`",
            ),
            (
                "[server.tls]\ncert = \"c\"\nkye = \"k\"\n",
                "server.tls.kye",
                "`server.tls.key`",
            ),
            (
                "[agents.x]\ncommand = [\"a\"]\ninherit_envs = [\"A\"]\n",
                "agents.x.inherit_envs",
                "`agents.x.inherit_env`",
            ),
            (
                "[executor]\nkind = \"remote\"\nurl = \"wss://h\"\ntoken = \"t\"\nca_certs = \"x\"\n",
                "executor.ca_certs",
                "`executor.ca_cert`",
            ),
            (
                "[notifications]\nturn_finshed = true\n",
                "notifications.turn_finshed",
                "`notifications.turn_finished`",
            ),
        ];
        for (toml, key, hint) in cases {
            let err = load_toml(toml).expect_err(toml);
            assert_eq!(err.key, key, "{toml}: {err}");
            assert!(err.to_string().contains(hint), "{toml}: {err}");
        }
    }

    #[test]
    fn an_unknown_kandev_variable_names_the_nearest_one() {
        let err = Config::load(None, env(&[("KANDEV_LISTN", "127.0.0.1:1")])).expect_err("typo");
        assert_eq!(err.key, "listn");
        assert!(
            err.to_string().contains("KANDEV_LISTN") && err.to_string().contains("KANDEV_LISTEN?"),
            "{err}"
        );
        let err = Config::load(None, env(&[("KANDEV_AUHT__REQUIRED", "true")])).expect_err("typo");
        assert!(
            err.to_string()
                .contains("did you mean KANDEV_AUTH__REQUIRED?"),
            "{err}"
        );
        let err = Config::load(None, env(&[("KANDEV_FEATURES_ACP_ELICITATON", "true")]))
            .expect_err("flag typo");
        assert_eq!(err.key, "KANDEV_FEATURES_ACP_ELICITATON");
        assert!(
            err.to_string()
                .contains("did you mean KANDEV_FEATURES_ACP_ELICITATION?"),
            "{err}"
        );
    }

    #[test]
    fn variables_of_other_layers_are_not_config() {
        Config::load(
            None,
            env(&[
                ("KANDEV_FEATURES_ACP_ELICITATION", "true"),
                ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "2s"),
                ("KANDEV_ACP_IDLE_TIMEOUT", "1h"),
                ("KANDEV_ASK_USER_QUESTION_TIMEOUT", "2h"),
                ("KANDEV_MCP_URL", "http://x"),
                ("KANDEV_MCP_TOKEN", "t"),
                ("KANDEV_CONFIG", "k.toml"),
                ("KANDEV_LOG", "debug"),
                ("KANDEVX", "not ours"),
                ("PATH", "/bin"),
            ]),
        )
        .expect("none of these is a config key");
    }
}
