//! A real PostgreSQL server for tests, with no docker and no download: the binaries of
//! Debian's `postgresql` package (`initdb`, `postgres`), a cluster in a temporary
//! directory on a free loopback port, started once per test process and gone with it.
//! Each test asks [`database`] for a fresh database of its own; a test that must stop
//! the server starts its own with [`private_cluster`].
//!
//! When PostgreSQL is not installed, a test that needs it fails under `CI=true` and is
//! skipped (with a line saying so) elsewhere: [`database`] returns `None` then.
//!
//! The [`cluster`] trades durability for speed (`fsync=off`): these are tests; the bench
//! takes the [`durable_cluster`], on PostgreSQL's default commit settings. As root,
//! `initdb` and `postgres` run as the `postgres` user.

mod cluster;

pub use cluster::{Cluster, Durability, Unavailable};

use std::sync::OnceLock;

static CLUSTER: OnceLock<Result<Cluster, Unavailable>> = OnceLock::new();
static DURABLE: OnceLock<Result<Cluster, Unavailable>> = OnceLock::new();

/// The process's cluster, started on first use.
pub fn cluster() -> Result<&'static Cluster, &'static Unavailable> {
    CLUSTER.get_or_init(Cluster::start).as_ref()
}

/// The process's [`Durability::Durable`] cluster (PostgreSQL's default commit settings),
/// started on first use: for measurements, where `fsync=off` would flatter the figures.
pub fn durable_cluster() -> Result<&'static Cluster, &'static Unavailable> {
    DURABLE
        .get_or_init(|| Cluster::start_with(Durability::Durable))
        .as_ref()
}

/// Whether a test that needs PostgreSQL must fail when it is missing (`CI=true`).
pub fn required() -> bool {
    required_by(std::env::var("CI").ok().as_deref())
}

fn required_by(ci: Option<&str>) -> bool {
    matches!(ci, Some(v) if v.eq_ignore_ascii_case("true") || v == "1")
}

/// A fresh, empty database's URL (`postgres://postgres@127.0.0.1:PORT/t_…`). `None` when
/// PostgreSQL is unavailable outside CI (the test should return early); panics with the
/// reason under `CI=true`.
pub async fn database(test: &str) -> Option<String> {
    match cluster() {
        Ok(cluster) => Some(
            cluster
                .create_database()
                .await
                .unwrap_or_else(|err| panic!("{test}: cannot create a test database: {err}")),
        ),
        Err(why) if required() => panic!("{test} needs PostgreSQL and CI=true: {why}"),
        Err(why) => {
            eprintln!("SKIPPED {test}: PostgreSQL is not available here ({why})");
            None
        }
    }
}

/// A server of the calling test's own, which it may [`Cluster::stop`] (to see what its
/// clients do when the database goes away) without disturbing the shared one. `None`
/// when PostgreSQL is unavailable outside CI; panics with the reason under `CI=true`.
pub fn private_cluster(test: &str) -> Option<Cluster> {
    match Cluster::start() {
        Ok(cluster) => Some(cluster),
        Err(why) if required() => panic!("{test} needs PostgreSQL and CI=true: {why}"),
        Err(why) => {
            eprintln!("SKIPPED {test}: PostgreSQL is not available here ({why})");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ci_requires_postgres() {
        assert!(required_by(Some("true")));
        assert!(required_by(Some("TRUE")));
        assert!(required_by(Some("1")));
        assert!(!required_by(Some("false")));
        assert!(!required_by(None));
    }

    #[tokio::test]
    async fn two_databases_are_separate_and_usable() {
        let Some(a) = database("two_databases_are_separate_and_usable").await else {
            return;
        };
        let b = database("two_databases_are_separate_and_usable")
            .await
            .expect("second");
        assert_ne!(a, b);
        let pool = sqlx::PgPool::connect(&a).await.expect("connect a");
        sqlx::query("CREATE TABLE t (x BIGINT)")
            .execute(&pool)
            .await
            .expect("create");
        let pool_b = sqlx::PgPool::connect(&b).await.expect("connect b");
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 't'")
                .fetch_one(&pool_b)
                .await
                .expect("count");
        assert_eq!(n, 0, "b does not see a's table");
    }

    #[tokio::test]
    async fn a_private_cluster_stops_and_its_port_then_refuses() {
        let Some(mut cluster) =
            private_cluster("a_private_cluster_stops_and_its_port_then_refuses")
        else {
            return;
        };
        use sqlx::Connection;
        let url = cluster.create_database().await.expect("database");
        let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
        sqlx::query("SELECT 1")
            .execute(&mut conn)
            .await
            .expect("answers");
        assert!(cluster.is_running());
        cluster.stop();
        assert!(!cluster.is_running());
        assert!(
            sqlx::query("SELECT 1").execute(&mut conn).await.is_err(),
            "the open connection was cut"
        );
        assert!(
            sqlx::PgConnection::connect(&url).await.is_err(),
            "no new connection"
        );
    }
}
