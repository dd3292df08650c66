//! Replicas on one PostgreSQL (docs/architecture.md §12): two kandev processes with the same
//! `cluster.secret`, a remote agentctl (or two), a fresh database of the test cluster.
//! An answer given on the replica that does not own the session reaches the agent; the
//! other replica's operators see the owner's events; forty answers spread over both
//! deliver one; the owner SIGKILLed with a question pending, the survivor takes the
//! session over and the answer still reaches the agent; an owner cut off from the
//! database lets go once its lease has run out and the other replica carries on; an owner
//! drained by SIGTERM hands its session over at once instead; sessions spread over two
//! agentctl hosts and a dead host is skipped.

use std::time::{Duration, Instant};

use kandev_testkit::{
    DEADLINE, FaultProxy, Kandev, KandevOptions, OperatorWs, RemoteAgentctl, TURN_DEADLINE,
    answer_at_once, answer_body, poll, poll_until,
};
use serde_json::json;

const SECRET: &str = "e2e-replicas-cluster-secret";
/// Short, so a takeover is quick; renewals every ~667 ms.
const LEASE: &str = "2s";

/// Replica `name` on `db` with `executor` applied.
async fn replica(
    name: &str,
    db: &str,
    executor: impl FnOnce(KandevOptions) -> KandevOptions,
) -> Kandev {
    replica_with_lease(name, db, LEASE, executor).await
}

/// [`replica`] with its own `cluster.lease`.
async fn replica_with_lease(
    name: &str,
    db: &str,
    lease: &str,
    executor: impl FnOnce(KandevOptions) -> KandevOptions,
) -> Kandev {
    let options = KandevOptions::new()
        .flag_env(true)
        .database(db)
        .toml(&format!(
            "[cluster]\nreplica_id = \"{name}\"\nsecret = \"{SECRET}\"\nlease = \"{lease}\"\n"
        ));
    Kandev::start(executor(options)).await
}

