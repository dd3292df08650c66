//! Route tests: the router driven with `oneshot`, on in-memory SQLite, with a fake
//! agentctl link whose events the tests push.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ErrorCode, ErrorPayload, SettleOutcome,
};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::agent_link::{LinkError, LinkEvent};
use crate::config::Config;
use crate::state::AppState;
use crate::testing::{FakeConnector, app, app_with, eventually};

async fn call(router: &Router, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(
            body.map(|b| Body::from(b.to_owned()))
                .unwrap_or_else(Body::empty),
        )
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
        .await
        .expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, json)
}

fn assert_error(got: &(StatusCode, Value), status: u16, code: &str) {
    assert_eq!(got.0.as_u16(), status, "{:?}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{:?}", got.1);
    assert!(
        got.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

async fn task(router: &Router) -> String {
    let (s, v) = call(
        router,
        "POST",
        "/api/v1/tasks",
        Some(r#"{"title": "Fix the login page"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    v["id"].as_str().expect("id").to_owned()
}

async fn session(router: &Router, task: &str, prompt: Option<&str>) -> Value {
    let body = match prompt {
        Some(p) => json!({"agent": "mock", "prompt": p}),
        None => json!({"agent": "mock"}),
    };
    let (s, v) = call(
        router,
        "POST",
        &format!("/api/v1/tasks/{task}/sessions"),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v
}

fn elicitation(pending_id: &str, text: &str) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::ElicitationRequested(
        serde_json::from_value(json!({
            "pending_id": pending_id,
            "acp_session_id": "acp-1",
            "tool_call_id": "tool-1",
            "message": text,
            "questions": [{"id": "question_0", "kind": "single_select", "title": "Colour",
                "prompt": text, "options": [{"id": "Red", "label": "Red", "description": null},
                {"id": "Blue", "label": "Blue", "description": null}],
                "custom_answer": null, "required": false, "default": null, "constraints": {}}]
        }))
        .expect("event"),
    ))
}

/// Waits until `n` clarifications are pending.
async fn wait_pending_count(router: &Router, n: usize) {
    eventually(&format!("{n} pending clarifications"), || async {
        let v = get(router, "/api/v1/clarifications?status=pending").await;
        (v["clarifications"].as_array().map(Vec::len) == Some(n)).then_some(())
    })
    .await;
}

async fn get(router: &Router, uri: &str) -> Value {
    let (s, v) = call(router, "GET", uri, None).await;
    assert_eq!(s, StatusCode::OK, "{uri}: {v}");
    v
}

async fn wait_state(router: &Router, session: &str, state: &str) -> Value {
    let uri = format!("/api/v1/sessions/{session}");
    eventually(&format!("session {state}"), || async {
        let v = get(router, &uri).await;
        (v["state"] == state).then_some(v)
    })
    .await
}

/// An app with one started session and its fake link.
async fn started() -> (
    AppState,
    Router,
    std::sync::Arc<FakeConnector>,
    String,
    String,
) {
    let (state, connector) = app().await;
    let router = super::router(state.clone());
    let task = task(&router).await;
    let s = session(&router, &task, None).await;
    let id = s["id"].as_str().expect("id").to_owned();
    (state, router, connector, task, id)
}

#[tokio::test]
async fn healthz_and_unknown_routes() {
    let (state, _) = app().await;
    let router = super::router(state);
    assert_eq!(get(&router, "/healthz").await, json!({"status": "ok"}));
    assert_eq!(
        get(&router, "/api/v1/agents").await,
        json!({"agents": [{"id": "mock"}]})
    );
    assert_error(
        &call(&router, "GET", "/api/v1/nope", None).await,
        404,
        "NOT_FOUND",
    );
    assert_error(
        &call(&router, "POST", "/healthz", None).await,
        405,
        "METHOD_NOT_ALLOWED",
    );
    assert_error(
        &call(&router, "DELETE", "/api/v1/tasks", None).await,
        405,
        "METHOD_NOT_ALLOWED",
    );
    // Everything else is the embedded web UI.
    let resp = router
        .clone()
        .oneshot(
            Request::builder()
                .uri("/")
                .body(Body::empty())
                .expect("req"),
        )
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .expect("ct")
            .starts_with("text/html")
    );
    assert_error(
        &call(&router, "GET", "/nope.js", None).await,
        404,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn runtime_flags_list_patch_and_errors() {
    let (state, _) = app().await;
    let router = super::router(state.clone());
    let v = get(&router, "/api/v1/runtime-flags").await;
    let flag = &v["flags"][0];
    assert_eq!(flag["key"], "features.acpElicitation");
    assert_eq!(flag["env_var"], "KANDEV_FEATURES_ACP_ELICITATION");
    assert_eq!(
        (
            flag["value"].clone(),
            flag["source"].clone(),
            flag["locked"].clone()
        ),
        (json!(false), json!("default"), json!(false))
    );
    for field in [
        "kind",
        "label",
        "description",
        "stability",
        "risk_level",
        "restart_required",
        "mutable",
    ] {
        assert!(flag.get(field).is_some(), "{field}");
    }

    let uri = "/api/v1/runtime-flags/features.acpElicitation";
    let mut ws = state.hub.subscribe();
    let (s, v) = call(&router, "PATCH", uri, Some(r#"{"override": true}"#)).await;
    let pushed = tokio::time::timeout(std::time::Duration::from_secs(2), ws.recv())
        .await
        .expect("pushed in time")
        .expect("runtime_flags.updated");
    assert_eq!(
        (pushed.kind, pushed.data["value"].clone()),
        ("runtime_flags.updated", json!(true))
    );
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (v["value"].clone(), v["source"].clone()),
        (json!(true), json!("override"))
    );
    let (_, v) = call(&router, "PATCH", uri, Some(r#"{"override": null}"#)).await;
    assert_eq!(v["source"], "default");

    assert_error(
        &call(
            &router,
            "PATCH",
            "/api/v1/runtime-flags/features.teleport",
            Some(r#"{"override": true}"#),
        )
        .await,
        404,
        "NOT_FOUND",
    );
    for bad in [
        r#"{}"#,
        r#"{"override": "yes"}"#,
        r#"{"override": true, "x": 1}"#,
        r#"[true]"#,
        "not json",
    ] {
        assert_error(
            &call(&router, "PATCH", uri, Some(bad)).await,
            400,
            "BAD_REQUEST",
        );
    }
}

#[tokio::test]
async fn an_env_locked_flag_refuses_patch_with_409() {
    let env = BTreeMap::from([(
        "KANDEV_FEATURES_ACP_ELICITATION".to_owned(),
        "true".to_owned(),
    )]);
    let (state, _) = app_with(env, Config::default()).await;
    let router = super::router(state);
    let got = call(
        &router,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(r#"{"override": false}"#),
    )
    .await;
    assert_error(&got, 409, "FLAG_LOCKED");
    let v = get(&router, "/api/v1/runtime-flags").await;
    assert_eq!(
        (
            v["flags"][0]["source"].clone(),
            v["flags"][0]["locked"].clone()
        ),
        (json!("env"), json!(true))
    );
}

#[tokio::test]
async fn tasks_create_list_get_and_errors() {
    let (state, _) = app().await;
    let router = super::router(state);
    assert_error(
        &call(&router, "POST", "/api/v1/tasks", Some(r#"{"title": "  "}"#)).await,
        400,
        "BAD_REQUEST",
    );
    assert_error(
        &call(
            &router,
            "POST",
            "/api/v1/tasks",
            Some(r#"{"description": "x"}"#),
        )
        .await,
        400,
        "BAD_REQUEST",
    );
    assert_error(
        &call(&router, "POST", "/api/v1/tasks", Some("{")).await,
        400,
        "BAD_REQUEST",
    );
    let huge = json!({"title": "x".repeat(super::BODY_LIMIT + 10)}).to_string();
    assert_error(
        &call(&router, "POST", "/api/v1/tasks", Some(&huge)).await,
        413,
        "PAYLOAD_TOO_LARGE",
    );
    let id = task(&router).await;
    let v = get(&router, &format!("/api/v1/tasks/{id}")).await;
    assert_eq!(v["title"], "Fix the login page");
    assert_eq!(v["sessions"], json!([]));
    assert_eq!(v["pending_action"], Value::Null);
    let v = get(&router, "/api/v1/tasks").await;
    assert_eq!(v["tasks"].as_array().map(Vec::len), Some(1));
    assert_error(
        &call(&router, "GET", "/api/v1/tasks/nope", None).await,
        404,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn session_start_errors() {
    let (state, connector) = app().await;
    let router = super::router(state);
    let id = task(&router).await;
    assert_error(
        &call(
            &router,
            "POST",
            "/api/v1/tasks/nope/sessions",
            Some(r#"{"agent": "mock"}"#),
        )
        .await,
        404,
        "NOT_FOUND",
    );
    let got = call(
        &router,
        "POST",
        &format!("/api/v1/tasks/{id}/sessions"),
        Some(r#"{"agent": "gpt-9"}"#),
    )
    .await;
    assert_error(&got, 400, "BAD_REQUEST");
    assert!(
        got.1["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("mock"),
        "lists the known agents"
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/tasks/{id}/sessions"),
            Some(r#"{}"#),
        )
        .await,
        400,
        "BAD_REQUEST",
    );

    // agentctl unreachable: the session is created and FAILED, with the reason.
    connector
        .unreachable
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let s = session(&router, &id, None).await;
    assert_eq!(s["state"], "FAILED");
    assert!(
        s["error"]
            .as_str()
            .expect("error")
            .contains("connection refused")
    );
}

#[tokio::test]
async fn a_patch_applies_to_the_next_session_start() {
    let (state, connector) = app().await;
    let router = super::router(state);
    let id = task(&router).await;
    let off = session(&router, &id, None).await;
    assert_eq!(off["state"], "IDLE");
    assert!(off["client_capabilities"].get("elicitation").is_none());
    assert_eq!(off["flags"], json!({"features.acpElicitation": false}));
    let (s, _) = call(
        &router,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(r#"{"override": true}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let on = session(&router, &id, None).await;
    assert_eq!(
        on["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let sent = connector
        .link(on["id"].as_str().expect("id"))
        .calls_of("agent.session.start");
    assert_eq!(sent[0]["flags"], json!({"features.acpElicitation": true}));
    assert_eq!(sent[0]["agent"]["id"], "mock");
    assert_eq!(sent[0]["agent"]["command"][1], "--scenario");
    // The first session keeps what it started with.
    let first = get(
        &router,
        &format!("/api/v1/sessions/{}", off["id"].as_str().expect("id")),
    )
    .await;
    assert!(first["client_capabilities"].get("elicitation").is_none());
}

#[tokio::test]
async fn prompt_runs_a_turn_and_messages_aggregate() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    assert_error(
        &call(
            &router,
            "POST",
            "/api/v1/sessions/nope/prompt",
            Some(r#"{"text": "hi"}"#),
        )
        .await,
        404,
        "NOT_FOUND",
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/prompt"),
            Some(r#"{"text": ""}"#),
        )
        .await,
        400,
        "BAD_REQUEST",
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/prompt"),
            Some(r#"{"txt": "x"}"#),
        )
        .await,
        400,
        "BAD_REQUEST",
    );
    let (s, _) = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/prompt"),
        Some(r#"{"text": "Say hello"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "RUNNING"
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/prompt"),
            Some(r#"{"text": "again"}"#),
        )
        .await,
        409,
        "TURN_IN_PROGRESS",
    );
    for text in ["Hel", "lo"] {
        link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}),
        }));
    }
    link.push(LinkEvent::Agent(AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    }));
    wait_state(&router, &id, "IDLE").await;
    let v = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    let summary: Vec<(String, String)> = v["messages"]
        .as_array()
        .expect("list")
        .iter()
        .map(|m| {
            (
                m["author_type"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("user".to_owned(), "Say hello".to_owned()),
            ("agent".to_owned(), "Hello".to_owned())
        ]
    );
    assert_error(
        &call(&router, "GET", "/api/v1/sessions/nope/messages", None).await,
        404,
        "NOT_FOUND",
    );
    // turn_finished is off by default.
    assert_eq!(
        get(&router, "/api/v1/notifications").await["notifications"],
        json!([])
    );
}

#[tokio::test]
async fn prompt_when_the_stream_is_down_is_503() {
    let (_, router, connector, _, id) = started().await;
    connector
        .link(&id)
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let got = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/prompt"),
        Some(r#"{"text": "x"}"#),
    )
    .await;
    assert_error(&got, 503, "AGENT_STREAM_NOT_CONNECTED");
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}/messages")).await["messages"],
        json!([])
    );
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "IDLE"
    );
    let got = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/cancel"),
        None,
    )
    .await;
    assert_error(&got, 503, "AGENT_STREAM_NOT_CONNECTED");
    assert_error(
        &call(&router, "POST", "/api/v1/sessions/nope/cancel", None).await,
        404,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn agentctl_errors_map_to_their_statuses() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    let prompt = format!("/api/v1/sessions/{id}/prompt");
    let body = Some(r#"{"text": "x"}"#);
    link.reply(
        "agent.prompt",
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::Internal,
            "agent crashed",
        ))),
    );
    assert_error(
        &call(&router, "POST", &prompt, body).await,
        502,
        "AGENTCTL_ERROR",
    );
    link.reply(
        "agent.prompt",
        Err(LinkError::Timeout(std::time::Duration::from_secs(30))),
    );
    assert_error(
        &call(&router, "POST", &prompt, body).await,
        504,
        "AGENTCTL_TIMEOUT",
    );
    link.reply(
        "agent.prompt",
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::BadRequest,
            "no session",
        ))),
    );
    assert_error(
        &call(&router, "POST", &prompt, body).await,
        400,
        "BAD_REQUEST",
    );
    link.reply("agent.prompt", Err(LinkError::Protocol("garbled".into())));
    assert_error(
        &call(&router, "POST", &prompt, body).await,
        502,
        "AGENTCTL_ERROR",
    );
    // None of them left a turn running or a user message behind.
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "IDLE"
    );
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}/messages")).await["messages"],
        json!([])
    );
}

#[tokio::test]
async fn elicitation_creates_record_message_state_and_one_notification() {
    let (state, router, connector, task_id, id) = started().await;
    let mut ws = state.hub.subscribe();
    let link = connector.link(&id);
    let pending = "0b6c7a4e-1d2f-4a8b-9c3d-5e6f7a8b9c0d";
    link.push(elicitation(pending, "Pick a colour"));
    let s = wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    assert_eq!(s["pending_action"], "clarification");
    let t = get(&router, &format!("/api/v1/tasks/{task_id}")).await;
    assert_eq!(
        (t["state"].clone(), t["pending_action"].clone()),
        (json!("WAITING_FOR_INPUT"), json!("clarification"))
    );

    let rec = get(&router, &format!("/api/v1/clarifications/{pending}")).await;
    assert_eq!(rec["pending_id"], pending, "agentctl's id verbatim");
    assert_eq!(
        (rec["source"].clone(), rec["status"].clone()),
        (json!("elicitation"), json!("pending"))
    );
    let msgs = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    let m = &msgs["messages"][0];
    assert_eq!(
        (
            m["type"].clone(),
            m["author_type"].clone(),
            m["requests_input"].clone()
        ),
        (json!("clarification_request"), json!("agent"), json!(true))
    );
    assert_eq!(m["metadata"]["pending_id"], pending);
    assert_eq!(m["metadata"]["status"], "pending");
    assert_eq!(m["metadata"]["questions"][0]["id"], "question_0");

    let list = eventually("the notification", || async {
        let n = get(&router, "/api/v1/notifications").await;
        let list = n["notifications"].as_array().cloned().unwrap_or_default();
        (!list.is_empty()).then_some(list)
    })
    .await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["event"], "session.clarification_requested");
    assert!(
        list[0]["body"]
            .as_str()
            .expect("body")
            .contains("Fix the login page")
    );
    assert!(
        !list[0]["body"]
            .as_str()
            .expect("body")
            .contains("Pick a colour")
    );

    let mut kinds = Vec::new();
    for kind in [
        "clarification.created",
        "message.created",
        "session.updated",
        "task.updated",
        "notification",
    ] {
        while !kinds.contains(&kind) {
            let event = tokio::time::timeout(std::time::Duration::from_secs(2), ws.recv())
                .await
                .unwrap_or_else(|_| panic!("no {kind} event; got {kinds:?}"))
                .expect("hub open");
            kinds.push(event.kind);
        }
    }

    let filtered = get(
        &router,
        &format!("/api/v1/clarifications?session_id={id}&status=pending"),
    )
    .await;
    assert_eq!(filtered["clarifications"].as_array().map(Vec::len), Some(1));
    let none = get(&router, "/api/v1/clarifications?status=answered").await;
    assert_eq!(none["clarifications"], json!([]));
    assert_error(
        &call(&router, "GET", "/api/v1/clarifications?status=bogus", None).await,
        400,
        "BAD_REQUEST",
    );
    assert_error(
        &call(&router, "GET", "/api/v1/clarifications/nope", None).await,
        404,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn respond_forwards_first_and_settles_from_agentctls_verdict() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "Pick a colour"));
    link.push(elicitation("p-2", "Pick a colour"));
    wait_pending_count(&router, 2).await;
    let respond = |pid: &str| format!("/api/v1/clarifications/{pid}/respond");
    let answer = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}], "rejected": false, "reject_reason": ""}"#;

    // Unknown id in the backend: 404 from the backend, nothing forwarded.
    let got = call(&router, "POST", &respond("nope"), Some(answer)).await;
    assert_error(&got, 404, "NOT_FOUND");
    assert_eq!(got.1["error"]["origin"], "backend");
    assert!(link.calls_of("agent.elicitations.respond").is_empty());
    assert_error(
        &call(&router, "POST", &respond("p-1"), Some(r#"{"answers": 3}"#)).await,
        400,
        "BAD_REQUEST",
    );

    // INVALID_ANSWER passes through as 400, record stays pending.
    link.reply(
        "agent.elicitations.respond",
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::InvalidAnswer,
            "option `Green` is not declared",
        ))),
    );
    let got = call(&router, "POST", &respond("p-1"), Some(answer)).await;
    assert_error(&got, 400, "INVALID_ANSWER");
    assert!(
        got.1["error"]["message"]
            .as_str()
            .expect("m")
            .contains("Green")
    );
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "pending"
    );

    // Stream down: 503, record stays pending (AC-20a).
    link.down.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_error(
        &call(&router, "POST", &respond("p-1"), Some(answer)).await,
        503,
        "AGENT_STREAM_NOT_CONNECTED",
    );
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "pending"
    );
    link.down.store(false, std::sync::atomic::Ordering::SeqCst);

    // Success: answered, message metadata updated, the twin still pending (D4).
    let (s, v) = call(&router, "POST", &respond("p-1"), Some(answer)).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    let rec = get(&router, "/api/v1/clarifications/p-1").await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    assert!(rec["settled_at"].is_string());
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-2").await["status"],
        "pending"
    );
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "WAITING_FOR_INPUT"
    );

    // A second submission is still forwarded; agentctl's NOT_FOUND comes back as origin agentctl.
    link.reply(
        "agent.elicitations.respond",
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::NotFound,
            "no pending `p-1`",
        ))),
    );
    let got = call(&router, "POST", &respond("p-1"), Some(answer)).await;
    assert_error(&got, 404, "NOT_FOUND");
    assert_eq!(got.1["error"]["origin"], "agentctl");
    assert_eq!(
        link.calls_of("agent.elicitations.respond").len(),
        3,
        "every submission reached agentctl"
    );
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "answered"
    );

    // Skip: declined.
    let (s, v) = call(
        &router,
        "POST",
        &respond("p-2"),
        Some(r#"{"rejected": true, "reject_reason": "later"}"#),
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "declined"})));
    wait_state(&router, &id, "IDLE").await;
    let msgs = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    let statuses: Vec<Value> = msgs["messages"]
        .as_array()
        .expect("l")
        .iter()
        .map(|m| m["metadata"]["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("answered"), json!("declined")]);
}

#[tokio::test]
async fn settled_events_withdraw_the_surface() {
    let (state, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    let mut ws = state.hub.subscribe();
    link.push(LinkEvent::Agent(AgentEvent::ElicitationSettled {
        pending_id: "p-1".into(),
        outcome: SettleOutcome::TimedOut,
        response: json!({"action": "decline"}),
        answer: None,
        answered_by: None,
    }));
    let s = wait_state(&router, &id, "IDLE").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "expired"
    );
    let msgs = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    assert_eq!(msgs["messages"][0]["metadata"]["status"], "expired");
    let kinds: Vec<&str> = std::iter::from_fn(|| ws.try_recv().ok())
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"clarification.settled"), "{kinds:?}");

    // A settled event for a record the operator already settled changes nothing.
    link.push(elicitation("p-2", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    let (s, _) = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-2/respond",
        Some(r#"{"answers": []}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    link.push(LinkEvent::Agent(AgentEvent::ElicitationSettled {
        pending_id: "p-2".into(),
        outcome: SettleOutcome::Answered,
        response: json!({"action": "accept", "content": {}}),
        answer: None,
        answered_by: None,
    }));
    link.push(LinkEvent::Agent(AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    }));
    wait_state(&router, &id, "IDLE").await;
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-2").await["status"],
        "answered"
    );
}

