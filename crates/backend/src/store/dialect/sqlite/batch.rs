//! Write batches on SQLite's one writer, grouped into shared commits.
//!
//! A batch is a write transaction sent to the writer connection's thread in one hop:
//! `BEGIN IMMEDIATE`, its statements and `COMMIT` (docs/decisions/0013). It is for the
//! writes on an answer's path (a record's open and its settlement) and for streamed text
//! (an append to a message), whose statements are few and fixed.
//!
//! One task, [`Batches`]' writer, runs them in the order they came. Batches that queued
//! while it was busy run together in one transaction, one hop each, and commit once: with
//! twenty sessions asking at once, each commit and each hand-over of the connection was
//! what the one writer's throughput was made of. A group commits whole or not at all; if
//! any of its batches fails, nothing of the group is kept and each batch runs again alone,
//! so a batch's failure stays its own.
//!
//! A caller waits for its batch's outcome, which comes only after the commit. A caller
//! that goes away (an operator's request cut off) cannot leave a batch half sent with the
//! transaction open on the shared writer: the task runs it to its end either way, and a
//! failed transaction is rolled back on the same connection before its turn ends.

use sqlx::sqlite::SqliteRow;
use tokio::sync::{mpsc, oneshot};

use super::SqliteDb;
use super::sql::Binds;
use super::writer::{Turn, Writer};
use crate::store::StoreError;

/// At most this many batches share a commit, so the write lock is never held for long.
const MOST_IN_A_GROUP: usize = 64;

/// What one batch returns: the rows of its statements, in order.
type Outcome = Result<Vec<SqliteRow>, StoreError>;

/// The queue of the task that runs every batch.
#[derive(Debug, Clone)]
pub(super) struct Batches {
    queue: mpsc::UnboundedSender<Batch>,
}

/// One batch and where its outcome goes.
struct Batch {
    /// The statements, `;`-separated.
    statements: String,
    binds: Binds,
    done: oneshot::Sender<Outcome>,
}

impl Batches {
    /// Starts the task that runs batches on `writer` (it ends with the last handle).
    pub(super) fn spawn(writer: Writer) -> Self {
        let (queue, batches) = mpsc::unbounded_channel();
        tokio::spawn(write(writer, batches));
        Self { queue }
    }
}

