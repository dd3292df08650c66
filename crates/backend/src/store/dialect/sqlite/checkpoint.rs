//! WAL checkpoints off the writer's path. SQLite's own checkpoint runs inside the commit
//! that crosses `wal_autocheckpoint` pages: it copies the WAL into the database file and
//! syncs both, and that commit (an elicitation's open, an answer's settlement) waits
//! milliseconds for it — the round trip's p99 (docs/decisions/0013). Here the writer never
//! checkpoints; a task does, on its own connection, every [`EVERY`], in `PASSIVE` mode
//! (it never waits for, or blocks, the writer). Commits are still in the WAL before they
//! return; a checkpoint is still where they are synced (docs/decisions/0011), now at least
//! every [`EVERY`] instead of every ~1,000 pages.

use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

/// How often the WAL is checkpointed.
pub(super) const EVERY: Duration = Duration::from_millis(500);

/// The checkpoint task of one database, stopped when the last handle to it drops.
#[derive(Debug)]
pub(super) struct Checkpoints(pub(super) tokio::task::AbortHandle);

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Checkpoints the database `options` open, every [`EVERY`], until the returned handle
/// drops. A failed checkpoint is retried at the next tick on a fresh connection (the WAL
/// only grows meanwhile), which never creates the file: a database moved away is the
/// readiness probe's to report, not this task's to replace with an empty one.
pub(super) fn spawn(options: SqliteConnectOptions) -> Checkpoints {
    let options = options.create_if_missing(false);
    let task = tokio::spawn(async move {
        let mut conn: Option<SqliteConnection> = None;
        let mut ticks = tokio::time::interval(EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if conn.is_none() {
                conn = options.connect().await.ok();
            }
            let Some(c) = conn.as_mut() else {
                continue;
            };
            if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&mut *c)
                .await
            {
                tracing::warn!(error = %err, "WAL checkpoint failed; retried");
                conn = None;
            }
        }
    });
    Checkpoints(task.abort_handle())
}