#[tokio::test]
async fn a_lost_link_disconnects_pendings_and_answers_are_not_delivered() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    link.push(LinkEvent::Lost {
        reason: "agentctl died".into(),
    });
    let s = wait_state(&router, &id, "FAILED").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "agent_disconnected"
    );
    let (s, v) = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-1/respond",
        Some(r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]}"#),
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "not_delivered"})));
    assert!(
        link.calls_of("agent.elicitations.respond").is_empty(),
        "nothing sent"
    );
    let msgs = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    let m = msgs["messages"]
        .as_array()
        .expect("l")
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("msg")
        .clone();
    assert_eq!(m["metadata"]["status"], "agent_disconnected");
    assert_eq!(
        m["metadata"]["undelivered_answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/prompt"),
            Some(r#"{"text": "x"}"#),
        )
        .await,
        409,
        "SESSION_ENDED",
    );
}

#[tokio::test]
async fn reattach_disconnects_records_agentctl_no_longer_holds() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "q"));
    link.push(elicitation("p-2", "q"));
    wait_pending_count(&router, 2).await;
    link.push(LinkEvent::Disconnected);
    let keep = match elicitation("p-2", "q") {
        LinkEvent::Agent(AgentEvent::ElicitationRequested(r)) => r,
        _ => unreachable!(),
    };
    link.push(LinkEvent::Reattached {
        pending: vec![keep],
        questions: Some(Vec::new()),
    });
    eventually("p-1 disconnected", || async {
        (get(&router, "/api/v1/clarifications/p-1").await["status"] == "agent_disconnected")
            .then_some(())
    })
    .await;
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-2").await["status"],
        "pending"
    );
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "WAITING_FOR_INPUT"
    );
}

