//! The PostgreSQL dialect: one [`PostgresDb`] (a pool) implements every store trait with
//! the shared `sql/`. Instants are `TIMESTAMPTZ`, queried JSON is `JSONB` (a metadata
//! merge is `metadata || patch`, in SQL), documents kept as exchanged (capabilities,
//! flags, agent info) are `JSON`, counters are `BIGINT`.
//! Transactions run at READ COMMITTED: every invariant is a conditional update or a
//! row lock taken by an `UPDATE … RETURNING`, which PostgreSQL re-checks on the row
//! version it locks, so concurrent writers from any process serialize on the row.

#[path = "../sql/mod.rs"]
// Mounted by both dialects on purpose: one text of each query, compiled per engine.
#[allow(clippy::duplicate_mod)]
mod sql;

use sql::records;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Connection, FromRow, PgConnection, PgPool, Postgres, Row, Transaction};

use crate::model::settlement::Effect;
use crate::model::{Clarification, Message, SessionRecord, Settlement, Timestamp};
use crate::store::{ChangeBus, DatabaseOptions, OpenError, SettledRecord, StoreError};

/// The migrations for PostgreSQL, embedded from `migrations/postgres/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The PostgreSQL database behind every store.
#[derive(Debug, Clone)]
pub struct PostgresDb {
    pool: PgPool,
}

/// The engine handle `sql/` implements the stores on, and its sqlx database.
type Db = PostgresDb;
type Engine = Postgres;
/// The connection a transaction runs on.
type Conn = PgConnection;

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

    /// The pool: where reads go (and the engine's own tests and the data copy).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A connection for writes: from the same pool, the server orders writers.
    async fn writer(&self) -> Result<PoolConnection<Postgres>, StoreError> {
        Ok(self.pool.acquire().await?)
    }

    /// The migration versions applied. A pooled connection is checked by the pool before
    /// use, so a server that went away fails here (the caller bounds how long that may take).
    async fn applied_migrations(&self) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(sql::APPLIED)
            .fetch_all(&self.pool)
            .await?)
    }
}

/// A transaction on a writer's connection.
async fn begin(writer: &mut Conn) -> Result<Transaction<'_, Postgres>, StoreError> {
    Ok(writer.begin().await?)
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

/// The fence of a write acting for a session (docs/architecture.md §12), for its
/// `WHERE`: the generation bound at `param` is `NULL` (unfenced) or still the one of the
/// session in column `session`'s lease. The lease row is share-locked, so a claim taking
/// the session over waits for the write, and a write waiting on a claim re-reads the new
/// generation and changes nothing.
fn fenced(session: &str, param: &str) -> String {
    format!(
        "({param}::BIGINT IS NULL OR EXISTS (SELECT 1 FROM session_leases fence \
         WHERE fence.session_id = {session} AND fence.generation = {param} FOR SHARE))"
    )
}

/// The texts of the JSON array bound at `param`, as a subquery.
fn each_text(param: &str) -> String {
    format!("SELECT jsonb_array_elements_text({param})")
}

/// The `[session_id, generation]` pairs of the JSON array bound at `param`, as a table.
fn each_pair(param: &str) -> String {
    format!(
        "(SELECT value ->> 0 AS session_id, (value ->> 1)::BIGINT AS generation \
         FROM jsonb_array_elements({param}))"
    )
}

/// A JSON document bound as text into a `JSON` column: kept as exchanged, key order
/// included (AC-02 compares them byte for byte); a `JSONB` parameter would reorder the
/// keys before the column ever saw them.
fn json_as_sent(param: &str) -> String {
    format!("{param}::text::json")
}

/// The clock of leases, `ms` milliseconds (bound at that parameter) from now: the
/// server's, so replicas whose clocks differ still agree on expiry.
fn now_plus(ms: &str) -> String {
    format!("now() + make_interval(secs => {ms}::DOUBLE PRECISION / 1000)")
}

/// What a webhook claim adds to its row pick: replicas claiming at once skip each other's
/// rows instead of waiting on them (and then taking them twice).
const CLAIM_LOCK: &str = "FOR UPDATE SKIP LOCKED";

