//! Persistence: one store trait per domain, each method written once for every engine.
//!
//! - [`TaskStore`], [`SessionStore`], [`MessageStore`], [`ClarificationStore`],
//!   [`NotificationStore`], [`OutboxStore`], [`FlagOverrideStore`], [`LeaseStore`], [`ChangeBus`] and
//!   [`HealthStore`] say what the modules may ask of the database. Every multi-row change is
//!   one method, run in one transaction; every rule that must hold across processes
//!   (first answer wins, one turn at a time, a message number per session, the session
//!   state machine) is a constraint or a conditional update inside it, never a lock in
//!   memory.
//! - `sql/` implements them, one file per domain, each query written once: the model
//!   types bind and read themselves (`sqlx::Type`, `FromRow`), so one text serves SQLite
//!   and PostgreSQL alike.
//! - `dialect/` holds what genuinely differs, one module per engine: [`sqlite`] (the
//!   embedded default) and [`postgres`] (what a team and its replicas share). Each opens
//!   its pool and compiles `sql/` against itself (docs/decisions/0014).
//! - [`Stores`] bundles one handle per domain; [`open`] picks the engine by URL.
//!
//! Database errors stop here: callers see [`StoreError`], never `sqlx::Error`.

mod clarifications;
#[cfg(test)]
mod conformance;
mod dialect;
mod flags;
mod health;
mod leases;
mod messages;
mod notifications;
mod outbox;
mod sessions;
mod tasks;
mod views;

use std::sync::Arc;

pub use dialect::{postgres, sqlite};

pub use clarifications::{
    CallReturned, CallSettles, ClarificationFilter, ClarificationStore, Opened, QuestionOpened,
    SettledRecord,
};
pub use flags::{FlagOverrideStore, StoredOverrides};
pub use health::{Gauges, HealthStore, MigrationState, PoolUse};
pub use leases::{ChangeBus, Claimant, LeaseStore};
pub use messages::MessageStore;
pub use notifications::NotificationStore;
pub use outbox::OutboxStore;
pub use sessions::{SessionStore, StartFacts, TurnStart};
pub use tasks::TaskStore;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached (connection refused, pool exhausted, file gone).
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// A statement failed.
    #[error("database error: {0}")]
    Query(String),
    /// A stored value does not decode (an unknown state name, broken JSON).
    #[error("stored data does not decode: {0}")]
    Corrupt(String),
}

/// Both engines speak sqlx; its errors become [`StoreError`] here and go no further.
impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                StoreError::Unavailable(err.to_string())
            }
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                StoreError::Corrupt(err.to_string())
            }
            other => StoreError::Query(other.to_string()),
        }
    }
}

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL names no supported engine, or does not parse.
    #[error("database_url `{url}`: {message}")]
    Url {
        /// The URL (as configured; it may hold a password only for server engines).
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The parent directory of a database file could not be created.
    #[error("cannot create the database directory {path}: {source}")]
    Dir {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Connecting failed.
    #[error("cannot open database {url}: {message}")]
    Connect {
        /// The URL.
        url: String,
        /// The driver's complaint.
        message: String,
    },
    /// A migration failed.
    #[error("database migration failed: {0}")]
    Migrate(String),
}

/// One handle per domain store, all on the same database. Cheap to clone.
#[derive(Clone)]
pub struct Stores {
    /// Tasks.
    pub tasks: Arc<dyn TaskStore>,
    /// Sessions (and the turn claim).
    pub sessions: Arc<dyn SessionStore>,
    /// Chat messages.
    pub messages: Arc<dyn MessageStore>,
    /// Clarification records and `ask_user_question_kandev` calls.
    pub clarifications: Arc<dyn ClarificationStore>,
    /// Notifications.
    pub notifications: Arc<dyn NotificationStore>,
    /// The webhook outbox and the used answer links.
    pub outbox: Arc<dyn OutboxStore>,
    /// Runtime-flag overrides (the Settings page).
    pub flag_overrides: Arc<dyn FlagOverrideStore>,
    /// Session leases: which replica owns which live session.
    pub leases: Arc<dyn LeaseStore>,
    /// Notes between replicas.
    pub bus: Arc<dyn ChangeBus>,
    /// The database itself: reachable, migrated, its pool (readiness, metrics).
    pub health: Arc<dyn HealthStore>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    /// Every store of one engine handle that implements them all.
    pub fn from_engine<E>(engine: Arc<E>) -> Self
    where
        E: TaskStore
            + SessionStore
            + MessageStore
            + ClarificationStore
            + NotificationStore
            + OutboxStore
            + FlagOverrideStore
            + LeaseStore
            + ChangeBus
            + HealthStore
            + 'static,
    {
        Self {
            tasks: engine.clone(),
            sessions: engine.clone(),
            messages: engine.clone(),
            clarifications: engine.clone(),
            notifications: engine.clone(),
            outbox: engine.clone(),
            flag_overrides: engine.clone(),
            leases: engine.clone(),
            bus: engine.clone(),
            health: engine,
        }
    }
}

/// How a server database is reached (SQLite ignores these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseOptions {
    /// Connections in the pool.
    pub pool_size: u32,
    /// How long one statement may run before the server cancels it.
    pub statement_timeout: std::time::Duration,
}

impl Default for DatabaseOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            statement_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// Which engine a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `sqlite:`.
    Sqlite,
    /// `postgres://` or `postgresql://`.
    Postgres,
}

impl Engine {
    /// The engine of `url`, if kandev has one for it.
    pub fn of(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else {
            None
        }
    }
}

/// `url` with its password, if any, replaced by `***` (for errors and logs).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Opens (creating it when the engine allows) and migrates the database `url` names.
pub async fn open(url: &str, options: &DatabaseOptions) -> Result<Stores, OpenError> {
    match Engine::of(url) {
        Some(Engine::Sqlite) => {
            let db = sqlite::SqliteDb::open(url).await?;
            Ok(Stores::from_engine(Arc::new(db)))
        }
        Some(Engine::Postgres) => {
            let db = postgres::PostgresDb::open(url, options).await?;
            Ok(Stores::from_engine(Arc::new(db)))
        }
        None => Err(OpenError::Url {
            url: redact_url(url),
            message:
                "unsupported engine; use sqlite://data/kandev.db or postgres://user@host:5432/db"
                    .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show_in_a_url_we_print() {
        assert_eq!(
            redact_url("postgres://kandev:s3cret@db.internal:5432/kandev"),
            "postgres://kandev:***@db.internal:5432/kandev"
        );
        assert_eq!(
            redact_url("postgres://kandev@db/k"),
            "postgres://kandev@db/k"
        );
        assert_eq!(
            redact_url("sqlite://data/kandev.db"),
            "sqlite://data/kandev.db"
        );
        assert_eq!(Engine::of("postgresql://x/y"), Some(Engine::Postgres));
        assert_eq!(Engine::of("mysql://x/y"), None);
    }
}
