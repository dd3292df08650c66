//! A kandev restart: what it reconciles, locally and under a remote executor.

use super::*;

/// A fresh runtime on the same database plays the role of the next process: it
/// reconciles (which must come to `expected`) and serves.
async fn restart(started: &Started, config: Config, expected: Reconciled) -> Api {
    let state = &started.api.state;
    let next = AppState::new(
        state.stores.clone(),
        config,
        kandev_flags::FlagService::new(
            kandev_flags::Profile::Dev,
            kandev_flags::Profiles::empty(),
            BTreeMap::<String, String>::new(),
            crate::store::StoredOverrides(state.stores.flag_overrides.clone()),
        ),
        started.connector.clone(),
    );
    let reconciled = next.sessions.reconcile_after_restart().await;
    assert_eq!(reconciled.expect("reconcile"), expected);
    api(next)
}

/// A question's open commits the session's stream position with its record, and no
/// write of its own follows: a trigger logs every write of `last_event_seq`.
#[tokio::test]
async fn an_opened_question_stores_the_stream_position_in_its_own_commit() {
    let db = crate::store::sqlite::SqliteDb::memory()
        .await
        .expect("in-memory database");
    sqlx::raw_sql(
        "CREATE TABLE seq_writes (seq INTEGER); \
         CREATE TRIGGER seq_written AFTER UPDATE OF last_event_seq ON sessions \
         BEGIN INSERT INTO seq_writes VALUES (NEW.last_event_seq); END",
    )
    .execute(db.pool())
    .await
    .expect("trigger");
    let stores = crate::store::Stores::from_engine(Arc::new(db.clone()));
    let (state, connector) = crate::testing::app_on(stores).await;
    let api = api(state);
    let task = task(&api).await;
    let id = session(&api, &task, None).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let link = connector.link(&id);
    for (seq, pending_id) in [(5, "p-1"), (6, "p-2")] {
        *link.delivered.lock().expect("lock") = Some(seq);
        link.push(elicitation(pending_id, "Pick"));
        eventually("the record stored", || async {
            let stores = &api.state.stores;
            stores
                .clarifications
                .clarification(pending_id)
                .await
                .expect("read")
        })
        .await;
    }
    // The second record is stored, so the consumer is past whatever followed the first.
    let writes: Vec<Option<i64>> = sqlx::query_scalar("SELECT seq FROM seq_writes ORDER BY rowid")
        .fetch_all(db.pool())
        .await
        .expect("writes");
    assert_eq!(writes, [Some(5), Some(6)], "one write each, in the open");
}

fn remote_config() -> Config {
    Config {
        executor: crate::agent_link::ExecutorConfig::remote("ws://127.0.0.1:7740", "t"),
        ..Config::default()
    }
}

#[tokio::test]
async fn restart_under_a_remote_executor_reattaches_and_keeps_what_agentctl_holds() {
    let started = started().await;
    let Started {
        api,
        connector,
        id,
        link,
        ..
    } = &started;
    // A turn is on: its questions arrive inside it.
    let go = Some(r#"{"text": "go"}"#);
    api.post(&session_uri(id, "prompt"), go, StatusCode::ACCEPTED)
        .await;
    // The link has handed over events up to sequence number 2.
    *link.delivered.lock().expect("lock") = Some(2);
    started.asks_twice("q").await;
    api.wait_state(id, "WAITING_FOR_INPUT").await;
    // Once applied, how far is stored, for the next process to re-attach after it.
    eventually("the last applied event stored", || async {
        let row = api.state.stores.sessions.session(id).await.expect("row");
        (row.expect("session").last_event_seq == Some(2)).then_some(())
    })
    .await;

    let resumed = Reconciled {
        resumed: 1,
        failed: 0,
    };
    let api = restart(&started, remote_config(), resumed).await;
    assert_eq!(
        *connector.resumed.lock().expect("lock"),
        vec![(id.clone(), Some(2))],
        "re-attached after the last event the previous process applied"
    );
    // The resumed link reports agentctl's list first: p-2 is still held, p-1 is not.
    let link = connector.link(id);
    link.push(reattached(&["p-2"]));
    api.only_p2_is_held(id).await;
    // The record agentctl still holds is answered through the resumed link.
    let (s, v) = api.respond("p-2", RED).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    let sent = link.calls_of::<ElicitationsRespond>();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["pending_id"], "p-2");
    // The turn is still on: answering its last question does not make the session idle.
    assert_eq!(
        api.wait_state(id, "RUNNING").await["pending_action"],
        Value::Null
    );
}

#[tokio::test]
async fn restart_under_a_remote_executor_fails_a_session_agentctl_cannot_resume() {
    let started = waiting().await;
    started.connector.unreachable.store(true, SeqCst);
    let failed = Reconciled {
        resumed: 0,
        failed: 1,
    };
    let api = restart(&started, remote_config(), failed).await;
    let s = api.session(&started.id).await;
    assert_eq!(s["state"], "FAILED");
    let error = s["error"].as_str();
    assert!(
        error.is_some_and(|e| e.contains("re-attaching to agentctl failed")),
        "{s}"
    );
    assert_eq!(api.status_of("p-1").await, "agent_disconnected");
}

#[tokio::test]
async fn restart_reconciliation_fails_stale_sessions() {
    let started = waiting().await;
    let failed = Reconciled {
        resumed: 0,
        failed: 1,
    };
    let api = restart(&started, Config::default(), failed).await;
    assert_eq!(api.state_of(&started.id).await, "FAILED");
    assert_eq!(api.status_of("p-1").await, "agent_disconnected");
    let (s, v) = api.respond("p-1", NO_ANSWERS).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "not_delivered"})));
}
