//! SIGTERM drains kandev: not ready and no new sessions first, then the requests in
//! flight finish, then the live sessions stop with their pendings cancelled, then it
//! exits; a second signal exits at once.

use std::time::{Duration, Instant};

use kandev_testkit::{DEADLINE, Kandev, KandevOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn session_with_a_question(kandev: &Kandev) -> String {
    let asked = kandev.ask("mock", "Pick").await;
    asked.session_id
}

#[tokio::test]
async fn a_sigterm_sent_the_moment_kandev_says_it_listens_is_drained() {
    // Kandev::start returns as soon as the listening line is printed.
    let mut kandev = Kandev::start_default().await;
    kandev.sigterm();
    assert_eq!(
        kandev.wait_exit().await,
        Some(0),
        "drained and exited, not ended by the signal's default action"
    );
    let log = kandev.log();
    assert!(log.contains("drained"), "{log}");
}

#[tokio::test]
async fn sigterm_with_a_question_waiting_cancels_it_and_exits_promptly() {
    let mut kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    session_with_a_question(&kandev).await;
    let agentctl = kandev.agentctls();
    assert_eq!(agentctl.len(), 1);

    let signalled = Instant::now();
    kandev.sigterm();
    let code = kandev.wait_exit().await;
    let took = signalled.elapsed();
    assert_eq!(code, Some(0), "{}", kandev.log());
    // Generous: the point is that nothing waits on a timeout any more.
    assert!(took < Duration::from_secs(10), "exit took {took:?}");
    assert_eq!(
        kandev.frames().elicitation_responses(),
        [json!({"action": "cancel"})],
        "the agent was told cancel"
    );
    let log = kandev.log();
    assert!(
        log.contains("agentctl exited status=exit status: 0"),
        "agentctl exited by itself, not killed after the grace:\n{log}"
    );
    assert!(log.contains("session ended state=CANCELLED"), "{log}");
    assert!(
        !std::path::Path::new(&format!("/proc/{}", agentctl[0].0)).exists(),
        "agentctl is gone"
    );
}

#[tokio::test]
async fn while_draining_kandev_is_not_ready_and_refuses_new_sessions_then_a_second_signal_exits() {
    // A long grace, ended by the second signal: nothing here waits on a clock.
    let mut kandev = Kandev::start(
        KandevOptions::new()
            .flag_env(true)
            .toml("[drain]\ngrace = \"10m\""),
    )
    .await;
    let session = session_with_a_question(&kandev).await;
    let task = kandev.create_task("Too late").await;
    let task = task["id"].as_str().expect("task id");

    kandev.sigterm();
    kandev
        .wait_log("draining: not ready, no new sessions", 1)
        .await;
    let ready = kandev.api().get("/readyz").await;
    assert_eq!(ready.status, 503, "{ready}");
    assert_eq!(ready.body["checks"]["draining"]["ok"], false, "{ready}");
    assert_eq!(ready.body["checks"]["database"]["ok"], true, "{ready}");
    let refused = kandev.try_start_session(task, "mock", None).await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (503, "DRAINING"),
        "{refused}"
    );
    assert_eq!(kandev.api().get("/healthz").await.status, 200);
    // Everything else is still served: the live session and its question.
    assert_eq!(kandev.session(&session).await["state"], "WAITING_FOR_INPUT");

    kandev.sigterm();
    assert_eq!(kandev.wait_exit().await, Some(130));
}

/// A request whose body is still on its way when the signal arrives is answered before
/// kandev exits, and an open operator WebSocket does not hold the exit up.
#[tokio::test]
async fn a_request_in_flight_finishes_before_kandev_exits() {
    let mut kandev = Kandev::start_default().await;
    let _operator_ws = kandev.ws().await;
    // Raw HTTP/1.1: `Expect: 100-continue` makes kandev say when the handler is reading
    // the body, so the request is provably in flight before the signal (no client
    // library exposes that moment).
    let body = r#"{"title": "Sent during the drain"}"#;
    let mut conn = TcpStream::connect(kandev.addr()).await.expect("connect");
    let head = format!(
        "POST /api/v1/tasks HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        kandev.addr(),
        body.len()
    );
    conn.write_all(head.as_bytes()).await.expect("head");
    let mut seen = Vec::new();
    let continued = tokio::time::timeout(DEADLINE, async {
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains("100 Continue\r\n\r\n") {
            let n = conn.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before 100 Continue");
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(
        continued.is_ok(),
        "no 100 Continue: {}",
        String::from_utf8_lossy(&seen)
    );

    kandev.sigterm();
    kandev
        .wait_log("draining: finishing the requests in flight", 1)
        .await;
    conn.write_all(body.as_bytes()).await.expect("body");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut answer))
        .await
        .expect("an answer")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.contains("HTTP/1.1 201"),
        "the request in flight was answered: {answer}"
    );
    assert_eq!(kandev.wait_exit().await, Some(0));
    let log = kandev.log();
    assert!(log.contains("drained"), "{log}");
    assert!(
        !log.contains("cut off"),
        "nothing held the server open: {log}"
    );
}
