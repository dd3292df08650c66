//! A write transaction in one hop: `BEGIN IMMEDIATE`, the statements and `COMMIT` sent to
//! the writer connection's thread as one batch, where [`SqliteDb::begin`] costs a hop per
//! statement and two more (docs/decisions/0013). For the writes on an answer's path (a
//! record's open and its settlement), whose statements are few and fixed.
//!
//! The batch runs on a task of its own, so a caller that goes away (an operator's request
//! cut off) cannot leave it half sent with the transaction open on the shared writer; a
//! failed statement is rolled back on the same connection before it returns to the pool.

use sqlx::sqlite::SqliteRow;

use super::SqliteDb;
use super::sql::Binds;
use crate::store::StoreError;

impl SqliteDb {
    /// Runs `statements` (`;`-separated) as one write transaction in one hop; the rows
    /// they return, in order. Nothing of it is committed when any of them fails.
    pub(super) async fn in_one_hop(
        &self,
        statements: String,
        binds: Binds,
    ) -> Result<Vec<SqliteRow>, StoreError> {
        let writer = self.writer.clone();
        let batch = tokio::spawn(async move {
            let mut conn = writer.acquire().await?;
            let sql = format!("BEGIN IMMEDIATE; {statements}; COMMIT");
            let result = sqlx::query_with(&sql, binds.into_arguments())
                .fetch_all(&mut *conn)
                .await;
            if result.is_err() && sqlx::query("ROLLBACK").execute(&mut *conn).await.is_err() {
                // No transaction was open (BEGIN itself failed), or the connection is in a
                // state not worth trusting: either way the pool opens a fresh one.
                conn.close_on_drop();
            }
            Ok::<_, StoreError>(result?)
        });
        batch.await.map_err(|err| {
            StoreError::Unavailable(format!("a write batch did not finish: {err}"))
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn db() -> (SqliteDb, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}", dir.path().join("k.db").display());
        let db = SqliteDb::open(&url).await.expect("open");
        sqlx::query("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
            .execute(&db.writer)
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
        let mut tx = db.begin().await.expect("begin");
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
        let tx = db.begin().await.expect("the writer is free again");
        tx.commit().await.expect("commit");
    }
}
