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
pub(super) struct Checkpoints(tokio::task::AbortHandle);

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

#[cfg(test)]
mod tests {
    use crate::store::sqlite::SqliteDb;

    #[tokio::test]
    async fn the_writer_leaves_checkpoints_to_the_task_which_keeps_up() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("k.db");
        let db = SqliteDb::open(&format!("sqlite://{}", file.display()))
            .await
            .expect("open");
        let (autocheckpoint,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint")
            .fetch_one(&db.writer)
            .await
            .expect("pragma");
        assert_eq!(autocheckpoint, 0, "the writer's commits never checkpoint");
        let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let before = size();
        sqlx::query("CREATE TABLE t (v BLOB)")
            .execute(&db.writer)
            .await
            .expect("table");
        for _ in 0..200 {
            sqlx::query("INSERT INTO t (v) VALUES (zeroblob(1024))")
                .execute(&db.writer)
                .await
                .expect("insert");
        }
        // Pages reach the database file only through a checkpoint, and only the task runs one.
        crate::testing::eventually("the task copied the WAL into the file", || async {
            (size() >= before + 200 * 1024).then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn the_task_stops_with_the_last_handle_to_its_database() {
        let dir = tempfile::tempdir().expect("dir");
        let db = SqliteDb::open(&format!("sqlite://{}", dir.path().join("k.db").display()))
            .await
            .expect("open");
        let task = db
            ._checkpoints
            .as_ref()
            .expect("a file database has one")
            .0
            .clone();
        let other = db.clone();
        drop(db);
        assert!(!task.is_finished(), "a clone still holds the database");
        drop(other);
        crate::testing::eventually("the task stopped", || async {
            task.is_finished().then_some(())
        })
        .await;
    }
}
