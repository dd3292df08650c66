//! Route tests: the router driven with `oneshot`, on in-memory SQLite, with a fake
//! agentctl link whose events the tests push.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use kandev_agent_stream::request::{Cancel, ElicitationsRespond, Prompt, SessionStart};
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ElicitationRequested, ErrorCode, ErrorPayload,
    SettleOutcome,
};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tower::ServiceExt;

use crate::agent_link::{LinkError, LinkEvent};
use crate::config::Config;
use crate::events::OperatorEvent;
use crate::sessions::Reconciled;
use crate::state::AppState;
use crate::testing::{FakeConnector, FakeLink, app, app_with, eventually};

const FLAG: &str = "/api/v1/runtime-flags/features.acpElicitation";
const BAD: &str = "BAD_REQUEST";
const NOT_FOUND: &str = "NOT_FOUND";
const STREAM_DOWN: &str = "AGENT_STREAM_NOT_CONNECTED";
const ENDED: &str = "SESSION_ENDED";
/// The answer picking `Red` in [`elicitation`]'s question.
const RED: &str = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]}"#;
const NO_ANSWERS: &str = r#"{"answers": []}"#;

/// A request the API must refuse: `(method, uri, body, status, error code)`.
type Refusal<'a> = (&'a str, &'a str, Option<&'a str>, u16, &'a str);

/// The router under test over `state`, and the requests the tests make of it.
struct Api {
    router: Router,
    state: AppState,
}

fn api(state: AppState) -> Api {
    Api {
        router: super::router(state.clone()),
        state,
    }
}

/// `/api/v1/sessions/{id}/{tail}`.
fn session_uri(id: &str, tail: &str) -> String {
    format!("/api/v1/sessions/{id}/{tail}")
}

/// `/api/v1/clarifications/{pending}/respond`.
fn respond_uri(pending: &str) -> String {
    format!("/api/v1/clarifications/{pending}/respond")
}

impl Api {
    async fn send(&self, req: Request<Body>) -> Response<Body> {
        self.router.clone().oneshot(req).await.expect("response")
    }