/// Two replicas on a fresh PostgreSQL database and one remote agentctl.
async fn two_replicas(test: &str) -> (Kandev, Kandev, RemoteAgentctl) {
    let db = kandev_testkit::postgres::database(test).await;
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let a = replica("replica-a", &db, |o| o.remote(&url, agentctl.token())).await;
    let b = replica("replica-b", &db, |o| o.remote(&url, agentctl.token())).await;
    (a, b, agentctl)
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn an_answer_on_b_reaches_the_agent_of_a_session_started_on_a_and_b_sees_a_s_events() {
    let (a, b, _agentctl) = two_replicas("replicas_answer_on_b").await;
    let ws_b = b.ws().await;
    let asked = a.ask("mock", "/e2e:single").await;

    let created = ws_b
        .wait_for_type("clarification.created", DEADLINE, |d| {
            d["pending_id"] == asked.pending_id.as_str()
        })
        .await;
    assert_eq!(created["data"]["session_id"], asked.session_id.as_str());
    assert_eq!(
        ws_b.of_type("clarification.created").len(),
        1,
        "no duplicate on B"
    );
    ws_b.wait_for_type("session.updated", DEADLINE, |d| {
        d["id"] == asked.session_id.as_str() && d["pending_action"] == "clarification"
    })
    .await;
    // Reads come from the database on any replica.
    assert_eq!(
        b.clarification(&asked.pending_id).await["status"],
        "pending"
    );

    let r = b
        .answer(&asked.pending_id, &[("question_0", &["SQLite"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "answered"}), "{r}");
    let got = a
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
    let record = b
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    assert_eq!(record["answered_by"], "local", "{record}");
    ws_b.wait_for_type("clarification.settled", DEADLINE, |d| {
        d["pending_id"] == asked.pending_id.as_str()
    })
    .await;
    b.wait_session_state(&asked.session_id, "IDLE").await;

    // A prompt on B for A's session runs on A's agent; B's operators see its events.
    let r = b
        .api()
        .post(
            &format!("/api/v1/sessions/{}/prompt", asked.session_id),
            &json!({"text": "/e2e:single"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let second = b.wait_pending(&asked.session_id, 1).await;
    assert_ne!(second[0]["pending_id"], asked.pending_id.as_str());
    let r = b
        .api()
        .post(
            &format!("/api/v1/sessions/{}/stop", asked.session_id),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    a.wait_session_state(&asked.session_id, "COMPLETED").await;
    assert_events_in_session_order(&ws_b, &asked.session_id);
}

/// The `message.created` events of a session arrive on the WebSocket in `seq` order,
/// each once.
fn assert_events_in_session_order(ws: &OperatorWs, session_id: &str) {
    let seqs: Vec<i64> = ws
        .of_type("message.created")
        .iter()
        .filter(|e| e["data"]["session_id"] == session_id)
        .filter_map(|e| e["data"]["seq"].as_i64())
        .collect();
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(seqs, sorted, "in order, no duplicates");
    assert!(!seqs.is_empty());
}

/// What a replica logs once it listens for the others' notes.
const LISTENING: &str = "listening for the other replicas' changes";

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn only_a_replica_with_peers_listens_for_their_notes() {
    let db = kandev_testkit::postgres::database("replicas_only_peers_listen").await;
    let clustered = replica("replica-a", &db, |o| o).await;
    clustered.wait_log(LISTENING, 1).await;
    drop(clustered);
    // Without `cluster.secret` kandev is the only replica: no LISTEN, no NOTIFY per change.
    let alone = Kandev::start(
        KandevOptions::new()
            .flag_env(true)
            .database(&kandev_testkit::postgres::database("replicas_alone_no_bus").await),
    )
    .await;
    let ws = alone.ws().await;
    let asked = alone.ask("mock", "/e2e:single").await;
    ws.wait_for_type("clarification.created", DEADLINE, |d| {
        d["pending_id"] == asked.pending_id.as_str()
    })
    .await;
    assert!(!alone.log().contains(LISTENING), "{}", alone.log());
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn forty_concurrent_answers_over_two_replicas_deliver_exactly_one() {
    let (a, b, _agentctl) = two_replicas("replicas_forty_answers").await;
    let asked = a.ask("mock", "/e2e:single").await;
    let raced = answer_at_once(
        &[a.api(), b.api()],
        &asked.pending_id,
        40,
        &["Postgres", "SQLite", "DynamoDB"],
    )
    .await;
    for r in &raced.refused {
        assert_eq!(r.body["error"]["origin"], "agentctl", "{r}");
    }
    let delivered = raced.delivered;
    assert_eq!(delivered.len(), 1, "exactly one delivered: {delivered:?}");
    b.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(
        a.frames().elicitation_responses(),
        vec![json!({"action": "accept", "content": {"question_0": delivered[0]}})],
        "the agent saw one response, the winner's"
    );
}

/// Answers `pending_id` ("DynamoDB") through `survivor` once it has taken the session
/// over (until then the owner cannot be reached: 503, nothing done) and asserts it was
/// answered. Panics after `within`.
async fn answer_once_taken_over(survivor: &Kandev, pending_id: &str, within: Duration) {
    let body = answer_body(&[("question_0", &["DynamoDB"], "")]);
    let answered = poll_until("the survivor to take the session over", within, || async {
        let r = survivor.respond(pending_id, &body).await;
        match r.status {
            200 => Some(r),
            503 => None,
            _ => panic!("unexpected respond outcome during the takeover: {r}"),
        }
    })
    .await;
    assert_eq!(answered.body, json!({"status": "answered"}), "{answered}");
}

/// The agent of `owner`'s session received that answer.
async fn agent_got_the_answer(owner: &Kandev) {
    let got = owner
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "DynamoDB"}})
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn the_owner_sigkilled_with_a_pending_question_the_survivor_takes_over_and_the_answer_reaches_the_agent()
 {
    let (mut a, b, agentctl) = two_replicas("replicas_takeover").await;
    let asked = a.ask("mock", "/e2e:single").await;
    let ws_b = b.ws().await;
    a.kill();
    let killed = Instant::now();

    // Until the lease runs out B cannot reach the owner (503, nothing done); then B
    // claims the session, re-attaches to agentctl and answers itself.
    answer_once_taken_over(&b, &asked.pending_id, DEADLINE).await;
    let takeover = killed.elapsed();
    eprintln!(
        "TAKEOVER: answered through the survivor {takeover:?} after SIGKILL of the owner (cluster.lease = {LEASE})"
    );
    agent_got_the_answer(&a).await;
    // The turn goes on under the new owner: it ends, and B's operators see it.
    b.wait_session_state(&asked.session_id, "IDLE").await;
    ws_b.wait_for_type("session.updated", DEADLINE, |d| {
        d["id"] == asked.session_id.as_str() && d["state"] == "IDLE"
    })
    .await;
    assert_eq!(a.frames().elicitation_responses().len(), 1, "not doubled");
    let messages = b.messages(&asked.session_id).await;
    let requests = messages
        .iter()
        .filter(|m| m["type"] == "clarification_request")
        .count();
    assert_eq!(requests, 1, "nothing doubled: {messages:?}");
    assert!(
        b.log().contains("stopped renewing its lease"),
        "the survivor says why it took over"
    );
    assert!(agentctl.log().contains(&asked.session_id));
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn a_drained_owner_hands_its_session_over_long_before_its_lease_would_run_out() {
    let db = kandev_testkit::postgres::database("replicas_hand_over").await;
    // Renewed (and looked over by the survivor) every 10 s: a takeover that waited for
    // this lease to run out could not answer before 30 s after the drain.
    const LONG_LEASE: Duration = Duration::from_secs(30);
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let remote = |o: KandevOptions| o.remote(&url, agentctl.token());
    let mut a = replica_with_lease("replica-a", &db, "30s", remote).await;
    let b = replica_with_lease("replica-b", &db, "30s", remote).await;
    let asked = a.ask("mock", "/e2e:single").await;

    a.terminate().await;
    let drained = Instant::now();
    assert!(
        a.log()
            .contains("draining: handed sessions to the other replicas sessions=1"),
        "the owner says it handed the session on"
    );
    let within = LONG_LEASE - Duration::from_secs(5);
    answer_once_taken_over(&b, &asked.pending_id, within).await;
    eprintln!(
        "HAND-OVER: answered through the survivor {:?} after the owner drained (cluster.lease = 30s)",
        drained.elapsed()
    );
    // The agent was not stopped by the drain: it got the operator's answer, once.
    agent_got_the_answer(&a).await;
    b.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(a.frames().elicitation_responses().len(), 1, "not doubled");
    let metrics = b.api().get("/metrics").await;
    assert_eq!(metrics.status, 200, "{metrics}");
    let text = metrics.body.as_str().unwrap_or_default();
    assert!(
        text.contains("kandev_lease_takeovers_total 1"),
        "the survivor counts the takeover: {text}"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn a_dead_replica_s_local_executor_sessions_end_failed_saying_so() {
    let db = kandev_testkit::postgres::database("replicas_local_failed").await;
    let mut a = replica("replica-a", &db, |o| o).await;
    let b = replica("replica-b", &db, |o| o).await;
    let asked = a.ask("mock", "/e2e:single").await;
    a.kill();
    let session = b.wait_session_state(&asked.session_id, "FAILED").await;
    let error = session["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("replica `replica-a`") && error.contains("local executor"),
        "{session}"
    );
    b.wait_clarification_status(&asked.pending_id, "agent_disconnected")
        .await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn sessions_spread_over_two_agentctl_hosts_and_a_dead_host_is_skipped() {
    let db = kandev_testkit::postgres::database("replicas_two_hosts").await;
    let mut h1 = RemoteAgentctl::start(&[]).await;
    let h2 = RemoteAgentctl::start(&[]).await;
    let hosts = vec![
        (format!("ws://{}", h1.addr()), h1.token().to_owned()),
        (format!("ws://{}", h2.addr()), h2.token().to_owned()),
    ];
    let kandev = replica("replica-a", &db, |o| o.remote_hosts(&hosts)).await;
    let mut sessions = Vec::new();
    for i in 0..4 {
        let (_, session) = kandev
            .task_with_session("mock", &format!("hello {i}"))
            .await;
        assert_ne!(session["state"], "FAILED", "{session}");
        sessions.push(session["id"].as_str().expect("id").to_owned());
    }
    let on = |host: &RemoteAgentctl| {
        sessions
            .iter()
            .filter(|id| host.log().contains(id.as_str()))
            .count()
    };
    assert_eq!((on(&h1), on(&h2)), (2, 2), "fewest live sessions first");

    h1.kill();
    for i in 0..2 {
        let (_, session) = kandev
            .task_with_session("mock", &format!("after {i}"))
            .await;
        assert_ne!(session["state"], "FAILED", "{session}");
        let id = session["id"].as_str().expect("id").to_owned();
        let found = poll(DEADLINE, || async { h2.log().contains(&id).then_some(()) }).await;
        assert!(found.is_some(), "session {id} went to the live host");
    }
    assert!(
        kandev.log().contains("agentctl host skipped"),
        "the dead host's skip is logged"
    );
}

/// `url` (`postgres://user@host:port/db`) with its host and port replaced by `addr`.
fn through(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, rest) = rest.split_once('@').expect("a user");
    let (_, db) = rest.split_once('/').expect("a database");
    format!("{scheme}://{user}@{addr}/{db}")
}

/// The `host:port` of a database URL.
fn server_of(url: &str) -> std::net::SocketAddr {
    let rest = url.split_once('@').expect("a user").1;
    rest.split_once('/')
        .expect("a database")
        .0
        .parse()
        .expect("host:port")
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn an_owner_cut_off_from_the_database_lets_go_and_the_other_replica_carries_on() {
    let db = kandev_testkit::postgres::database("replicas_partition").await;
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let proxy = FaultProxy::start(server_of(&db)).await;
    let a = replica("replica-a", &through(&db, proxy.addr()), |o| {
        o.remote(&url, agentctl.token())
    })
    .await;
    let b = replica("replica-b", &db, |o| o.remote(&url, agentctl.token())).await;
    let asked = a.ask("mock", "/e2e:single").await;

    proxy.cut();
    poll_until("the cut-off owner to let go", DEADLINE, || async {
        a.log()
            .contains("this replica no longer acts for the session")
            .then_some(())
    })
    .await;
    poll_until("the other replica to take over", DEADLINE, || async {
        b.log().contains("session re-attached").then_some(())
    })
    .await;
    let r = b
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "answered"}), "{r}");
    a.frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    b.wait_session_state(&asked.session_id, "IDLE").await;

    // Back on the database, the old owner acts for nothing: the session stays B's.
    proxy.restore();
    let r = a
        .api()
        .post(
            &format!("/api/v1/sessions/{}/prompt", asked.session_id),
            &json!({"text": "/e2e:single"}),
        )
        .await;
    assert_eq!(r.status, 202, "forwarded to the new owner: {r}");
    b.wait_pending(&asked.session_id, 1).await;
    assert_eq!(
        a.frames().elicitation_responses().len(),
        1,
        "the agent got one answer"
    );
    assert!(
        !a.log().contains("session lost its agent"),
        "the old owner wrote no end for the session"
    );
}

/// `kandev operator add NAME` → (token, the TOML lines it printed).
fn operator_add(name: &str) -> (String, String) {
    let output = std::process::Command::new(kandev_testkit::bins::kandev())
        .args(["operator", "add", name])
        .output()
        .expect("run kandev operator add");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let token = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kdv_"))
        .expect("a token line")
        .to_owned();
    let toml = text[text.find("[[auth.operators]]").expect("config lines")..].to_owned();
    (token, toml)
}

/// `POST path` on `kandev` as the operator with `token`.
async fn post_as(
    kandev: &Kandev,
    token: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(format!("http://{}{path}", kandev.addr()))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn a_forwarded_answer_is_recorded_as_the_operator_who_gave_it() {
    let db = kandev_testkit::postgres::database("replicas_answered_by").await;
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}", agentctl.addr());
    let (alice, alice_toml) = operator_add("alice");
    let (bob, bob_toml) = operator_add("bob");
    let auth = format!("[auth]\nrequired = true\n\n{alice_toml}\n{bob_toml}");
    let with_auth = |o: KandevOptions| {
        o.remote(&url, agentctl.token())
            .env("KANDEV_AUTH__SESSION_SECRET", "replicas-session-secret")
            .toml(&auth)
    };
    let a = replica("replica-a", &db, with_auth).await;
    let b = replica("replica-b", &db, with_auth).await;

    let (status, task) = post_as(
        &a,
        &alice,
        "/api/v1/tasks",
        &json!({"title": "who answered"}),
    )
    .await;
    assert_eq!(status, 201, "{task}");
    let path = format!(
        "/api/v1/tasks/{}/sessions",
        task["id"].as_str().expect("id")
    );
    let (status, session) = post_as(
        &a,
        &alice,
        &path,
        &json!({"agent": "mock", "prompt": "/e2e:single"}),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    let sid = session["id"].as_str().expect("id");
    let record = poll_until("the pending record", DEADLINE, || async {
        let (status, body) = get_as(
            &b,
            &bob,
            &format!("/api/v1/clarifications?session_id={sid}&status=pending"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        body["clarifications"]
            .as_array()
            .and_then(|l| l.first().cloned())
    })
    .await;
    let pid = record["pending_id"].as_str().expect("id");

    let (status, body) = post_as(
        &b,
        "kdv_not-a-token",
        &format!("/api/v1/clarifications/{pid}/respond"),
        &answer_body(&[("question_0", &["SQLite"], "")]),
    )
    .await;
    assert_eq!(
        status, 401,
        "a bad token is refused before anything is forwarded: {body}"
    );
    let (status, body) = post_as(
        &b,
        &bob,
        &format!("/api/v1/clarifications/{pid}/respond"),
        &answer_body(&[("question_0", &["SQLite"], "")]),
    )
    .await;
    assert_eq!((status, &body), (200, &json!({"status": "answered"})));
    let (_, record) = get_as(&a, &alice, &format!("/api/v1/clarifications/{pid}")).await;
    assert_eq!(record["answered_by"], "bob", "{record}");
}

/// `GET path` on `kandev` as the operator with `token`.
async fn get_as(kandev: &Kandev, token: &str, path: &str) -> (u16, serde_json::Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .get(format!("http://{}{path}", kandev.addr()))
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}
