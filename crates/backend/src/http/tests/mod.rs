//! Route tests: the router driven with `oneshot`, on in-memory SQLite, with a fake
//! agentctl link whose events the tests push. This file is the harness; the tests are
//! in a file per area.

mod basics;
mod questions;
mod restarts;
mod turns;

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
