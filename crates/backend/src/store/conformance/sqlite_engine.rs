//! The SQLite engine's own promises, beside the contract the conformance suite checks
//! on both engines: its file and pragmas, the one-hop write batch, the checkpoint task.
//! Mounted as a child of `store::dialect::sqlite`, so it sees that module's private parts.

use super::sql::Binds;
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
    let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
        .fetch_one(db.pool())
        .await
        .expect("pragma");
    assert_eq!(synchronous, 1, "NORMAL on the readers");
    let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
        .fetch_one(&mut *db.writer().await.expect("writer"))
        .await
        .expect("pragma");
    assert_eq!(synchronous, 1, "NORMAL on the writer");
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

/// A file database with a table `t (k TEXT PRIMARY KEY, v INTEGER)` (the batch's own
/// tests use it too).
pub(super) async fn db() -> (SqliteDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    let db = SqliteDb::open(&url).await.expect("open");
    sqlx::query("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
        .execute(&mut *db.writer().await.expect("writer"))
        .await
        .expect("table");
    (db, dir)
}

async fn count(db: &SqliteDb) -> i64 {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    n
}

#[tokio::test]
async fn a_batch_commits_whole_or_not_at_all_and_the_writer_stays_usable() {
    let (db, _dir) = db().await;
    let binds = || {
        Binds::default()
            .and("a".to_owned())
            .and_then(|b| b.and(1_i64))
            .expect("binds")
    };
    let rows = db
        .in_one_hop(
            "INSERT INTO t (k, v) VALUES ($1, $2); SELECT v FROM t WHERE k = $1".into(),
            binds(),
        )
        .await
        .expect("batch");
    assert_eq!(rows.len(), 1);
    // The second statement fails on the key: the first of the batch is undone.
    let failed = db
        .in_one_hop(
            "INSERT INTO t (k, v) VALUES ('b', 2); INSERT INTO t (k, v) VALUES ($1, $2)".into(),
            binds(),
        )
        .await;
    assert!(failed.is_err());
    assert_eq!(count(&db).await, 1, "nothing of the failed batch is kept");
    // The writer is not left inside the failed transaction.
    let mut writer = db.writer().await.expect("writer");
    let mut tx = begin(&mut writer).await.expect("begin");
    sqlx::query("INSERT INTO t (k, v) VALUES ('c', 3)")
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(count(&db).await, 2);
}

#[tokio::test]
async fn a_batch_whose_caller_goes_away_still_runs_to_its_end() {
    let (db, _dir) = db().await;
    let binds = Binds::default()
        .and("a".to_owned())
        .and_then(|b| b.and(1_i64))
        .expect("binds");
    // Polled once (which sends it) and dropped.
    let batch = db.in_one_hop("INSERT INTO t (k, v) VALUES ($1, $2)".into(), binds);
    let _ = tokio::time::timeout(std::time::Duration::ZERO, batch).await;
    crate::testing::eventually("the batch committed on its own", || async {
        (count(&db).await == 1).then_some(())
    })
    .await;
    let mut writer = db.writer().await.expect("writer");
    let tx = begin(&mut writer).await.expect("the writer is free again");
    tx.commit().await.expect("commit");
}

#[tokio::test]
async fn the_writer_leaves_checkpoints_to_the_task_which_keeps_up() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("k.db");
    let db = SqliteDb::open(&format!("sqlite://{}", file.display()))
        .await
        .expect("open");
    let (autocheckpoint,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint")
        .fetch_one(&mut *db.writer().await.expect("writer"))
        .await
        .expect("pragma");
    assert_eq!(autocheckpoint, 0, "the writer's commits never checkpoint");
    let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let before = size();
    sqlx::query("CREATE TABLE t (v BLOB)")
        .execute(&mut *db.writer().await.expect("writer"))
        .await
        .expect("table");
    for _ in 0..200 {
        sqlx::query("INSERT INTO t (v) VALUES (zeroblob(1024))")
            .execute(&mut *db.writer().await.expect("writer"))
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

/// The most the WAL file held while 2,000 commits of 8 KiB (16 MiB in all), 1 ms apart,
/// ran beside two readers always on the WAL running `read` one after the other,
/// checkpointed every 20 ms as `restart_past` and `wal_bound` say.
async fn steady_load_wal_high(read: &'static str, restart_past: u64, wal_bound: u64) -> u64 {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("k.db");
    let wal = dir.path().join("k.db-wal");
    let plan = Checkpointing {
        every: Duration::from_millis(20),
        restart_past,
        wal_bound,
    };
    let db = SqliteDb::open_checkpointed(&format!("sqlite://{}", file.display()), plan)
        .await
        .expect("open");
    sqlx::query("CREATE TABLE t (v BLOB)")
        .execute(&mut *db.writer().await.expect("writer"))
        .await
        .expect("table");
    // Readers always on the WAL, as operators' feeds are.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (pool, stop) = (db.pool.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let _: (i64,) = sqlx::query_as(read).fetch_one(&pool).await.expect("read");
                }
            })
        })
        .collect();
    let mut pace = tokio::time::interval(Duration::from_millis(1));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut high = 0;
    for _ in 0..2_000 {
        pace.tick().await;
        sqlx::query("INSERT INTO t (v) VALUES (zeroblob(8192))")
            .execute(&mut *db.writer().await.expect("writer"))
            .await
            .expect("insert");
        high = high.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("reader");
    }
    high
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_writes_and_reads_let_the_wal_start_over() {
    // Never emptied by a `TRUNCATE`: only SQLite starting the WAL over keeps it small.
    // Short reads, as kandev's are (a row by its key): a read of a snapshot older than the
    // last copy keeps SQLite from starting over at that tick.
    let read = "SELECT coalesce(max(rowid), 0) FROM t";
    let high = steady_load_wal_high(read, 64 * 1024, u64::MAX).await;
    // A tick's worth of commits is about 160 KiB; without the restarts the WAL holds all
    // 16 MiB.
    assert!(
        high < 4 * 1024 * 1024,
        "the WAL reached {high} bytes: SQLite never started it over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_writes_and_reads_keep_the_wal_within_its_bound() {
    // Never made to start over: only the `TRUNCATE` past the bound keeps it small.
    let bound = 256 * 1024;
    // Long reads (the whole table), which keep SQLite from ever starting it over.
    let high = steady_load_wal_high("SELECT count(*) FROM t", u64::MAX, bound).await;
    // The bound plus what a tick's worth of commits adds, with room to spare; without the
    // bound the WAL holds all 16 MiB.
    assert!(
        high < 16 * bound,
        "the WAL reached {high} bytes with a bound of {bound}"
    );
}
