//! The store contract, tested once and run on every engine: each test here runs on
//! SQLite (a temporary file) and on PostgreSQL (a fresh database of the test cluster,
//! `kandev_testkit::postgres`), as `store::conformance::<area>::<test>::{sqlite, postgres}`.

mod clarifications;
mod health;
mod leases;
mod outbox;
mod sessions;
mod simple;

use std::sync::Arc;

use async_trait::async_trait;

use crate::model::{ClarificationStatus, Outcome, SettledBy, Task};
use crate::store::postgres::PostgresDb;
use crate::store::sqlite::SqliteDb;
use crate::store::{DatabaseOptions, Stores};

/// A database under test, and the few raw writes the contract tests need to stage a
/// state no store method produces.
#[async_trait]
pub(crate) trait Engine: Send + Sync {
    /// Every store on it.
    fn stores(&self) -> Stores;
    /// An independent handle (its own pool) on the same database: a second process.
    async fn second(&self) -> Box<dyn Engine>;
    /// Forces a record's settled facts (status, outcome, settled_by, answered_by).
    async fn stand(
        &self,
        pending_id: &str,
        status: ClarificationStatus,
        outcome: Outcome,
        by: SettledBy,
        answered_by: Option<&str>,
    );
    /// Tries to insert a message with an existing `(session_id, seq)`; whether the
    /// database took it.
    async fn duplicate_seq_accepted(&self, session: &str, task: &str, seq: i64) -> bool;
    /// Whether a clarification's open and settlement return their session: SQLite reads
    /// it in the same hop; PostgreSQL's count is written by a trigger after its one
    /// statement, so the feed reads it back.
    fn returns_sessions(&self) -> bool;
}

struct OnSqlite {
    db: SqliteDb,
    url: String,
    _dir: Arc<tempfile::TempDir>,
}

#[async_trait]
impl Engine for OnSqlite {
    fn stores(&self) -> Stores {
        Stores::from_engine(Arc::new(self.db.clone()))
    }

    async fn second(&self) -> Box<dyn Engine> {
        Box::new(OnSqlite {
            db: SqliteDb::open(&self.url).await.expect("second handle"),
            url: self.url.clone(),
            _dir: Arc::clone(&self._dir),
        })
    }

    fn returns_sessions(&self) -> bool {
        true
    }

    async fn stand(
        &self,
        pending_id: &str,
        status: ClarificationStatus,
        outcome: Outcome,
        by: SettledBy,
        answered_by: Option<&str>,
    ) {
        sqlx::query(
            "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, answered_by = $5 WHERE pending_id = $1",
        )
        .bind(pending_id)
        .bind(status.as_str())
        .bind(outcome.as_str())
        .bind(by.as_str())
        .bind(answered_by)
        .execute(self.db.pool())
        .await
        .expect("stand");
    }

    async fn duplicate_seq_accepted(&self, session: &str, task: &str, seq: i64) -> bool {
        sqlx::query(
            "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, metadata, created_at, updated_at) \
             VALUES ('dup', $1, $2, $3, 'message', 'agent', 'dup', '{}', '', '')",
        )
        .bind(session)
        .bind(task)
        .bind(seq)
        .execute(self.db.pool())
        .await
        .is_ok()
    }
}

struct OnPostgres {
    db: PostgresDb,
    url: String,
}

#[async_trait]
impl Engine for OnPostgres {
    fn stores(&self) -> Stores {
        Stores::from_engine(Arc::new(self.db.clone()))
    }

    async fn second(&self) -> Box<dyn Engine> {
        Box::new(OnPostgres {
            db: PostgresDb::open(&self.url, &DatabaseOptions::default())
                .await
                .expect("second handle"),
            url: self.url.clone(),
        })
    }

    fn returns_sessions(&self) -> bool {
        false
    }

    async fn stand(
        &self,
        pending_id: &str,
        status: ClarificationStatus,
        outcome: Outcome,
        by: SettledBy,
        answered_by: Option<&str>,
    ) {
        sqlx::query(
            "UPDATE clarifications SET status = $2, outcome = $3, settled_by = $4, answered_by = $5 WHERE pending_id = $1",
        )
        .bind(pending_id)
        .bind(status.as_str())
        .bind(outcome.as_str())
        .bind(by.as_str())
        .bind(answered_by)
        .execute(self.db.pool())
        .await
        .expect("stand");
    }

    async fn duplicate_seq_accepted(&self, session: &str, task: &str, seq: i64) -> bool {
        sqlx::query(
            "INSERT INTO messages (id, session_id, task_id, seq, type, author_type, content, metadata, created_at, updated_at) \
             VALUES ('dup', $1, $2, $3, 'message', 'agent', 'dup', '{}', now(), now())",
        )
        .bind(session)
        .bind(task)
        .bind(seq)
        .execute(self.db.pool())
        .await
        .is_ok()
    }
}

/// A migrated SQLite file database.
pub(crate) async fn sqlite() -> Box<dyn Engine> {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("kandev.db").display());
    let db = SqliteDb::open(&url).await.expect("opens");
    Box::new(OnSqlite {
        db,
        url,
        _dir: Arc::new(dir),
    })
}

/// A migrated PostgreSQL database of its own.
pub(crate) async fn postgres(test: &str) -> Box<dyn Engine> {
    let url = kandev_testkit::postgres::database(test).await;
    let db = PostgresDb::open(&url, &DatabaseOptions::default())
        .await
        .expect("opens");
    Box::new(OnPostgres { db, url })
}

/// A task and a session to hang records on: `(stores, task id, session id)`.
pub(crate) async fn seeded(engine: &dyn Engine) -> (Stores, String, String) {
    let stores = engine.stores();
    let task = Task::new("T", "");
    stores.tasks.create_task(&task).await.expect("task");
    let session = stores
        .sessions
        .insert_session(&task.id, "mock")
        .await
        .expect("session");
    (stores, task.id, session.id)
}

/// Runs each named `async fn(&dyn Engine)` of the enclosing module on both engines.
macro_rules! on_every_engine {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    let engine = crate::store::conformance::sqlite().await;
                    super::$name(&*engine).await;
                }

                #[tokio::test]
                #[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
                async fn postgres() {
                    let engine = crate::store::conformance::postgres(stringify!($name)).await;
                    super::$name(&*engine).await;
                }
            }
        )*
    };
}
pub(crate) use on_every_engine;
