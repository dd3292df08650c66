//! Settlement paths (F7), deadlines, cancel, shutdown, agent exit, and the stream itself:
//! auth, bad frames, dropped and re-attached streams.

mod support;

use serde_json::{Value, json};
use support::{AgentCtl, Harness, MockLog, Stream, TOKEN, pending_id, start_payload};

const SHORT_DEADLINES: &[(&str, &str)] = &[
    ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "300ms"),
    ("KANDEV_ACP_IDLE_TIMEOUT", "1s"),
];

#[tokio::test]
async fn ac15_turn_cancel_answers_cancel_and_withdraws_the_surface() {
    let mut h = Harness::start("single", true).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    assert_eq!(
        h.stream.ok("agent.cancel", json!({})).await,
        json!({"success": true})
    );
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "turn_cancelled", "response": {"action": "cancel"}})
    );
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    assert_eq!(
        h.stream.event("turn_completed").await["stop_reason"],
        "cancelled"
    );
    let cancels: Vec<Value> = h
        .log
        .frames("recv")
        .into_iter()
        .filter(|f| f["method"] == "session/cancel")
        .collect();
    assert_eq!(cancels.len(), 1);
    assert_eq!(
        cancels[0]["params"]["sessionId"],
        h.started["acp_session_id"]
    );
    assert_eq!(
        h.stream.ok("agent.elicitations.list", json!({})).await,
        json!({"pending": []})
    );
}

#[tokio::test]
async fn ac64_unanswered_elicitation_is_declined_at_the_deadline_and_the_turn_continues() {
    let mut h = Harness::start_env("single", true, SHORT_DEADLINES).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "timed_out", "response": {"action": "decline"}})
    );
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "decline"}),
        "decline, not cancel"
    );
    let events = h.stream.events_until("turn_completed").await;
    assert_eq!(
        events.last().expect("turn_completed")["payload"]["stop_reason"],
        "end_turn",
        "the turn continued"
    );
    assert_eq!(
        h.respond(&id, json!([]), true).await["payload"]["code"],
        "NOT_FOUND"
    );
}

#[tokio::test]
async fn f7_agent_cancel_request_settles_agent_cancelled() {
    let mut h = Harness::start("agent-cancel", true).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "agent_cancelled", "response": {"action": "cancel"}})
    );
    h.log
        .wait_until("$/cancel_request", |log| {
            log.frames("send")
                .iter()
                .any(|f| f["method"] == "$/cancel_request")
        })
        .await;
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    // A late operator answer is discarded (D5).
    let late = h
        .respond(
            &id,
            json!([{"question_id": "question_0", "selected_options": ["Postgres"]}]),
            false,
        )
        .await;
    assert_eq!(late["payload"]["code"], "NOT_FOUND");
    h.stream.event("turn_completed").await;
}

#[tokio::test]
async fn f7_agent_shutdown_answers_cancel_then_stops_the_agent() {
    let mut h = Harness::start("single", true).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    assert_eq!(
        h.stream.ok("agent.shutdown", json!({})).await,
        json!({"success": true})
    );
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "shutdown", "response": {"action": "cancel"}})
    );
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    h.stream.event("agent_exited").await;
    let refused = h.stream.err("agent.prompt", json!({"text": "again"})).await;
    assert_eq!(refused["code"], "BAD_REQUEST");
}

#[tokio::test]
async fn f7_agent_exit_settles_agent_exited_with_no_response() {
    let mut h = Harness::start("crash", true).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "agent_exited", "response": null})
    );
    assert_eq!(h.stream.event("agent_exited").await["code"], 3);
    let turn = h.stream.event("turn_completed").await;
    assert_eq!(turn["stop_reason"], "error", "{turn}");
    let create = &h.log.sent_requests("elicitation/create")[0];
    assert!(
        h.log.responses_to(&create["id"]).is_empty(),
        "nothing could reach the dead agent"
    );
}

#[tokio::test]
async fn f7_sigterm_answers_cancel_emits_shutdown_and_exits() {
    let mut h = Harness::start("single", true).await;
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    h.agentctl.sigterm();
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "shutdown", "response": {"action": "cancel"}})
    );
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    h.stream.closed().await;
    assert_eq!(h.agentctl.wait_exit().await, Some(0));
}

