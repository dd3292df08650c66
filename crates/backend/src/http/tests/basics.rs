//! Routes outside a turn: health, runtime flags, tasks, session starts, body limits.

use super::*;

#[tokio::test]
async fn healthz_and_unknown_routes() {
    let api = api(app().await.0);
    assert_eq!(api.get("/healthz").await, json!({"status": "ok"}));
    assert_eq!(
        api.get("/api/v1/agents").await,
        json!({"agents": [{"id": "mock"}]})
    );
    // Everything else is the embedded web UI.
    let resp = api
        .send(Request::get("/").body(Body::empty()).expect("req"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let content_type = resp.headers()["content-type"].to_str().expect("ct");
    assert!(content_type.starts_with("text/html"));
    api.refuses_all(&[
        ("GET", "/api/v1/nope", None, 404, NOT_FOUND),
        ("POST", "/healthz", None, 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/api/v1/tasks", None, 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/nope.js", None, 404, NOT_FOUND),
    ])
    .await;
}

#[tokio::test]
async fn runtime_flags_list_patch_and_errors() {
    let api = api(app().await.0);
    let v = api.get("/api/v1/runtime-flags").await;
    let flag = &v["flags"][0];
    assert_eq!(flag["key"], "features.acpElicitation");
    assert_eq!(flag["env_var"], "KANDEV_FEATURES_ACP_ELICITATION");
    assert_eq!(
        [&flag["value"], &flag["source"], &flag["locked"]],
        [&json!(false), &json!("default"), &json!(false)]
    );
    let fields = [
        "kind",
        "label",
        "description",
        "stability",
        "risk_level",
        "restart_required",
        "mutable",
    ];
    for field in fields {
        assert!(flag.get(field).is_some(), "{field}");
    }

    let mut ws = api.hub();
    let (s, v) = api.call("PATCH", FLAG, Some(r#"{"override": true}"#)).await;
    let pushed = next_hub_event(&mut ws).await;
    assert_eq!(
        (pushed.kind, pushed.data["value"].clone()),
        ("runtime_flags.updated", json!(true))
    );
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        [&v["value"], &v["source"]],
        [&json!(true), &json!("override")]
    );
    let (_, v) = api.call("PATCH", FLAG, Some(r#"{"override": null}"#)).await;
    assert_eq!(v["source"], "default");

    let teleport = "/api/v1/runtime-flags/features.teleport";
    let on = Some(r#"{"override": true}"#);
    api.refuses("PATCH", teleport, on, 404, NOT_FOUND).await;
    let bad = [
        r#"{}"#,
        r#"{"override": "yes"}"#,
        r#"{"override": true, "x": 1}"#,
        r#"[true]"#,
        "not json",
    ];
    for body in bad {
        api.refuses("PATCH", FLAG, Some(body), 400, BAD).await;
    }
}

#[tokio::test]
async fn an_env_locked_flag_refuses_patch_with_409() {
    let env = BTreeMap::from([(
        "KANDEV_FEATURES_ACP_ELICITATION".to_owned(),
        "true".to_owned(),
    )]);
    let api = api(app_with(env, Config::default()).await.0);
    let off = Some(r#"{"override": false}"#);
    api.refuses("PATCH", FLAG, off, 409, "FLAG_LOCKED").await;
    let v = api.get("/api/v1/runtime-flags").await;
    let flag = &v["flags"][0];
    assert_eq!(
        [&flag["source"], &flag["locked"]],
        [&json!("env"), &json!(true)]
    );
}

#[tokio::test]
async fn tasks_create_list_get_and_errors() {
    let api = api(app().await.0);
    let huge = json!({"title": "x".repeat(crate::http::BODY_LIMIT + 10)}).to_string();
    let tasks = "/api/v1/tasks";
    api.refuses_all(&[
        ("POST", tasks, Some(r#"{"title": "  "}"#), 400, BAD),
        ("POST", tasks, Some(r#"{"description": "x"}"#), 400, BAD),
        ("POST", tasks, Some("{"), 400, BAD),
        ("POST", tasks, Some(&huge), 413, "PAYLOAD_TOO_LARGE"),
    ])
    .await;
    let id = task(&api).await;
    let v = api.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(v["title"], "Fix the login page");
    assert_eq!(v["sessions"], json!([]));
    assert_eq!(v["pending_action"], Value::Null);
    let v = api.get(tasks).await;
    assert_eq!(v["tasks"].as_array().map(Vec::len), Some(1));
    api.refuses("GET", "/api/v1/tasks/nope", None, 404, NOT_FOUND)
        .await;
}

#[tokio::test]
async fn session_start_errors() {
    let (state, connector) = app().await;
    let api = api(state);
    let id = task(&api).await;
    let sessions = format!("/api/v1/tasks/{id}/sessions");
    let mock = Some(r#"{"agent": "mock"}"#);
    api.refuses("POST", "/api/v1/tasks/nope/sessions", mock, 404, NOT_FOUND)
        .await;
    let gpt = Some(r#"{"agent": "gpt-9"}"#);
    let error = api.refuses("POST", &sessions, gpt, 400, BAD).await;
    let message = error["message"].as_str().expect("msg");
    assert!(message.contains("mock"), "lists the known agents");
    api.refuses("POST", &sessions, Some(r#"{}"#), 400, BAD)
        .await;

    // agentctl unreachable: the session is created and FAILED, with the reason.
    connector.unreachable.store(true, SeqCst);
    let s = session(&api, &id, None).await;
    assert_eq!(s["state"], "FAILED");
    let error = s["error"].as_str().expect("error");
    assert!(error.contains("connection refused"));
}

#[tokio::test]
async fn a_patch_applies_to_the_next_session_start() {
    let (state, connector) = app().await;
    let api = api(state);
    let id = task(&api).await;
    let off = session(&api, &id, None).await;
    assert_eq!(off["state"], "IDLE");
    assert!(off["client_capabilities"].get("elicitation").is_none());
    assert_eq!(off["flags"], json!({"features.acpElicitation": false}));
    let (s, _) = api.call("PATCH", FLAG, Some(r#"{"override": true}"#)).await;
    assert_eq!(s, StatusCode::OK);
    let on = session(&api, &id, None).await;
    assert_eq!(
        on["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let sent = connector
        .link(on["id"].as_str().expect("id"))
        .calls_of::<SessionStart>();
    assert_eq!(sent[0]["flags"], json!({"features.acpElicitation": true}));
    assert_eq!(sent[0]["agent"]["id"], "mock");
    assert_eq!(sent[0]["agent"]["command"][1], "--scenario");
    // The first session keeps what it started with.
    let first = api.session(off["id"].as_str().expect("id")).await;
    assert!(first["client_capabilities"].get("elicitation").is_none());
}

/// A route that reads no body (`/cancel`) still refuses one past the limit, whether its
/// length is declared or not (a chunked body carries no `Content-Length`), and acts on
/// nothing: the session keeps its state.
#[tokio::test]
async fn oversized_bodies_are_413_before_any_handler_runs() {
    let Started { api, id, .. } = started().await;
    let before = api.state_of(&id).await;
    let big = "x".repeat(crate::http::BODY_LIMIT + 1);
    for declared in [true, false] {
        let mut req = Request::post(session_uri(&id, "cancel"));
        if declared {
            req = req.header("content-length", big.len().to_string());
        }
        let req = req.body(Body::from(big.clone())).expect("request");
        assert_eq!(
            api.send(req).await.status(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "declared: {declared}"
        );
    }
    assert_eq!(before, api.state_of(&id).await);
    // A small body without a declared length still reaches the handler.
    let req = Request::post("/api/v1/tasks")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"title": "chunked"}"#))
        .expect("request");
    assert_eq!(api.send(req).await.status(), StatusCode::CREATED);
}
