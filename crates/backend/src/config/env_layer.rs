//! The `KANDEV_*` environment as a figment layer, and figment's errors as one line that
//! names the key and where its value came from.

use figment::value::{Dict, Map, Value};
use figment::{Metadata, Profile as FigmentProfile, Provider};

use super::ConfigError;
use super::auto_answers::{ANSWER_TIMEOUT_VAR, DEFAULT_ANSWER_TIMEOUT};
use super::strict::{self, FLAG_ENV_PREFIX};

/// Env vars with the `KANDEV_` prefix that belong to other layers and are not config
/// keys: the config file's own, agentctl's settings (the local executor passes them on),
/// `agentctl mcp-stdio`'s. Runtime flags (`KANDEV_FEATURES_*`) are checked against the
/// flag registry instead.
const FOREIGN_ENV: &[&str] = &[
    "config",
    "elicitation_answer_timeout",
    "acp_idle_timeout",
    "ask_user_question_timeout",
    "mcp_url",
    "mcp_token",
    "log",
    "log_format",
];

/// agentctl's answer deadline as `env` sets it for the local executor (its default
/// otherwise): reminders must come before it. A value that is no duration is an error here.
pub(super) fn deadline_in(env: &[(String, String)]) -> Result<std::time::Duration, ConfigError> {
    match env.iter().find(|(name, _)| name == ANSWER_TIMEOUT_VAR) {
        Some((_, value)) if !value.trim().is_empty() => humantime::parse_duration(value.trim())
            .map_err(|err| {
                ConfigError::new(
                    ANSWER_TIMEOUT_VAR,
                    format!("`{value}` is not a duration: {err}"),
                )
            }),
        _ => Ok(DEFAULT_ANSWER_TIMEOUT),
    }
}

/// The `KANDEV_*` env layer: `KANDEV_LISTEN` sets `listen`, a double underscore
/// nests (`KANDEV_NOTIFICATIONS__TURN_FINISHED` sets `notifications.turn_finished`).
/// Values parse like figment's own env provider (`true`, `42`, `[a, b]`, strings).
#[derive(Debug, Clone, Default)]
pub struct EnvLayer {
    vars: Vec<(String, String)>,
}

impl EnvLayer {
    /// Keeps the `KANDEV_*` variables that are config keys.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let vars = vars
            .into_iter()
            .filter_map(|(name, value)| {
                let key = name.strip_prefix("KANDEV_")?.to_ascii_lowercase();
                (!key.is_empty()
                    && !FOREIGN_ENV.contains(&key.as_str())
                    && !key.starts_with(FLAG_ENV_PREFIX))
                .then(|| (key.replace("__", "."), value))
            })
            .collect();
        Self { vars }
    }
}

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_LAYER_NAME)
    }

    fn data(&self) -> Result<Map<FigmentProfile, Dict>, figment::Error> {
        let mut dict = Dict::new();
        for (key, value) in &self.vars {
            let parsed: Value = value.parse().unwrap_or_else(|_| Value::from(value.clone()));
            let path: Vec<&str> = key.split('.').collect();
            insert_path(&mut dict, &path, parsed);
        }
        Ok(FigmentProfile::Default.collect(dict))
    }
}

/// Sets `path` in `dict`, creating the intermediate dictionaries.
fn insert_path(dict: &mut Dict, path: &[&str], value: Value) {
    match path {
        [] => {}
        [last] => {
            dict.insert((*last).to_owned(), value);
        }
        [first, rest @ ..] => {
            let entry = dict
                .entry((*first).to_owned())
                .or_insert_with(|| Value::from(Dict::new()));
            if entry.as_dict().is_none() {
                *entry = Value::from(Dict::new());
            }
            if let Value::Dict(_, inner) = entry {
                insert_path(inner, rest, value);
            }
        }
    }
}

const ENV_LAYER_NAME: &str = "environment variable";

/// One line from figment's (possibly chained) error: the first problem, its key and its source.
pub(super) fn figment_error(err: figment::Error, env: Option<&EnvLayer>) -> ConfigError {
    let Some(first) = err.into_iter().next() else {
        return ConfigError::new("?", "unreadable configuration");
    };
    let key = if first.path.is_empty() {
        "(file)".to_owned()
    } else {
        first.path.join(".")
    };
    let source = first
        .metadata
        .as_ref()
        .map(|md| match &md.source {
            _ if md.name == ENV_LAYER_NAME => {
                let value = env
                    .and_then(|env| env.vars.iter().find(|(k, _)| *k == key))
                    .map(|(_, v)| format!("=`{v}`"))
                    .unwrap_or_default();
                format!(
                    " (from environment variable KANDEV_{}{value})",
                    first.path.join("__").to_ascii_uppercase()
                )
            }
            Some(source) => format!(" (from {} {source})", md.name),
            None => format!(" (from {})", md.name),
        })
        .unwrap_or_default();
    if let figment::error::Kind::UnknownField(field, expected) = &first.kind {
        return strict::unknown_key(&first.path, field, expected, env.map(|e| e.vars.as_slice()));
    }
    let kind = first.kind.to_string().replace('\n', " ");
    ConfigError::new(key, format!("{kind}{source}"))
}
