//! The SQLite dialect: one [`SqliteDb`] (WAL mode; a pool of readers and one writer
//! connection) implements every store trait with the shared `sql/`. Every write goes
//! through the writer; writes that must be atomic run in [`SqliteDb::begin`]'s
//! `BEGIN IMMEDIATE` transactions: the write lock is taken at the start, so a writer of
//! another process queues on the busy timeout instead of one failing on a stale
//! snapshot. Commits are `synchronous = NORMAL` (written to the WAL, synced at
//! checkpoints: a kandev crash loses nothing; see docs/decisions/0011). Timestamps are
//! fixed-width RFC 3339 text and JSON is text.

mod batch;
mod checkpoint;
#[cfg(test)]
#[path = "../../conformance/sqlite_engine.rs"]
mod engine_tests;
mod merge;
mod settle;
#[path = "../../sql/mod.rs"]
// Mounted by both dialects on purpose: one text of each query, compiled per engine.
#[allow(clippy::duplicate_mod)]
mod sql;
mod writer;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Sqlite, SqliteConnection, SqlitePool, Transaction};
use writer::{Turn, Writer};

use crate::store::{ChangeBus, OpenError, StoreError};
pub(crate) use checkpoint::Checkpointing;

use batch::write_returning;
pub(crate) use merge::{merge, merge_alone};
pub(crate) use settle::{open_clarification, settle_once, settle_row};

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
    writer: Writer,
    /// The task that runs the write batches of an answer's path on `writer`, grouping
    /// those that queue into one commit.
    batches: batch::Batches,
    /// How the readiness probe reaches the file afresh (never creating it); `None` for
    /// an in-memory database, which only its pool can see.
    probe: Option<SqliteConnectOptions>,
    /// The WAL checkpoint task of a file database, held for its drop: it runs while any
    /// handle to the database lives.
    _checkpoints: Option<Arc<checkpoint::Checkpoints>>,
}

/// The engine handle `sql/` implements the stores on, and its sqlx database.
type Db = SqliteDb;
type Engine = Sqlite;
/// The connection a transaction runs on.
type Conn = SqliteConnection;

impl SqliteDb {
    /// Opens (creating the file and its directory when missing) and migrates `url`.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        Self::open_checkpointed(url, Checkpointing::DEFAULT).await
    }

    /// [`SqliteDb::open`], with the WAL checkpointed as `checkpointing` says.
    pub(crate) async fn open_checkpointed(
        url: &str,
        checkpointing: Checkpointing,
    ) -> Result<Self, OpenError> {
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
        let refused = |err: sqlx::Error| OpenError::Connect {
            url: url.to_owned(),
            message: err.to_string(),
        };
        let connect = |pool: SqlitePoolOptions, options: SqliteConnectOptions| async move {
            pool.connect_with(options).await.map_err(refused)
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
            (pool.clone(), Writer::Shared(pool), None)
        } else {
            // A connection is in-process, and sqlx pings it when it is taken back: a ping
            // before handing it out again would only cost a reader a hop of its worker
            // thread on every statement.
            let readers = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(8);
            let readers = connect(readers, options.clone());
            // The writer's commits never checkpoint: the task does (`checkpoint`). When a
            // write starts the WAL over, it also cuts the file back to the task's bound.
            let writer = Writer::open(
                options
                    .clone()
                    .pragma("wal_autocheckpoint", "0")
                    .pragma("journal_size_limit", checkpointing.wal_bound.to_string()),
            );
            let (readers, writer) = (readers.await?, writer.await.map_err(refused)?);
            let checkpoints = Arc::new(checkpoint::spawn(options, writer.clone(), checkpointing));
            (readers, writer, Some(checkpoints))
        };
        // On a pooled connection: the migrator takes one from a pool (on the writer's own
        // connection its future is not `Send`). Nothing else writes before it is done.
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|err| OpenError::Migrate(err.to_string()))?;
        if let Ok(mut turn) = writer.turn().await {
            log_durability(&mut turn).await;
        }
        Ok(Self {
            pool,
            batches: batch::Batches::spawn(writer.clone()),
            writer,
            probe,
            _checkpoints: checkpoints,
        })
    }

    /// An in-memory, migrated database (tests).
    pub async fn memory() -> Result<Self, OpenError> {
        Self::open("sqlite::memory:").await
    }

    /// The readers' pool: where reads go, WAL readers beside the writer (and the
    /// engine's own tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The writer's turn, where writes go: SQLite has one writer at a time.
    async fn writer(&self) -> Result<Turn<'_>, StoreError> {
        self.writer.turn().await
    }

    /// The migration versions applied, read on a fresh connection: pooled ones keep a
    /// deleted or moved file open and would report it fine, while the next connection
    /// would find nothing there.
    async fn applied_migrations(&self) -> Result<Vec<i64>, StoreError> {
        let Some(options) = &self.probe else {
            return Ok(sqlx::query_scalar(sql::APPLIED)
                .fetch_all(&self.pool)
                .await?);
        };
        let mut conn = SqliteConnection::connect_with(options)
            .await
            .map_err(|err| StoreError::Unavailable(err.to_string()))?;
        let applied = sqlx::query_scalar(sql::APPLIED)
            .fetch_all(&mut conn)
            .await?;
        conn.close().await?;
        Ok(applied)
    }
}

