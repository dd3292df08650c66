//! `kandev migrate-db`: a kandev on SQLite with tasks, sessions, messages,
//! clarifications and notifications is copied into PostgreSQL, and a kandev on the
//! PostgreSQL database serves the same records. Needs the PostgreSQL test cluster (a
//! failure under `CI=true` when it is missing).

use std::process::Output;

use kandev_testkit::{Kandev, KandevOptions, kandev_command};
use serde_json::{Value, json};

fn red() -> Value {
    json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]})
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

/// `kandev migrate-db --from … --to …`, with no `KANDEV_*` of the test runner.
fn migrate_db(from: &str, to: &str) -> Output {
    kandev_command()
        .args(["migrate-db", "--from", from, "--to", to])
        .output()
        .expect("run kandev migrate-db")
}

/// A kandev on the database at `url`.
async fn on(url: &str) -> Kandev {
    Kandev::start(KandevOptions::new().database(url)).await
}

/// `GET path` on kandev's API, asserting the 200.
async fn get(kandev: &Kandev, path: &str) -> Value {
    kandev.api().get(path).await.expect_status(200, path)
}

/// Everything an operator can read: the board, and each session with its transcript,
/// clarifications and the notifications.
async fn records(kandev: &Kandev) -> Value {
    let board = get(kandev, "/api/v1/tasks").await;
    let mut sessions = Vec::new();
    for task in board["tasks"].as_array().expect("tasks") {
        let detail = kandev.task(&id(task)).await;
        for session in detail["sessions"].as_array().expect("sessions") {
            let sid = id(session);
            sessions.push(json!({
                "session": kandev.session(&sid).await,
                "messages": kandev.messages(&sid).await,
                "clarifications": kandev.clarifications(&sid, None).await,
            }));
        }
    }
    json!({
        "board": board,
        "sessions": sessions,
        "notifications": kandev.notifications().await,
    })
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn migrate_db_copies_an_sqlite_kandev_into_postgres_and_kandev_serves_the_same_records() {
    let postgres = kandev_testkit::postgres::database("migrate_db_copies").await;
    let data = tempfile::tempdir().expect("data dir");
    let sqlite = format!("sqlite://{}", data.path().join("kandev.db").display());

    let mut before = on(&sqlite).await;
    before.flag_on().await;
    let task = id(&before.create_task("Pick a colour").await);
    let answered = before.start_session(&task, "mock", Some("Pick")).await;
    let pending = before.wait_pending(&id(&answered), 1).await;
    let pending_id = pending[0]["pending_id"].as_str().expect("pending id");
    assert_eq!(before.respond(pending_id, &red()).await.status, 200);
    before
        .wait_agent_text(&id(&answered), "You picked Red.")
        .await;
    before.wait_session_state(&id(&answered), "IDLE").await;
    // A streamed reply (a message built by hundreds of appends), compared whole below.
    let streamed = id(&before.create_task("Stream").await);
    let streaming = before
        .start_session(&streamed, "mock", Some("/e2e:e2e-stream"))
        .await;
    before.wait_session_state(&id(&streaming), "IDLE").await;
    // A second task whose question is still open when kandev stops.
    let other = id(&before.create_task("Left waiting").await);
    let waiting = before.start_session(&other, "mock", Some("Pick")).await;
    before.wait_pending(&id(&waiting), 1).await;
    assert_eq!(before.terminate().await, Some(0), "{}", before.log());
    // The record as kandev left it, read back by a kandev on the same file.
    let reread = on(&sqlite).await;
    let expected = records(&reread).await;
    drop(reread);

    let out = migrate_db(&sqlite, &postgres);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("3 tasks, 3 sessions") && stdout.contains("2 clarifications"),
        "the report counts what was copied: {stdout}"
    );

    let after = on(&postgres).await;
    let served = records(&after).await;
    assert_eq!(
        served, expected,
        "PostgreSQL serves the records SQLite held"
    );
    assert_eq!(
        after.flag().await["source"],
        "override",
        "the Settings override moved too"
    );
    let record = after.clarification(pending_id).await;
    assert_eq!(record["status"], "answered", "{record}");
    assert_eq!(
        record["answer"]["answers"][0]["selected_options"],
        json!(["Red"]),
        "{record}"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn migrate_db_refuses_a_target_that_holds_records_and_writes_nothing() {
    let postgres = kandev_testkit::postgres::database("migrate_db_refuses").await;
    let data = tempfile::tempdir().expect("data dir");
    let sqlite = format!("sqlite://{}", data.path().join("kandev.db").display());
    let mut source = on(&sqlite).await;
    source.create_task("Source task").await;
    source.terminate().await;
    let mut target = on(&postgres).await;
    target.create_task("Already there").await;
    target.terminate().await;

    let out = migrate_db(&sqlite, &postgres);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "kandev: migrate-db: the target already holds 1 row(s) in `tasks`: migrate-db copies into an empty database only"
    );
    let target = on(&postgres).await;
    let titles: Vec<Value> = get(&target, "/api/v1/tasks").await["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["title"].clone())
        .collect();
    assert_eq!(titles, vec![json!("Already there")]);

    let backwards = migrate_db("postgres://kandev:s3cret@127.0.0.1:9/kandev", &sqlite);
    assert_eq!(backwards.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&backwards.stderr).trim(),
        "kandev: migrate-db: migrate-db copies from sqlite: to postgres://; --from is postgres://kandev:***@127.0.0.1:9/kandev",
        "one line, and the password stays out of it"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn migrate_db_counts_a_pending_record_once() {
    let postgres = kandev_testkit::postgres::database("migrate_db_pending").await;
    let data = tempfile::tempdir().expect("data dir");
    let sqlite = format!("sqlite://{}", data.path().join("kandev.db").display());
    let mut before = on(&sqlite).await;
    before.flag_on().await;
    let task = id(&before.create_task("Left waiting").await);
    let waiting = before.start_session(&task, "mock", Some("Pick")).await;
    before.wait_pending(&id(&waiting), 1).await;
    // A crash leaves the record pending in the file (a clean stop would settle it).
    before.kill();

    let out = migrate_db(&sqlite, &postgres);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The session's count is the target's own (its triggers counted the copied record);
    // copied on top of it, it would count twice.
    let pool = sqlx::PgPool::connect(&postgres).await.expect("connect");
    let counts: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT pending, (SELECT COUNT(*) FROM clarifications c \
           WHERE c.session_id = s.id AND c.status = 'pending') FROM sessions s",
    )
    .fetch_all(&pool)
    .await
    .expect("counts");
    pool.close().await;
    assert_eq!(counts, [(1, 1)]);
}
