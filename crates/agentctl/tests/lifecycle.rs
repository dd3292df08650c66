//! Settlement paths (F7), deadlines, cancel, shutdown, agent exit, and the stream itself:
//! auth, bad frames, dropped and re-attached streams.

use kandev_testkit::FrameLog;
use kandev_testkit::agentctl::{
    AgentCtl, Harness, Stream, TOKEN, choose, message_texts, pending_id, start_payload,
    start_payload_in,
};
use serde_json::{Value, json};

const SHORT_DEADLINES: &[(&str, &str)] = &[
    ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "300ms"),
    ("KANDEV_ACP_IDLE_TIMEOUT", "1s"),
];

/// The ACP `cancel` answer.
fn cancel() -> Value {
    json!({"action": "cancel"})
}

/// agentctl with `env` and a `scenario` session (flag on) whose first elicitation is
/// pending; returns it and the pending id.
async fn elicited(scenario: &str, env: &[(&str, &str)]) -> (Harness, String) {
    let mut h = Harness::start_env(scenario, true, env).await;
    let id = h.elicit().await;
    (h, id)
}

/// `action` (empty payload) answers `{"success": true}`.
async fn succeeds(h: &Harness, action: &str) {
    let reply = h.stream.ok(action, json!({})).await;
    assert_eq!(reply, json!({"success": true}), "{action}");
}

/// The next `elicitation_settled` settles `id` with `outcome` and `response`, and nothing
/// else; a non-null `response` is also the one answer the agent received.
async fn settled(h: &mut Harness, id: &str, outcome: &str, response: Value) {
    let settled = h.stream.settled(id, outcome).await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": outcome, "response": response})
    );
    if !response.is_null() {
        assert_eq!(h.log.elicitation_answer(1).await.1, response, "{outcome}");
    }
}

#[tokio::test]
async fn ac15_turn_cancel_answers_cancel_and_withdraws_the_surface() {
    let (mut h, id) = elicited("single", &[]).await;
    succeeds(&h, "agent.cancel").await;
    settled(&mut h, &id, "turn_cancelled", cancel()).await;
    h.stream.turn_ends("cancelled").await;
    let cancels: Vec<Value> = h
        .log
        .messages("recv")
        .into_iter()
        .filter(|f| f["method"] == "session/cancel")
        .collect();
    assert_eq!(cancels.len(), 1);
    let session = &h.started["acp_session_id"];
    assert_eq!(&cancels[0]["params"]["sessionId"], session);
    let listed = h.stream.ok("agent.elicitations.list", json!({})).await;
    assert_eq!(listed, json!({"pending": []}));
}

