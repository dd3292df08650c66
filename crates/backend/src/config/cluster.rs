//! `[cluster]` (docs/architecture.md §12): several kandev processes on one PostgreSQL. Each live
//! session is owned by one replica through a lease; requests for it that reach another
//! replica are forwarded to the owner's `advertise_url`, authenticated by `secret`.
//!
//! SQLite is one replica: any `[cluster]` setting other than the defaults is refused
//! there, so a second process never runs believing it shares the sessions.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};
use crate::store::Engine;

/// `[cluster]`. Its `Debug` output never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// This replica's id in leases and logs; by default `<hostname>-<random>`, fresh per
    /// start. Two running processes must never share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_id: Option<String>,
    /// How other replicas reach this one (`http://10.0.0.7:8080`); by default
    /// `http(s)://<listen>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_url: Option<String>,
    /// Authenticates replica-to-replica calls; the same on every replica. Without it,
    /// a request for a session another replica owns is refused instead of forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// How long a lease lasts unless renewed (renewed every third of it): how long a
    /// dead owner's sessions wait before another replica takes them over.
    #[serde(default = "default_lease", with = "super::humantime_text")]
    pub lease: Duration,
}

/// The default `cluster.lease`.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest `cluster.lease`: renewals every third of it must fit a busy database.
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// The shortest `cluster.secret`.
pub const MIN_SECRET_LEN: usize = 16;

fn default_lease() -> Duration {
    DEFAULT_LEASE
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            replica_id: None,
            advertise_url: None,
            secret: None,
            lease: DEFAULT_LEASE,
        }
    }
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("replica_id", &self.replica_id)
            .field("advertise_url", &self.advertise_url)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("lease", &self.lease)
            .finish()
    }
}

impl ClusterConfig {
    /// The replica id: the configured one, or `<hostname>-<8 random hex>`.
    pub fn resolve_replica_id(&self) -> String {
        if let Some(id) = &self.replica_id {
            return id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty() && is_valid_replica_id(h))
            .unwrap_or_else(|| "kandev".to_owned());
        let random = uuid::Uuid::new_v4().simple().to_string();
        format!("{host}-{}", &random[..8])
    }

    /// The advertised URL: the configured one, or `http(s)://<listen>` (the address
    /// actually bound, so `listen = "127.0.0.1:0"` advertises its real port).
    pub fn resolve_advertise_url(&self, listen: SocketAddr, tls: bool) -> String {
        match &self.advertise_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("{}://{listen}", if tls { "https" } else { "http" }),
        }
    }
}

/// Letters, digits, `.`, `_` and `-`, 1 to 64 of them.
pub fn is_valid_replica_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks `[cluster]`.
pub(super) fn validate(config: &Config) -> Result<(), ConfigError> {
    let cluster = &config.cluster;
    if Engine::of(&config.database_url) == Some(Engine::Sqlite)
        && *cluster != ClusterConfig::default()
    {
        return Err(ConfigError::new(
            "cluster",
            "replicas need PostgreSQL (database_url = \"postgres://…\"); with SQLite kandev runs as one replica and takes no [cluster] settings",
        ));
    }
    if let Some(id) = &cluster.replica_id
        && !is_valid_replica_id(id)
    {
        return Err(ConfigError::new(
            "cluster.replica_id",
            format!("`{id}` must be 1 to 64 letters, digits, `.`, `_` or `-`"),
        ));
    }
    if let Some(url) = &cluster.advertise_url {
        let parsed = reqwest::Url::parse(url).ok();
        let ok = parsed.as_ref().is_some_and(|u| {
            matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.path() == "/"
        });
        if !ok {
            return Err(ConfigError::new(
                "cluster.advertise_url",
                format!(
                    "`{url}` must be an http:// or https:// base URL, e.g. http://10.0.0.7:8080"
                ),
            ));
        }
    }
    if let Some(secret) = &cluster.secret
        && secret.len() < MIN_SECRET_LEN
    {
        return Err(ConfigError::new(
            "cluster.secret",
            format!("must be at least {MIN_SECRET_LEN} characters"),
        ));
    }
    if cluster.lease < MIN_LEASE {
        return Err(ConfigError::new(
            "cluster.lease",
            format!("must be at least {}", humantime::format_duration(MIN_LEASE)),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut env: Vec<(String, String)> = vec![(
            "KANDEV_DATABASE_URL".into(),
            "postgres://kandev@db:5432/kandev".into(),
        )];
        env.extend(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        Config::load(None, env)
    }

    #[test]
    fn defaults_are_one_fresh_replica_with_a_ten_second_lease() {
        let c = load(&[]).expect("defaults");
        assert_eq!(c.cluster, ClusterConfig::default());
        assert_eq!(c.cluster.lease, Duration::from_secs(10));
        let a = c.cluster.resolve_replica_id();
        assert!(is_valid_replica_id(&a), "{a}");
        assert_ne!(a, c.cluster.resolve_replica_id(), "fresh per start");
        let listen: SocketAddr = "127.0.0.1:9001".parse().expect("addr");
        assert_eq!(
            c.cluster.resolve_advertise_url(listen, false),
            "http://127.0.0.1:9001"
        );
    }

    #[test]
    fn settings_load_and_the_secret_never_shows() {
        let c = load(&[
            ("KANDEV_CLUSTER__REPLICA_ID", "kandev-a"),
            ("KANDEV_CLUSTER__ADVERTISE_URL", "http://10.0.0.7:8080/"),
            ("KANDEV_CLUSTER__SECRET", "0123456789abcdef-secret"),
            ("KANDEV_CLUSTER__LEASE", "3s"),
        ])
        .expect("loads");
        assert_eq!(c.cluster.resolve_replica_id(), "kandev-a");
        let listen: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        assert_eq!(
            c.cluster.resolve_advertise_url(listen, false),
            "http://10.0.0.7:8080"
        );
        assert_eq!(c.cluster.lease, Duration::from_secs(3));
        let shown = format!("{:?}", c.cluster);
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    #[test]
    fn bad_values_and_unknown_keys_are_one_line_naming_the_key() {
        for (var, value, key) in [
            ("KANDEV_CLUSTER__LEASE", "soon", "cluster.lease"),
            ("KANDEV_CLUSTER__LEASE", "200ms", "cluster.lease"),
            ("KANDEV_CLUSTER__SECRET", "short", "cluster.secret"),
            ("KANDEV_CLUSTER__REPLICA_ID", "a b", "cluster.replica_id"),
            (
                "KANDEV_CLUSTER__ADVERTISE_URL",
                "ws://x:1",
                "cluster.advertise_url",
            ),
            (
                "KANDEV_CLUSTER__ADVERTISE_URL",
                "http://x:1/api",
                "cluster.advertise_url",
            ),
        ] {
            let err = load(&[(var, value)]).expect_err(var);
            assert_eq!(err.key, key, "{err}");
            assert!(!err.to_string().contains('\n'), "{err}");
        }
        let err = load(&[("KANDEV_CLUSTER__LEASES", "3s")]).expect_err("unknown");
        assert!(err.to_string().contains("lease"), "{err}");
    }

    #[test]
    fn sqlite_refuses_cluster_settings() {
        let env = vec![("KANDEV_CLUSTER__LEASE".to_owned(), "3s".to_owned())];
        let err = Config::load(None, env).expect_err("sqlite is one replica");
        assert_eq!(err.key, "cluster");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
        Config::load(None, Vec::<(String, String)>::new()).expect("defaults are fine");
    }
}