    async fn call(&self, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let body = body.map_or_else(Body::empty, |b| Body::from(b.to_owned()));
        let resp = self.send(req.body(body).expect("request")).await;
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// A `POST`'s status, which must be `status`.
    async fn post(&self, uri: &str, body: Option<&str>, status: StatusCode) -> Value {
        let (s, v) = self.call("POST", uri, body).await;
        assert_eq!(s, status, "{uri}: {v}");
        v
    }

    /// Asserts the request is refused with `status` and error `code`, and a message;
    /// the error object.
    async fn refuses(
        &self,
        method: &str,
        uri: &str,
        body: Option<&str>,
        status: u16,
        code: &str,
    ) -> Value {
        let (s, v) = self.call(method, uri, body).await;
        assert_eq!(s.as_u16(), status, "{method} {uri}: {v:?}");
        assert_eq!(v["error"]["code"], code, "{method} {uri}: {v:?}");
        let message = v["error"]["message"].as_str();
        assert!(message.is_some_and(|m| !m.is_empty()), "{v:?}");
        v["error"].clone()
    }

    /// [`Api::refuses`] for each row.
    async fn refuses_all(&self, refusals: &[Refusal<'_>]) {
        for &(method, uri, body, status, code) in refusals {
            self.refuses(method, uri, body, status, code).await;
        }
    }

    /// Every operator event published from now on.
    fn hub(&self) -> broadcast::Receiver<OperatorEvent> {
        self.state.hub.subscribe()
    }

    async fn get(&self, uri: &str) -> Value {
        let (s, v) = self.call("GET", uri, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        v
    }

    async fn session(&self, id: &str) -> Value {
        self.get(&format!("/api/v1/sessions/{id}")).await
    }

    async fn state_of(&self, id: &str) -> Value {
        self.session(id).await["state"].clone()
    }

    async fn messages(&self, id: &str) -> Value {
        self.get(&session_uri(id, "messages")).await["messages"].clone()
    }

    async fn record(&self, pending: &str) -> Value {
        self.get(&format!("/api/v1/clarifications/{pending}")).await
    }

    async fn status_of(&self, pending: &str) -> Value {
        self.record(pending).await["status"].clone()
    }

    /// Answers record `pending` with `body`: the status code and the reply.
    async fn respond(&self, pending: &str, body: &str) -> (StatusCode, Value) {
        self.call("POST", &respond_uri(pending), Some(body)).await
    }

    async fn notifications(&self) -> Value {
        self.get("/api/v1/notifications").await["notifications"].clone()
    }

    async fn clarifications(&self, query: &str) -> Value {
        self.get(&format!("/api/v1/clarifications?{query}")).await["clarifications"].clone()
    }

    /// Waits until `n` clarifications are pending.
    async fn wait_pending_count(&self, n: usize) {
        eventually(&format!("{n} pending clarifications"), || async {
            let list = self.clarifications("status=pending").await;
            (list.as_array().map(Vec::len) == Some(n)).then_some(())
        })
        .await;
    }

    async fn wait_state(&self, session: &str, state: &str) -> Value {
        eventually(&format!("session {state}"), || async {
            let v = self.session(session).await;
            (v["state"] == state).then_some(v)
        })
        .await
    }

    /// A prompt, refused or otherwise, left no turn running and no user message behind.
    async fn nothing_left_behind(&self, id: &str) {
        assert_eq!(self.state_of(id).await, "IDLE");
        assert_eq!(self.messages(id).await, json!([]));
    }

    /// After a re-attach whose list holds only `p-2` (of `p-1` and `p-2`): `p-1` is
    /// disconnected, `p-2` stays pending, and the session still waits for input.
    async fn only_p2_is_held(&self, id: &str) {
        eventually("p-1 disconnected", || async {
            (self.status_of("p-1").await == "agent_disconnected").then_some(())
        })
        .await;
        assert_eq!(self.status_of("p-2").await, "pending");
        assert_eq!(self.state_of(id).await, "WAITING_FOR_INPUT");
    }

    /// The record whose message is `prompt`, whatever its status.
    async fn record_asking(&self, session: &str, prompt: &str) -> Value {
        let all = self.clarifications(&format!("session_id={session}")).await;
        all.as_array()
            .and_then(|all| all.iter().find(|c| c["message"] == prompt).cloned())
            .unwrap_or(Value::Null)
    }
}

/// The next event on the operator hub, within 5 s.
async fn next_hub_event(ws: &mut broadcast::Receiver<OperatorEvent>) -> OperatorEvent {
    tokio::time::timeout(Duration::from_secs(5), ws.recv())
        .await
        .expect("a hub event within 5 s")
        .expect("hub open")
}

async fn task(api: &Api) -> String {
    let v = api
        .post(
            "/api/v1/tasks",
            Some(r#"{"title": "Fix the login page"}"#),
            StatusCode::CREATED,
        )
        .await;
    v["id"].as_str().expect("id").to_owned()
}

async fn session(api: &Api, task: &str, prompt: Option<&str>) -> Value {
    let body = match prompt {
        Some(p) => json!({"agent": "mock", "prompt": p}),
        None => json!({"agent": "mock"}),
    };
    let uri = format!("/api/v1/tasks/{task}/sessions");
    api.post(&uri, Some(&body.to_string()), StatusCode::CREATED)
        .await
}

fn requested(pending_id: &str, text: &str) -> ElicitationRequested {
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
    .expect("event")
}

fn elicitation(pending_id: &str, text: &str) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::ElicitationRequested(requested(
        pending_id, text,
    )))
}

fn settled(pending_id: &str, outcome: SettleOutcome, response: Value) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::ElicitationSettled {
        pending_id: pending_id.into(),
        outcome,
        response,
        answer: None,
        answered_by: None,
    })
}

