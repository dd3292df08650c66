//! [`LeaseStore`] and [`ChangeBus`] on PostgreSQL. Lease instants come from the
//! server's clock (`now()`), so replicas whose clocks differ still agree on expiry. The
//! bus is `NOTIFY kandev_changes` on the pool and a [`PgListener`] per listener.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use sqlx::Row;
use sqlx::postgres::{PgListener, PgRow};

use super::{PostgresDb, time};
use crate::model::{SessionLease, TakeOver};
use crate::store::{ChangeBus, Claimant, LeaseStore, StoreError};

/// The `LISTEN/NOTIFY` channel of operator changes.
pub const CHANNEL: &str = "kandev_changes";

const COLUMNS: &str = "session_id, replica_id, advertise_url, generation, expires_at, agent_host";

fn lease(row: &PgRow) -> Result<SessionLease, StoreError> {
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

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The `WHERE` under which a stored lease may be taken by the claimant (`$2`; every
/// form names it, so every statement uses every parameter it is given).
fn may_take(take_over: TakeOver) -> &'static str {
    match take_over {
        TakeOver::Expired => {
            "(session_leases.expires_at <= now() OR (FALSE AND session_leases.replica_id = $2))"
        }
        TakeOver::ExpiredOrOwn => {
            "(session_leases.expires_at <= now() OR session_leases.replica_id = $2)"
        }
        TakeOver::Any => "($2::TEXT IS NOT NULL OR TRUE)",
    }
}

#[async_trait]
impl LeaseStore for PostgresDb {
    async fn claim(
        &self,
        session_id: &str,
        by: Claimant<'_>,
        take_over: TakeOver,
    ) -> Result<Option<SessionLease>, StoreError> {
        let row = sqlx::query(&format!(
            "INSERT INTO session_leases (session_id, replica_id, advertise_url, generation, expires_at) \
             VALUES ($1, $2, $3, 1, now() + make_interval(secs => $4::DOUBLE PRECISION / 1000)) \
             ON CONFLICT (session_id) DO UPDATE SET replica_id = EXCLUDED.replica_id, \
               advertise_url = EXCLUDED.advertise_url, generation = session_leases.generation + 1, \
               expires_at = EXCLUDED.expires_at \
             WHERE {} RETURNING {COLUMNS}",
            may_take(take_over)
        ))
        .bind(session_id)
        .bind(by.replica_id)
        .bind(by.advertise_url)
        .bind(millis(by.lease))
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
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
        let generations: Vec<i64> = held
            .iter()
            .map(|(_, g)| i64::try_from(*g).unwrap_or(i64::MAX))
            .collect();
        let rows: Vec<(String,)> = sqlx::query_as(
            "UPDATE session_leases l \
             SET expires_at = now() + make_interval(secs => $2::DOUBLE PRECISION / 1000) \
             FROM UNNEST($3::TEXT[], $4::BIGINT[]) AS h(session_id, generation) \
             WHERE l.replica_id = $1 AND l.session_id = h.session_id AND l.generation = h.generation \
             RETURNING l.session_id",
        )
        .bind(replica_id)
        .bind(millis(lease_for))
        .bind(&ids)
        .bind(&generations)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
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
            "UPDATE session_leases SET expires_at = now() WHERE session_id = $1 AND generation = $2",
        )
        .bind(session_id)
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
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
        let rows: Vec<(String,)> = sqlx::query_as(&format!(
            "SELECT s.id FROM sessions s LEFT JOIN session_leases session_leases ON session_leases.session_id = s.id \
             WHERE s.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') AND ( \
               (session_leases.session_id IS NULL AND s.created_at <= now() - make_interval(secs => $1::DOUBLE PRECISION / 1000)) \
               OR (session_leases.session_id IS NOT NULL AND {})) \
             ORDER BY s.created_at, s.id",
            may_take(take_over)
        ))
        .bind(millis(unowned_after))
        .bind(replica_id)
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
impl ChangeBus for PostgresDb {
    fn is_shared(&self) -> bool {
        true
    }

    async fn notify(&self, note: &str) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(note)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn listen(
        &self,
    ) -> Result<Option<BoxStream<'static, Result<String, StoreError>>>, StoreError> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        // `try_recv` says `None` when the connection broke (it reconnects on the next
        // call, and notes sent meanwhile are lost): that becomes an error item, so the
        // listener knows it may have missed something.
        let notes = futures::stream::unfold(listener, |mut listener| async move {
            let item = match listener.try_recv().await {
                Ok(Some(note)) => Ok(note.payload().to_owned()),
                Ok(None) => Err(StoreError::Unavailable(
                    "the listening connection broke; notes may have been missed".into(),
                )),
                Err(err) => {
                    // Do not spin while the server is away.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Err(StoreError::from(err))
                }
            };
            Some((item, listener))
        });
        Ok(Some(notes.boxed()))
    }
}
