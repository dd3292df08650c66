//! Persistence: one store trait per domain, each implemented per database engine.
//!
//! - [`TaskStore`], [`SessionStore`], [`MessageStore`], [`ClarificationStore`],
//!   [`NotificationStore`] and [`FlagOverrideStore`] say what the rooms may ask of the
//!   database. Every multi-row change is one method, run in one transaction; every rule
//!   that must hold across processes (first answer wins, one turn at a time, a message
//!   number per session, the session state machine) is a constraint or a conditional
//!   update inside it, never a lock in memory.
//! - [`sqlite`] implements them on SQLite (the embedded default).
//! - [`Stores`] bundles one handle per domain; [`open`] picks the engine by URL.
//!
//! Database errors stop here: callers see [`StoreError`], never `sqlx::Error`.

mod clarifications;
mod flags;
mod messages;
mod notifications;
mod sessions;
pub mod sqlite;
mod tasks;
mod views;

use std::sync::Arc;

pub use clarifications::{
    Claim, ClarificationFilter, ClarificationStore, QuestionOpened, SettledRecord,
};
pub use flags::{FlagOverrideStore, StoredOverrides};
pub use messages::MessageStore;
pub use notifications::NotificationStore;
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
    /// Runtime-flag overrides (the Settings page).
    pub flag_overrides: Arc<dyn FlagOverrideStore>,
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
            + FlagOverrideStore
            + 'static,
    {
        Self {
            tasks: engine.clone(),
            sessions: engine.clone(),
            messages: engine.clone(),
            clarifications: engine.clone(),
            notifications: engine.clone(),
            flag_overrides: engine,
        }
    }
}

/// Opens (creating it when the engine allows) and migrates the database `url` names.
pub async fn open(url: &str) -> Result<Stores, OpenError> {
    if url.starts_with("sqlite:") {
        let db = sqlite::SqliteDb::open(url).await?;
        return Ok(Stores::from_engine(Arc::new(db)));
    }
    Err(OpenError::Url {
        url: url.to_owned(),
        message: "unsupported engine; use a sqlite: URL such as sqlite://data/kandev.db".into(),
    })
}
