//! A real PostgreSQL server for tests, with no docker and no download: the binaries of
//! Debian's `postgresql` package (`initdb`, `postgres`), a cluster in a temporary
//! directory on a free loopback port, started once per test process and gone with it.
//! Each test asks [`database`] for a fresh database of its own; a test that must stop
//! the server starts its own with [`private_cluster`].
//!
//! A test that needs PostgreSQL is marked `#[ignore = "needs PostgreSQL …"]`: the test
//! runner reports it as ignored unless ignored tests are asked for (`just test` asks), and
//! then it fails when PostgreSQL is missing. No path skips and passes.
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

/// The process's cluster, for a test that needs PostgreSQL.
///
/// # Panics
/// When PostgreSQL cannot start here, with the reason. A test that needs it is marked
/// `#[ignore = "needs PostgreSQL …"]`, so the test runner reports it as ignored unless it
/// is asked for (`just test` runs ignored tests); it never passes without running.
pub fn shared() -> &'static Cluster {
    cluster().unwrap_or_else(|why| panic!("this test needs PostgreSQL (`just pg-deps` installs it): {why}"))
}

/// A fresh, empty database's URL (`postgres://postgres@127.0.0.1:PORT/t_…`).
///
/// # Panics
/// When PostgreSQL is unavailable ([`shared`]) or the database cannot be created.
pub async fn database(test: &str) -> String {
    shared()
        .create_database()
        .await
        .unwrap_or_else(|err| panic!("{test}: cannot create a test database: {err}"))
}

/// A server of the calling test's own, which it may [`Cluster::stop`] (to see what its
/// clients do when the database goes away) without disturbing the shared one.
///
/// # Panics
/// When PostgreSQL cannot start here.
pub fn private_cluster(test: &str) -> Cluster {
    Cluster::start().unwrap_or_else(|why| {
        panic!("{test} needs PostgreSQL (`just pg-deps` installs it): {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
    async fn two_databases_are_separate_and_usable() {
        let a = database("two_databases_are_separate_and_usable").await;
        let b = database("two_databases_are_separate_and_usable").await;
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
    #[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
    async fn a_private_cluster_stops_and_its_port_then_refuses() {
        let mut cluster = private_cluster("a_private_cluster_stops_and_its_port_then_refuses");
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
