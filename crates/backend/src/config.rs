//! The backend's configuration (docs/architecture.md §4.5): figment layers, built-in
//! defaults < `kandev.toml` (`--config` / `KANDEV_CONFIG`) < `KANDEV_*` env.
//!
//! A bad value stops start-up with one line naming the key ([`ConfigError`]), and so
//! does an unknown key, in the file or as a `KANDEV_*` variable: the line names the
//! nearest valid one (a mistyped `[auth]` must never silently mean "no auth").
//! `[server]` and `[auth]` live in [`security`].

mod agent;
mod auto_answers;
mod cluster;
mod env_layer;
mod integrations;
mod notifications;
mod security;
mod strict;

pub use agent::AgentConfig;
pub use auto_answers::{AutoAnswerConfig, AutoAnswerRule, RuleAnswer, RuleTool, answer_deadline};
pub use cluster::{ClusterConfig, DEFAULT_LEASE};
pub use env_layer::EnvLayer;
pub use integrations::{IntegrationsConfig, SlackConfig};
pub use notifications::{HookEvent, HookFormat, NotificationsConfig, WebhookConfig};
pub use security::{
    AuthConfig, OperatorConfig, ServerConfig, TlsConfig, is_valid_operator_name, normalize_origin,
};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use kandev_flags::{Profile, Profiles};
use serde::{Deserialize, Serialize};

use crate::agent_link::ExecutorConfig;
use env_layer::{deadline_in, figment_error};

/// The repository's `profiles.yaml`, used when no `profiles_file` is configured and
/// none is in the working directory.
pub const BUILTIN_PROFILES: &str = include_str!("../../../profiles.yaml");

/// Env var naming the config file (same as `--config`).
pub const CONFIG_FILE_VAR: &str = "KANDEV_CONFIG";

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Deployment profile, selecting the `profiles.yaml` column.
    pub profile: Profile,
    /// Address of the operator API.
    pub listen: SocketAddr,
    /// sqlx database URL: `sqlite://…` (embedded) or `postgres://user@host:port/db`.
    pub database_url: String,
    /// Connections in the pool of a server database.
    #[serde(default = "default_pool_size")]
    pub database_pool_size: u32,
    /// How long one statement may run on a server database (humantime, e.g. `30s`).
    #[serde(default = "default_statement_timeout", with = "humantime_text")]
    pub database_statement_timeout: std::time::Duration,
    /// Agents by id.
    pub agents: BTreeMap<String, AgentConfig>,
    /// Where agentctl runs.
    pub executor: ExecutorConfig,
    /// Which notifications are dispatched.
    pub notifications: NotificationsConfig,
    /// `profiles.yaml` to read; `None` means `./profiles.yaml` if present, else the built-in copy.
    #[serde(default)]
    pub profiles_file: Option<PathBuf>,
    /// `[server]`: allowed hosts and origins, TLS.
    #[serde(default)]
    pub server: ServerConfig,
    /// `[auth]`: operators.
    #[serde(default)]
    pub auth: AuthConfig,
    /// `[cluster]`: replicas on one PostgreSQL.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[metrics]`: a listener of its own for `GET /metrics`.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// `[drain]`: how a SIGTERM is wound down.
    #[serde(default)]
    pub drain: DrainConfig,
    /// `[integrations]`: Slack's buttons.
    #[serde(default)]
    pub integrations: IntegrationsConfig,
}

/// `[drain]`: the timing of the shutdown on SIGTERM/SIGINT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainConfig {
    /// How long kandev keeps serving after the signal, answering `/readyz` 503 and
    /// refusing new sessions, before it stops accepting connections: time for a load
    /// balancer to notice (humantime; default `0s`).
    #[serde(default, with = "humantime_text")]
    pub grace: std::time::Duration,
    /// How long the requests in flight may take to finish once connections are no
    /// longer accepted (default `10s`).
    #[serde(default = "default_finish_within", with = "humantime_text")]
    pub finish_within: std::time::Duration,
}

fn default_finish_within() -> std::time::Duration {
    std::time::Duration::from_secs(10)
}

impl Default for DrainConfig {
    fn default() -> Self {
        Self {
            grace: std::time::Duration::ZERO,
            finish_within: default_finish_within(),
        }
    }
}

/// `[metrics]`. `GET /metrics` is always served on `listen`, behind operator auth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Also serve `GET /metrics` alone on this address, without auth or `Host` check
    /// (for a scraper; bind it where only the scraper reaches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
}