impl SqliteDb {
    /// Runs `statements` (`;`-separated) as one write transaction; the rows they return,
    /// in order, once committed. Nothing of it is committed when any of them fails.
    pub(super) async fn in_one_hop(&self, statements: String, binds: Binds) -> Outcome {
        let (done, outcome) = oneshot::channel();
        let gone = || StoreError::Unavailable("the database writer has stopped".into());
        self.batches
            .queue
            .send(Batch {
                statements,
                binds,
                done,
            })
            .map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

/// One write `statement` (with `RETURNING`) as a batch: the row it returned, decoded, once
/// committed. Streamed text is written this way, so the appends of many sessions share
/// the writer's commits instead of taking a turn and a commit each (docs/decisions/0013).
pub(super) async fn write_returning<T>(
    db: &SqliteDb,
    statement: String,
    binds: Binds,
) -> Result<Option<T>, StoreError>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow>,
{
    let rows = db.in_one_hop(statement, binds).await?;
    Ok(rows.first().map(T::from_row).transpose()?)
}

/// The writer task: takes what has queued, up to a group, and runs it.
async fn write(writer: Writer, mut batches: mpsc::UnboundedReceiver<Batch>) {
    let mut group = Vec::with_capacity(MOST_IN_A_GROUP);
    while batches.recv_many(&mut group, MOST_IN_A_GROUP).await > 0 {
        run_group(&writer, std::mem::take(&mut group)).await;
    }
}

/// Runs `group`: together when it has more than one batch, and each alone when it has
/// one or the group failed. Answers every batch.
async fn run_group(writer: &Writer, group: Vec<Batch>) {
    if group.len() > 1 {
        match together(writer, &group).await {
            Ok(rows) => {
                for (batch, rows) in group.into_iter().zip(rows) {
                    // A caller that went away no longer wants its rows.
                    let _ = batch.done.send(Ok(rows));
                }
                return;
            }
            Err(err) => {
                tracing::debug!(error = %err, size = group.len(), "a write group failed; each batch runs alone");
            }
        }
    }
    for batch in group {
        let outcome = alone(writer, &batch.statements, batch.binds).await;
        let _ = batch.done.send(outcome);
    }
}

/// One batch in a transaction of its own, in one hop.
async fn alone(writer: &Writer, statements: &str, binds: Binds) -> Outcome {
    let mut conn = writer.turn().await?;
    let sql = format!("BEGIN IMMEDIATE; {statements}; COMMIT");
    let result = sqlx::query_with(&sql, binds.into_arguments())
        .fetch_all(&mut *conn)
        .await;
    roll_back_if_failed(&mut conn, result.is_err()).await;
    Ok(result?)
}

/// Every batch of `group` in one transaction, one hop each (the first opens it, the last
/// commits it); each batch's rows. Nothing is committed when any of them fails.
async fn together(writer: &Writer, group: &[Batch]) -> Result<Vec<Vec<SqliteRow>>, StoreError> {
    let mut conn = writer.turn().await?;
    let last = group.len() - 1;
    let mut rows = Vec::with_capacity(group.len());
    let mut failed = None;
    for (n, batch) in group.iter().enumerate() {
        let sql = match n {
            0 => format!("BEGIN IMMEDIATE; {}", batch.statements),
            n if n == last => format!("{}; COMMIT", batch.statements),
            _ => batch.statements.clone(),
        };
        // Kept for the batch's run alone should the group fail.
        let binds = batch.binds.clone();
        match sqlx::query_with(&sql, binds.into_arguments())
            .fetch_all(&mut *conn)
            .await
        {
            Ok(batch_rows) => rows.push(batch_rows),
            Err(err) => {
                failed = Some(err);
                break;
            }
        }
    }
    roll_back_if_failed(&mut conn, failed.is_some()).await;
    match failed {
        None => Ok(rows),
        Some(err) => Err(err.into()),
    }
}

/// After a failed transaction, rolls it back on the connection that ran it.
async fn roll_back_if_failed(conn: &mut Turn<'_>, failed: bool) {
    if failed && sqlx::query("ROLLBACK").execute(&mut **conn).await.is_err() {
        // No transaction was open (BEGIN itself failed), or the connection is in a state
        // not worth trusting: either way the writer takes a fresh one.
        conn.renew().await;
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::super::engine_tests::db;
    use super::*;

    /// A batch that inserts `k` and reads its row back.
    fn insert(k: &str, v: i64) -> (Batch, oneshot::Receiver<Outcome>) {
        let (done, outcome) = oneshot::channel();
        let binds = Binds::default()
            .and(k.to_owned())
            .and_then(|b| b.and(v))
            .expect("binds");
        let batch = Batch {
            statements: "INSERT INTO t (k, v) VALUES ($1, $2); SELECT v FROM t WHERE k = $1".into(),
            binds,
            done,
        };
        (batch, outcome)
    }

    async fn keys(db: &SqliteDb) -> Vec<String> {
        sqlx::query_scalar("SELECT k FROM t ORDER BY k")
            .fetch_all(db.pool())
            .await
            .expect("keys")
    }

    #[tokio::test]
    async fn a_group_gives_each_batch_its_own_rows() {
        let (db, _dir) = db().await;
        let (batches, outcomes): (Vec<_>, Vec<_>) = [("a", 1), ("b", 2), ("c", 3)]
            .map(|(k, v)| insert(k, v))
            .into_iter()
            .unzip();
        run_group(&db.writer, batches).await;
        for (outcome, v) in outcomes.into_iter().zip([1_i64, 2, 3]) {
            let rows = outcome.await.expect("answered").expect("committed");
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].get::<i64, _>(0), v, "no batch reads another's rows");
        }
        assert_eq!(keys(&db).await, ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn a_failing_batch_fails_alone_and_the_rest_of_its_group_commits() {
        let (db, _dir) = db().await;
        // The second batch's key is taken by the first: its insert fails.
        let (batches, outcomes): (Vec<_>, Vec<_>) = [("a", 1), ("a", 2), ("c", 3)]
            .map(|(k, v)| insert(k, v))
            .into_iter()
            .unzip();
        run_group(&db.writer, batches).await;
        let mut outcomes = outcomes.into_iter();
        let mut next = async || {
            outcomes
                .next()
                .expect("an outcome")
                .await
                .expect("answered")
        };
        assert_eq!(next().await.expect("first commits")[0].get::<i64, _>(0), 1);
        assert!(
            next().await.is_err(),
            "the duplicate key is the second's error"
        );
        assert_eq!(next().await.expect("third commits")[0].get::<i64, _>(0), 3);
        assert_eq!(keys(&db).await, ["a", "c"]);
        let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE k = 'a'")
            .fetch_one(db.pool())
            .await
            .expect("a");
        assert_eq!(v, 1, "nothing of the failed batch is kept");
        // The writer is free and outside any transaction.
        let mut turn = db.writer().await.expect("writer");
        let tx = super::super::begin(&mut turn).await.expect("begin");
        tx.commit().await.expect("commit");
    }

    #[tokio::test]
    async fn batches_that_queue_behind_a_busy_writer_all_commit_in_their_order() {
        let (db, _dir) = db().await;
        // Holding the one writer connection makes the batches queue.
        let held = db.writer().await.expect("writer");
        let binds = |k: &str| Binds::default().and(k.to_owned()).expect("binds");
        let batch = |k: &'static str| {
            db.in_one_hop(
                "INSERT INTO t (k, v) VALUES ($1, (SELECT COUNT(*) FROM t)); SELECT v FROM t WHERE k = $1".into(),
                binds(k),
            )
        };
        let all = futures::future::join_all(["a", "b", "c", "d"].map(batch));
        let released = async {
            tokio::task::yield_now().await;
            drop(held);
        };
        let (outcomes, ()) = tokio::join!(all, released);
        let order: Vec<i64> = outcomes
            .into_iter()
            .map(|rows| rows.expect("committed")[0].get::<i64, _>(0))
            .collect();
        assert_eq!(order, [0, 1, 2, 3], "each saw the ones queued before it");
    }

    #[tokio::test]
    async fn a_rollback_that_fails_leaves_the_writer_a_fresh_connection() {
        let (db, _dir) = db().await;
        let mut turn = db.writer().await.expect("writer");
        // A temporary table lives and dies with its connection.
        sqlx::query("CREATE TEMP TABLE mine (x INTEGER)")
            .execute(&mut *turn)
            .await
            .expect("temp table");
        // No transaction is open, so the ROLLBACK fails.
        roll_back_if_failed(&mut turn, true).await;
        let seen: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM temp.sqlite_master WHERE name = 'mine'")
                .fetch_one(&mut *turn)
                .await
                .expect("the fresh connection answers");
        assert_eq!(seen, 0, "the connection was replaced");
        drop(turn);
        let rows = db
            .in_one_hop(
                "INSERT INTO t (k, v) VALUES ('a', 1)".into(),
                Binds::default(),
            )
            .await
            .expect("the writer still writes");
        assert!(rows.is_empty());
        assert_eq!(keys(&db).await, ["a"]);
    }
}
