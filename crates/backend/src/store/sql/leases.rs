//! [`LeaseStore`]: every change is one conditional statement, so two replicas claiming
//! the same session get one lease between them. Instants come from the engine's clock
//! (`engine::now_plus`): the server's on PostgreSQL, so replicas agree on expiry.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::types::Json;

use super::{bigint, engine};
use crate::model::{SessionLease, TakeOver};
use crate::store::{Claimant, LeaseStore, StoreError};

use engine::Db;

const COLUMNS: &str = "session_id, replica_id, advertise_url, generation, expires_at, agent_host";

/// Milliseconds, as bound for `engine::now_plus`.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The `WHERE` under which a stored lease may be taken by the claimant (`$2`; every
/// form names it, so every statement uses every parameter it is given).
fn may_take(take_over: TakeOver) -> String {
    let now = engine::now_plus("0");
    match take_over {
        TakeOver::Expired => format!(
            "(session_leases.expires_at <= {now} OR (FALSE AND session_leases.replica_id = $2))"
        ),
        TakeOver::ExpiredOrOwn => {
            format!("(session_leases.expires_at <= {now} OR session_leases.replica_id = $2)")
        }
        TakeOver::Any => "(CAST($2 AS TEXT) IS NOT NULL OR TRUE)".to_owned(),
    }
}

#[async_trait]
impl LeaseStore for Db {
    async fn claim(
        &self,
        session_id: &str,
        by: Claimant<'_>,
        take_over: TakeOver,
    ) -> Result<Option<SessionLease>, StoreError> {
        let lease = sqlx::query_as(&format!(
            "INSERT INTO session_leases (session_id, replica_id, advertise_url, generation, expires_at) \
             VALUES ($1, $2, $3, 1, {}) \
             ON CONFLICT (session_id) DO UPDATE SET replica_id = excluded.replica_id, \
               advertise_url = excluded.advertise_url, generation = session_leases.generation + 1, \
               expires_at = excluded.expires_at \
             WHERE {} RETURNING {COLUMNS}",
            engine::now_plus("$4"),
            may_take(take_over)
        ))
        .bind(session_id)
        .bind(by.replica_id)
        .bind(by.advertise_url)
        .bind(millis(by.lease))
        .fetch_optional(&mut *self.writer().await?)
        .await?;
        Ok(lease)
    }

    async fn renew(
        &self,
        replica_id: &str,
        held: &[(String, u64)],
        lease_for: Duration,
    ) -> Result<Vec<String>, StoreError> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let still = sqlx::query_scalar(&format!(
            "UPDATE session_leases SET expires_at = {} FROM {} AS h \
             WHERE session_leases.replica_id = $1 AND session_leases.session_id = h.session_id \
               AND session_leases.generation = h.generation \
             RETURNING session_leases.session_id",
            engine::now_plus("$2"),
            engine::each_pair("$3")
        ))
        .bind(replica_id)
        .bind(millis(lease_for))
        .bind(Json(held))
        .fetch_all(&mut *self.writer().await?)
        .await?;
        Ok(still)
    }

    async fn release(&self, session_id: &str, generation: u64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM session_leases WHERE session_id = $1 AND generation = $2")
            .bind(session_id)
            .bind(bigint(generation))
            .execute(&mut *self.writer().await?)
            .await?;
        Ok(())
    }

    async fn hand_over(&self, session_id: &str, generation: u64) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE session_leases SET expires_at = {} WHERE session_id = $1 AND generation = $2",
            engine::now_plus("0")
        ))
        .bind(session_id)
        .bind(bigint(generation))
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lease(&self, session_id: &str) -> Result<Option<SessionLease>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM session_leases WHERE session_id = $1");
        let lease = sqlx::query_as(&sql)
            .bind(session_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(lease)
    }

    async fn claimable(
        &self,
        replica_id: &str,
        take_over: TakeOver,
        unowned_after: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let ids = sqlx::query_scalar(&format!(
            "SELECT s.id FROM sessions s LEFT JOIN session_leases ON session_leases.session_id = s.id \
             WHERE s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') AND ( \
               (session_leases.session_id IS NULL AND s.created_at <= {}) \
               OR (session_leases.session_id IS NOT NULL AND {})) \
             ORDER BY s.created_at, s.id",
            engine::now_plus("$1"),
            may_take(take_over)
        ))
        .bind(-millis(unowned_after))
        .bind(replica_id)
        .fetch_all(self.pool())
        .await?;
        Ok(ids)
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
        .bind(bigint(generation))
        .bind(host)
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    async fn host_loads(&self) -> Result<Vec<(String, usize)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT l.agent_host, COUNT(*) FROM session_leases l JOIN sessions s ON s.id = l.session_id \
             WHERE l.agent_host IS NOT NULL AND s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') \
             GROUP BY l.agent_host",
        )
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(host, n)| (host, usize::try_from(n).unwrap_or(0)))
            .collect())
    }
}