fn default_pool_size() -> u32 {
    crate::store::DatabaseOptions::default().pool_size
}

fn default_statement_timeout() -> std::time::Duration {
    crate::store::DatabaseOptions::default().statement_timeout
}

/// A duration written as humantime text (`30s`, `2m`).
mod humantime_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map_err(|err| serde::de::Error::custom(format!("`{text}` is not a duration: {err}")))
    }
}

impl Config {
    /// How the database is reached.
    pub fn database_options(&self) -> crate::store::DatabaseOptions {
        crate::store::DatabaseOptions {
            pool_size: self.database_pool_size,
            statement_timeout: self.database_statement_timeout,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            profile: Profile::Dev,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: "sqlite://data/kandev.db".to_owned(),
            database_pool_size: default_pool_size(),
            database_statement_timeout: default_statement_timeout(),
            agents: BTreeMap::from([("mock".to_owned(), AgentConfig::demo())]),
            executor: ExecutorConfig::default(),
            notifications: NotificationsConfig::default(),
            profiles_file: None,
            server: ServerConfig::default(),
            auth: AuthConfig::default(),
            cluster: ClusterConfig::default(),
            metrics: MetricsConfig::default(),
            drain: DrainConfig::default(),
            integrations: IntegrationsConfig::default(),
        }
    }
}

/// A binary installed beside the running `kandev` executable.
pub fn sibling_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_default()
        .join(name)
}