#[tokio::test]
async fn agent_exit_fails_the_session() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(LinkEvent::Agent(AgentEvent::AgentExited { code: Some(3) }));
    let s = wait_state(&router, &id, "FAILED").await;
    assert!(s["error"].as_str().expect("error").contains('3'));
    eventually("agentctl stopped", || async {
        link.shut
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn cancel_and_stop() {
    let (_, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    let (s, _) = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(link.calls_of("agent.cancel").len(), 1);
    let (s, _) = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let v = get(&router, &format!("/api/v1/sessions/{id}")).await;
    assert_eq!(
        (v["state"].clone(), v["pending_action"].clone()),
        (json!("COMPLETED"), Value::Null)
    );
    assert!(link.shut.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "cancelled"
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/stop"),
            None,
        )
        .await,
        409,
        "SESSION_ENDED",
    );
    assert_error(
        &call(
            &router,
            "POST",
            &format!("/api/v1/sessions/{id}/cancel"),
            None,
        )
        .await,
        409,
        "SESSION_ENDED",
    );
    assert_error(
        &call(&router, "POST", "/api/v1/sessions/nope/stop", None).await,
        404,
        "NOT_FOUND",
    );
    // A late answer to a record of an ended session: agentctl cannot be asked, the backend says so.
    let got = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-1/respond",
        Some(r#"{"answers": []}"#),
    )
    .await;
    assert_error(&got, 404, "NOT_FOUND");
    assert_eq!(got.1["error"]["origin"], "backend");
}

#[tokio::test]
async fn turn_finished_notification_when_enabled() {
    let mut config = Config::default();
    config.notifications.turn_finished = true;
    let (state, connector) = app_with(BTreeMap::new(), config).await;
    let router = super::router(state);
    let task = task(&router).await;
    let s = session(&router, &task, Some("go")).await;
    assert_eq!(s["state"], "RUNNING");
    let id = s["id"].as_str().expect("id");
    let link = connector.link(id);
    assert_eq!(link.calls_of("agent.prompt"), [json!({"text": "go"})]);
    link.push(LinkEvent::Agent(AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    }));
    wait_state(&router, id, "IDLE").await;
    let n = get(&router, "/api/v1/notifications").await;
    assert_eq!(n["notifications"][0]["event"], "session.turn_finished");
}

/// A fresh runtime on the same database plays the role of the next process.
fn next_process(
    state: &AppState,
    connector: &std::sync::Arc<FakeConnector>,
    config: Config,
) -> AppState {
    AppState::new(
        state.stores.clone(),
        config,
        kandev_flags::FlagService::new(
            kandev_flags::Profile::Dev,
            kandev_flags::Profiles::empty(),
            BTreeMap::<String, String>::new(),
            crate::store::StoredOverrides(state.stores.flag_overrides.clone()),
        ),
        connector.clone(),
    )
}

fn remote_config() -> Config {
    Config {
        executor: crate::agent_link::ExecutorConfig::remote("ws://127.0.0.1:7740", "t"),
        ..Config::default()
    }
}

#[tokio::test]
async fn restart_under_a_remote_executor_reattaches_and_keeps_what_agentctl_holds() {
    let (state, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    // A turn is on: its questions arrive inside it.
    let (s, _) = call(
        &router,
        "POST",
        &format!("/api/v1/sessions/{id}/prompt"),
        Some(r#"{"text": "go"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // The link has handed over events up to sequence number 2.
    *link.delivered.lock().expect("lock") = Some(2);
    link.push(elicitation("p-1", "q"));
    link.push(elicitation("p-2", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    wait_pending_count(&router, 2).await;
    // Once applied, how far is stored, for the next process to re-attach after it.
    eventually("the last applied event stored", || async {
        let row = state
            .stores
            .sessions
            .session(&id)
            .await
            .expect("row")
            .expect("session");
        (row.last_event_seq == Some(2)).then_some(())
    })
    .await;

    let next = next_process(&state, &connector, remote_config());
    assert_eq!(
        next.sessions
            .reconcile_after_restart()
            .await
            .expect("reconcile"),
        crate::sessions::Reconciled {
            resumed: 1,
            failed: 0
        }
    );
    assert_eq!(
        *connector.resumed.lock().expect("lock"),
        vec![(id.clone(), Some(2))],
        "re-attached after the last event the previous process applied"
    );
    // The resumed link reports agentctl's list first: p-2 is still held, p-1 is not.
    let link = connector.link(&id);
    let keep = match elicitation("p-2", "q") {
        LinkEvent::Agent(AgentEvent::ElicitationRequested(r)) => r,
        _ => unreachable!(),
    };
    link.push(LinkEvent::Reattached {
        pending: vec![keep],
        questions: Some(Vec::new()),
    });
    let router = super::router(next);
    eventually("p-1 disconnected", || async {
        (get(&router, "/api/v1/clarifications/p-1").await["status"] == "agent_disconnected")
            .then_some(())
    })
    .await;
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-2").await["status"],
        "pending"
    );
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "WAITING_FOR_INPUT"
    );
    // The record agentctl still holds is answered through the resumed link.
    let (s, v) = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-2/respond",
        Some(r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]}"#),
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    let sent = link.calls_of("agent.elicitations.respond");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["pending_id"], "p-2");
    // The turn is still on: answering its last question does not make the session idle.
    assert_eq!(
        wait_state(&router, &id, "RUNNING").await["pending_action"],
        Value::Null
    );
}

#[tokio::test]
async fn restart_under_a_remote_executor_fails_a_session_agentctl_cannot_resume() {
    let (state, router, connector, _, id) = started().await;
    connector.link(&id).push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    connector
        .unreachable
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let next = next_process(&state, &connector, remote_config());
    assert_eq!(
        next.sessions
            .reconcile_after_restart()
            .await
            .expect("reconcile"),
        crate::sessions::Reconciled {
            resumed: 0,
            failed: 1
        }
    );
    let router = super::router(next);
    let s = get(&router, &format!("/api/v1/sessions/{id}")).await;
    assert_eq!(s["state"], "FAILED");
    assert!(
        s["error"]
            .as_str()
            .is_some_and(|e| e.contains("re-attaching to agentctl failed")),
        "{s}"
    );
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "agent_disconnected"
    );
}

#[tokio::test]
async fn restart_reconciliation_fails_stale_sessions() {
    let (state, router, connector, _, id) = started().await;
    connector.link(&id).push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    let next = next_process(&state, &connector, Config::default());
    assert_eq!(
        next.sessions
            .reconcile_after_restart()
            .await
            .expect("reconcile"),
        crate::sessions::Reconciled {
            resumed: 0,
            failed: 1
        }
    );
    let router = super::router(next);
    assert_eq!(
        get(&router, &format!("/api/v1/sessions/{id}")).await["state"],
        "FAILED"
    );
    assert_eq!(
        get(&router, "/api/v1/clarifications/p-1").await["status"],
        "agent_disconnected"
    );
    let (s, v) = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-1/respond",
        Some(r#"{"answers": []}"#),
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "not_delivered"})));
}

