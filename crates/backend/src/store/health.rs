//! [`HealthStore`]: what the readiness probe and the metrics ask of the database itself,
//! beside the domain stores.

use async_trait::async_trait;

use crate::model::{SessionState, Source};
use crate::store::StoreError;

/// The migrations the binary carries, against those the database records as applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationState {
    /// Migrations this binary embeds.
    pub expected: usize,
    /// Of those, how many the database records as applied successfully.
    pub applied: usize,
}

impl MigrationState {
    /// Whether every migration the binary knows has been applied.
    pub fn complete(&self) -> bool {
        self.applied == self.expected
    }

    /// Compares the up migrations `migrator` carries with the `applied` versions.
    pub(crate) fn of_migrator(migrator: &sqlx::migrate::Migrator, applied: &[i64]) -> Self {
        Self::of(
            migrator
                .iter()
                .filter(|m| m.migration_type.is_up_migration())
                .map(|m| m.version),
            applied,
        )
    }

    /// Compares the binary's migration `versions` with the `applied` ones.
    pub(crate) fn of(versions: impl Iterator<Item = i64>, applied: &[i64]) -> Self {
        let mut expected = 0;
        let mut found = 0;
        for version in versions {
            expected += 1;
            if applied.contains(&version) {
                found += 1;
            }
        }
        Self {
            expected,
            applied: found,
        }
    }
}

/// How the connection pool is used right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolUse {
    /// Connections open (idle and in use).
    pub open: u32,
    /// Of those, idle.
    pub idle: u32,
    /// The most the pool opens.
    pub max: u32,
}

impl PoolUse {
    /// How `pool` is used now.
    pub(crate) fn of<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> Self {
        Self {
            open: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        }
    }
}

/// What the database holds right now, for the metrics' gauges. The same on every
/// replica of one database.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gauges {
    /// Pending clarifications per source (sources with none are left out).
    pub pending: Vec<(Source, u64)>,
    /// Live sessions per state as shown (`WAITING_FOR_INPUT` while one has a pending
    /// clarification); ended sessions are not counted.
    pub sessions: Vec<(SessionState, u64)>,
}

impl Gauges {
    /// Adds `n` sessions stored as `stored`, `waiting` when one of theirs is pending.
    pub(crate) fn add_sessions(&mut self, stored: SessionState, waiting: bool, n: u64) {
        let shown = stored.shown(usize::from(waiting));
        match self.sessions.iter_mut().find(|(state, _)| *state == shown) {
            Some((_, count)) => *count += n,
            None => self.sessions.push((shown, n)),
        }
    }
}

/// The database as a service: reachable, migrated, its pool.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// One cheap round trip that proves the database answers *where kandev opens it*
    /// (for SQLite a fresh connection to the file, not a pooled one that would keep
    /// working on a file already deleted), and reads which migrations are applied.
    async fn probe(&self) -> Result<MigrationState, StoreError>;

    /// The pool's connections.
    fn pool_use(&self) -> PoolUse;

    /// Counts for the gauges (two grouped queries).
    async fn gauges(&self) -> Result<Gauges, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migration_missing_from_the_database_is_incomplete() {
        let all = MigrationState::of([1, 2, 3].into_iter(), &[1, 2, 3]);
        assert_eq!(
            all,
            MigrationState {
                expected: 3,
                applied: 3
            }
        );
        assert!(all.complete());
        let behind = MigrationState::of([1, 2, 3].into_iter(), &[1, 2]);
        assert!(!behind.complete());
        // A version the binary does not know (a newer binary migrated) does not count.
        let other = MigrationState::of([1, 2].into_iter(), &[1, 7]);
        assert_eq!(other.applied, 1);
    }

    #[test]
    fn a_live_session_with_a_pending_one_counts_as_waiting() {
        let mut gauges = Gauges::default();
        gauges.add_sessions(SessionState::Running, true, 2);
        gauges.add_sessions(SessionState::Idle, true, 1);
        gauges.add_sessions(SessionState::Idle, false, 3);
        gauges.add_sessions(SessionState::WaitingForInput, false, 1);
        assert_eq!(
            gauges.sessions,
            [
                (SessionState::WaitingForInput, 3),
                (SessionState::Idle, 3),
                (SessionState::Running, 1),
            ]
        );
    }
}