fn turn_completed() -> LinkEvent {
    LinkEvent::Agent(AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    })
}

/// A re-attach whose elicitation list holds `held` and no waiting tool call.
fn reattached(held: &[&str]) -> LinkEvent {
    LinkEvent::Reattached {
        pending: held.iter().map(|id| requested(id, "q")).collect(),
        questions: Some(Vec::new()),
    }
}

fn remote_error(code: ErrorCode, message: &str) -> Result<Value, LinkError> {
    Err(LinkError::Remote(ErrorPayload::new(code, message)))
}

/// An app with one started session and its fake link.
struct Started {
    api: Api,
    connector: Arc<FakeConnector>,
    task: String,
    id: String,
    link: Arc<FakeLink>,
}

async fn started() -> Started {
    let (state, connector) = app().await;
    let api = api(state);
    let task = task(&api).await;
    let s = session(&api, &task, None).await;
    let id = s["id"].as_str().expect("id").to_owned();
    let link = connector.link(&id);
    Started {
        api,
        connector,
        task,
        id,
        link,
    }
}

impl Started {
    /// The agent asks `text` twice, as `p-1` and `p-2`; both are pending once this returns.
    async fn asks_twice(&self, text: &str) {
        self.link.push(elicitation("p-1", text));
        self.link.push(elicitation("p-2", text));
        self.api.wait_pending_count(2).await;
    }
}

/// [`started`], after [`Started::asks_twice`].
async fn asked_twice(text: &str) -> Started {
    let s = started().await;
    s.asks_twice(text).await;
    s
}

/// [`started`], with record `p-1` pending and the session waiting for input.
async fn waiting() -> Started {
    let s = started().await;
    s.link.push(elicitation("p-1", "q"));
    s.api.wait_state(&s.id, "WAITING_FOR_INPUT").await;
    s
}

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
    let huge = json!({"title": "x".repeat(super::BODY_LIMIT + 10)}).to_string();
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

