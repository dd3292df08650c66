//! WAL checkpoints off the writer's path. SQLite's own checkpoint runs inside the commit
//! that crosses `wal_autocheckpoint` pages: it copies the WAL into the database file and
//! syncs both, and that commit (an elicitation's open, an answer's settlement) waits
//! milliseconds for it — the round trip's p99 (docs/decisions/0013). Here the writer never
//! checkpoints; a task does, on its own connection, every [`Checkpointing::every`], in
//! `PASSIVE` mode (it never waits for, or blocks, the writer). Commits are still in the WAL
//! before they return; a checkpoint is still where they are synced (docs/decisions/0011).
//!
//! A `PASSIVE` checkpoint copies pages but never empties the WAL: SQLite starts it over
//! only when a write begins while every frame is copied and no reader is on it, which
//! steady writes and reads never leave room for. The 30-minute soak at 200 answers/s grew
//! it to 2.8 GB, and reads and RSS grew with it. So once the WAL holds more than
//! [`Checkpointing::wal_bound`], the task runs a `TRUNCATE` checkpoint: it waits for the
//! readers on the WAL to finish (the writer waits meanwhile, a few milliseconds every few
//! seconds under load) and leaves the file empty.

use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

/// When the checkpoint task runs, and when it also empties the WAL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpointing {
    /// How often the WAL is checkpointed.
    pub(crate) every: Duration,
    /// The WAL size, in bytes, past which a checkpoint also empties it.
    pub(crate) wal_bound: u64,
}

impl Checkpointing {
    /// Every 500 ms (the most a power cut can roll back, decision 0011); the WAL emptied
    /// past 64 MiB, a few seconds of writes at the bench's knee.
    pub(crate) const DEFAULT: Self = Self {
        every: Duration::from_millis(500),
        wal_bound: 64 * 1024 * 1024,
    };
}

/// The checkpoint task of one database, stopped when the last handle to it drops.
#[derive(Debug)]
pub(super) struct Checkpoints(pub(super) tokio::task::AbortHandle);

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Checkpoints the database `options` open, as `plan` says, until the returned handle
/// drops. A failed checkpoint is retried at the next tick on a fresh connection (the WAL
/// only grows meanwhile), which never creates the file: a database moved away is the
/// readiness probe's to report, not this task's to replace with an empty one.
pub(super) fn spawn(options: SqliteConnectOptions, plan: Checkpointing) -> Checkpoints {
    let options = options.create_if_missing(false);
    let task = tokio::spawn(async move {
        let mut conn: Option<(SqliteConnection, u64)> = None;
        let mut ticks = tokio::time::interval(plan.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if conn.is_none() {
                conn = connect(&options).await;
            }
            let Some((c, page_size)) = conn.as_mut() else {
                continue;
            };
            if let Err(err) = checkpoint(c, *page_size, plan.wal_bound).await {
                tracing::warn!(error = %err, "WAL checkpoint failed; retried");
                conn = None;
            }
        }
    });
    Checkpoints(task.abort_handle())
}

/// A connection for the task, with the page size that turns WAL frames into bytes.
async fn connect(options: &SqliteConnectOptions) -> Option<(SqliteConnection, u64)> {
    let mut conn = options.connect().await.ok()?;
    let (page_size,): (i64,) = sqlx::query_as("PRAGMA page_size")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    Some((conn, u64::try_from(page_size).ok()?))
}

/// One tick: copy what the WAL holds, and empty it when it has grown past `wal_bound`.
async fn checkpoint(
    conn: &mut SqliteConnection,
    page_size: u64,
    wal_bound: u64,
) -> Result<(), sqlx::Error> {
    // (busy, frames in the WAL, frames copied)
    let (_, frames, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut *conn)
        .await?;
    if u64::try_from(frames).unwrap_or(0).saturating_mul(page_size) <= wal_bound {
        return Ok(());
    }
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut *conn)
        .await?;
    if busy != 0 {
        // A reader outlasted the busy timeout; the next tick tries again.
        tracing::debug!(frames, "WAL not emptied: a reader held it");
    }
    Ok(())
}
