//! [`HealthStore`]: what the readiness probe and the metrics ask of the database itself,
//! beside the domain stores.

use async_trait::async_trait;

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

/// The database as a service: reachable, migrated, its pool.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// One cheap round trip that proves the database answers *where kandev opens it*
    /// (for SQLite a fresh connection to the file, not a pooled one that would keep
    /// working on a file already deleted), and reads which migrations are applied.
    async fn probe(&self) -> Result<MigrationState, StoreError>;

    /// The pool's connections.
    fn pool_use(&self) -> PoolUse;
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
}