#[tokio::test]
async fn prompt_runs_a_turn_and_messages_aggregate() {
    let Started { api, link, id, .. } = started().await;
    let prompt = session_uri(&id, "prompt");
    let nope = "/api/v1/sessions/nope/prompt";
    api.refuses_all(&[
        ("POST", nope, Some(r#"{"text": "hi"}"#), 404, NOT_FOUND),
        ("POST", &prompt, Some(r#"{"text": ""}"#), 400, BAD),
        ("POST", &prompt, Some(r#"{"txt": "x"}"#), 400, BAD),
    ])
    .await;
    let hello = Some(r#"{"text": "Say hello"}"#);
    api.post(&prompt, hello, StatusCode::ACCEPTED).await;
    assert_eq!(api.state_of(&id).await, "RUNNING");
    let again = Some(r#"{"text": "again"}"#);
    api.refuses("POST", &prompt, again, 409, "TURN_IN_PROGRESS")
        .await;
    for text in ["Hel", "lo"] {
        link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}),
        }));
    }
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    let messages = api.messages(&id).await;
    let summary: Vec<(&str, &str)> = messages
        .as_array()
        .expect("list")
        .iter()
        .map(|m| {
            let text = |key: &str| m[key].as_str().unwrap_or_default();
            (text("author_type"), text("content"))
        })
        .collect();
    assert_eq!(summary, [("user", "Say hello"), ("agent", "Hello")]);
    let nope = "/api/v1/sessions/nope/messages";
    api.refuses("GET", nope, None, 404, NOT_FOUND).await;
    // turn_finished is off by default.
    assert_eq!(api.notifications().await, json!([]));
}

#[tokio::test]
async fn operators_see_the_prompt_before_an_agent_reply_that_outran_the_prompts_request() {
    let Started { api, link, id, .. } = started().await;
    let (release, gate) = tokio::sync::oneshot::channel();
    *link.prompt_gate.lock().expect("lock") = Some(gate);
    let mut ws = api.hub();
    let uri = session_uri(&id, "prompt");
    let prompt = api.post(&uri, Some(r#"{"text": "Say hi"}"#), StatusCode::ACCEPTED);
    // agentctl has the prompt but its reply is held; the agent answers meanwhile, and its
    // message is stored before the prompt's request is back.
    let agent_replies_first = async {
        eventually("the prompt sent", || async {
            (link.calls_of::<Prompt>().len() == 1).then_some(())
        })
        .await;
        link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Hi"}}}),
        }));
        eventually("the agent's message stored", || async {
            (api.messages(&id).await.as_array().map(Vec::len) == Some(2)).then_some(())
        })
        .await;
        release.send(()).expect("the request waits");
    };
    tokio::join!(prompt, agent_replies_first);
    let mut created = Vec::new();
    while created.len() < 2 {
        let e = next_hub_event(&mut ws).await;
        if e.kind == "message.created" {
            created.push((e.data["seq"].clone(), e.data["author_type"].clone()));
        }
    }
    assert_eq!(
        created,
        [(json!(1), json!("user")), (json!(2), json!("agent"))],
        "in seq order, the prompt first"
    );
}

#[tokio::test]
async fn queued_chunks_reach_operators_as_one_created_then_appends_of_the_new_text() {
    let Started { api, link, id, .. } = started().await;
    api.post(
        &session_uri(&id, "prompt"),
        Some(r#"{"text": "Stream"}"#),
        StatusCode::ACCEPTED,
    )
    .await;
    let mut ws = api.hub();
    let chunk = |kind: &str, text: &str| {
        LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": kind,
                "content": {"type": "text", "text": text}}}),
        })
    };
    // 300 chunks of 10 bytes (8 UTF-16 units: the emoji is two), queued before the
    // consumer runs (this runtime has one thread): one batch of `MAX_EVENTS`, then the rest.
    let texts: Vec<String> = (1..=300).map(|i| format!("{i:04}🙂ab")).collect();
    *link.delivered.lock().expect("lock") = Some(303);
    for text in &texts {
        link.push(chunk("agent_message_chunk", text));
    }
    link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
        update: json!({"update": {"sessionUpdate": "tool_call", "toolCallId": "t1",
            "title": "Read", "status": "pending"}}),
    }));
    link.push(chunk("agent_thought_chunk", "t1"));
    link.push(chunk("agent_thought_chunk", "t2"));
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;

    let mut messages = Vec::new();
    while messages.len() < 4 {
        let e = next_hub_event(&mut ws).await;
        // The prompt's own message may still be on its way.
        if e.kind.starts_with("message.") && e.data["author_type"] != "user" {
            messages.push(e);
        }
    }
    let kinds: Vec<&str> = messages.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            "message.created",
            "message.appended",
            "message.created",
            "message.created"
        ]
    );
    let (created, appended) = (&*messages[0].data, &*messages[1].data);
    let max = crate::sessions::chunks::MAX_EVENTS;
    assert_eq!(created["content"], texts[..max].concat());
    let all = texts.concat();
    assert_eq!(
        appended,
        &json!({
            "id": created["id"],
            "session_id": id,
            "task_id": created["task_id"],
            "seq": created["seq"],
            "type": "message",
            "author_type": "agent",
            "updated_at": appended["updated_at"],
            "text": texts[max..].concat(),
            "length": all.encode_utf16().count(),
        }),
        "the appended text and the length after it, never the whole content"
    );
    assert_eq!(all.encode_utf16().count(), 300 * 8);
    assert_eq!(messages[2].data["type"], "tool_call");
    assert_eq!(
        [&messages[3].data["type"], &messages[3].data["content"]],
        [&json!("thought"), &json!("t1t2")]
    );
    let stored = api.messages(&id).await;
    assert_eq!(stored[1]["content"], all);
    // Merged events count as applied like any: how far is stored once all are applied.
    eventually("the last applied event stored", || async {
        let row = api.state.stores.sessions.session(&id).await.expect("row");
        (row.expect("session").last_event_seq == Some(303)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn prompt_when_the_stream_is_down_is_503() {
    let Started { api, link, id, .. } = started().await;
    link.down.store(true, SeqCst);
    let x = Some(r#"{"text": "x"}"#);
    api.refuses("POST", &session_uri(&id, "prompt"), x, 503, STREAM_DOWN)
        .await;
    api.nothing_left_behind(&id).await;
    api.refuses_all(&[
        ("POST", &session_uri(&id, "cancel"), None, 503, STREAM_DOWN),
        ("POST", "/api/v1/sessions/nope/cancel", None, 404, NOT_FOUND),
    ])
    .await;
}

#[tokio::test]
async fn agentctl_errors_map_to_their_statuses() {
    let Started { api, link, id, .. } = started().await;
    let prompt = session_uri(&id, "prompt");
    let errors = [
        (
            remote_error(ErrorCode::Internal, "agent crashed"),
            502,
            "AGENTCTL_ERROR",
        ),
        (
            Err(LinkError::Timeout(Duration::from_secs(30))),
            504,
            "AGENTCTL_TIMEOUT",
        ),
        (remote_error(ErrorCode::BadRequest, "no session"), 400, BAD),
        (
            Err(LinkError::Protocol("garbled".into())),
            502,
            "AGENTCTL_ERROR",
        ),
    ];
    for (reply, status, code) in errors {
        link.reply::<Prompt>(reply);
        api.refuses("POST", &prompt, Some(r#"{"text": "x"}"#), status, code)
            .await;
    }
    // None of them left a turn running or a user message behind.
    api.nothing_left_behind(&id).await;
}

#[tokio::test]
async fn elicitation_creates_record_message_state_and_one_notification() {
    let Started {
        api,
        task,
        id,
        link,
        ..
    } = started().await;
    let mut ws = api.hub();
    let pending = "0b6c7a4e-1d2f-4a8b-9c3d-5e6f7a8b9c0d";
    link.push(elicitation(pending, "Pick a colour"));
    let s = api.wait_state(&id, "WAITING_FOR_INPUT").await;
    assert_eq!(s["pending_action"], "clarification");
    let t = api.get(&format!("/api/v1/tasks/{task}")).await;
    assert_eq!(
        [&t["state"], &t["pending_action"]],
        [&json!("WAITING_FOR_INPUT"), &json!("clarification")]
    );

    let rec = api.record(pending).await;
    assert_eq!(rec["pending_id"], pending, "agentctl's id verbatim");
    assert_eq!(
        [&rec["source"], &rec["status"]],
        [&json!("elicitation"), &json!("pending")]
    );
    let m = &api.messages(&id).await[0];
    assert_eq!(
        [&m["type"], &m["author_type"], &m["requests_input"]],
        [
            &json!("clarification_request"),
            &json!("agent"),
            &json!(true)
        ]
    );
    assert_eq!(m["metadata"]["pending_id"], pending);
    assert_eq!(m["metadata"]["status"], "pending");
    assert_eq!(m["metadata"]["questions"][0]["id"], "question_0");

    let list = eventually("the notification", || async {
        let list = api.notifications().await.as_array().cloned();
        list.filter(|l| !l.is_empty())
    })
    .await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["event"], "session.clarification_requested");
    let body = list[0]["body"].as_str().expect("body");
    assert!(body.contains("Fix the login page"));
    assert!(!body.contains("Pick a colour"));

    let mut kinds = Vec::new();
    for kind in [
        "clarification.created",
        "message.created",
        "session.updated",
        "task.updated",
        "notification",
    ] {
        while !kinds.contains(&kind) {
            kinds.push(next_hub_event(&mut ws).await.kind);
        }
    }

    let filtered = api
        .clarifications(&format!("session_id={id}&status=pending"))
        .await;
    assert_eq!(filtered.as_array().map(Vec::len), Some(1));
    let none = api.clarifications("status=answered").await;
    assert_eq!(none, json!([]));
    api.refuses_all(&[
        ("GET", "/api/v1/clarifications?status=bogus", None, 400, BAD),
        ("GET", "/api/v1/clarifications/nope", None, 404, NOT_FOUND),
    ])
    .await;
}

#[tokio::test]
async fn respond_forwards_first_and_settles_from_agentctls_verdict() {
    let Started { api, link, id, .. } = asked_twice("Pick a colour").await;
    let answer = Some(
        r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}], "rejected": false, "reject_reason": ""}"#,
    );
    let respond = respond_uri("p-1");

    // Unknown id in the backend: 404 from the backend, nothing forwarded.
    let error = api
        .refuses("POST", &respond_uri("nope"), answer, 404, NOT_FOUND)
        .await;
    assert_eq!(error["origin"], "backend");
    assert!(link.calls_of::<ElicitationsRespond>().is_empty());
    let three = Some(r#"{"answers": 3}"#);
    api.refuses("POST", &respond, three, 400, BAD).await;

    // INVALID_ANSWER passes through as 400, record stays pending.
    link.reply::<ElicitationsRespond>(remote_error(
        ErrorCode::InvalidAnswer,
        "option `Green` is not declared",
    ));
    let error = api
        .refuses("POST", &respond, answer, 400, "INVALID_ANSWER")
        .await;
    assert!(error["message"].as_str().expect("m").contains("Green"));
    assert_eq!(api.status_of("p-1").await, "pending");

    // Stream down: 503, record stays pending (AC-20a).
    link.down.store(true, SeqCst);
    api.refuses("POST", &respond, answer, 503, STREAM_DOWN)
        .await;
    assert_eq!(api.status_of("p-1").await, "pending");
    link.down.store(false, SeqCst);

    // Success: answered, message metadata updated, the twin still pending (D4).
    let (s, v) = api.call("POST", &respond, answer).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    let rec = api.record("p-1").await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    assert!(rec["settled_at"].is_string());
    assert_eq!(api.status_of("p-2").await, "pending");
    assert_eq!(api.state_of(&id).await, "WAITING_FOR_INPUT");

    // A second submission is still forwarded; agentctl's NOT_FOUND comes back as origin agentctl.
    link.reply::<ElicitationsRespond>(remote_error(ErrorCode::NotFound, "no pending `p-1`"));
    let error = api.refuses("POST", &respond, answer, 404, NOT_FOUND).await;
    assert_eq!(error["origin"], "agentctl");
    assert_eq!(
        link.calls_of::<ElicitationsRespond>().len(),
        3,
        "every submission reached agentctl"
    );
    assert_eq!(api.status_of("p-1").await, "answered");

    // Skip: declined.
    let skip = r#"{"rejected": true, "reject_reason": "later"}"#;
    let (s, v) = api.respond("p-2", skip).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "declined"})));
    api.wait_state(&id, "IDLE").await;
    let messages = api.messages(&id).await;
    let statuses: Vec<&Value> = messages
        .as_array()
        .expect("l")
        .iter()
        .map(|m| &m["metadata"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("answered"), &json!("declined")]);
}