#[tokio::test]
async fn a_settled_event_racing_the_respond_success_ends_in_one_consistent_state() {
    let (state, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    link.push(elicitation("p-1", "q"));
    wait_state(&router, &id, "WAITING_FOR_INPUT").await;
    let mut ws = state.hub.subscribe();
    let answer = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Blue"]}]}"#;
    let (s, v) = call(
        &router,
        "POST",
        "/api/v1/clarifications/p-1/respond",
        Some(answer),
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    // Let the consumer apply the settled event it received during the request.
    link.push(LinkEvent::Agent(AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    }));
    wait_state(&router, &id, "IDLE").await;
    let rec = get(&router, "/api/v1/clarifications/p-1").await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Blue"])
    );
    let settled: Vec<_> = std::iter::from_fn(|| ws.try_recv().ok())
        .filter(|e| e.kind == "clarification.settled")
        .collect();
    assert_eq!(settled.len(), 1, "withdrawn once");
    assert_eq!(
        settled[0].data["answer"]["answers"][0]["selected_options"],
        json!(["Blue"])
    );
}

/// A route that reads no body (`/cancel`) still refuses one past the limit, whether its
/// length is declared or not (a chunked body carries no `Content-Length`), and acts on
/// nothing: the session keeps its state.
#[tokio::test]
async fn oversized_bodies_are_413_before_any_handler_runs() {
    let (_state, router, _connector, _task, id) = started().await;
    let before = get(&router, &format!("/api/v1/sessions/{id}")).await;
    let big = "x".repeat(super::BODY_LIMIT + 1);
    for declared in [true, false] {
        let mut req = Request::builder()
            .method("POST")
            .uri(format!("/api/v1/sessions/{id}/cancel"));
        if declared {
            req = req.header("content-length", big.len().to_string());
        }
        let req = req.body(Body::from(big.clone())).expect("request");
        let resp = router.clone().oneshot(req).await.expect("response");
        assert_eq!(
            resp.status(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "declared: {declared}"
        );
    }
    let after = get(&router, &format!("/api/v1/sessions/{id}")).await;
    assert_eq!(before["state"], after["state"]);
    // A small body without a declared length still reaches the handler.
    let req = Request::builder()
        .method("POST")
        .uri("/api/v1/tasks")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"title": "chunked"}"#))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::CREATED);
}