/// The backend's local executor holds agentctl's stdin: when the backend dies (even by
/// SIGKILL) the pipe closes and agentctl shuts down as on SIGTERM, instead of living on as
/// an orphan with its agent and an unanswerable pending.
#[tokio::test]
async fn stdin_eof_with_exit_on_stdin_eof_answers_cancel_emits_shutdown_and_exits() {
    let agentctl = AgentCtl::start_with(&[], &["--exit-on-stdin-eof"]);
    let stream = agentctl.connect().await;
    let log = MockLog::new();
    let started = stream
        .ok(
            "agent.session.start",
            start_payload("s-1", "single", true, &log),
        )
        .await;
    let mut h = Harness {
        agentctl,
        stream,
        log,
        started,
    };
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    h.agentctl.close_stdin();
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({"event": "elicitation_settled", "pending_id": id, "outcome": "shutdown", "response": {"action": "cancel"}})
    );
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    assert_eq!(h.agentctl.wait_exit().await, Some(0));
}

/// With `--exit-on-stdin-eof` a blocking stdin read is in flight; a SIGTERM while the
/// backend still holds the pipe must not wait for it (it held the exit until the backend
/// killed agentctl five seconds later).
#[tokio::test]
async fn sigterm_with_exit_on_stdin_eof_exits_while_stdin_is_still_open() {
    let agentctl = AgentCtl::start_with(&[], &["--exit-on-stdin-eof"]);
    let stream = agentctl.connect().await;
    let log = MockLog::new();
    let started = stream
        .ok(
            "agent.session.start",
            start_payload("s-1", "single", true, &log),
        )
        .await;
    let mut h = Harness {
        agentctl,
        stream,
        log,
        started,
    };
    let id = pending_id(&h.prompt_until_elicitation("go").await);
    h.agentctl.sigterm();
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(settled["pending_id"], id.as_str());
    assert_eq!(settled["outcome"], "shutdown");
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    assert_eq!(h.agentctl.wait_exit().await, Some(0), "stdin is still open");
}

#[tokio::test]
async fn idle_agent_past_the_idle_timeout_is_given_up() {
    let mut h = Harness::start_env("sleepy", false, SHORT_DEADLINES).await;
    h.prompt("go").await;
    let turn = h.stream.event("turn_completed").await;
    assert_eq!(turn["stop_reason"], "error");
    assert!(
        turn["error"]
            .as_str()
            .is_some_and(|e| e.contains("KANDEV_ACP_IDLE_TIMEOUT")),
        "{turn}"
    );
    h.stream.event("agent_exited").await;
}

#[tokio::test]
async fn agent_stderr_lines_become_events() {
    let agentctl = AgentCtl::start(&[]);
    let mut stream = agentctl.connect().await;
    let log = MockLog::new();
    let mut payload = start_payload("s-1", "plain", false, &log);
    payload["agent"]["env"]["RUST_LOG"] = json!("info");
    stream.ok("agent.session.start", payload).await;
    stream.ok("agent.prompt", json!({"text": "go"})).await;
    let line = stream
        .event_where("agent_stderr", |e| {
            e["line"]
                .as_str()
                .is_some_and(|l| l.contains("playing scenario"))
        })
        .await;
    assert!(!line["line"].as_str().unwrap_or("").ends_with('\n'));
}

