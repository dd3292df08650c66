//! docs/architecture.md §10 at the HTTP level: the real `kandev` binary on a real socket, driven
//! the way an attacker's page, curl and the browser would (was the backend's
//! `tests/security.rs`). Each attack of issue 12 is a test named after it; each shows the
//! refusal and that nothing changed, and that the legitimate client still gets through.
//!
//! - [`origins`]: another site's page, a rebound host, framing, and the allowed proxy.
//! - [`credentials`]: tokens and credentials on HTTP and the WebSocket, guesses, the logs.
//! - [`browser`]: the sign-in cookie.
//! - [`startup`]: configurations refused at start, and TLS.
//! - [`operators`]: who answered.

use std::net::SocketAddr;

use kandev_backend::auth::token_sha256;
use kandev_testkit::{ApiResponse, DEADLINE, Kandev, KandevOptions};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};

mod browser;
mod credentials;
mod operators;
mod origins;
mod startup;

const EVIL: &str = "http://evil.example";
const ALICE: &str = "kdv_alice_test_token_0123456789abcdef";
const BOB: &str = "kdv_bob_test_token_fedcba9876543210";

/// `[auth]` requiring alice and bob.
fn auth_toml() -> String {
    format!(
        "\n[auth]\nrequired = true\n\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n\n\
         [[auth.operators]]\nname = \"bob\"\ntoken_sha256 = \"{}\"\n",
        token_sha256(ALICE),
        token_sha256(BOB)
    )
}

async fn with_toml(toml: &str) -> Kandev {
    Kandev::start(KandevOptions::new().toml(toml)).await
}

async fn with_auth() -> Kandev {
    with_toml(&auth_toml()).await
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `Basic base64(user:password)` (RFC 7617).
fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// `method path` (JSON `body`) with `headers` on kandev's operator API.
async fn send(
    kandev: &Kandev,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> ApiResponse {
    kandev
        .api()
        .send(method, path, body.as_ref(), headers)
        .await
}

/// An API call as the operator holding `token`.
async fn as_operator(
    kandev: &Kandev,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> ApiResponse {
    send(
        kandev,
        method,
        path,
        body,
        &[("authorization", &bearer(token))],
    )
    .await
}

async fn create_task(kandev: &Kandev, title: &str, headers: &[(&str, &str)]) -> ApiResponse {
    let body = json!({"title": title});
    send(kandev, "POST", "/api/v1/tasks", Some(body), headers).await
}

/// `POST /api/v1/auth/login` with `token`, and `headers`.
async fn login(kandev: &Kandev, token: &str, headers: &[(&str, &str)]) -> ApiResponse {
    let body = json!({"token": token});
    send(kandev, "POST", "/api/v1/auth/login", Some(body), headers).await
}

/// `GET /api/v1/auth/me` with `headers` → the operator it names.
async fn me(kandev: &Kandev, headers: &[(&str, &str)]) -> ApiResponse {
    send(kandev, "GET", "/api/v1/auth/me", None, headers).await
}

fn assert_refused(got: &ApiResponse, status: u16, code: &str) {
    assert_eq!(got.status, status, "{got}");
    assert_eq!(got.error_code(), code, "{got}");
    assert!(
        got.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{got}"
    );
}

async fn task_titles(kandev: &Kandev, token: Option<&str>) -> Vec<String> {
    let auth = token.map(bearer);
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let body = send(kandev, "GET", "/api/v1/tasks", None, &headers)
        .await
        .expect_status(200, "list tasks");
    body["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["title"].as_str().map(str::to_owned))
        .collect()
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `/api/v1/ws` with extra headers; a refusal comes back as its status and JSON body.
async fn ws(addr: SocketAddr, headers: &[(&str, &str)]) -> Result<Ws, (u16, Value)> {
    let mut request = format!("ws://{addr}/api/v1/ws")
        .into_client_request()
        .expect("request");
    for (name, value) in headers {
        let name: HeaderName = name.parse().expect("header name");
        request
            .headers_mut()
            .insert(name, HeaderValue::from_str(value).expect("header value"));
    }
    match tokio::time::timeout(DEADLINE, tokio_tungstenite::connect_async(request))
        .await
        .expect("handshake in time")
    {
        Ok((socket, response)) => {
            assert_eq!(response.status().as_u16(), 101);
            Ok(socket)
        }
        Err(WsError::Http(response)) => {
            let body = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            Err((response.status().as_u16(), body))
        }
        Err(other) => panic!("unexpected WebSocket failure: {other}"),
    }
}

/// Asserts the stream refuses `headers` with `status` (and `code`, when given).
async fn assert_ws_refused(kandev: &Kandev, headers: &[(&str, &str)], status: u16, code: &str) {
    let refused = ws(kandev.addr(), headers)
        .await
        .expect_err("the stream must refuse");
    assert_eq!(refused.0, status, "{headers:?}: {}", refused.1);
    if !code.is_empty() {
        assert_eq!(refused.1["error"]["code"], code, "{headers:?}");
    }
}

/// The next `task.created` event on `socket`.
async fn next_task_created(socket: &mut Ws) -> Value {
    use futures::StreamExt;
    tokio::time::timeout(DEADLINE, async {
        while let Some(Ok(message)) = socket.next().await {
            if let Ok(text) = message.to_text()
                && let Ok(event) = serde_json::from_str::<Value>(text)
                && event["type"] == "task.created"
            {
                return event;
            }
        }
        panic!("the socket closed before task.created");
    })
    .await
    .expect("task.created in time")
}

/// Creates a task with `headers` and asserts every socket sees its `task.created`.
async fn created_task_is_seen(kandev: &Kandev, headers: &[(&str, &str)], sockets: &mut [Ws]) {
    let created = create_task(kandev, "seen by the operator", headers).await;
    assert_eq!(created.status, 201, "{created}");
    for socket in sockets {
        assert_eq!(
            next_task_created(socket).await["data"]["id"],
            created.body["id"]
        );
    }
}

/// Signs in with `token`; returns the `name=value` of the session cookie.
async fn sign_in(kandev: &Kandev, token: &str) -> String {
    let got = login(kandev, token, &[]).await;
    assert_eq!(got.status, 200, "{got}");
    let set_cookie = got.header("set-cookie").expect("a cookie");
    set_cookie.split(';').next().expect("pair").to_owned()
}

/// reqwest is built without a crypto provider of its own (the workspace uses ring only).
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