/// Records how far events are applied. That only spares a replay after a restart (events
/// are idempotent, a lost update replays a few more), so this commit alone does not wait
/// for the WAL to reach the disk: `set_config(…, true)` is local to the statement's own
/// transaction (docs/decisions/0013). Every record and answer still commits synchronously.
const SET_LAST_EVENT_SEQ: &str = "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)) \
     UPDATE sessions SET last_event_seq = $2 FROM relaxed WHERE id = $1";

/// `append` (an `UPDATE messages … WHERE id = $1`) that also records its session's events
/// applied up to `$4`: one statement, so one round trip and one commit.
fn with_position(append: &str) -> String {
    format!(
        "WITH progress AS (UPDATE sessions SET last_event_seq = $4 \
         WHERE id = (SELECT session_id FROM messages WHERE id = $1)) {append}"
    )
}

/// Merges `patch` into message `id`'s metadata (and replaces its content when given):
/// a shallow `||` in SQL, so concurrent merges of different keys both survive.
async fn merge(
    conn: &mut Conn,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    sqlx::query_as(&format!(
        "UPDATE messages SET metadata = metadata || $2, content = COALESCE($3, content), updated_at = $4 \
         WHERE id = $1 RETURNING {}",
        sql::MESSAGE
    ))
    .bind(id)
    .bind(Json(patch))
    .bind(content)
    .bind(Timestamp::now())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| StoreError::Query(format!("no message `{id}`")))
}

/// One write `statement` (with `RETURNING`) on its own: the row it returned, decoded,
/// once committed (one statement, one commit; SQLite's batches it instead).
async fn write_returning<T>(
    db: &Db,
    statement: String,
    binds: sql::Binds,
) -> Result<Option<T>, StoreError>
where
    T: for<'r> FromRow<'r, PgRow> + Send + Unpin,
{
    Ok(sqlx::query_as_with(&statement, binds.into_arguments())
        .fetch_optional(&mut *db.writer().await?)
        .await?)
}

/// [`merge`] on its own: one statement, no transaction needed.
async fn merge_alone(
    db: &Db,
    id: &str,
    patch: &Map<String, Value>,
    content: Option<&str>,
) -> Result<Message, StoreError> {
    merge(&mut *db.writer().await?, id, patch, content).await
}

/// Stores `opening` at `at` in one statement: one round trip and one commit on the
/// agent's path (docs/decisions/0013); the session's `last_event_seq` moves with it. The
/// stored message, or `None` when nothing was written: the guard sees a committed record
/// with the pending id (a replayed request), the key one racing it (the statement then
/// fails whole, message included); or there is no such session.
async fn open_clarification(
    db: &Db,
    opening: &records::Opening<'_>,
    at: Timestamp,
) -> Result<Option<(Message, Option<SessionRecord>)>, StoreError> {
    // The notification announcing the record, with it or not at all.
    let note = if opening.notification.is_some() {
        format!(
            ", note AS ( \
               INSERT INTO notifications ({}) SELECT $21, $22, $23, $24, $25, $26, $27 FROM msg \
             )",
            sql::notifications::NOTIFICATION_COLUMNS
        )
    } else {
        String::new()
    };
    let sql = format!(
        "WITH seq AS ( \
           UPDATE sessions SET message_seq = message_seq + 1, last_event_seq = COALESCE($20, last_event_seq) \
           WHERE id = $2 AND NOT EXISTS (SELECT 1 FROM clarifications WHERE pending_id = $11) \
           RETURNING message_seq \
         ), msg AS ( \
           INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at, tool_call_id) \
           SELECT $1, $2, $3, seq.message_seq, $4, $5, $6, $7, $8, $9, $9, $10 FROM seq \
           RETURNING {} \
         ), record AS ( \
           INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id, expires_at, on_deadline) \
           SELECT $11, $12, $13, $14, $15, $16, $17, 'pending', $9, msg.id, $18, $19 FROM msg \
         ){note} \
         SELECT * FROM msg",
        sql::MESSAGE
    );
    let binds = opening.binds(at)?.into_arguments();
    let opened = sqlx::query_as_with(&sql, binds)
        .fetch_optional(&mut *db.writer().await?)
        .await;
    match opened {
        Err(sqlx::Error::Database(err)) if err.constraint() == Some("clarifications_pkey") => {
            Ok(None)
        }
        // The count is the trigger's, written after this statement: read back.
        opened => Ok(opened?.map(|message| (message, None))),
    }
}

