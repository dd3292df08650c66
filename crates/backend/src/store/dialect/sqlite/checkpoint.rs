//! WAL checkpoints off the writer's path. SQLite's own checkpoint runs inside the commit
//! that crosses `wal_autocheckpoint` pages: it copies the WAL into the database file and
//! syncs both, and that commit (an elicitation's open, an answer's settlement) waits
//! milliseconds for it — the round trip's p99 (docs/decisions/0013). Here the writer never
//! checkpoints; a task does, on its own connection, every [`Checkpointing::every`], in
//! `PASSIVE` mode (it never waits for, or blocks, the writer). Commits are still in the WAL
//! before they return; a checkpoint is still where they are synced (docs/decisions/0011).
//!
//! A `PASSIVE` checkpoint copies pages but never empties the WAL: SQLite starts it over
//! when a write begins while every frame is copied and no reader is on an older snapshot.
//! Under steady writes that moment never comes: the writer adds frames while the
//! checkpoint copies, so it never ends with all of them copied, and the WAL only grows
//! (the 30-minute soak at 200 answers/s grew it to 2.8 GB, reads and RSS with it). So once
//! the WAL holds more than [`Checkpointing::restart_past`], the task copies what came
//! during its checkpoint in a second one, and what came during that in a third with the
//! writer's turn held: that one copies a millisecond's worth, and the next write finds
//! every frame copied and starts the WAL over, unless a reader is still on an older
//! snapshot; the next tick tries again. Should
//! readers keep it from starting over until the WAL holds more than
//! [`Checkpointing::wal_bound`], the task runs a `TRUNCATE` checkpoint, which waits for
//! them, holding the writer off meanwhile, and leaves the file empty.

use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

use super::writer::Writer;
use crate::store::StoreError;

/// When the checkpoint task runs, and when it makes the WAL start over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpointing {
    /// How often the WAL is checkpointed.
    pub(crate) every: Duration,
    /// The WAL size, in bytes, past which a checkpoint copies the rest with the writer
    /// held, so that SQLite starts the WAL over.
    pub(crate) restart_past: u64,
    /// The WAL size, in bytes, past which a checkpoint waits for readers and empties it.
    pub(crate) wal_bound: u64,
}

impl Checkpointing {
    /// Every 500 ms (the most a power cut can roll back, decision 0011); the WAL made to
    /// start over past 4 MiB (under a second of a heavy load's writes: a smaller WAL is
    /// not worth pausing the writer for) and emptied past 64 MiB.
    pub(crate) const DEFAULT: Self = Self {
        every: Duration::from_millis(500),
        restart_past: 4 * 1024 * 1024,
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

/// Checkpoints the database `options` open, whose writes go through `writer`, as `plan`
/// says, until the returned handle drops. A failed checkpoint is retried at the next tick
/// on a fresh connection (the WAL only grows meanwhile), which never creates the file: a
/// database moved away is the readiness probe's to report, not this task's to replace
/// with an empty one.
pub(super) fn spawn(
    options: SqliteConnectOptions,
    writer: Writer,
    plan: Checkpointing,
) -> Checkpoints {
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
            if let Err(err) = checkpoint(c, *page_size, &writer, plan).await {
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

/// One tick: copy what the WAL holds, and make it start over when it has grown past
/// `plan.restart_past`, or empty it past `plan.wal_bound`.
async fn checkpoint(
    conn: &mut SqliteConnection,
    page_size: u64,
    writer: &Writer,
    plan: Checkpointing,
) -> Result<(), StoreError> {
    let frames = passive(conn).await?;
    let wal = u64::try_from(frames).unwrap_or(0).saturating_mul(page_size);
    if wal > plan.wal_bound {
        let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut *conn)
            .await?;
        if busy != 0 {
            // A reader outlasted the busy timeout; the next tick tries again.
            tracing::debug!(frames, "WAL not emptied: a reader held it");
        }
    } else if wal > plan.restart_past {
        // What came during the first copy, copied without holding the writer, leaves the
        // held copy below only the last few milliseconds' frames.
        passive(conn).await?;
        // No write can come between this copy and the next write's start.
        let _turn = writer.turn().await?;
        passive(conn).await?;
    }
    Ok(())
}

/// A `PASSIVE` checkpoint: the frames the WAL held when it began.
async fn passive(conn: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    // (busy, frames in the WAL, frames copied)
    let (_, frames, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await?;
    Ok(frames)
}
