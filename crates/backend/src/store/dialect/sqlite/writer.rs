//! SQLite's one writer connection, taken in turns.
//!
//! A file database's writer is one connection held for the life of the database, behind
//! a fair async lock: writers queue in order, as they did on a pool of one, but a turn
//! ends without sqlx's release ping. That ping (a hop to the connection's worker thread
//! and back, on a task of its own) came after every statement, and the next writer
//! waited for it: writes that queue (streamed text) took twice as long and twice the CPU
//! (docs/decisions/0022).
//!
//! An in-memory database is its one connection, which its readers share: that one stays
//! in its pool, as before.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, MutexGuard};

use crate::store::StoreError;

/// How long a writer waits for its turn before it reports the database unavailable (a
/// pool's default wait, which the writer had before).
const TURN_TIMEOUT: Duration = Duration::from_secs(30);

/// The one writer connection.
#[derive(Debug, Clone)]
pub(super) enum Writer {
    /// A file database's: held, with how to open it again.
    Held {
        /// The connection.
        connection: Arc<Mutex<SqliteConnection>>,
        /// How it was opened (a connection not worth trusting is replaced).
        options: Arc<SqliteConnectOptions>,
    },
    /// An in-memory database's only connection, in the pool its readers share.
    Shared(SqlitePool),
}

/// One writer's turn on the connection; the next waits until it is dropped.
pub(super) enum Turn<'a> {
    /// On a held connection.
    Held {
        /// The connection, locked.
        connection: MutexGuard<'a, SqliteConnection>,
        /// How to open it again.
        options: &'a SqliteConnectOptions,
    },
    /// On the in-memory database's pooled connection.
    Shared(PoolConnection<Sqlite>),
}

impl Writer {
    /// Opens a file database's writer with `options`.
    pub(super) async fn open(options: SqliteConnectOptions) -> Result<Self, sqlx::Error> {
        let connection = SqliteConnection::connect_with(&options).await?;
        Ok(Self::Held {
            connection: Arc::new(Mutex::new(connection)),
            options: Arc::new(options),
        })
    }

    /// Waits for the writer's turn (in order of asking).
    pub(super) async fn turn(&self) -> Result<Turn<'_>, StoreError> {
        let busy = || StoreError::Unavailable("the database writer stayed busy".into());
        match self {
            Self::Held {
                connection,
                options,
            } => {
                let connection = tokio::time::timeout(TURN_TIMEOUT, connection.lock())
                    .await
                    .map_err(|_| busy())?;
                Ok(Turn::Held {
                    connection,
                    options,
                })
            }
            Self::Shared(pool) => Ok(Turn::Shared(pool.acquire().await?)),
        }
    }
}

impl Turn<'_> {
    /// Replaces a connection not worth trusting any more (a failed rollback) with a
    /// fresh one: at once when it is held, when the turn ends when it is pooled.
    pub(super) async fn renew(&mut self) {
        match self {
            Turn::Held {
                connection,
                options,
            } => match SqliteConnection::connect_with(options).await {
                Ok(fresh) => {
                    let old = std::mem::replace(&mut **connection, fresh);
                    let _ = old.close().await;
                }
                Err(err) => {
                    tracing::error!(error = %err, "cannot reopen the database writer");
                }
            },
            Turn::Shared(connection) => connection.close_on_drop(),
        }
    }
}

impl Deref for Turn<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        match self {
            Turn::Held { connection, .. } => connection,
            Turn::Shared(connection) => connection,
        }
    }
}

impl DerefMut for Turn<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            Turn::Held { connection, .. } => connection,
            Turn::Shared(connection) => connection,
        }
    }
}
