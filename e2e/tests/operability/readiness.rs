//! `/healthz` says the process answers; `/readyz` follows the database, its migrations
//! and the drain.

use kandev_testkit::{DEADLINE, Kandev, KandevOptions, poll_until};
use serde_json::Value;

async fn readyz(kandev: &Kandev) -> (u16, Value) {
    let r = kandev.api().get("/readyz").await;
    (r.status, r.body)
}

/// Waits until `/readyz` answers `status`; returns the body.
async fn wait_ready(kandev: &Kandev, status: u16) -> Value {
    poll_until(&format!("/readyz {status}"), DEADLINE, || async {
        let (got, body) = readyz(kandev).await;
        (got == status).then_some(body)
    })
    .await
}

fn assert_up(body: &Value) {
    assert_eq!(body["status"], "ready", "{body}");
    let migrations = &body["checks"]["migrations"];
    assert_eq!(migrations["ok"], true, "{body}");
    assert!(
        migrations["expected"].as_u64().is_some_and(|n| n > 0),
        "{body}"
    );
    assert_eq!(migrations["applied"], migrations["expected"], "{body}");
    assert_eq!(body["checks"]["draining"]["ok"], true, "{body}");
}

#[tokio::test]
async fn readiness_follows_the_sqlite_file_and_its_migrations() {
    let db = tempfile::tempdir().expect("tempdir");
    let data = db.path().join("data");
    let file = data.join("kandev.db");
    let kandev =
        Kandev::start(KandevOptions::new().database(&format!("sqlite://{}", file.display()))).await;
    let (status, body) = readyz(&kandev).await;
    assert_eq!(status, 200, "{body}");
    assert_up(&body);

    // The directory moves away: pooled connections still see the old file, a restart
    // would not. Not ready, though the process is up.
    let away = db.path().join("away");
    std::fs::rename(&data, &away).expect("move the database away");
    let body = wait_ready(&kandev, 503).await;
    assert_eq!(body["status"], "not_ready", "{body}");
    assert_eq!(body["checks"]["database"]["ok"], false, "{body}");
    assert!(body["checks"]["database"]["error"].is_string(), "{body}");
    assert_eq!(kandev.api().get("/healthz").await.status, 200);

    std::fs::rename(&away, &data).expect("move it back");
    assert_up(&wait_ready(&kandev, 200).await);

    // A migration the binary carries is not recorded as applied (a database rolled
    // back under a newer binary): not ready.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display()))
        .await
        .expect("open the file");
    sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)",
    )
    .execute(&pool)
    .await
    .expect("forget one migration");
    pool.close().await;
    let body = wait_ready(&kandev, 503).await;
    let migrations = &body["checks"]["migrations"];
    assert_eq!(body["checks"]["database"]["ok"], true, "{body}");
    assert_eq!(migrations["ok"], false, "{body}");
    assert_eq!(
        migrations["applied"].as_u64().expect("applied") + 1,
        migrations["expected"].as_u64().expect("expected"),
        "{body}"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn readiness_follows_the_postgres_server() {
    let mut cluster =
        kandev_testkit::postgres::private_cluster("readiness_follows_the_postgres_server");
    let url = cluster.create_database().await.expect("a database");
    let kandev = Kandev::start(KandevOptions::new().database(&url)).await;
    let (status, body) = readyz(&kandev).await;
    assert_eq!(status, 200, "{body}");
    assert_up(&body);

    cluster.stop();
    let body = wait_ready(&kandev, 503).await;
    assert_eq!(body["checks"]["database"]["ok"], false, "{body}");
    assert!(body["checks"]["database"]["error"].is_string(), "{body}");
    assert_eq!(kandev.api().get("/healthz").await.status, 200);
}
