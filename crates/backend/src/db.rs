//! The database: a sqlx SQLite pool (WAL), created on first start, with the
//! top-level `migrations/` embedded into the binary and applied at start.

use std::borrow::Cow;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

/// The pool every store uses.
pub type Db = sqlx::SqlitePool;

/// The embedded migrations, oldest first: `(version, description, sql)`.
///
/// Listed by hand because `sqlx::migrate!` needs sqlx's `macros` feature, which the
/// workspace does not enable; a new file in `migrations/` needs a line here.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../../migrations/0001_init.sql")),
    (
        2,
        "ask_user_question",
        include_str!("../../../migrations/0002_ask_user_question.sql"),
    ),
    (
        3,
        "session_event_seq",
        include_str!("../../../migrations/0003_session_event_seq.sql"),
    ),
];

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL does not parse.
    #[error("database_url `{url}` is not a valid sqlite URL: {source}")]
    Url {
        /// The URL.
        url: String,
        /// sqlx's complaint.
        source: sqlx::Error,
    },
    /// The parent directory of the file could not be created.
    #[error("cannot create the database directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Connecting failed.
    #[error("cannot open database {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// sqlx's error.
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Opens (creating the file and its directory when missing) and migrates the database.
pub async fn connect(url: &str) -> Result<Db, DbError> {
    let memory = url.contains(":memory:") || url.contains("mode=memory");
    let mut options = SqliteConnectOptions::from_str(url)
        .map_err(|source| DbError::Url {
            url: url.to_owned(),
            source,
        })?
        .create_if_missing(true)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5));
    if !memory {
        options = options.journal_mode(SqliteJournalMode::Wal);
        if let Some(dir) = options.get_filename().parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|source| DbError::Dir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
    }
    // Every connection to `:memory:` is its own database, so a memory pool keeps exactly one.
    let pool_options = if memory {
        SqlitePoolOptions::new()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
    } else {
        SqlitePoolOptions::new().max_connections(8)
    };
    let pool = pool_options
        .connect_with(options)
        .await
        .map_err(|source| DbError::Connect {
            url: url.to_owned(),
            source,
        })?;
    migrator().run(&pool).await?;
    Ok(pool)
}

/// The embedded migrations as a sqlx [`Migrator`].
pub fn migrator() -> Migrator {
    let migrations: Vec<Migration> = MIGRATIONS
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                Cow::Borrowed(*sql),
                false,
            )
        })
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// Now, as the RFC 3339 text every timestamp column holds (UTC, microseconds, so
/// that text order is time order).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// An in-memory, migrated database for tests.
#[cfg(test)]
pub async fn memory() -> Db {
    connect("sqlite::memory:")
        .await
        .expect("in-memory database")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn creates_the_file_and_its_directory_in_wal_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/data/kandev.db");
        let url = format!("sqlite://{}", path.display());
        let pool = connect(&url).await.expect("opens");
        assert!(path.is_file());
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .expect("pragma");
        assert_eq!(mode, "wal");
        pool.close().await;
        // A second start finds the migrations applied and applies nothing twice.
        let pool = connect(&url).await.expect("reopens");
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations")
            .fetch_one(&pool)
            .await
            .expect("count");
        assert_eq!(n, MIGRATIONS.len() as i64);
    }

    #[tokio::test]
    async fn memory_database_has_every_table() {
        let pool = memory().await;
        for table in [
            "tasks",
            "sessions",
            "messages",
            "clarifications",
            "runtime_flag_overrides",
            "notifications",
        ] {
            let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&pool)
                .await
                .expect(table);
            assert_eq!(n, 0);
        }
    }

    #[test]
    fn now_is_sortable_rfc3339() {
        let a = now();
        assert!(chrono::DateTime::parse_from_rfc3339(&a).is_ok());
        assert!(a.ends_with('Z'));
        assert!(now() >= a);
    }
}
