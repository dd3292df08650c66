//! The database engine under test. `TEST_DATABASE=postgres` runs the suite on a fresh
//! database of the throwaway PostgreSQL cluster (`kandev_testkit::postgres`) per kandev; otherwise
//! each kandev gets an SQLite file in its own directory.

use std::path::Path;

/// Whether this run is on PostgreSQL (`TEST_DATABASE=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("TEST_DATABASE").is_ok_and(|v| v == "postgres")
}

/// A fresh, empty database of the engine under test: a file under `dir`, or a new
/// database of the test cluster (which must be there when asked for).
pub async fn fresh_database(dir: &Path) -> String {
    if on_postgres() {
        let cluster = crate::postgres::cluster().unwrap_or_else(|why| {
            panic!("TEST_DATABASE=postgres but PostgreSQL is unavailable: {why}")
        });
        return cluster
            .create_database()
            .await
            .expect("a fresh PostgreSQL database");
    }
    format!("sqlite://{}", dir.join("kandev.db").display())
}