#[tokio::test]
async fn settled_events_withdraw_the_surface() {
    let Started { api, link, id, .. } = waiting().await;
    let mut ws = api.hub();
    let decline = json!({"action": "decline"});
    link.push(settled("p-1", SettleOutcome::TimedOut, decline));
    let s = api.wait_state(&id, "IDLE").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(api.status_of("p-1").await, "expired");
    let messages = api.messages(&id).await;
    assert_eq!(messages[0]["metadata"]["status"], "expired");
    let kinds: Vec<&str> = std::iter::from_fn(|| ws.try_recv().ok())
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"clarification.settled"), "{kinds:?}");

    // A settled event for a record the operator already settled changes nothing.
    link.push(elicitation("p-2", "q"));
    api.wait_state(&id, "WAITING_FOR_INPUT").await;
    let (s, _) = api.respond("p-2", NO_ANSWERS).await;
    assert_eq!(s, StatusCode::OK);
    let accept = json!({"action": "accept", "content": {}});
    link.push(settled("p-2", SettleOutcome::Answered, accept));
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    assert_eq!(api.status_of("p-2").await, "answered");
}

#[tokio::test]
async fn a_lost_link_disconnects_pendings_and_answers_are_not_delivered() {
    let Started { api, link, id, .. } = waiting().await;
    link.push(LinkEvent::Lost {
        reason: "agentctl died".into(),
    });
    let s = api.wait_state(&id, "FAILED").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(api.status_of("p-1").await, "agent_disconnected");
    let (s, v) = api.respond("p-1", RED).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "not_delivered"})));
    assert!(
        link.calls_of::<ElicitationsRespond>().is_empty(),
        "nothing sent"
    );
    let messages = api.messages(&id).await;
    let m = messages
        .as_array()
        .expect("l")
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("msg");
    assert_eq!(m["metadata"]["status"], "agent_disconnected");
    assert_eq!(
        m["metadata"]["undelivered_answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    let x = Some(r#"{"text": "x"}"#);
    api.refuses("POST", &session_uri(&id, "prompt"), x, 409, ENDED)
        .await;
}

#[tokio::test]
async fn reattach_disconnects_records_agentctl_no_longer_holds() {
    let Started { api, link, id, .. } = asked_twice("q").await;
    link.push(LinkEvent::Disconnected);
    link.push(reattached(&["p-2"]));
    api.only_p2_is_held(&id).await;
}

#[tokio::test]
async fn agent_exit_fails_the_session() {
    let Started { api, link, id, .. } = started().await;
    link.push(LinkEvent::Agent(AgentEvent::AgentExited { code: Some(3) }));
    let s = api.wait_state(&id, "FAILED").await;
    assert!(s["error"].as_str().expect("error").contains('3'));
    eventually("agentctl stopped", || async {
        link.shut.load(SeqCst).then_some(())
    })
    .await;
}

#[tokio::test]
async fn cancel_and_stop() {
    let Started { api, link, id, .. } = waiting().await;
    let (cancel, stop) = (session_uri(&id, "cancel"), session_uri(&id, "stop"));
    api.post(&cancel, None, StatusCode::ACCEPTED).await;
    assert_eq!(link.calls_of::<Cancel>().len(), 1);
    api.post(&stop, None, StatusCode::ACCEPTED).await;
    let v = api.session(&id).await;
    assert_eq!(
        [&v["state"], &v["pending_action"]],
        [&json!("COMPLETED"), &Value::Null]
    );
    assert!(link.shut.load(SeqCst));
    assert_eq!(api.status_of("p-1").await, "cancelled");
    api.refuses_all(&[
        ("POST", &stop, None, 409, ENDED),
        ("POST", &cancel, None, 409, ENDED),
        ("POST", "/api/v1/sessions/nope/stop", None, 404, NOT_FOUND),
    ])
    .await;
    // A late answer to a record of an ended session: agentctl cannot be asked, the backend says so.
    let no_answers = Some(NO_ANSWERS);
    let error = api
        .refuses("POST", &respond_uri("p-1"), no_answers, 404, NOT_FOUND)
        .await;
    assert_eq!(error["origin"], "backend");
}

#[tokio::test]
async fn turn_finished_notification_when_enabled() {
    let mut config = Config::default();
    config.notifications.turn_finished = true;
    let (state, connector) = app_with(BTreeMap::new(), config).await;
    let api = api(state);
    let task = task(&api).await;
    let s = session(&api, &task, Some("go")).await;
    assert_eq!(s["state"], "RUNNING");
    let id = s["id"].as_str().expect("id");
    let link = connector.link(id);
    assert_eq!(link.calls_of::<Prompt>(), [json!({"text": "go"})]);
    link.push(turn_completed());
    api.wait_state(id, "IDLE").await;
    let n = api.notifications().await;
    assert_eq!(n[0]["event"], "session.turn_finished");
}

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

#[tokio::test]
async fn a_settled_event_racing_the_respond_success_ends_in_one_consistent_state() {
    let Started { api, link, id, .. } = waiting().await;
    let mut ws = api.hub();
    let blue = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Blue"]}]}"#;
    let (s, v) = api.respond("p-1", blue).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    // Let the consumer apply the settled event it received during the request.
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    let rec = api.record("p-1").await;
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
    let Started { api, id, .. } = started().await;
    let before = api.state_of(&id).await;
    let big = "x".repeat(super::BODY_LIMIT + 1);
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

#[tokio::test]
async fn reattach_cancels_ask_user_question_calls_agentctl_no_longer_holds() {
    let Started { api, link, id, .. } = started().await;
    let gone = ask_user_question("call-gone", "Deploy now?");
    let held = ask_user_question("call-held", "Run the migration?");
    for call in [&gone, &held] {
        link.push(LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(
            call.clone(),
        )));
    }
    api.wait_pending_count(2).await;

    // No question list (agentctl did not answer it) is "unknown": nothing is withdrawn.
    // The elicitation pushed behind it is the sync point: events are applied in order.
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: None,
    });
    link.push(elicitation("p-sync", "q"));
    api.wait_pending_count(3).await;

    // call-gone's `ask_user_question_settled` was lost; agentctl lists only call-held,
    // and a call whose requested event was lost as well.
    let mut ws = api.hub();
    let unseen = ask_user_question("call-unseen", "Rotate the keys?");
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: Some(vec![held, unseen]),
    });
    // The surface is withdrawn like any settlement: the WS event (published last, after
    // the record and its message metadata are written) is the sync point.
    let event = loop {
        let e = next_hub_event(&mut ws).await;
        if e.kind == "clarification.settled" && e.data["message"] == "Deploy now?" {
            break e;
        }
    };
    assert_eq!(event.data["status"], "cancelled");
    let cancelled = api.record_asking(&id, "Deploy now?").await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["pending_id"], event.data["pending_id"]);
    let messages = api.messages(&id).await;
    let message = messages
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|m| m["metadata"]["pending_id"] == cancelled["pending_id"])
        })
        .expect("the record's message");
    assert_eq!(message["metadata"]["status"], "cancelled");
    // p-sync is an elicitation agentctl no longer lists either; call-held and
    // call-unseen remain, so the session still waits for input.
    api.wait_pending_count(2).await;
    let still = [
        (
            "Run the migration?",
            "a call agentctl still holds stays pending",
        ),
        (
            "Rotate the keys?",
            "a held call the backend never saw is opened",
        ),
    ];
    for (prompt, why) in still {
        let record = api.record_asking(&id, prompt).await;
        assert_eq!(record["status"], "pending", "{why}");
    }
    assert_eq!(
        api.wait_state(&id, "WAITING_FOR_INPUT").await["pending_action"],
        "clarification"
    );

    // The held call's record is still answerable.
    let held = api.record_asking(&id, "Run the migration?").await;
    let held_id = held["pending_id"].as_str().expect("pending_id");
    let yes = r#"{"answers": [{"question_id": "q1", "selected_options": ["Yes"]}]}"#;
    let (s, v) = api.respond(held_id, yes).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(api.status_of(held_id).await, "answered");
}