#[tokio::test]
async fn ac64_unanswered_elicitation_is_declined_at_the_deadline_and_the_turn_continues() {
    let (mut h, id) = elicited("single", SHORT_DEADLINES).await;
    // Declined, not cancelled.
    settled(&mut h, &id, "timed_out", json!({"action": "decline"})).await;
    // The turn continued.
    h.stream.turn_ends("end_turn").await;
    let late = h.respond(&id, json!([]), true).await;
    assert_eq!(late["payload"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn f7_agent_cancel_request_settles_agent_cancelled() {
    let (mut h, id) = elicited("agent-cancel", &[]).await;
    settled(&mut h, &id, "agent_cancelled", cancel()).await;
    h.log
        .wait_until("$/cancel_request", |log| {
            let sent = log.messages("send");
            sent.iter().any(|f| f["method"] == "$/cancel_request")
        })
        .await;
    // A late operator answer is discarded (D5).
    let late = h.respond(&id, choose("Postgres"), false).await;
    assert_eq!(late["payload"]["code"], "NOT_FOUND");
    h.stream.event("turn_completed").await;
}

#[tokio::test]
async fn f7_agent_shutdown_answers_cancel_then_stops_the_agent() {
    let (mut h, id) = elicited("single", &[]).await;
    succeeds(&h, "agent.shutdown").await;
    settled(&mut h, &id, "shutdown", cancel()).await;
    h.stream.event("agent_exited").await;
    let refused = h.stream.err("agent.prompt", json!({"text": "again"})).await;
    assert_eq!(refused["code"], "BAD_REQUEST");
}

#[tokio::test]
async fn f7_agent_exit_settles_agent_exited_with_no_response() {
    let (mut h, id) = elicited("crash", &[]).await;
    settled(&mut h, &id, "agent_exited", Value::Null).await;
    assert_eq!(h.stream.event("agent_exited").await["code"], 3);
    h.stream.turn_ends("error").await;
    let create = &h.log.sent_requests("elicitation/create")[0];
    assert!(
        h.log.responses_to(&create["id"]).is_empty(),
        "nothing could reach the dead agent"
    );
}

/// Elicits on `agentctl`, then `stop`s it: the pending settles `shutdown` with `cancel`
/// reaching the agent, the stream closes and agentctl exits 0.
async fn stopping_answers_cancel_and_exits(agentctl: AgentCtl, stop: fn(&mut AgentCtl)) {
    let mut h = Harness::start_on(agentctl, "single", true, |_| {}).await;
    let id = h.elicit().await;
    stop(&mut h.agentctl);
    settled(&mut h, &id, "shutdown", cancel()).await;
    h.stream.closed().await;
    assert_eq!(h.agentctl.wait_exit().await, Some(0));
}

/// `agentctl serve --exit-on-stdin-eof`, as the backend's local executor starts it.
fn exiting_on_stdin_eof() -> AgentCtl {
    AgentCtl::start_with(&[], &["--exit-on-stdin-eof"])
}

#[tokio::test]
async fn f7_sigterm_answers_cancel_emits_shutdown_and_exits() {
    stopping_answers_cancel_and_exits(AgentCtl::start(&[]), |a| a.sigterm()).await;
}

/// The backend's local executor holds agentctl's stdin: when the backend dies (even by
/// SIGKILL) the pipe closes and agentctl shuts down as on SIGTERM, instead of living on as
/// an orphan with its agent and an unanswerable pending.
#[tokio::test]
async fn stdin_eof_with_exit_on_stdin_eof_answers_cancel_emits_shutdown_and_exits() {
    stopping_answers_cancel_and_exits(exiting_on_stdin_eof(), AgentCtl::close_stdin).await;
}

/// With `--exit-on-stdin-eof` a blocking stdin read is in flight; a SIGTERM while the
/// backend still holds the pipe must not wait for it (it held the exit until the backend
/// killed agentctl five seconds later): it exits 0 while stdin is still open.
#[tokio::test]
async fn sigterm_with_exit_on_stdin_eof_exits_while_stdin_is_still_open() {
    stopping_answers_cancel_and_exits(exiting_on_stdin_eof(), |a| a.sigterm()).await;
}

#[tokio::test]
async fn idle_agent_past_the_idle_timeout_is_given_up() {
    let mut h = Harness::start_env("sleepy", false, SHORT_DEADLINES).await;
    h.prompt("go").await;
    let turn = h.stream.turn_ends("error").await;
    let error = turn["error"].as_str().unwrap_or_default();
    assert!(error.contains("KANDEV_ACP_IDLE_TIMEOUT"), "{turn}");
    h.stream.event("agent_exited").await;
}

/// The next `agent_stderr` event whose line satisfies `matches`; returns the line.
async fn stderr_line(stream: &mut Stream, matches: impl Fn(&str) -> bool) -> String {
    let event = stream
        .event_where("agent_stderr", |e| e["line"].as_str().is_some_and(&matches))
        .await;
    event["line"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn agent_stderr_lines_become_events() {
    let mut h = Harness::start_on(AgentCtl::start(&[]), "plain", false, |payload| {
        payload["agent"]["env"]["RUST_LOG"] = json!("info");
    })
    .await;
    h.prompt("go").await;
    let line = stderr_line(&mut h.stream, |l| l.contains("playing scenario")).await;
    assert!(!line.ends_with('\n'));
}

#[tokio::test]
async fn stream_without_or_with_a_wrong_token_is_refused_with_401() {
    let agentctl = AgentCtl::start(&[]);
    for token in [None, Some("wrong-token"), Some("")] {
        let refused = Stream::connect(&agentctl.url(), token)
            .await
            .expect_err("refused");
        match refused {
            tokio_tungstenite::tungstenite::Error::Http(response) => {
                assert_eq!(response.status(), 401, "{token:?}")
            }
            other => panic!("expected HTTP 401, got {other:?}"),
        }
    }
    assert!(Stream::connect(&agentctl.url(), Some(TOKEN)).await.is_ok());
    assert!(
        !agentctl.stderr().contains(TOKEN),
        "the token must never be logged"
    );
}

#[tokio::test]
async fn healthz_needs_no_token() {
    let agentctl = AgentCtl::start(&[]);
    let url = format!("http://{}/healthz", agentctl.addr);
    let response = kandev_testkit::http::client()
        .get(url)
        .send()
        .await
        .expect("an HTTP response");
    let status = response.status().as_u16();
    let body = response.text().await.expect("the body");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, r#"{"status":"ok"}"#);
}

#[tokio::test]
async fn bad_frames_get_errors_and_the_stream_stays_up() {
    let agentctl = AgentCtl::start(&[]);
    let mut stream = agentctl.connect().await;
    stream.send_text("this is not json");
    let error = stream.error_frame().await;
    assert_eq!(error["payload"]["code"], "BAD_REQUEST", "{error}");
    for (id, frame) in [
        ("x1", r#"{"id": "x1", "type": "request"}"#),
        (
            "x2",
            r#"{"id": "x2", "type": "response", "action": "agent.prompt", "payload": {}}"#,
        ),
    ] {
        stream.send_text(frame);
        let error = stream.error_frame().await;
        assert_eq!(
            (error["id"].as_str(), error["payload"]["code"].as_str()),
            (Some(id), Some("BAD_REQUEST")),
            "{error}"
        );
    }

    let spawn_failure = json!({"session_id": "s-9", "agent": {"id": "x", "command": ["/nonexistent/agent"]}, "flags": {}});
    for (action, payload, code) in [
        ("agent.frobnicate", json!({}), "UNKNOWN_ACTION"),
        ("agent.prompt", json!({"text": "hi"}), "BAD_REQUEST"),
        (
            "agent.session.start",
            json!({"session_id": 7}),
            "BAD_REQUEST",
        ),
        (
            "agent.session.attach",
            json!({"session_id": "nope"}),
            "NOT_FOUND",
        ),
        ("agent.session.start", spawn_failure, "BAD_REQUEST"),
    ] {
        let refused = stream.err(action, payload).await;
        assert_eq!(refused["code"], code, "{action}: {refused}");
    }
    // Still up and usable after all of that.
    let log = FrameLog::in_temp_dir();
    stream
        .ok(
            "agent.session.start",
            start_payload("s-1", "plain", false, &log),
        )
        .await;
    let unknown_pending = stream
        .err(
            "agent.elicitations.respond",
            json!({"pending_id": "p-unknown"}),
        )
        .await;
    assert_eq!(unknown_pending["code"], "NOT_FOUND");
}

/// Closes the session's stream from this side and waits until agentctl has seen it go;
/// returns agentctl and the agent's log.
async fn detach(h: Harness) -> (AgentCtl, FrameLog) {
    let Harness {
        agentctl,
        stream,
        log,
        ..
    } = h;
    stream.close();
    agentctl.wait_stderr("agent stream detached").await;
    (agentctl, log)
}

/// The sequence number of an event frame (its `id`).
fn seq(frame: &Value) -> u64 {
    frame["id"].as_str().expect("id").parse().expect("seq")
}

#[tokio::test]
async fn a_dropped_stream_keeps_pending_elicitations_answerable() {
    let mut h = Harness::start("two-identical", true).await;
    h.prompt("go").await;
    let first = pending_id(&h.stream.event("elicitation_requested").await);
    let second = pending_id(&h.stream.event("elicitation_requested").await);
    let (agentctl, log) = detach(h).await;

    let (mut again, attached) = agentctl.attach(None).await;
    let listed: Vec<&str> = attached["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .filter_map(|p| p["pending_id"].as_str())
        .collect();
    assert_eq!(listed, [first.as_str(), second.as_str()]);
    for (id, option) in [(&first, "Postgres"), (&second, "SQLite")] {
        let payload = json!({"pending_id": id, "answers": choose(option)});
        let reply = again.ok("agent.elicitations.respond", payload).await;
        assert_eq!(reply, json!({"success": true}));
    }
    for (n, option) in [(1, "Postgres"), (2, "SQLite")] {
        let (_, result) = log.elicitation_answer(n).await;
        assert_eq!(result["content"]["question_0"], option);
    }
    again.turn_ends("end_turn").await;
}

#[tokio::test]
async fn events_while_detached_are_flushed_in_order_on_attach() {
    // Long enough for agentctl to see the close before the deadline fires.
    let deadlines = [
        ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "2s"),
        ("KANDEV_ACP_IDLE_TIMEOUT", "10s"),
    ];
    let mut h = Harness::start_env("single", true, &deadlines).await;
    h.prompt("go").await;
    h.stream.event("elicitation_requested").await;
    let last_seen = seq(h.stream.seen.last().expect("seen"));
    let (agentctl, log) = detach(h).await;
    // While detached: the deadline declines, the agent reports it and ends its turn.
    log.wait_until("the end of the turn", |log| {
        let sent = log.messages("send");
        sent.iter().any(|f| f["result"]["stopReason"] == "end_turn")
    })
    .await;

    let (mut again, attached) = agentctl.attach(None).await;
    assert_eq!(attached["pending"], json!([]));
    let flushed = again.events_until("turn_completed").await;
    let ids: Vec<u64> = flushed.iter().map(seq).collect();
    let expected: Vec<u64> = (last_seen + 1..last_seen + 1 + ids.len() as u64).collect();
    assert_eq!(ids, expected, "no event lost, none reordered");
    let kinds: Vec<&str> = flushed
        .iter()
        .filter_map(|f| f["payload"]["event"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"elicitation_settled"));
    assert!(
        message_texts(&flushed)
            .iter()
            .any(|t| t.contains("\"action\":\"decline\"")),
        "{flushed:#?}"
    );
}

#[tokio::test]
async fn a_new_stream_attaching_replaces_the_old_one() {
    let h = Harness::start("plain", false).await;
    let (mut newer, _) = h.agentctl.attach(None).await;
    assert_eq!(h.stream.closed().await, "replaced by a newer agent stream");
    newer.ok("agent.prompt", json!({"text": "go"})).await;
    newer.turn_ends("end_turn").await;
}

#[tokio::test]
async fn a_running_session_cannot_be_started_twice() {
    let h = Harness::start("plain", false).await;
    let other = h.agentctl.connect().await;
    let log = FrameLog::in_temp_dir();
    let payload = start_payload("s-1", "plain", false, &log);
    let refused = other.err("agent.session.start", payload).await;
    assert_eq!(refused["code"], "BAD_REQUEST");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("agent.session.attach"), "{refused}");
}

#[tokio::test]
async fn one_turn_at_a_time() {
    let mut h = Harness::start("sleepy", false).await;
    h.prompt("go").await;
    h.stream.event("session_update").await;
    let second = h.stream.err("agent.prompt", json!({"text": "again"})).await;
    assert_eq!(second["code"], "BAD_REQUEST", "{second}");
    h.stream.ok("agent.cancel", json!({})).await;
    h.stream.turn_ends("cancelled").await;
    h.prompt("/e2e:plain").await;
    h.stream.turn_ends("end_turn").await;
}

#[tokio::test]
async fn attach_with_after_seq_replays_events_a_dying_stream_may_have_lost() {
    let mut h = Harness::start("plain", false).await;
    h.prompt("go").await;
    let first_run = h.stream.events_until("turn_completed").await;
    let ids: Vec<u64> = first_run.iter().map(seq).collect();
    assert!(ids.len() >= 3, "{first_run:#?}");
    // Suppose the backend processed only the first event before its stream broke.
    let (agentctl, _log) = detach(h).await;

    let (mut again, _) = agentctl.attach(Some(ids[0])).await;
    let replayed = again.events_until("turn_completed").await;
    assert_eq!(
        replayed,
        first_run[1..],
        "everything after after_seq, again, in order"
    );

    // Without after_seq, only events no stream was given are flushed: none here.
    let (mut third, attached) = agentctl.attach(None).await;
    assert_eq!(attached["pending"], json!([]));
    third.ok("agent.prompt", json!({"text": "go"})).await;
    let next = third.events_until("turn_completed").await;
    let last_old = *ids.last().expect("last");
    assert_eq!(
        seq(&next[0]),
        last_old + 1,
        "no replay without after_seq, and no gap"
    );
}

/// Runs the agent's command inside `sh -c`, as the script `wrap` makes of the quoted
/// command line.
fn in_shell(payload: &mut Value, wrap: impl FnOnce(&str) -> String) {
    let quoted = payload["agent"]["command"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|a| format!("'{}'", a.as_str().expect("str")))
        .collect::<Vec<_>>()
        .join(" ");
    payload["agent"]["command"] = json!(["sh", "-c", wrap(&quoted)]);
}

#[tokio::test]
async fn an_agent_that_ignores_stdin_eof_is_killed_after_the_grace_period() {
    // The shell becomes `sleep` once the mock agent exits on EOF, so the process lingers.
    let mut h = Harness::start_on(AgentCtl::start(&[]), "single", true, |payload| {
        in_shell(payload, |agent| format!("{agent}; exec sleep 60"));
    })
    .await;
    h.elicit().await;
    let started = std::time::Instant::now();
    assert_eq!(
        h.stream.ok("agent.shutdown", json!({})).await,
        json!({"success": true})
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "killed after the grace period, not waited out"
    );
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(settled["outcome"], "shutdown");
    let exited = h.stream.event("agent_exited").await;
    assert_eq!(exited["code"], Value::Null, "killed by a signal");
    assert_eq!(h.log.elicitation_answer(1).await.1, cancel());
}

#[tokio::test]
async fn two_hundred_pendings_are_each_answered_exactly_once_with_their_own_answer() {
    const N: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let options = ["Postgres", "SQLite", "DynamoDB"];
    let mut steps: Vec<Value> = (0..N)
        .map(|i| {
            json!({"elicit": {"id": format!("e{i}"), "params": {
                "mode": "form", "sessionId": "$SESSION_ID", "message": format!("Question {i}"),
                "requestedSchema": {"type": "object", "properties": {"question_0": {
                    "type": "string", "title": "Datastore",
                    "oneOf": options.iter().map(|o| json!({"const": o, "title": o})).collect::<Vec<_>>()}}}}}})
        })
        .collect();
    steps.extend((0..N).map(|i| json!({"await": {"id": format!("e{i}")}})));
    let scenario = json!({"name": "many", "description": "N elicitations at once", "steps": steps});
    std::fs::write(dir.path().join("many.json"), scenario.to_string()).expect("write scenario");

    let agentctl = AgentCtl::start(&[]);
    let mut stream = agentctl.connect().await;
    let log = FrameLog::in_temp_dir();
    stream
        .ok(
            "agent.session.start",
            start_payload_in("mock", "s-1", "many", dir.path(), true, &log),
        )
        .await;
    stream.ok("agent.prompt", json!({"text": "go"})).await;
    let mut by_message = std::collections::HashMap::new();
    for _ in 0..N {
        let requested = stream.event("elicitation_requested").await;
        by_message.insert(
            requested["message"].as_str().expect("message").to_owned(),
            pending_id(&requested),
        );
    }
    assert_eq!(by_message.len(), N);
    let listed = stream.ok("agent.elicitations.list", json!({})).await;
    assert_eq!(listed["pending"].as_array().map(Vec::len), Some(N));

    // Answer all at once, each twice; question i gets option i % 3.
    let submissions = (0..N).flat_map(|i| {
        let id = by_message[&format!("Question {i}")].clone();
        let answer = json!({"pending_id": id, "answers": choose(options[i % 3])});
        [answer.clone(), answer]
    });
    let replies = futures::future::join_all(
        submissions.map(|payload| stream.request("agent.elicitations.respond", payload)),
    )
    .await;
    assert_eq!(
        replies.iter().filter(|r| r["type"] == "response").count(),
        N
    );
    assert_eq!(
        replies
            .iter()
            .filter(|r| r["payload"]["code"] == "NOT_FOUND")
            .count(),
        N
    );

    stream.turn_ends("end_turn").await;
    let requests = log.sent_requests("elicitation/create");
    assert_eq!(requests.len(), N);
    for request in &requests {
        let i: usize = request["params"]["message"].as_str().expect("message")["Question ".len()..]
            .parse()
            .expect("index");
        let responses = log.responses_to(&request["id"]);
        assert_eq!(responses.len(), 1, "question {i}");
        assert_eq!(
            responses[0]["result"],
            json!({"action": "accept", "content": {"question_0": options[i % 3]}}),
            "question {i}"
        );
    }
}

#[tokio::test]
async fn the_agent_never_sees_the_stream_token() {
    let mut h = Harness::start_on(AgentCtl::start(&[]), "plain", false, |payload| {
        in_shell(payload, |agent| {
            format!("echo \"token=[${{AGENTCTL_TOKEN:-}}]\" >&2; exec {agent}")
        });
    })
    .await;
    let line = stderr_line(&mut h.stream, |l| l.starts_with("token=")).await;
    assert_eq!(line, "token=[]");
}

#[tokio::test]
async fn a_failed_handshake_is_reported_and_the_session_id_stays_free() {
    let agentctl = AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let failed = stream
        .err(
            "agent.session.start",
            json!({"session_id": "s-1", "agent": {"id": "broken", "command": ["sh", "-c", "echo not-acp; exit 7"]}, "flags": {}}),
        )
        .await;
    assert_eq!(failed["code"], "INTERNAL", "{failed}");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(message.contains("handshake"), "{failed}");
    // The same stream and id can start a working agent afterwards.
    let log = FrameLog::in_temp_dir();
    let started = stream
        .ok(
            "agent.session.start",
            start_payload("s-1", "plain", false, &log),
        )
        .await;
    assert!(started["acp_session_id"].is_string());
}
