//! [`LeaseStore`] on SQLite: the same rows and rules as on PostgreSQL, with this
//! process's clock (one replica). [`ChangeBus`] goes nowhere: there is no other replica.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteDb, time};
use crate::model::{SessionLease, TakeOver, Timestamp};
use crate::store::{ChangeBus, Claimant, LeaseStore, StoreError};

const COLUMNS: &str = "session_id, replica_id, advertise_url, generation, expires_at, agent_host";

fn lease(row: &SqliteRow) -> Result<SessionLease, StoreError> {
    let generation: i64 = row.try_get("generation")?;
    Ok(SessionLease {
        session_id: row.try_get("session_id")?,
        replica_id: row.try_get("replica_id")?,
        advertise_url: row.try_get("advertise_url")?,
        generation: u64::try_from(generation).unwrap_or(0),
        expires_at: time(row, "expires_at")?,
        agent_host: row.try_get("agent_host")?,
    })
}

/// The `WHERE` under which a stored lease may be taken, with the claimant's id and the
/// current instant bound at the parameters named (each form names both, so every
/// statement uses every parameter it is given).
fn may_take(take_over: TakeOver, claimant: &str, now: &str) -> String {
    let own = match take_over {
        TakeOver::Expired => "0",
        TakeOver::ExpiredOrOwn => "1",
        TakeOver::Any => return format!("({now} IS NOT NULL OR {claimant} IS NOT NULL)"),
    };
    format!(
        "(session_leases.expires_at <= {now} OR ({own} = 1 AND session_leases.replica_id = {claimant}))"
    )
}

#[async_trait]
impl LeaseStore for SqliteDb {
    async fn claim(
        &self,
        session_id: &str,
        by: Claimant<'_>,
        take_over: TakeOver,
    ) -> Result<Option<SessionLease>, StoreError> {
        let now = Timestamp::now();
        let row = sqlx::query(&format!(
            "INSERT INTO session_leases (session_id, replica_id, advertise_url, generation, expires_at) \
             VALUES ($1, $2, $3, 1, $4) \
             ON CONFLICT (session_id) DO UPDATE SET replica_id = excluded.replica_id, \
               advertise_url = excluded.advertise_url, generation = session_leases.generation + 1, \
               expires_at = excluded.expires_at \
             WHERE {} RETURNING {COLUMNS}",
            may_take(take_over, "$2", "$5")
        ))
        .bind(session_id)
        .bind(by.replica_id)
        .bind(by.advertise_url)
        .bind(now.plus(by.lease).to_rfc3339())
        .bind(now.to_rfc3339())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(lease).transpose()
    }

    async fn renew(
        &self,
        replica_id: &str,
        held: &[(String, u64)],
        lease_for: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let until = Timestamp::now().plus(lease_for).to_rfc3339();
        let mut tx = self.begin().await?;
        let mut still = Vec::new();
        for (id, generation) in held {
            let done = sqlx::query(
                "UPDATE session_leases SET expires_at = $4 \
                 WHERE session_id = $1 AND replica_id = $2 AND generation = $3",
            )
            .bind(id)
            .bind(replica_id)
            .bind(i64::try_from(*generation).unwrap_or(i64::MAX))
            .bind(&until)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 1 {
                still.push(id.clone());
            }
        }
        tx.commit().await?;
        Ok(still)
    }

    async fn release(&self, session_id: &str, generation: u64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM session_leases WHERE session_id = $1 AND generation = $2")
            .bind(session_id)
            .bind(i64::try_from(generation).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn hand_over(&self, session_id: &str, generation: u64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE session_leases SET expires_at = $3 WHERE session_id = $1 AND generation = $2",
        )
        .bind(session_id)
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
        .bind(Timestamp::now().to_rfc3339())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lease(&self, session_id: &str) -> Result<Option<SessionLease>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM session_leases WHERE session_id = $1"
        ))
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(lease)
        .transpose()
    }

    async fn claimable(
        &self,
        replica_id: &str,
        take_over: TakeOver,
        unowned_after: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let now = Timestamp::now();
        let created_before = chrono::Duration::from_std(unowned_after)
            .ok()
            .and_then(|d| now.instant().checked_sub_signed(d))
            .map_or(now, Timestamp::from);
        let rows: Vec<(String,)> = sqlx::query_as(&format!(
            "SELECT s.id FROM sessions s LEFT JOIN session_leases ON session_leases.session_id = s.id \
             WHERE s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') AND ( \
               (session_leases.session_id IS NULL AND s.created_at <= $1) \
               OR (session_leases.session_id IS NOT NULL AND {})) \
             ORDER BY s.created_at, s.id",
            may_take(take_over, "$2", "$3")
        ))
        .bind(created_before.to_rfc3339())
        .bind(replica_id)
        .bind(now.to_rfc3339())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn set_agent_host(
        &self,
        session_id: &str,
        generation: u64,
        host: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE session_leases SET agent_host = $3 WHERE session_id = $1 AND generation = $2",
        )
        .bind(session_id)
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
        .bind(host)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn host_loads(&self) -> Result<Vec<(String, usize)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT l.agent_host, COUNT(*) FROM session_leases l JOIN sessions s ON s.id = l.session_id \
             WHERE l.agent_host IS NOT NULL AND s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') \
             GROUP BY l.agent_host",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(host, n)| (host, usize::try_from(n).unwrap_or(0)))
            .collect())
    }
}

#[async_trait]
impl ChangeBus for SqliteDb {
    fn is_shared(&self) -> bool {
        false
    }

    async fn notify(&self, _note: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn listen(
        &self,
    ) -> Result<Option<BoxStream<'static, Result<String, StoreError>>>, StoreError> {
        Ok(None)
    }
}