/// A configuration `kandev` refuses to start with; [`std::fmt::Display`] is one line naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: `{key}`: {message}")]
pub struct ConfigError {
    /// The dotted key at fault.
    pub key: String,
    /// What is wrong with it, and where it came from.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl Config {
    /// Loads the layers: defaults, then the TOML file (when given), then the `KANDEV_*`
    /// variables among `env` (the process environment in production).
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::new(
                    "config",
                    format!("config file {} does not exist", path.display()),
                ));
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        let env: Vec<(String, String)> = env.into_iter().collect();
        let deadline = deadline_in(&env)?;
        strict::check_env_names(env.iter().map(|(name, _)| name.as_str()))?;
        let env = EnvLayer::from_vars(env);
        figment = figment.merge(env.clone());
        let config: Config = figment
            .extract()
            .map_err(|err| figment_error(err, Some(&env)))?;
        config.validate()?;
        config.notifications.validate(deadline)?;
        Ok(config.with_local_pass_env())
    }

    /// Extracts and validates a config from any figment (tests build their own).
    pub fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        let config: Config = figment.extract().map_err(|err| figment_error(err, None))?;
        config.validate()?;
        Ok(config.with_local_pass_env())
    }

    /// Hands the local executor every agent's `inherit_env`, so the agentctl it starts
    /// has those variables to pass on.
    fn with_local_pass_env(mut self) -> Self {
        let mut names: Vec<String> = self
            .agents
            .values()
            .flat_map(|agent| agent.inherit_env.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        if let ExecutorConfig::Local { pass_env, .. } = &mut self.executor {
            *pass_env = names;
        }
        self
    }

    /// Whether every API call needs an operator's credentials.
    pub fn auth_required(&self) -> bool {
        self.auth.is_required(self.listen)
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if crate::store::Engine::of(&self.database_url).is_none() {
            return Err(ConfigError::new(
                "database_url",
                format!(
                    "`{}` is not supported; use sqlite://data/kandev.db or postgres://user@host:5432/kandev",
                    crate::store::redact_url(&self.database_url)
                ),
            ));
        }
        if self.database_pool_size == 0 {
            return Err(ConfigError::new("database_pool_size", "must be at least 1"));
        }
        if self.agents.is_empty() {
            return Err(ConfigError::new("agents", "at least one agent is required"));
        }
        for (id, agent) in &self.agents {
            if agent.command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(ConfigError::new(
                    format!("agents.{id}.command"),
                    "must name a program, e.g. command = [\"/usr/bin/my-agent\", \"--acp\"]",
                ));
            }
        }
        if let ExecutorConfig::Remote {
            url, token, hosts, ..
        } = &self.executor
        {
            let listed: Vec<(String, &str, &str)> = if hosts.is_empty() {
                vec![("executor".to_owned(), url.as_str(), token.as_str())]
            } else if !url.is_empty() || !token.is_empty() {
                return Err(ConfigError::new(
                    "executor.hosts",
                    "give either url and token, or hosts = [{url, token}, …], not both",
                ));
            } else {
                hosts
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        (
                            format!("executor.hosts[{i}]"),
                            h.url.as_str(),
                            h.token.as_str(),
                        )
                    })
                    .collect()
            };
            for (at, url, token) in listed {
                if !(url.starts_with("ws://") || url.starts_with("wss://")) {
                    return Err(ConfigError::new(
                        format!("{at}.url"),
                        format!("`{url}` must start with ws:// or wss://"),
                    ));
                }
                if token.is_empty() {
                    return Err(ConfigError::new(
                        format!("{at}.token"),
                        "a remote executor needs the agentctl token",
                    ));
                }
            }
        }
        if let Some(path) = &self.profiles_file
            && !path.is_file()
        {
            return Err(ConfigError::new(
                "profiles_file",
                format!("{} does not exist", path.display()),
            ));
        }
        self.notifications.validate(answer_deadline())?;
        self.integrations.validate()?;
        if self.notifications.webhooks.iter().any(|h| h.answer_links) && !self.auth_required() {
            return Err(ConfigError::new(
                "notifications.webhooks",
                "answer_links needs operator auth (auth.required = true, or a non-loopback listen with operators)",
            ));
        }
        cluster::validate(self)?;
        auto_answers::validate(self)?;
        security::validate(self)
    }

    /// The per-profile flag values: the configured file, else `profiles.yaml` in
    /// `cwd`, else the built-in copy.
    pub fn load_profiles(&self, cwd: &Path) -> Result<Profiles, ConfigError> {
        let local = cwd.join("profiles.yaml");
        let path = self
            .profiles_file
            .clone()
            .or_else(|| local.is_file().then_some(local));
        match path {
            Some(path) => Profiles::from_file(&path)
                .map_err(|err| ConfigError::new("profiles_file", err.to_string())),
            None => Profiles::parse(BUILTIN_PROFILES)
                .map_err(|err| ConfigError::new("profiles_file", err.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use kandev_agent_stream::request::PermissionPolicy;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::load(None, env(&[("PATH", "/bin")])).expect("defaults load");
        assert_eq!(c.profile, Profile::Dev);
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database_url, "sqlite://data/kandev.db");
        assert_eq!(c.executor, ExecutorConfig::local(None));
        assert!(!c.auth_required(), "loopback: auth is optional");
        assert_eq!(c.server, ServerConfig::default());
        let mock = &c.agents["mock"];
        assert!(mock.command[0].ends_with("mock-agent"));
        assert_eq!(mock.command[1..], ["--scenario", "demo"]);
        assert!(c.notifications.clarification_requested);
        assert!(!c.notifications.turn_finished);
        assert_eq!(c.profiles_file, None);
    }

    #[test]
    fn file_then_env_override_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("kandev.toml");
        std::fs::write(
            &file,
            r#"
            profile = "prod"
            listen = "127.0.0.1:9000"
            [agents.claude]
            command = ["claude-agent-acp"]
            env = { FOO = "bar" }
            permission_policy = "reject_once"
            [executor]
            kind = "remote"
            url = "ws://10.0.0.5:7740"
            token = "secret"
            "#,
        )
        .expect("write");
        let vars = env(&[
            ("KANDEV_LISTEN", "127.0.0.1:9100"),
            ("KANDEV_NOTIFICATIONS__TURN_FINISHED", "true"),
            // Flag and agentctl variables are not config keys.
            ("KANDEV_FEATURES_ACP_ELICITATION", "true"),
            ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "2s"),
            ("KANDEV_CONFIG", "elsewhere.toml"),
            // The log format is a command-line setting, read before the config.
            ("KANDEV_LOG_FORMAT", "json"),
        ]);
        let c = Config::load(Some(&file), vars).expect("loads");
        assert_eq!(c.profile, Profile::Prod);
        assert_eq!(c.listen.to_string(), "127.0.0.1:9100");
        assert!(c.notifications.turn_finished);
        assert!(c.notifications.clarification_requested);
        assert!(c.agents.contains_key("mock"), "defaults stay merged");
        let claude = &c.agents["claude"];
        assert_eq!(claude.env["FOO"], "bar");
        assert_eq!(claude.permission_policy, PermissionPolicy::RejectOnce);
        assert_eq!(claude.spec("claude").id, "claude");
        assert_eq!(
            c.executor,
            ExecutorConfig::remote("ws://10.0.0.5:7740", "secret")
        );
    }

    #[test]
    fn a_bad_value_names_its_key_in_one_line() {
        let err = Config::load(None, env(&[("KANDEV_PROFILE", "staging")])).expect_err("profile");
        assert_eq!(err.key, "profile");
        let line = err.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("staging"), "{line}");
        assert!(line.contains("KANDEV_PROFILE"), "{line}");

        let err = Config::load(None, env(&[("KANDEV_LISTEN", "nowhere")])).expect_err("listen");
        assert_eq!(err.key, "listen");
        assert!(err.to_string().contains("KANDEV_LISTEN=`nowhere`"), "{err}");

        let err = Config::load(None, env(&[("KANDEV_DATABASE_URL", "mysql://x")])).expect_err("db");
        assert_eq!(err.key, "database_url");
        let pg = Config::load(
            None,
            env(&[
                ("KANDEV_DATABASE_URL", "postgres://kandev@db:5432/kandev"),
                ("KANDEV_DATABASE_STATEMENT_TIMEOUT", "5s"),
                ("KANDEV_DATABASE_POOL_SIZE", "4"),
            ]),
        )
        .expect("postgres is supported");
        assert_eq!(
            pg.database_options(),
            crate::store::DatabaseOptions {
                pool_size: 4,
                statement_timeout: std::time::Duration::from_secs(5)
            }
        );
        let err = Config::load(None, env(&[("KANDEV_DATABASE_STATEMENT_TIMEOUT", "soon")]))
            .expect_err("duration");
        assert_eq!(err.key, "database_statement_timeout");

        let err = Config::load(
            None,
            env(&[("KANDEV_NOTIFICATIONS__TURN_FINISHED", "maybe")]),
        )
        .expect_err("bool");
        assert_eq!(err.key, "notifications.turn_finished");
        assert!(
            err.to_string()
                .contains("KANDEV_NOTIFICATIONS__TURN_FINISHED")
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("k.toml");
        std::fs::write(&file, "[agents.x]\ncommand = []\n").expect("write");
        let err = Config::load(Some(&file), env(&[])).expect_err("empty command");
        assert_eq!(err.key, "agents.x.command");

        std::fs::write(
            &file,
            "[executor]\nkind = \"remote\"\nurl = \"http://x\"\ntoken = \"t\"\n",
        )
        .expect("write");
        let err = Config::load(Some(&file), env(&[])).expect_err("bad url");
        assert_eq!(err.key, "executor.url");

        let missing = dir.path().join("missing.toml");
        let err = Config::load(Some(&missing), env(&[])).expect_err("missing file");
        assert_eq!(err.key, "config");

        let err = Config::load(
            None,
            env(&[("KANDEV_PROFILES_FILE", "/nope/profiles.yaml")]),
        )
        .expect_err("missing profiles");
        assert_eq!(err.key, "profiles_file");
    }

    #[test]
    fn metrics_listen_is_a_strict_key() {
        let c = Config::load(None, env(&[("KANDEV_METRICS__LISTEN", "127.0.0.1:9464")]))
            .expect("loads");
        assert_eq!(
            c.metrics.listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 9464)))
        );
        assert_eq!(Config::default().metrics.listen, None);
        let drain = Config::load(
            None,
            env(&[
                ("KANDEV_DRAIN__GRACE", "5s"),
                ("KANDEV_DRAIN__FINISH_WITHIN", "1m"),
            ]),
        )
        .expect("loads")
        .drain;
        assert_eq!(drain.grace, std::time::Duration::from_secs(5));
        assert_eq!(drain.finish_within, std::time::Duration::from_secs(60));
        assert_eq!(Config::default().drain.grace, std::time::Duration::ZERO);
        let err = Config::load(None, env(&[("KANDEV_METRICS__LISTN", "127.0.0.1:9464")]))
            .expect_err("unknown key");
        assert_eq!(err.key, "metrics.listn");
        assert!(err.to_string().contains("listen"), "{err}");
    }

    #[test]
    fn profiles_fall_back_to_the_built_in_copy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = Config::default();
        assert_eq!(
            c.load_profiles(dir.path()).expect("built in"),
            Profiles::parse(BUILTIN_PROFILES).expect("valid")
        );
        std::fs::write(
            dir.path().join("profiles.yaml"),
            "features:\n  KANDEV_FEATURES_ACP_ELICITATION:\n    dev: \"true\"\n",
        )
        .expect("write");
        let p = c.load_profiles(dir.path()).expect("local file");
        assert_eq!(
            p.value(kandev_flags::ACP_ELICITATION, Profile::Dev),
            Some(true)
        );
    }
}
