//! The stores on SQLite: one [`SqliteDb`] (WAL mode; a pool of readers and one writer
//! connection) implements every store trait, one file per domain. Every write goes
//! through the writer; writes that must be atomic run in [`SqliteDb::begin`]'s
//! `BEGIN IMMEDIATE` transactions: the write lock is taken at the start, so a writer of
//! another process queues on the busy timeout instead of one failing on a stale
//! snapshot. Commits are `synchronous = NORMAL` (written to the WAL, synced at
//! checkpoints: a kandev crash loses nothing; see docs/decisions/0003). Timestamps are
//! fixed-width RFC 3339 text and JSON is text.

mod batch;
mod checkpoint;
mod clarifications;
mod flags;
mod health;
mod leases;
mod messages;
mod notifications;
mod outbox;
mod questions;
mod sessions;
mod tasks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};

use crate::model::Timestamp;
use crate::store::{OpenError, StoreError};

/// The migrations for SQLite, embedded from `migrations/sqlite/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// The SQLite database behind every store.
#[derive(Debug, Clone)]
pub struct SqliteDb {
    /// Reads (WAL readers run beside the writer).
    pool: SqlitePool,
    /// Every write, on one connection: SQLite has one writer at a time, so writers queue
    /// here in order instead of polling its lock (the busy handler sleeps 1, 2, 5, … up
    /// to 100 ms between tries, which is what a contended write's tail was made of).
    writer: SqlitePool,
    /// How the readiness probe reaches the file afresh (never creating it); `None` for
    /// an in-memory database, which only its pool can see.
    probe: Option<SqliteConnectOptions>,
    /// The WAL checkpoint task of a file database, held for its drop: it runs while any
    /// handle to the database lives.
    _checkpoints: Option<Arc<checkpoint::Checkpoints>>,
}

type Tx = Transaction<'static, Sqlite>;

impl SqliteDb {
    /// Opens (creating the file and its directory when missing) and migrates `url`.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let mut options = SqliteConnectOptions::from_str(url)
            .map_err(|err| OpenError::Url {
                url: url.to_owned(),
                message: format!("not a valid sqlite URL: {err}"),
            })?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        if !memory {
            // NORMAL in WAL mode: a commit is written to the WAL before it returns, synced
            // at checkpoints (docs/decisions/0011-sqlite-synchronous-normal.md).
            options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            if let Some(dir) = options.get_filename().parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir).map_err(|source| OpenError::Dir {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
        }
        let probe = (!memory).then(|| options.clone().create_if_missing(false));
        let connect = |pool: SqlitePoolOptions, options: SqliteConnectOptions| async move {
            pool.connect_with(options)
                .await
                .map_err(|err| OpenError::Connect {
                    url: url.to_owned(),
                    message: err.to_string(),
                })
        };
        // Every connection to `:memory:` is its own database, so a memory pool keeps one
        // and writes through it too.
        let (pool, writer, checkpoints) = if memory {
            let pool = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
            let pool = connect(pool, options).await?;
            (pool.clone(), pool, None)
        } else {
            // A connection is in-process, and sqlx pings it when it is taken back: a ping
            // before handing it out again would only cost the writer a hop of its worker
            // thread on every statement.
            let pools = || SqlitePoolOptions::new().test_before_acquire(false);
            let readers = connect(pools().max_connections(8), options.clone());
            // The writer's commits never checkpoint: the task does (`checkpoint`).
            let writer = connect(
                pools().max_connections(1),
                options.clone().pragma("wal_autocheckpoint", "0"),
            );
            let (readers, writer) = (readers.await?, writer.await?);
            let checkpoints = Arc::new(checkpoint::spawn(options));
            (readers, writer, Some(checkpoints))
        };
        MIGRATOR
            .run(&writer)
            .await
            .map_err(|err| OpenError::Migrate(err.to_string()))?;
        log_durability(&writer).await;
        Ok(Self {
            pool,
            writer,
            probe,
            _checkpoints: checkpoints,
        })
    }

    /// An in-memory, migrated database (tests).
    pub async fn memory() -> Result<Self, OpenError> {
        Self::open("sqlite::memory:").await
    }