/// What a settlement writes into its record's message (the record's answer and operator
/// are on the message already when the settlement brings none).
fn settle_patch(s: &Settlement, at: Timestamp) -> Value {
    let mut patch = json!({"status": s.status, "outcome": s.outcome, "settled_at": at});
    if let Some(answer) = &s.answer {
        patch["answer"] = json!(answer);
    }
    if let Some(who) = &s.answered_by {
        patch["answered_by"] = json!(who);
    }
    patch
}

/// The first conditional update of [`Settlement::effect_on`] and its message, in one
/// statement (one round trip, no transaction of its own needed; docs/decisions/0013).
async fn settle_once(
    db: &Db,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    settle_row(&mut *db.writer().await?, pending_id, s).await
}

/// [`settle_once`] on the caller's connection (inside its transaction, if any).
async fn settle_row(
    conn: &mut Conn,
    pending_id: &str,
    s: &Settlement,
) -> Result<Option<SettledRecord>, StoreError> {
    let at = Timestamp::now();
    let message_as_m: Vec<String> = sql::MESSAGE
        .split(", ")
        .map(|c| format!("messages.{c} AS m_{c}"))
        .collect();
    let statement = format!(
        "WITH settled AS ({}), msg AS ( \
           UPDATE messages SET metadata = metadata || $9, updated_at = $5 \
           FROM settled WHERE messages.id = settled.message_id RETURNING {} \
         ) \
         SELECT settled.*, msg.* FROM settled LEFT JOIN msg ON true",
        records::settle_update(),
        message_as_m.join(", "),
    );
    let binds = records::settle_binds(pending_id, s, at)?.and(Json(settle_patch(s, at)))?;
    let row = sqlx::query_with(&statement, binds.into_arguments())
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let record = Clarification::from_row(&row)?;
    let message = match &record.message_id {
        Some(_) => Some(prefixed_message(&row)?),
        None => None,
    };
    Ok(Some(SettledRecord {
        record,
        message,
        effect: Effect::Settle,
        // The count is the trigger's, written after this statement: read back.
        session: None,
    }))
}

/// The message a settlement returned beside its record, its columns prefixed `m_`.
fn prefixed_message(row: &PgRow) -> Result<Message, sqlx::Error> {
    Ok(Message {
        id: row.try_get("m_id")?,
        session_id: row.try_get("m_session_id")?,
        task_id: row.try_get("m_task_id")?,
        seq: row.try_get("m_seq")?,
        kind: row.try_get("m_type")?,
        author_type: row.try_get("m_author_type")?,
        content: row.try_get("m_content")?,
        requests_input: row.try_get("m_requests_input")?,
        metadata: row.try_get("m_metadata")?,
        created_at: row.try_get("m_created_at")?,
        updated_at: row.try_get("m_updated_at")?,
    })
}

/// The `LISTEN/NOTIFY` channel of operator changes.
pub const CHANNEL: &str = "kandev_changes";

/// The bus is `NOTIFY kandev_changes` on the pool and a [`PgListener`] per listener.
#[async_trait]
impl ChangeBus for PostgresDb {
    fn is_shared(&self) -> bool {
        true
    }

    async fn notify(&self, notes: &[String]) -> Result<(), StoreError> {
        // One statement, one transaction: delivered together, in the array's order.
        // (PostgreSQL folds identical notes of one transaction into one; a note names a
        // row to read, so the one left reads the same latest state.)
        sqlx::query(
            "SELECT pg_notify($1, note) FROM unnest($2::text[]) WITH ORDINALITY AS n(note, i) ORDER BY i",
        )
        .bind(CHANNEL)
        .bind(notes)
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