fn ask_user_question(request_id: &str, prompt: &str) -> AskUserQuestionRequested {
    serde_json::from_value(json!({
        "request_id": request_id,
        "acp_session_id": "acp-1",
        "questions": [{"id": "q1", "title": null, "prompt": prompt, "kind": "single_select",
            "options": [{"id": "Yes", "label": "Yes", "description": null},
                {"id": "No", "label": "No", "description": null}],
            "custom_answer": null, "required": true, "default": null, "constraints": {}}],
        "context": null
    }))
    .expect("ask_user_question_requested")
}

/// The record whose message is `prompt`, whatever its status.
async fn record_asking(router: &Router, session: &str, prompt: &str) -> Value {
    let v = get(
        router,
        &format!("/api/v1/clarifications?session_id={session}"),
    )
    .await;
    v["clarifications"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["message"] == prompt).cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn reattach_cancels_ask_user_question_calls_agentctl_no_longer_holds() {
    let (state, router, connector, _, id) = started().await;
    let link = connector.link(&id);
    let gone = ask_user_question("call-gone", "Deploy now?");
    let held = ask_user_question("call-held", "Run the migration?");
    link.push(LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(
        gone.clone(),
    )));
    link.push(LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(
        held.clone(),
    )));
    wait_pending_count(&router, 2).await;

    // No question list (agentctl did not answer it) is "unknown": nothing is withdrawn.
    // The elicitation pushed behind it is the sync point: events are applied in order.
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: None,
    });
    link.push(elicitation("p-sync", "q"));
    wait_pending_count(&router, 3).await;

    // call-gone's `ask_user_question_settled` was lost; agentctl lists only call-held,
    // and a call whose requested event was lost as well.
    let mut ws = state.hub.subscribe();
    let unseen = ask_user_question("call-unseen", "Rotate the keys?");
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: Some(vec![held, unseen]),
    });
    // The surface is withdrawn like any settlement: the WS event (published last, after
    // the record and its message metadata are written) is the sync point.
    let event = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            let e = ws.recv().await.expect("hub open");
            if e.kind == "clarification.settled" && e.data["message"] == "Deploy now?" {
                return e;
            }
        }
    })
    .await
    .expect("clarification.settled within 5 s");
    assert_eq!(event.data["status"], "cancelled");
    let cancelled = record_asking(&router, &id, "Deploy now?").await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["pending_id"], event.data["pending_id"]);
    let msgs = get(&router, &format!("/api/v1/sessions/{id}/messages")).await;
    let message = msgs["messages"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|m| m["metadata"]["pending_id"] == cancelled["pending_id"])
        })
        .cloned()
        .expect("the record's message");
    assert_eq!(message["metadata"]["status"], "cancelled");
    // p-sync is an elicitation agentctl no longer lists either; call-held and
    // call-unseen remain, so the session still waits for input.
    wait_pending_count(&router, 2).await;
    assert_eq!(
        record_asking(&router, &id, "Run the migration?").await["status"],
        "pending",
        "a call agentctl still holds stays pending"
    );
    assert_eq!(
        record_asking(&router, &id, "Rotate the keys?").await["status"],
        "pending",
        "a held call the backend never saw is opened"
    );
    assert_eq!(
        wait_state(&router, &id, "WAITING_FOR_INPUT").await["pending_action"],
        "clarification"
    );

    // The held call's record is still answerable.
    let held_id = record_asking(&router, &id, "Run the migration?").await["pending_id"]
        .as_str()
        .expect("pending_id")
        .to_owned();
    let (s, v) = call(
        &router,
        "POST",
        &format!("/api/v1/clarifications/{held_id}/respond"),
        Some(r#"{"answers": [{"question_id": "q1", "selected_options": ["Yes"]}]}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        get(&router, &format!("/api/v1/clarifications/{held_id}")).await["status"],
        "answered"
    );
}