/// A write transaction on the writer's turn, holding SQLite's write lock from its first
/// statement.
async fn begin(writer: &mut Conn) -> Result<Transaction<'_, Sqlite>, StoreError> {
    Ok(writer.begin_with("BEGIN IMMEDIATE").await?)
}

/// Logs what a commit survives, as the writer reports it (the bench quotes this line).
async fn log_durability(writer: &mut Conn) {
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *writer)
        .await
        .unwrap_or_default();
    let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *writer)
        .await
        .unwrap_or(-1);
    let synchronous = usize::try_from(level)
        .ok()
        .and_then(|level| ["off", "normal", "full", "extra"].get(level).copied())
        .unwrap_or("unknown");
    tracing::debug!(engine = "sqlite", journal_mode = %journal, synchronous, "database opened");
}

/// The fence of a write acting for a session (docs/architecture.md §12), for its
/// `WHERE`: the generation bound at `param` is `NULL` (unfenced) or still the one of the
/// session in column `session`'s lease. One replica writes at a time on SQLite, so
/// reading the row is enough (SQLite has no row locks to take).
fn fenced(session: &str, param: &str) -> String {
    format!(
        "({param} IS NULL OR EXISTS (SELECT 1 FROM session_leases fence \
         WHERE fence.session_id = {session} AND fence.generation = {param}))"
    )
}

/// The texts of the JSON array bound at `param`, as a subquery (SQLite has no arrays).
fn each_text(param: &str) -> String {
    format!("SELECT value FROM json_each({param})")
}

/// The `[session_id, generation]` pairs of the JSON array bound at `param`, as a table.
fn each_pair(param: &str) -> String {
    format!("(SELECT value ->> 0 AS session_id, value ->> 1 AS generation FROM json_each({param}))")
}

/// A JSON document bound as text and kept as it came (SQLite keeps JSON as text anyway).
fn json_as_sent(param: &str) -> String {
    param.to_owned()
}

/// The clock of leases, `ms` milliseconds (bound at that parameter) from now, as
/// [`Timestamp`](crate::model::Timestamp) text: SQLite's own clock has milliseconds, the
/// trailing zeros keep the text fixed-width. One replica, so one clock: this process's.
fn now_plus(ms: &str) -> String {
    format!("strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ({ms} / 1000.0) || ' seconds')")
}

/// What a webhook claim adds to its row pick: nothing, SQLite runs one write at a time.
const CLAIM_LOCK: &str = "";

/// `append` (an `UPDATE messages … WHERE id = $1`) that also records its session's events
/// applied up to `$4`: a second statement in the same batch, so the same commit.
fn with_position(append: &str) -> String {
    format!(
        "{append}; UPDATE sessions SET last_event_seq = $4 \
         WHERE id = (SELECT session_id FROM messages WHERE id = $1)"
    )
}

/// Records how far events are applied.
const SET_LAST_EVENT_SEQ: &str = "UPDATE sessions SET last_event_seq = $2 WHERE id = $1";

/// SQLite has one replica: the bus goes nowhere.
#[async_trait]
impl ChangeBus for SqliteDb {
    fn is_shared(&self) -> bool {
        false
    }

    async fn notify(&self, _notes: &[String]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn listen(
        &self,
    ) -> Result<Option<BoxStream<'static, Result<String, StoreError>>>, StoreError> {
        Ok(None)
    }
}