#[tokio::test]
async fn stream_without_or_with_a_wrong_token_is_refused_with_401() {
    let agentctl = AgentCtl::start(&[]);
    for token in [None, Some("wrong-token"), Some("")] {
        let refused = Stream::connect(&agentctl.url(), token)
            .await
            .err()
            .expect("refused");
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
    let (status, body) = support::http::send(support::http::client().get(url)).await;
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
    stream.send_text(r#"{"id": "x1", "type": "request"}"#);
    let error = stream.error_frame().await;
    assert_eq!(
        (error["id"].as_str(), error["payload"]["code"].as_str()),
        (Some("x1"), Some("BAD_REQUEST")),
        "{error}"
    );
    stream
        .send_text(r#"{"id": "x2", "type": "response", "action": "agent.prompt", "payload": {}}"#);
    let error = stream.error_frame().await;
    assert_eq!(
        (error["id"].as_str(), error["payload"]["code"].as_str()),
        (Some("x2"), Some("BAD_REQUEST")),
        "{error}"
    );

    let unknown = stream.err("agent.frobnicate", json!({})).await;
    assert_eq!(unknown["code"], "UNKNOWN_ACTION");
    let unbound = stream.err("agent.prompt", json!({"text": "hi"})).await;
    assert_eq!(unbound["code"], "BAD_REQUEST");
    let bad_payload = stream
        .err("agent.session.start", json!({"session_id": 7}))
        .await;
    assert_eq!(bad_payload["code"], "BAD_REQUEST");
    let missing = stream
        .err("agent.session.attach", json!({"session_id": "nope"}))
        .await;
    assert_eq!(missing["code"], "NOT_FOUND");
    let spawn_failure = stream
        .err(
            "agent.session.start",
            json!({"session_id": "s-9", "agent": {"id": "x", "command": ["/nonexistent/agent"]}, "flags": {}}),
        )
        .await;
    assert_eq!(spawn_failure["code"], "BAD_REQUEST", "{spawn_failure}");
    // Still up and usable after all of that.
    let log = MockLog::new();
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

#[tokio::test]
async fn a_dropped_stream_keeps_pending_elicitations_answerable() {
    let mut h = Harness::start("two-identical", true).await;
    h.prompt("go").await;
    let first = pending_id(&h.stream.event("elicitation_requested").await);
    let second = pending_id(&h.stream.event("elicitation_requested").await);
    let Harness {
        agentctl,
        stream,
        log,
        ..
    } = h;
    stream.close();

    let mut again = agentctl.connect().await;
    let attached = again
        .ok("agent.session.attach", json!({"session_id": "s-1"}))
        .await;
    let listed: Vec<&str> = attached["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .filter_map(|p| p["pending_id"].as_str())
        .collect();
    assert_eq!(listed, [first.as_str(), second.as_str()]);
    for (id, option) in [(&first, "Postgres"), (&second, "SQLite")] {
        let reply = again
            .ok("agent.elicitations.respond", json!({"pending_id": id, "answers": [{"question_id": "question_0", "selected_options": [option]}]}))
            .await;
        assert_eq!(reply, json!({"success": true}));
    }
    assert_eq!(
        log.elicitation_answer(1).await.1["content"]["question_0"],
        "Postgres"
    );
    assert_eq!(
        log.elicitation_answer(2).await.1["content"]["question_0"],
        "SQLite"
    );
    assert_eq!(
        again.event("turn_completed").await["stop_reason"],
        "end_turn"
    );
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
    let last_seen: u64 = h.stream.seen.last().expect("seen")["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("seq");
    let Harness {
        agentctl,
        stream,
        log,
        ..
    } = h;
    stream.close();
    agentctl.wait_stderr("agent stream detached").await;
    // While detached: the deadline declines, the agent reports it and ends its turn.
    log.wait_until("the end of the turn", |log| {
        log.frames("send")
            .iter()
            .any(|f| f["result"]["stopReason"] == "end_turn")
    })
    .await;

    let mut again = agentctl.connect().await;
    let attached = again
        .ok("agent.session.attach", json!({"session_id": "s-1"}))
        .await;
    assert_eq!(attached["pending"], json!([]));
    let flushed = again.events_until("turn_completed").await;
    let ids: Vec<u64> = flushed
        .iter()
        .map(|f| f["id"].as_str().expect("id").parse().expect("seq"))
        .collect();
    let expected: Vec<u64> = (last_seen + 1..last_seen + 1 + ids.len() as u64).collect();
    assert_eq!(ids, expected, "no event lost, none reordered");
    let kinds: Vec<&str> = flushed
        .iter()
        .filter_map(|f| f["payload"]["event"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"elicitation_settled"));
    assert!(
        support::message_texts(&flushed)
            .iter()
            .any(|t| t.contains("\"action\":\"decline\"")),
        "{flushed:#?}"
    );
}

#[tokio::test]
async fn a_new_stream_attaching_replaces_the_old_one() {
    let h = Harness::start("plain", false).await;
    let mut newer = h.agentctl.connect().await;
    newer
        .ok("agent.session.attach", json!({"session_id": "s-1"}))
        .await;
    assert_eq!(h.stream.closed().await, "replaced by a newer agent stream");
    newer.ok("agent.prompt", json!({"text": "go"})).await;
    assert_eq!(
        newer.event("turn_completed").await["stop_reason"],
        "end_turn"
    );
}

#[tokio::test]
async fn a_running_session_cannot_be_started_twice() {
    let h = Harness::start("plain", false).await;
    let other = h.agentctl.connect().await;
    let log = MockLog::new();
    let refused = other
        .err(
            "agent.session.start",
            start_payload("s-1", "plain", false, &log),
        )
        .await;
    assert_eq!(refused["code"], "BAD_REQUEST");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("agent.session.attach")),
        "{refused}"
    );
}

#[tokio::test]
async fn one_turn_at_a_time() {
    let mut h = Harness::start("sleepy", false).await;
    h.prompt("go").await;
    h.stream.event("session_update").await;
    let second = h.stream.err("agent.prompt", json!({"text": "again"})).await;
    assert_eq!(second["code"], "BAD_REQUEST", "{second}");
    h.stream.ok("agent.cancel", json!({})).await;
    assert_eq!(
        h.stream.event("turn_completed").await["stop_reason"],
        "cancelled"
    );
    h.prompt("/e2e:plain").await;
    assert_eq!(
        h.stream.event("turn_completed").await["stop_reason"],
        "end_turn"
    );
}

#[tokio::test]
async fn attach_with_after_seq_replays_events_a_dying_stream_may_have_lost() {
    let mut h = Harness::start("plain", false).await;
    h.prompt("go").await;
    let first_run = h.stream.events_until("turn_completed").await;
    let ids: Vec<String> = first_run
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(ids.len() >= 3, "{first_run:#?}");
    // Suppose the backend processed only the first event before its stream broke.
    let after: u64 = ids[0].parse().expect("seq");
    let Harness {
        agentctl, stream, ..
    } = h;
    stream.close();
    agentctl.wait_stderr("agent stream detached").await;

    let mut again = agentctl.connect().await;
    again
        .ok(
            "agent.session.attach",
            json!({"session_id": "s-1", "after_seq": after}),
        )
        .await;
    let replayed = again.events_until("turn_completed").await;
    assert_eq!(
        replayed,
        first_run[1..],
        "everything after after_seq, again, in order"
    );

    // Without after_seq, only events no stream was given are flushed: none here.
    let mut third = agentctl.connect().await;
    let attached = third
        .ok("agent.session.attach", json!({"session_id": "s-1"}))
        .await;
    assert_eq!(attached["pending"], json!([]));
    third.ok("agent.prompt", json!({"text": "go"})).await;
    let next = third.events_until("turn_completed").await;
    let first_new: u64 = next[0]["id"].as_str().expect("id").parse().expect("seq");
    let last_old: u64 = ids.last().expect("last").parse().expect("seq");
    assert_eq!(
        first_new,
        last_old + 1,
        "no replay without after_seq, and no gap"
    );
}

#[tokio::test]
async fn an_agent_that_ignores_stdin_eof_is_killed_after_the_grace_period() {
    let agentctl = AgentCtl::start(&[]);
    let mut stream = agentctl.connect().await;
    let log = MockLog::new();
    let mut payload = start_payload("s-1", "single", true, &log);
    // The shell becomes `sleep` once the mock agent exits on EOF, so the process lingers.
    let quoted = shell_quoted(&payload["agent"]["command"]);
    payload["agent"]["command"] = json!(["sh", "-c", format!("{quoted}; exec sleep 60")]);
    stream.ok("agent.session.start", payload).await;
    stream.ok("agent.prompt", json!({"text": "go"})).await;
    stream.event("elicitation_requested").await;
    let started = std::time::Instant::now();
    assert_eq!(
        stream.ok("agent.shutdown", json!({})).await,
        json!({"success": true})
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "killed after the grace period, not waited out"
    );
    assert_eq!(
        stream.event("elicitation_settled").await["outcome"],
        "shutdown"
    );
    assert_eq!(
        stream.event("agent_exited").await["code"],
        Value::Null,
        "killed by a signal"
    );
    assert_eq!(
        log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
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
    let log = MockLog::new();
    stream
        .ok(
            "agent.session.start",
            support::start_payload_in("mock", "s-1", "many", dir.path(), true, &log),
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
        let answer = json!({"pending_id": id, "answers": [{"question_id": "question_0", "selected_options": [options[i % 3]]}]});
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

    assert_eq!(
        stream.event("turn_completed").await["stop_reason"],
        "end_turn"
    );
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
    let agentctl = AgentCtl::start(&[]);
    let mut stream = agentctl.connect().await;
    let log = MockLog::new();
    let mut payload = start_payload("s-1", "plain", false, &log);
    let quoted = shell_quoted(&payload["agent"]["command"]);
    payload["agent"]["command"] = json!([
        "sh",
        "-c",
        format!("echo \"token=[${{AGENTCTL_TOKEN:-}}]\" >&2; exec {quoted}")
    ]);
    stream.ok("agent.session.start", payload).await;
    let line = stream
        .event_where("agent_stderr", |e| {
            e["line"].as_str().is_some_and(|l| l.starts_with("token="))
        })
        .await;
    assert_eq!(line["line"], "token=[]");
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
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("handshake")),
        "{failed}"
    );
    // The same stream and id can start a working agent afterwards.
    let log = MockLog::new();
    let started = stream
        .ok(
            "agent.session.start",
            start_payload("s-1", "plain", false, &log),
        )
        .await;
    assert!(started["acp_session_id"].is_string());
}

/// The agent's argv as one single-quoted shell command line, to wrap it in `sh -c`.
fn shell_quoted(argv: &Value) -> String {
    argv.as_array()
        .expect("argv")
        .iter()
        .map(|a| format!("'{}'", a.as_str().expect("str")))
        .collect::<Vec<_>>()
        .join(" ")
}
