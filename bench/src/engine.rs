//! The database engines the stack benches run on, and what a commit survives on each.
//!
//! SQLite is the harness's file in kandev's own directory; PostgreSQL is a fresh
//! database of the bench's local cluster, started on PostgreSQL's default commit
//! settings (`kandev_testkit::postgres::durable_cluster`: `fsync`, `synchronous_commit` and
//! `full_page_writes` on). Either way the settings the report states are the ones
//! kandev read from its own connections at startup (its `database opened` log line).

/// One engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The embedded default.
    Sqlite,
    /// A server database (what a team deploys).
    Postgres,
}

impl Engine {
    /// Both, in report column order.
    pub const ALL: [Engine; 2] = [Engine::Sqlite, Engine::Postgres];

    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        }
    }

    /// The key in `report.json` and on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    /// Parses a command-line key.
    pub fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.key() == key)
    }

    /// The database URL for one kandev: `None` is the harness's SQLite file in kandev's
    /// directory; PostgreSQL gets a fresh database of the durable cluster.
    pub async fn database(self) -> Result<Option<String>, String> {
        match self {
            Self::Sqlite => Ok(None),
            Self::Postgres => {
                let cluster = kandev_testkit::postgres::durable_cluster()
                    .map_err(|why| format!("PostgreSQL is unavailable: {why}"))?;
                cluster
                    .create_database()
                    .await
                    .map(Some)
                    .map_err(|err| format!("PostgreSQL: cannot create a database: {err}"))
            }
        }
    }
}

/// The fields of kandev's `database opened` line (`engine=sqlite journal_mode=wal
/// synchronous=full`), quotes removed; `None` when the log has no such line.
pub fn durability_from_log(log: &str) -> Option<String> {
    const MARK: &str = "database opened ";
    let line = log.lines().find(|line| line.contains(MARK))?;
    let fields = &line[line.find(MARK)? + MARK.len()..];
    Some(fields.replace('"', "").trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_the_durability_line_is_read_from_a_log() {
        for engine in Engine::ALL {
            assert_eq!(Engine::parse(engine.key()), Some(engine));
        }
        assert_eq!(Engine::parse("mysql"), None);
        let log = "2026-01-01T00:00:00Z  WARN x: y\n\
            2026-01-01T00:00:00Z  INFO kandev_backend::store::sqlite: database opened engine=\"sqlite\" journal_mode=wal synchronous=\"full\"\n";
        assert_eq!(
            durability_from_log(log).as_deref(),
            Some("engine=sqlite journal_mode=wal synchronous=full")
        );
        assert_eq!(durability_from_log("nothing"), None);
    }
}
