//! [`OutboxStore`] on SQLite (one writer: a claim is one `UPDATE … RETURNING`).

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteDb, time, time_opt};
use crate::model::{Attempt, Delivery, DeliveryStatus, LastDelivery, NewDelivery, Timestamp};
use crate::store::StoreError;
use crate::store::outbox::{
    AttemptRow, ENQUEUE, FINISH, LATEST, OF_RECORD, OutboxStore, USE_LINK, latest_per_hook,
};

fn delivery(row: &SqliteRow) -> Result<Delivery, StoreError> {
    Ok(Delivery {
        id: row.try_get("id")?,
        hook: row.try_get("hook")?,
        event: row.try_get("event")?,
        pending_id: row.try_get("pending_id")?,
        body: row.try_get("body")?,
        attempts: row.try_get::<i64, _>("attempts")?.try_into().unwrap_or(0),
        not_after: time_opt(row, "not_after")?,
    })
}

fn last(row: &SqliteRow) -> Result<LastDelivery, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(LastDelivery {
        hook: row.try_get("hook")?,
        event: row.try_get("event")?,
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("delivery status `{status}`")))?,
        attempts: row.try_get::<i64, _>("attempts")?.try_into().unwrap_or(0),
        last_status: row
            .try_get::<Option<i64>, _>("last_status")?
            .and_then(|s| u16::try_from(s).ok()),
        last_error: row.try_get("last_error")?,
        created_at: time(row, "created_at")?,
        finished_at: time_opt(row, "finished_at")?,
    })
}

#[async_trait]
impl OutboxStore for SqliteDb {
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<usize, StoreError> {
        let mut tx = self.begin().await?;
        let now = Timestamp::now().to_rfc3339();
        let mut new = 0;
        for d in deliveries {
            new += sqlx::query(ENQUEUE)
                .bind(uuid::Uuid::new_v4().to_string())
                .bind(&d.hook)
                .bind(&d.event)
                .bind(&d.dedup_key)
                .bind(&d.pending_id)
                .bind(&d.body)
                .bind(d.due_at.to_rfc3339())
                .bind(d.not_after.map(Timestamp::to_rfc3339))
                .bind(&now)
                .execute(&mut *tx)
                .await?
                .rows_affected() as usize;
        }
        tx.commit().await?;
        Ok(new)
    }

    async fn claim_due(
        &self,
        claimant: &str,
        now: Timestamp,
        until: Timestamp,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "UPDATE webhook_deliveries SET claimed_by = $1, claimed_until = $2 \
             WHERE id IN (SELECT id FROM webhook_deliveries \
               WHERE status = 'pending' AND due_at <= $3 \
                 AND (claimed_until IS NULL OR claimed_until <= $3) \
               ORDER BY due_at, id LIMIT $4) \
             RETURNING id, hook, event, pending_id, body, attempts, not_after",
        )
        .bind(claimant)
        .bind(until.to_rfc3339())
        .bind(now.to_rfc3339())
        .bind(i64::from(limit))
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(delivery).collect()
    }

    async fn finish(
        &self,
        id: &str,
        claimant: &str,
        attempt: &Attempt,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let row = AttemptRow::of(attempt, at);
        let done = sqlx::query(FINISH)
            .bind(id)
            .bind(claimant)
            .bind(row.status)
            .bind(row.added)
            .bind(row.due_at.map(Timestamp::to_rfc3339))
            .bind(row.code)
            .bind(row.error)
            .bind(row.finished_at.map(Timestamp::to_rfc3339))
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn last_deliveries(&self) -> Result<Vec<LastDelivery>, StoreError> {
        let rows = sqlx::query(LATEST).fetch_all(&self.pool).await?;
        let rows = rows.iter().map(last).collect::<Result<Vec<_>, _>>()?;
        Ok(latest_per_hook(rows))
    }

    async fn deliveries_for(&self, pending_id: &str) -> Result<Vec<LastDelivery>, StoreError> {
        let rows = sqlx::query(OF_RECORD)
            .bind(pending_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(last).collect()
    }

    async fn use_answer_link(
        &self,
        nonce: &str,
        pending_id: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(USE_LINK)
            .bind(nonce)
            .bind(pending_id)
            .bind(at.to_rfc3339())
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
