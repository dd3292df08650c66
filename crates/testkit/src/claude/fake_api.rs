//! A fake Anthropic Messages API on loopback, standing in for the model behind the real
//! Claude Code CLI: `POST /v1/messages` is answered by a [`Script`] (streamed as SSE
//! when asked), every request is recorded, and tests wait on the record. Anything else
//! (`HEAD /api/hello` of 0.65.0, telemetry that slipped through) gets 404 and is
//! recorded too, so a test can assert the CLI talked to nothing else.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::Notify;

use super::model::{ModelRequest, Reply, Script};

/// One request the fake API received (any method or path).
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// `POST`, `HEAD`, …
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The `User-Agent` header (the CLI's name and version).
    pub user_agent: Option<String>,
    /// For `POST /v1/messages`: the request and the scripted reply.
    pub messages: Option<(ModelRequest, Reply)>,
}

#[derive(Debug)]
struct Shared {
    script: Mutex<Script>,
    received: Mutex<Vec<Received>>,
    changed: Notify,
    ids: AtomicU64,
}

/// A running fake API; dropping it stops the server.
#[derive(Debug)]
pub struct FakeAnthropic {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeAnthropic {
    /// Serves `script` on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(script: Script) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake Anthropic API");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            received: Mutex::new(Vec::new()),
            changed: Notify::new(),
            ids: AtomicU64::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            // A long conversation's request is larger than axum's 2 MB default.
            .layer(DefaultBodyLimit::max(64 << 20))
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            addr,
            shared,
            stop: Some(stop),
        }
    }

    /// `http://127.0.0.1:PORT`: the agent's `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the script (for the requests from now on).
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.shared.received).clone()
    }

    /// The Messages requests so far with their replies.
    pub fn turns(&self) -> Vec<(ModelRequest, Reply)> {
        self.received()
            .into_iter()
            .filter_map(|r| r.messages)
            .collect()
    }

    /// Waits until some Messages request satisfies `check` and returns what it gives.
    ///
    /// # Panics
    /// After `deadline`, naming `what` and listing what arrived.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        deadline: Duration,
        check: impl Fn(&ModelRequest, &Reply) -> Option<T>,
    ) -> T {
        let until = tokio::time::Instant::now() + deadline;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(found) = self
                .turns()
                .iter()
                .find_map(|(req, reply)| check(req, reply))
            {
                return found;
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                panic!(
                    "timed out after {deadline:?} waiting for the model to see {what}; it got:\n{}",
                    self.summary()
                );
            }
        }
    }

    /// One line per request, for failure output.
    pub fn summary(&self) -> String {
        self.received()
            .iter()
            .map(|r| match &r.messages {
                Some((req, reply)) => format!(
                    "{} {} tools={:?} prompt={:?} results={:?} -> {reply:?}",
                    r.method,
                    r.path,
                    req.tool_names(),
                    req.prompt()
                        .chars()
                        .rev()
                        .take(80)
                        .collect::<String>()
                        .chars()
                        .rev()
                        .collect::<String>(),
                    req.tool_results()
                ),
                None => format!("{} {} -> 404", r.method, r.path),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| uri.path().to_owned());
    let is_messages = method == Method::POST && uri.path() == "/v1/messages";
    let parsed = is_messages
        .then(|| serde_json::from_slice::<Value>(&body).ok())
        .flatten();
    let Some(body) = parsed else {
        record(
            &shared,
            Received {
                method: method.to_string(),
                path,
                user_agent,
                messages: None,
            },
        );
        return StatusCode::NOT_FOUND.into_response();
    };
    let request = ModelRequest {
        path: path.clone(),
        body,
    };
    let reply = lock(&shared.script).reply(&request);
    let n = shared.ids.fetch_add(1, Ordering::SeqCst) + 1;
    let model = request.body["model"]
        .as_str()
        .unwrap_or("claude-fake")
        .to_owned();
    let stream = request.body["stream"].as_bool().unwrap_or(false);
    let (content_type, text) = reply.encode(
        &model,
        &format!("msg_{n:04}"),
        &format!("toolu_{n:04}"),
        stream,
    );
    record(
        &shared,
        Received {
            method: method.to_string(),
            path,
            user_agent,
            messages: Some((request, reply)),
        },
    );
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

fn record(shared: &Shared, received: Received) {
    lock(&shared.received).push(received);
    shared.changed.notify_waiters();
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
