//! Start-up and serving: configuration checks, database, flags, state, listener; on a
//! signal, the drain of [`crate::shutdown`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kandev_flags::{EnvSource, FlagService, ProcessEnv, Profiles, resolve_all};
use kandev_tls::{PeerAddr, ServeListener};
use tokio::net::TcpListener;

use crate::agent_link::StreamConnector;
use crate::config::{Config, ConfigError};
use crate::state::AppState;
use crate::store::{OpenError, StoredOverrides};

/// The line `kandev` prints on stdout once it listens (with the real port when
/// `listen` asked for port 0), for scripts and tests.
pub const LISTENING_PREFIX: &str = "KANDEV_LISTENING=";

/// The line printed (before [`LISTENING_PREFIX`]'s) when `metrics.listen` is bound.
pub const METRICS_LISTENING_PREFIX: &str = "KANDEV_METRICS_LISTENING=";

/// Why `kandev serve` could not run.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A configuration value is bad (exit code 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Db(#[from] OpenError),
    /// The listener could not be bound, or serving failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Something else failed during start-up.
    #[error("{0}")]
    Other(String),
}

impl StartError {
    /// The process exit code: 2 for configuration errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            StartError::Config(_) => 2,
            _ => 1,
        }
    }
}

/// Checks what can only be checked against the environment: the profiles file and
/// the flag env vars (a non-boolean `KANDEV_FEATURES_*` is a configuration error).
pub fn prepare(config: &Config, cwd: &Path, env: &dyn EnvSource) -> Result<Profiles, ConfigError> {
    let profiles = config.load_profiles(cwd)?;
    resolve_all(env, &BTreeMap::new(), &profiles, config.profile).map_err(|err| ConfigError {
        key: err.var.clone(),
        message: err.to_string(),
    })?;
    Ok(profiles)
}

/// Runs `kandev serve` until SIGINT/SIGTERM.
pub async fn serve(mut config: Config, profiles: Profiles) -> Result<(), StartError> {
    let tls = match &config.server.tls {
        Some(tls) => Some(
            kandev_tls::server_config(&tls.cert, &tls.key).map_err(|err| ConfigError {
                key: "server.tls".to_owned(),
                message: err.to_string(),
            })?,
        ),
        None => None,
    };
    let listen = config.listen;
    // Bound before the state is built: the Host check compares against the real port
    // when `listen` asked for port 0. Connections wait in the backlog until we serve.
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: listen.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: listen.to_string(),
        source,
    })?;
    config.listen = addr;
    let stores = crate::store::open(&config.database_url, &config.database_options()).await?;
    let flags = FlagService::new(
        config.profile,
        profiles,
        ProcessEnv,
        StoredOverrides(stores.flag_overrides.clone()),
    );
    let state = AppState::new(stores, config, flags, Arc::new(StreamConnector));
    let reconciled = state
        .sessions
        .reconcile_after_restart()
        .await
        .map_err(|e| StartError::Other(format!("cannot reconcile sessions: {e}")))?;
    if reconciled.failed > 0 {
        tracing::warn!(
            sessions = reconciled.failed,
            "sessions left live by a previous run marked FAILED"
        );
    }
    if reconciled.resumed > 0 {
        tracing::info!(
            sessions = reconciled.resumed,
            "sessions left live by a previous run re-attached to their agentctl"
        );
    }
    // Renews this replica's leases, lets go of lost ones, takes over expired ones.
    state.sessions.spawn_lease_keeper();
    crate::metrics::spawn_upkeep();
    if let Some(metrics) = state.config.metrics.listen {
        let bound = crate::http::metrics::serve_separately(metrics, state.clone())
            .await
            .map_err(|source| StartError::Listen {
                addr: metrics.to_string(),
                source,
            })?;
        println!("{METRICS_LISTENING_PREFIX}{bound}");
        tracing::info!(%bound, "metrics on http://{bound}/metrics");
    }
    // TCP_NODELAY on every connection: small latency-bound frames (operator WS, respond).
    let listener = ServeListener::new(listener, tls).map_err(|source| StartError::Listen {
        addr: addr.to_string(),
        source,
    })?;
    let scheme = if listener.is_tls() { "https" } else { "http" };
    // Signals are listened for before anyone learns kandev is up (see `Signals`).
    let mut signals = crate::shutdown::Signals::listen();
    println!("{LISTENING_PREFIX}{addr}");
    tracing::info!(
        %addr,
        profile = %state.config.profile,
        auth = if state.auth.required() { "operators" } else { "off (loopback)" },
        "kandev listening on {scheme}://{addr}"
    );

    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(
        axum::serve(
            listener,
            // The peer address feeds the failed-attempt limit.
            crate::http::router(state.clone()).into_make_service_with_connect_info::<PeerAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = stop_rx.await;
        })
        .into_future(),
    );
    signals.next().await;
    crate::shutdown::exit_on_second_signal(signals);
    let server = crate::shutdown::HttpServer { stop, task };
    match crate::shutdown::drain(&state, server).await {
        Some(Err(source)) => Err(StartError::Listen {
            addr: addr.to_string(),
            source,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_boolean_flag_env_var_is_a_configuration_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = BTreeMap::from([(
            "KANDEV_FEATURES_ACP_ELICITATION".to_owned(),
            "maybe".to_owned(),
        )]);
        let err = prepare(&Config::default(), dir.path(), &env).expect_err("bad value");
        assert_eq!(err.key, "KANDEV_FEATURES_ACP_ELICITATION");
        assert!(err.to_string().contains("maybe"));
        assert_eq!(StartError::from(err).exit_code(), 2);

        let ok = BTreeMap::from([(
            "KANDEV_FEATURES_ACP_ELICITATION".to_owned(),
            "on".to_owned(),
        )]);
        prepare(&Config::default(), dir.path(), &ok).expect("a boolean is fine");
        assert_eq!(StartError::Other("x".into()).exit_code(), 1);
    }

    #[test]
    fn a_bad_profiles_file_is_a_configuration_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("profiles.yaml"),
            "features:\n  KANDEV_NOPE:\n    dev: \"true\"\n",
        )
        .expect("write");
        let err = prepare(
            &Config::default(),
            dir.path(),
            &BTreeMap::<String, String>::new(),
        )
        .expect_err("unknown env var in profiles.yaml");
        assert_eq!(err.key, "profiles_file");
        assert!(err.to_string().contains("KANDEV_NOPE"));
    }
}