    /// The pool, for the engine's own tests.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// A write transaction holding SQLite's write lock from its first statement.
    async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// Logs what a commit survives, as the connections report it (the bench quotes this line).
async fn log_durability(pool: &SqlitePool) {
    let journal: Option<(String,)> = sqlx::query_as("PRAGMA journal_mode")
        .fetch_optional(pool)
        .await
        .ok()
        .flatten();
    let synchronous: Option<(i64,)> = sqlx::query_as("PRAGMA synchronous")
        .fetch_optional(pool)
        .await
        .ok()
        .flatten();
    let synchronous = match synchronous.map(|(level,)| level) {
        Some(0) => "off",
        Some(1) => "normal",
        Some(2) => "full",
        Some(3) => "extra",
        _ => "unknown",
    };
    let journal = journal.map(|(mode,)| mode).unwrap_or_default();
    tracing::debug!(
        engine = "sqlite",
        journal_mode = %journal,
        synchronous,
        "database opened"
    );
}

/// A timestamp column.
fn time(row: &SqliteRow, column: &str) -> Result<Timestamp, StoreError> {
    let text: String = row.try_get(column)?;
    text.parse()
        .map_err(|err: crate::model::time::BadTimestamp| StoreError::Corrupt(err.to_string()))
}

/// A nullable timestamp column.
fn time_opt(row: &SqliteRow, column: &str) -> Result<Option<Timestamp>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        t.parse()
            .map_err(|err: crate::model::time::BadTimestamp| StoreError::Corrupt(err.to_string()))
    })
    .transpose()
}

/// A JSON text column.
fn json<T: DeserializeOwned>(row: &SqliteRow, column: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|err| StoreError::Corrupt(format!("{column}: {err}")))
}

/// A nullable JSON text column.
fn json_opt<T: DeserializeOwned>(row: &SqliteRow, column: &str) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        serde_json::from_str(&t).map_err(|err| StoreError::Corrupt(format!("{column}: {err}")))
    })
    .transpose()
}

/// A column holding one of a closed set of names.
fn name<T>(
    row: &SqliteRow,
    column: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    parse(&text).ok_or_else(|| StoreError::Corrupt(format!("{column}: unknown value `{text}`")))
}

/// A nullable column holding one of a closed set of names.
fn name_opt<T>(
    row: &SqliteRow,
    column: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        parse(&t).ok_or_else(|| StoreError::Corrupt(format!("{column}: unknown value `{t}`")))
    })
    .transpose()
}

/// The fence of a write acting for a session (docs/architecture.md §12), for its `WHERE`: the
/// generation bound at `param` is `NULL` (unfenced) or still the one of the session in
/// column `session`'s lease. One replica writes at a time on SQLite, so reading the row is enough.
fn fenced(session: &str, param: &str) -> String {
    format!(
        "({param} IS NULL OR EXISTS (SELECT 1 FROM session_leases fence \
         WHERE fence.session_id = {session} AND fence.generation = {param}))"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn creates_the_file_and_its_directory_in_wal_mode_and_migrates_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/data/kandev.db");
        let url = format!("sqlite://{}", path.display());
        let db = SqliteDb::open(&url).await.expect("opens");
        assert!(path.is_file());
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(db.pool())
            .await
            .expect("pragma");
        assert_eq!(mode, "wal");
        for pool in [db.pool(), &db.writer] {
            let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                .fetch_one(pool)
                .await
                .expect("pragma");
            assert_eq!(synchronous, 1, "NORMAL on every connection");
        }
        db.pool().close().await;
        let db = SqliteDb::open(&url).await.expect("reopens");
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations")
            .fetch_one(db.pool())
            .await
            .expect("count");
        assert_eq!(n, MIGRATOR.iter().count() as i64);
    }

    #[tokio::test]
    async fn a_directory_that_cannot_be_made_is_a_clear_error() {
        let file = tempfile::NamedTempFile::new().expect("file");
        let url = format!("sqlite://{}/data/kandev.db", file.path().display());
        let err = SqliteDb::open(&url)
            .await
            .expect_err("a file is in the way");
        assert!(matches!(err, OpenError::Dir { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("cannot create the database directory")
        );
    }
}
