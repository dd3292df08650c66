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
