//! [`OutboxStore`]. A claim is one `UPDATE … RETURNING` over due rows no live claim
//! holds; how the engine keeps two claims apart is `engine::CLAIM_LOCK`.

use async_trait::async_trait;

use super::engine::{self, Db};
use crate::model::{Attempt, Delivery, LastDelivery, NewDelivery, Timestamp, new_record_id};
use crate::store::{OutboxStore, StoreError};

/// The columns of a [`LastDelivery`].
const LAST: &str =
    "hook, event, status, attempts, last_status, last_error, created_at, finished_at";

#[async_trait]
impl OutboxStore for Db {
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<usize, StoreError> {
        let mut writer = self.writer().await?;
        let mut tx = engine::begin(&mut writer).await?;
        let now = Timestamp::now();
        let mut new = 0;
        for d in deliveries {
            new += sqlx::query(
                "INSERT INTO webhook_deliveries \
                 (id, hook, event, dedup_key, pending_id, body, due_at, not_after, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (dedup_key) DO NOTHING",
            )
            .bind(new_record_id())
            .bind(&d.hook)
            .bind(&d.event)
            .bind(&d.dedup_key)
            .bind(&d.pending_id)
            .bind(&d.body)
            .bind(d.due_at)
            .bind(d.not_after)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(usize::try_from(new).unwrap_or(usize::MAX))
    }

    async fn claim_due(
        &self,
        claimant: &str,
        now: Timestamp,
        until: Timestamp,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        let sql = format!(
            "UPDATE webhook_deliveries SET claimed_by = $1, claimed_until = $2 \
             WHERE id IN (SELECT id FROM webhook_deliveries \
               WHERE status = 'pending' AND due_at <= $3 \
                 AND (claimed_until IS NULL OR claimed_until <= $3) \
               ORDER BY due_at, id LIMIT $4 {}) \
             RETURNING id, hook, event, pending_id, body, attempts, not_after",
            engine::CLAIM_LOCK
        );
        let claimed = sqlx::query_as(&sql)
            .bind(claimant)
            .bind(until)
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.writer().await?)
            .await?;
        Ok(claimed)
    }

    async fn finish(
        &self,
        id: &str,
        claimant: &str,
        attempt: &Attempt,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        // (attempts added, next due time, HTTP status, error, finished at)
        let (added, due_at, code, error, finished_at) = match attempt {
            Attempt::Delivered { status } => (1, None, Some(*status), None, Some(at)),
            Attempt::Retry {
                at: next,
                status,
                error,
            } => (1, Some(*next), *status, Some(error), None),
            Attempt::Failed { status, error } => (1, None, *status, Some(error), Some(at)),
            Attempt::Dropped { reason } => (0, None, None, Some(reason), Some(at)),
        };
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET status = $3, attempts = attempts + $4, \
             due_at = COALESCE($5, due_at), last_status = $6, last_error = $7, \
             finished_at = $8, claimed_by = NULL, claimed_until = NULL \
             WHERE id = $1 AND claimed_by = $2 AND status = 'pending'",
        )
        .bind(id)
        .bind(claimant)
        .bind(attempt.status())
        .bind(added)
        .bind(due_at)
        .bind(code.map(i32::from))
        .bind(error)
        .bind(finished_at)
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn last_deliveries(&self) -> Result<Vec<LastDelivery>, StoreError> {
        let sql = format!(
            "SELECT {LAST} FROM webhook_deliveries WHERE attempts > 0 OR status <> 'pending' \
             ORDER BY created_at DESC, id LIMIT 1000"
        );
        let rows: Vec<LastDelivery> = sqlx::query_as(&sql).fetch_all(self.pool()).await?;
        // Newest first: the first row of each hook is its latest.
        let mut seen = std::collections::BTreeSet::new();
        Ok(rows
            .into_iter()
            .filter(|row| seen.insert(row.hook.clone()))
            .collect())
    }

    async fn deliveries_for(&self, pending_id: &str) -> Result<Vec<LastDelivery>, StoreError> {
        let sql = format!(
            "SELECT {LAST} FROM webhook_deliveries WHERE pending_id = $1 ORDER BY created_at, id"
        );
        let rows = sqlx::query_as(&sql)
            .bind(pending_id)
            .fetch_all(self.pool())
            .await?;
        Ok(rows)
    }

    async fn use_answer_link(
        &self,
        nonce: &str,
        pending_id: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO answer_link_uses (nonce, pending_id, used_at) VALUES ($1, $2, $3) \
             ON CONFLICT (nonce) DO NOTHING",
        )
        .bind(nonce)
        .bind(pending_id)
        .bind(at)
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
