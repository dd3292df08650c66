//! The stores on PostgreSQL: one [`PostgresDb`] (a pool) implements every store trait,
//! one file per domain, beside the SQLite ones. Instants are `TIMESTAMPTZ`, queried JSON is
//! `JSONB` (a metadata merge is `metadata || patch`, in SQL), documents kept as exchanged
//! (capabilities, flags, agent info) are `JSON`, counters are `BIGINT`.
//! Transactions run at READ COMMITTED: every invariant is a conditional update or a
//! row lock taken by an `UPDATE … RETURNING`, which PostgreSQL re-checks on the row
//! version it locks, so concurrent writers from any process serialize on the row.

mod clarifications;
mod flags;
mod health;
mod leases;
mod messages;
mod notifications;
mod outbox;
mod questions;
mod sessions;
mod tasks;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Row, Transaction};

use crate::model::Timestamp;
use crate::store::{DatabaseOptions, OpenError, StoreError};

/// The migrations for PostgreSQL, embedded from `migrations/postgres/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The PostgreSQL database behind every store.
#[derive(Debug, Clone)]
pub struct PostgresDb {
    pool: PgPool,
}

type Tx = Transaction<'static, Postgres>;

/// How long connecting may take before start-up gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled connection idle this long is pinged before it is handed out.
const IDLE_PING_AFTER: Duration = Duration::from_secs(1);

impl PostgresDb {
    /// Connects to `url` (the database must exist) and migrates it.
    pub async fn open(url: &str, options: &DatabaseOptions) -> Result<Self, OpenError> {
        let shown = crate::store::redact_url(url);
        let connect = PgConnectOptions::from_str(url)
            .map_err(|err| OpenError::Url {
                url: shown.clone(),
                message: format!("not a valid postgres URL: {err}"),
            })?
            .options([(
                "statement_timeout",
                format!("{}ms", options.statement_timeout.as_millis()),
            )]);
        let refused = |message: String| OpenError::Connect {
            url: shown.clone(),
            message,
        };
        // One direct connection first: a pool retries until its timeout and then reports
        // only that it timed out, where this names the cause (no server, no database, …).
        let probe = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&connect))
            .await
            .map_err(|_| {
                refused(format!(
                    "no answer from the server within {}s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|err| refused(connect_message(&err)))?;
        let _ = probe.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(options.pool_size)
            .acquire_timeout(CONNECT_TIMEOUT)
            // sqlx pings every connection it takes back, so one taken out again soon after
            // is known to be live: only one idle for a while (the server may have gone in
            // between) costs the round trip of a ping before it is handed out.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_PING_AFTER {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(connect)
            .await
            .map_err(|err| refused(connect_message(&err)))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|err| OpenError::Migrate(err.to_string()))?;
        log_durability(&pool).await;
        Ok(Self { pool })
    }

    /// The pool, for the engine's own tests and the data copy.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(self.pool.begin().await?)
    }
}

/// Logs what a commit survives, as the server reports it (the bench quotes this line).
async fn log_durability(pool: &PgPool) {
    let settings: Option<(String, String, String)> = sqlx::query_as(
        "SELECT current_setting('synchronous_commit'), current_setting('fsync'), \
         current_setting('full_page_writes')",
    )
    .fetch_optional(pool)
    .await
    .ok()
    .flatten();
    let (synchronous_commit, fsync, full_page_writes) = settings.unwrap_or_default();
    tracing::debug!(
        engine = "postgres",
        synchronous_commit = %synchronous_commit,
        fsync = %fsync,
        full_page_writes = %full_page_writes,
        "database opened"
    );
}

/// One line for a failed connection: the server's own words when it answered.
fn connect_message(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::Io(io) => format!("the server cannot be reached ({io})"),
        other => other.to_string(),
    }
}

/// A timestamp column.
fn time(row: &PgRow, column: &str) -> Result<Timestamp, StoreError> {
    let at: DateTime<Utc> = row.try_get(column)?;
    Ok(Timestamp::from(at))
}

/// A nullable timestamp column.
fn time_opt(row: &PgRow, column: &str) -> Result<Option<Timestamp>, StoreError> {
    let at: Option<DateTime<Utc>> = row.try_get(column)?;
    Ok(at.map(Timestamp::from))
}

/// A JSONB column decoded into `T`.
fn json<T: serde::de::DeserializeOwned>(row: &PgRow, column: &str) -> Result<T, StoreError> {
    let value: serde_json::Value = row.try_get(column)?;
    serde_json::from_value(value).map_err(|err| StoreError::Corrupt(format!("{column}: {err}")))
}

/// A nullable JSONB column decoded into `T`.
fn json_opt<T: serde::de::DeserializeOwned>(
    row: &PgRow,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let value: Option<serde_json::Value> = row.try_get(column)?;
    value
        .map(|v| {
            serde_json::from_value(v).map_err(|err| StoreError::Corrupt(format!("{column}: {err}")))
        })
        .transpose()
}

/// A column holding one of a closed set of names.
fn name<T>(row: &PgRow, column: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    parse(&text).ok_or_else(|| StoreError::Corrupt(format!("{column}: unknown value `{text}`")))
}

/// A nullable column holding one of a closed set of names.
fn name_opt<T>(
    row: &PgRow,
    column: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        parse(&t).ok_or_else(|| StoreError::Corrupt(format!("{column}: unknown value `{t}`")))
    })
    .transpose()
}

/// The fence of a write acting for a session (docs/architecture.md §12), for its `WHERE`: the
/// generation bound at `param` is `NULL` (unfenced) or still the one of the session in
/// column `session`'s lease. The lease row is share-locked, so a claim taking the session over waits for the write, and a write waiting on a claim re-reads the new generation and changes nothing.
fn fenced(session: &str, param: &str) -> String {
    format!(
        "({param}::BIGINT IS NULL OR EXISTS (SELECT 1 FROM session_leases fence \
         WHERE fence.session_id = {session} AND fence.generation = {param} FOR SHARE))"
    )
}
