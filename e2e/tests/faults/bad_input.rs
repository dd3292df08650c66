//! Bad input from both sides: a burst of malformed elicitations, a wrong agent-stream token,
//! oversized bodies on every operator route.

use kandev_testkit::{Kandev, RemoteAgentctl, TURN_DEADLINE, answer_body, poll_until};
use serde_json::{Value, json};

use super::{Scenarios, await_step, elicit, id_of, text_form, vm_rss_kb};

#[tokio::test]
async fn a_burst_of_a_thousand_malformed_elicitations_is_all_declined_with_no_operator_surface() {
    const N: usize = 1000;
    let malformed = [
        json!("not an object"),
        json!(42),
        json!([1, 2]),
        json!(null),
        json!({}),
        json!({"mode": "url", "sessionId": "$SESSION_ID", "url": "https://x", "message": "m"}),
        json!({"mode": "form", "message": "no scope", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        json!({"mode": "form", "requestId": "r", "message": "request scope", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        json!({"mode": "form", "sessionId": "s", "message": "no questions", "requestedSchema": {"type": "object", "properties": {}}}),
        json!({"mode": "form", "sessionId": "s", "message": 7, "requestedSchema": "nope"}),
        json!({"mode": 3, "sessionId": ["x"]}),
    ];
    let scenarios = Scenarios::new();
    let steps: Vec<Value> = (0..N)
        .map(|i| json!({"elicit_raw": {"id": format!("m{i}"), "params": malformed[i % malformed.len()]}}))
        .collect();
    scenarios.add("burst", steps);
    scenarios.add("none", vec![json!({"text": "ready"})]);
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    // A first turn that elicits nothing brings the session (and its agentctl) up.
    let (_, session) = kandev.task_with_session("fault", "/e2e:none").await;
    let sid = id_of(&session);
    kandev.wait_session_state(&sid, "IDLE").await;
    let agentctl = kandev.agentctls()[0].0;
    let baseline_kb = vm_rss_kb(agentctl);

    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{sid}/prompt"),
            &json!({"text": "/e2e:burst"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let frames = scenarios.frames();
    poll_until("a response to each of the burst", TURN_DEADLINE, || async {
        (frames.elicitation_responses().len() >= N).then_some(())
    })
    .await;
    let responses = frames.elicitation_responses();
    assert_eq!(responses.len(), N, "exactly one response each");
    for (i, r) in responses.iter().enumerate() {
        assert_eq!(r, &json!({"action": "decline"}), "request {i}");
    }
    kandev.wait_session_state(&sid, "IDLE").await;
    assert!(
        kandev.clarifications(&sid, None).await.is_empty(),
        "no record"
    );
    assert!(
        ws.of_type("clarification.created").is_empty(),
        "no operator event"
    );
    assert!(
        !kandev
            .notifications()
            .await
            .iter()
            .any(|n| n["event"] == "session.clarification_requested"),
        "no notification"
    );
    let after_kb = vm_rss_kb(agentctl);
    eprintln!("agentctl VmRSS: {baseline_kb} kB before the burst, {after_kb} kB after");
    assert!(
        after_kb <= baseline_kb + 8 * 1024,
        "agentctl memory back near its baseline: {baseline_kb} kB → {after_kb} kB"
    );
}

#[tokio::test]
async fn a_wrong_agent_stream_token_is_401_and_starts_nothing() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}/api/v1/agent/stream", agentctl.addr());
    for token in [Some("wrong-token"), None] {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.as_str().into_client_request().expect("request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}").parse().expect("header"),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 401, "token {token:?}");
            }
            other => panic!("token {token:?}: expected 401, got {other:?}"),
        }
    }

    // kandev configured with the wrong token: the session fails, no agent ever runs.
    let scenarios = Scenarios::new();
    scenarios.add("none", vec![json!({"text": "ready"})]);
    let kandev = Kandev::start(
        scenarios
            .options()
            .remote(&format!("ws://{}", agentctl.addr()), "wrong-token"),
    )
    .await;
    let task = kandev.create_task("wrong token").await;
    let r = kandev
        .try_start_session(&id_of(&task), "fault", Some("/e2e:none"))
        .await;
    if r.status == 201 {
        kandev.wait_session_state(&id_of(&r.body), "FAILED").await;
    } else {
        assert!(r.status >= 400, "{r}");
    }
    assert!(
        !scenarios.log_path().exists(),
        "no agent was started: {}",
        scenarios.frames().tail(5)
    );
}

#[tokio::test]
async fn oversized_bodies_on_every_operator_route_are_413_and_store_nothing() {
    let scenarios = Scenarios::new();
    scenarios.add("one", vec![elicit("o1", text_form("o1")), await_step("o1")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    // Ids only: the session's own row may still be written (its stored state catches up
    // with the pending record the view already counts) while this test runs.
    let task_ids = |tasks: Value| -> Vec<Value> {
        tasks["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].clone())
            .collect()
    };
    let tasks_before = task_ids(kandev.api().get("/api/v1/tasks").await.body);
    let messages_before = kandev.messages(&asked.session_id).await.len();
    let flag_before = kandev.flag().await;
    let session_before = kandev.session(&asked.session_id).await;

    let big = "x".repeat(1024 * 1024 + 1);
    let sid = &asked.session_id;
    let routes = [
        (
            "POST",
            "/api/v1/tasks".to_owned(),
            json!({"title": big, "description": "d"}),
        ),
        (
            "PATCH",
            "/api/v1/runtime-flags/features.acpElicitation".to_owned(),
            json!({"override": false, "pad": big}),
        ),
        (
            "POST",
            format!("/api/v1/tasks/{}/sessions", asked.task_id),
            json!({"agent": "fault", "prompt": big}),
        ),
        (
            "POST",
            format!("/api/v1/sessions/{sid}/prompt"),
            json!({"text": big}),
        ),
        (
            "POST",
            format!("/api/v1/clarifications/{}/respond", asked.pending_id),
            answer_body(&[("answer", &[], &big)]),
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, body) in &routes {
        let r = kandev.api().request(method, path, Some(body)).await;
        if r.status != 413 || r.body["error"]["code"].as_str().is_none() {
            wrong.push(format!("{method} {path} → {} {}", r.status, r.body));
        }
    }
    assert!(wrong.is_empty(), "not 413 with a JSON error: {wrong:#?}");

    assert_eq!(
        task_ids(kandev.api().get("/api/v1/tasks").await.body),
        tasks_before,
        "no task stored"
    );
    assert_eq!(
        kandev.messages(sid).await.len(),
        messages_before,
        "no message stored"
    );
    assert_eq!(kandev.flag().await, flag_before, "the flag is unchanged");
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "pending", "{record}");
    let session = kandev.session(sid).await;
    assert_eq!(session["state"], session_before["state"], "{session}");
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the agent"
    );
}

/// `POST /api/v1/sessions/{id}/cancel` and `/stop` take no body, so axum's
/// `DefaultBodyLimit` alone would never apply to them; the backend's body-limit layer
/// answers 413 before any handler runs, and nothing is cancelled or stopped.
#[tokio::test]
async fn oversized_bodies_on_cancel_and_stop_are_413_and_change_nothing() {
    let scenarios = Scenarios::new();
    scenarios.add("one", vec![elicit("o2", text_form("o2")), await_step("o2")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    let big = "x".repeat(1024 * 1024 + 1);
    let sid = &asked.session_id;
    for action in ["cancel", "stop"] {
        let r = kandev
            .api()
            .post(
                &format!("/api/v1/sessions/{sid}/{action}"),
                &json!({"pad": big}),
            )
            .await;
        assert_eq!(r.status, 413, "{action}: {r}");
    }
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(
        record["status"], "pending",
        "nothing was cancelled: {record}"
    );
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the agent"
    );
}
