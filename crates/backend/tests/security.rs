//! docs/architecture.md §10 at the HTTP level: the real `kandev` binary on a real socket, driven
//! with reqwest and tokio-tungstenite the way an attacker's page, curl and the browser
//! would. Each attack of issue 12 is a test named after it; each shows the refusal and
//! that nothing changed, and that the legitimate client still gets through.

mod support;

use std::net::SocketAddr;

use kandev_backend::auth::token_sha256;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{DEADLINE, Kandev, Options, refused_start, wait_for};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

const EVIL: &str = "http://evil.example";
const ALICE: &str = "kdv_alice_test_token_0123456789abcdef";
const BOB: &str = "kdv_bob_test_token_fedcba9876543210";

/// reqwest is built without a crypto provider of its own (the workspace uses ring only).
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .expect("client")
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

/// `[auth]` requiring alice and bob.
fn auth_toml() -> String {
    format!(
        "\n[auth]\nrequired = true\n\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n\n\
         [[auth.operators]]\nname = \"bob\"\ntoken_sha256 = \"{}\"\n",
        token_sha256(ALICE),
        token_sha256(BOB)
    )
}

async fn with_auth() -> Kandev {
    Kandev::start_with(Options::default().toml(&auth_toml())).await
}

async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

fn assert_refused(got: &(StatusCode, Value), status: u16, code: &str) {
    assert_eq!(got.0.as_u16(), status, "{}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{}", got.1);
    assert!(
        got.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

async fn task_titles(kandev: &Kandev, token: Option<&str>) -> Vec<String> {
    let mut request = client().get(url(kandev.addr, "/api/v1/tasks"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let (status, body) = json_of(request.send().await.expect("list")).await;
    assert_eq!(status, 200, "{body}");
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
        let name: tokio_tungstenite::tungstenite::http::HeaderName =
            name.parse().expect("header name");
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

async fn create_task(
    kandev: &Kandev,
    title: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = client()
        .post(url(kandev.addr, "/api/v1/tasks"))
        .json(&json!({"title": title}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    json_of(request.send().await.expect("post")).await
}

#[tokio::test]
async fn cross_site_websocket_hijacking_is_refused() {
    let kandev = Kandev::start().await;
    let own = format!("http://{}", kandev.addr);
    let refused = ws(kandev.addr, &[("origin", EVIL)])
        .await
        .expect_err("a foreign page must not open the event stream");
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert_eq!(refused.1["error"]["code"], "ORIGIN_NOT_ALLOWED");
    for origin in [
        "null",
        "http://127.0.0.1:1",
        "http://localhost.evil.example",
    ] {
        let refused = ws(kandev.addr, &[("origin", origin)])
            .await
            .expect_err(origin);
        assert_eq!(refused.0, 403, "{origin}");
    }
    // The UI's own page and a client without Origin (curl, SDKs) still get the stream.
    let mut same_origin = ws(kandev.addr, &[("origin", &own)])
        .await
        .expect("same origin");
    let mut no_origin = ws(kandev.addr, &[]).await.expect("no Origin");
    let (status, task) = create_task(&kandev, "seen by the operator", &[]).await;
    assert_eq!(status, 201);
    for socket in [&mut same_origin, &mut no_origin] {
        let event = next_task_created(socket).await;
        assert_eq!(event["data"]["id"], task["id"]);
    }
}

#[tokio::test]
async fn dns_rebinding_host_is_refused() {
    let kandev = Kandev::start().await;
    let (status, _) = create_task(&kandev, "secret roadmap", &[]).await;
    assert_eq!(status, 201);
    let evil_host = format!("evil.example:{}", kandev.addr.port());
    for path in [
        "/api/v1/tasks",
        "/api/v1/runtime-flags",
        "/",
        "/app.js",
        "/api/v1/clarifications",
    ] {
        let response = client()
            .get(url(kandev.addr, path))
            .header("host", &evil_host)
            .send()
            .await
            .expect("get");
        let got = json_of(response).await;
        assert_refused(&got, 403, "HOST_NOT_ALLOWED");
        assert!(
            !got.1.to_string().contains("secret roadmap"),
            "{path}: {}",
            got.1
        );
    }
    let (status, _) = create_task(&kandev, "planted", &[("host", &evil_host)]).await;
    assert_eq!(status, 403);
    let refused = ws(kandev.addr, &[("host", &evil_host)])
        .await
        .expect_err("the stream refuses a rebound name");
    assert_eq!(refused.1["error"]["code"], "HOST_NOT_ALLOWED");
    assert_eq!(
        task_titles(&kandev, None).await,
        ["secret roadmap"],
        "nothing planted"
    );
    // The names the UI is served under.
    let port = kandev.addr.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let response = client()
            .get(url(kandev.addr, "/"))
            .header("host", &host)
            .send()
            .await
            .expect("get");
        assert_eq!(response.status(), 200, "{host}");
    }
    // /healthz stays probe-able by address (load balancers), and says nothing else.
    let health = client()
        .get(url(kandev.addr, "/healthz"))
        .header("host", &evil_host)
        .send()
        .await
        .expect("healthz");
    assert_eq!(json_of(health).await.1, json!({"status": "ok"}));
}

#[tokio::test]
async fn allowed_hosts_and_origins_admit_a_proxy() {
    let kandev = Kandev::start_with(Options::default().toml(
        "\n[server]\nallowed_hosts = [\"kandev.example.com\"]\nallowed_origins = [\"https://ops.example.com\"]\n",
    ))
    .await;
    let response = client()
        .get(url(kandev.addr, "/api/v1/tasks"))
        .header("host", "kandev.example.com")
        .send()
        .await
        .expect("get");
    assert_eq!(response.status(), 200);
    // A TLS-terminating proxy: the page is https://kandev.example.com, kandev speaks HTTP.
    let (status, _) = create_task(
        &kandev,
        "via the proxy",
        &[
            ("host", "kandev.example.com"),
            ("origin", "https://kandev.example.com"),
        ],
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = create_task(
        &kandev,
        "from ops",
        &[("origin", "https://ops.example.com")],
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = create_task(
        &kandev,
        "from elsewhere",
        &[("origin", "https://ops.example.net")],
    )
    .await;
    assert_eq!(status, 403);
    ws(kandev.addr, &[("origin", "https://ops.example.com")])
        .await
        .expect("an allowed origin opens the stream");
}

#[tokio::test]
async fn cross_origin_task_creation_is_refused() {
    let kandev = Kandev::start().await;
    let got = create_task(&kandev, "planted by evil.example", &[("origin", EVIL)]).await;
    assert_refused(&got, 403, "ORIGIN_NOT_ALLOWED");
    // Other state changes from the foreign page: the flag toggle, a task's session.
    let flags_before = kandev.get("/api/v1/runtime-flags").await;
    let response = client()
        .patch(url(
            kandev.addr,
            "/api/v1/runtime-flags/features.acpElicitation",
        ))
        .header("origin", EVIL)
        .json(&json!({"override": true}))
        .send()
        .await
        .expect("patch");
    assert_refused(&json_of(response).await, 403, "ORIGIN_NOT_ALLOWED");
    assert_eq!(
        kandev.get("/api/v1/runtime-flags").await,
        flags_before,
        "flag unchanged"
    );
    assert!(
        task_titles(&kandev, None).await.is_empty(),
        "no task was created"
    );
    // Same-origin pages and curl-style clients still create tasks.
    let own = format!("http://{}", kandev.addr);
    let (status, _) = create_task(&kandev, "from the UI", &[("origin", &own)]).await;
    assert_eq!(status, 201);
    let (status, _) = create_task(&kandev, "from curl", &[]).await;
    assert_eq!(status, 201);
    assert_eq!(task_titles(&kandev, None).await.len(), 2);
}

#[tokio::test]
async fn clickjacking_is_refused_by_the_frame_headers() {
    let kandev = Kandev::start().await;
    for path in ["/", "/api/v1/tasks", "/nope"] {
        let response = client()
            .get(url(kandev.addr, path))
            .send()
            .await
            .expect("get");
        assert_eq!(
            response
                .headers()
                .get("x-frame-options")
                .and_then(|v| v.to_str().ok()),
            Some("DENY"),
            "{path}"
        );
        assert_eq!(
            response
                .headers()
                .get("content-security-policy")
                .and_then(|v| v.to_str().ok()),
            Some("frame-ancestors 'none'"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn missing_wrong_and_right_tokens_on_http() {
    let kandev = with_auth().await;
    let http = client();
    let missing = http
        .get(url(kandev.addr, "/api/v1/tasks"))
        .send()
        .await
        .expect("get");
    assert_eq!(
        missing
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"kandev\"")
    );
    assert_refused(&json_of(missing).await, 401, "AUTH_REQUIRED");
    let wrong = http
        .get(url(kandev.addr, "/api/v1/tasks"))
        .bearer_auth("kdv_not_a_token")
        .send()
        .await
        .expect("get");
    assert_refused(&json_of(wrong).await, 401, "INVALID_TOKEN");
    let basic = http
        .get(url(kandev.addr, "/api/v1/tasks"))
        .basic_auth("alice", Some(ALICE))
        .send()
        .await
        .expect("get");
    assert_refused(&json_of(basic).await, 401, "INVALID_TOKEN");
    // A state change without credentials does nothing.
    let got = create_task(&kandev, "anonymous", &[]).await;
    assert_refused(&got, 401, "AUTH_REQUIRED");
    let got = create_task(&kandev, "guessed", &[("authorization", "Bearer kdv_guess")]).await;
    assert_refused(&got, 401, "INVALID_TOKEN");
    assert!(task_titles(&kandev, Some(ALICE)).await.is_empty());
    // The right token, and who it is.
    let got = create_task(
        &kandev,
        "by alice",
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await;
    assert_eq!(got.0, 201, "{}", got.1);
    for (token, name) in [(ALICE, "alice"), (BOB, "bob")] {
        let me = http
            .get(url(kandev.addr, "/api/v1/auth/me"))
            .bearer_auth(token)
            .send()
            .await
            .expect("me");
        assert_eq!(
            json_of(me).await.1,
            json!({"operator": name, "auth_required": true})
        );
    }
    // Open without credentials: the health probe and the UI's files (the sign-in page).
    for path in ["/healthz", "/", "/app.js"] {
        let response = http.get(url(kandev.addr, path)).send().await.expect("get");
        assert_eq!(response.status(), 200, "{path}");
    }
    let unknown = http
        .get(url(kandev.addr, "/api/v1/nope"))
        .send()
        .await
        .expect("get");
    assert_eq!(
        unknown.status(),
        401,
        "unknown API paths need credentials too"
    );
}

#[tokio::test]
async fn without_auth_the_operator_is_local() {
    let kandev = Kandev::start().await;
    assert_eq!(
        kandev.get("/api/v1/auth/me").await,
        json!({"operator": "local", "auth_required": false})
    );
}

#[tokio::test]
async fn missing_wrong_and_right_credentials_on_the_websocket() {
    let kandev = with_auth().await;
    let refused = ws(kandev.addr, &[]).await.expect_err("no credentials");
    assert_eq!(
        (refused.0, refused.1["error"]["code"].clone()),
        (401, json!("AUTH_REQUIRED"))
    );
    let refused = ws(kandev.addr, &[("authorization", "Bearer kdv_wrong")])
        .await
        .expect_err("wrong token");
    assert_eq!(
        (refused.0, refused.1["error"]["code"].clone()),
        (401, json!("INVALID_TOKEN"))
    );
    let refused = ws(
        kandev.addr,
        &[("cookie", "kandev_session=alice.99999999999.00")],
    )
    .await
    .expect_err("forged cookie");
    assert_eq!(refused.0, 401);
    let mut by_token = ws(
        kandev.addr,
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await
    .expect("a Bearer token opens the stream");
    let cookie = sign_in(&kandev, BOB).await;
    let own = format!("http://{}", kandev.addr);
    let mut by_cookie = ws(kandev.addr, &[("cookie", &cookie), ("origin", &own)])
        .await
        .expect("the session cookie opens the stream");
    let got = create_task(
        &kandev,
        "watched",
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await;
    assert_eq!(got.0, 201);
    for socket in [&mut by_token, &mut by_cookie] {
        assert_eq!(next_task_created(socket).await["data"]["id"], got.1["id"]);
    }
}

/// Signs in with `token`; returns the `name=value` of the session cookie.
async fn sign_in(kandev: &Kandev, token: &str) -> String {
    let response = client()
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .json(&json!({"token": token}))
        .send()
        .await
        .expect("login");
    assert_eq!(response.status(), 200);
    let set_cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_owned();
    set_cookie.split(';').next().expect("pair").to_owned()
}

#[tokio::test]
async fn browser_sign_in_sets_an_http_only_strict_cookie_and_sign_out_clears_it() {
    let kandev = with_auth().await;
    let http = client();
    let wrong = http
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .json(&json!({"token": "kdv_wrong"}))
        .send()
        .await
        .expect("login");
    assert!(wrong.headers().get("set-cookie").is_none());
    assert_refused(&json_of(wrong).await, 401, "INVALID_TOKEN");

    let response = http
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .json(&json!({"token": ALICE}))
        .send()
        .await
        .expect("login");
    let set_cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("cookie")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains(ALICE), "the cookie is not the token");
    assert_eq!(json_of(response).await.1["operator"], "alice");
    let cookie = set_cookie.split(';').next().expect("pair").to_owned();
    let me = http
        .get(url(kandev.addr, "/api/v1/auth/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("me");
    assert_eq!(json_of(me).await.1["operator"], "alice");

    // Signing in from another site (login CSRF) is refused like any cross-origin POST.
    let csrf = http
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .header("origin", EVIL)
        .json(&json!({"token": ALICE}))
        .send()
        .await
        .expect("login");
    assert!(csrf.headers().get("set-cookie").is_none());
    assert_eq!(csrf.status(), 403);

    let out = http
        .post(url(kandev.addr, "/api/v1/auth/logout"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("logout");
    assert_eq!(out.status(), 204);
    let cleared = out
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("cleared");
    assert!(
        cleared.starts_with("kandev_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn a_session_cookie_verifies_on_a_replica_with_the_same_config() {
    let first = with_auth().await;
    let cookie = sign_in(&first, ALICE).await;
    // Another process (a replica, or this one restarted) with the same [auth].
    let replica = with_auth().await;
    let me = client()
        .get(url(replica.addr, "/api/v1/auth/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("me");
    assert_eq!(json_of(me).await.1["operator"], "alice");
    // Rotating alice's token signs her out everywhere.
    let rotated = Kandev::start_with(Options::default().toml(&format!(
        "\n[auth]\nrequired = true\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
        token_sha256("kdv_rotated")
    )))
    .await;
    let me = client()
        .get(url(rotated.addr, "/api/v1/auth/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("me");
    assert_refused(&json_of(me).await, 401, "INVALID_SESSION");
}

#[tokio::test]
async fn failed_attempts_are_rate_limited_per_address() {
    let kandev = with_auth().await;
    let http = client();
    for attempt in 0..10 {
        let response = http
            .get(url(kandev.addr, "/api/v1/tasks"))
            .bearer_auth(format!("kdv_guess_{attempt}"))
            .send()
            .await
            .expect("guess");
        assert_eq!(response.status(), 401, "attempt {attempt}");
    }
    let locked = http
        .get(url(kandev.addr, "/api/v1/tasks"))
        .bearer_auth("kdv_guess_10")
        .send()
        .await
        .expect("guess");
    let retry_after: u64 = locked
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_refused(&json_of(locked).await, 429, "TOO_MANY_ATTEMPTS");
    // Locked means locked: even the right token, and sign-in, wait; nothing is done.
    let got = create_task(
        &kandev,
        "while locked",
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await;
    assert_refused(&got, 429, "TOO_MANY_ATTEMPTS");
    let login = http
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .json(&json!({"token": ALICE}))
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 429);
    // Another address is not affected (Linux routes all of 127/8 to lo).
    install_crypto();
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .timeout(DEADLINE)
        .build()
        .expect("client");
    let response = elsewhere
        .get(url(kandev.addr, "/api/v1/tasks"))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("get");
    let (status, body) = json_of(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"], json!([]), "nothing was created while locked");
    // Requests without credentials are not guesses: they never lock anyone out.
    let fresh = with_auth().await;
    for _ in 0..15 {
        let response = http
            .get(url(fresh.addr, "/api/v1/tasks"))
            .send()
            .await
            .expect("get");
        assert_eq!(response.status(), 401);
    }
}

#[tokio::test]
async fn tokens_never_appear_in_the_logs() {
    let kandev = Kandev::start_with(
        Options::default()
            .toml(&auth_toml())
            .env("RUST_LOG", "debug"),
    )
    .await;
    let http = client();
    let wrong = "kdv_wrong_guess_that_must_not_be_logged";
    let _ = http
        .get(url(kandev.addr, "/api/v1/tasks"))
        .bearer_auth(wrong)
        .send()
        .await
        .expect("wrong");
    let _ = http
        .post(url(kandev.addr, "/api/v1/auth/login"))
        .json(&json!({"token": wrong}))
        .send()
        .await
        .expect("wrong login");
    let cookie = sign_in(&kandev, ALICE).await;
    let got = create_task(
        &kandev,
        "logged task",
        &[("authorization", &format!("Bearer {BOB}"))],
    )
    .await;
    assert_eq!(got.0, 201);
    let _ = ws(kandev.addr, &[("cookie", &cookie)]).await.expect("ws");
    kandev.wait_log("operator signed in", 1).await;
    kandev.wait_log("request refused", 1).await;
    let log = kandev.stderr();
    let cookie_value = cookie.split_once('=').expect("pair").1;
    for secret in [ALICE, BOB, wrong, cookie_value, &token_sha256(ALICE)] {
        assert!(!log.contains(secret), "a secret reached the log:\n{log}");
    }
}

#[tokio::test]
async fn a_non_loopback_listen_without_auth_refuses_to_start() {
    let (code, stderr) = refused_start("", &[("KANDEV_LISTEN", "0.0.0.0:0")]).await;
    assert_eq!(code, Some(2), "{stderr}");
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "one line: {stderr}");
    assert!(
        line.contains("auth.operators") && line.contains("kandev operator add"),
        "{line}"
    );
    let (code, stderr) = refused_start(
        "[auth]\nrequired = false\n",
        &[("KANDEV_LISTEN", "0.0.0.0:0")],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("auth.required"), "{stderr}");
}

#[tokio::test]
async fn a_non_loopback_listen_with_an_operator_serves_only_operators() {
    let kandev = Kandev::start_with(
        Options::default()
            .toml(&format!(
                "\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
                token_sha256(ALICE)
            ))
            .env("KANDEV_LISTEN", "0.0.0.0:0"),
    )
    .await;
    let addr = SocketAddr::from(([127, 0, 0, 1], kandev.addr.port()));
    let response = client()
        .get(url(addr, "/api/v1/tasks"))
        .send()
        .await
        .expect("get");
    assert_eq!(response.status(), 401, "auth is on by default off loopback");
    let response = client()
        .get(url(addr, "/api/v1/tasks"))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("get");
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_mistyped_auth_section_is_a_startup_error() {
    let (code, stderr) = refused_start(
        "[auht]\nrequired = true\n",
        &[("KANDEV_LISTEN", "127.0.0.1:0")],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("`auht`") && stderr.contains("did you mean `auth`?"),
        "{stderr}"
    );
    let (code, stderr) = refused_start("", &[("KANDEV_AUTH__REQUIERD", "true")]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("KANDEV_AUTH__REQUIRED"), "{stderr}");
}

/// A test CA and a certificate for localhost/127.0.0.1 it signed: (ca.pem, cert.pem, key.pem).
fn test_pki(
    dir: &std::path::Path,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{name} test CA"));
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    let paths = (
        dir.join(format!("{name}-ca.pem")),
        dir.join(format!("{name}-cert.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    std::fs::write(&paths.0, ca.pem()).expect("write");
    std::fs::write(&paths.1, cert.pem()).expect("write");
    std::fs::write(&paths.2, key.serialize_pem()).expect("write");
    paths
}

#[tokio::test]
async fn https_and_wss_with_a_test_ca() {
    let pki_dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = test_pki(pki_dir.path(), "kandev");
    let (other_ca, _, _) = test_pki(pki_dir.path(), "other");
    let kandev = Kandev::start_with(Options::default().toml(&format!(
        "{}\n[server.tls]\ncert = {:?}\nkey = {:?}\n",
        auth_toml(),
        cert.display().to_string(),
        key.display().to_string()
    )))
    .await;
    install_crypto();
    let trusting = reqwest::Client::builder()
        .tls_backend_preconfigured((*kandev_tls::client_config(Some(&ca)).expect("ca")).clone())
        .timeout(DEADLINE)
        .build()
        .expect("client");
    let https = format!("https://localhost:{}", kandev.addr.port());
    let response = trusting
        .post(format!("{https}/api/v1/auth/login"))
        .json(&json!({"token": ALICE}))
        .send()
        .await
        .expect("https login");
    let set_cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("cookie")
        .to_owned();
    assert!(
        set_cookie.contains("; Secure"),
        "over TLS the cookie is Secure: {set_cookie}"
    );
    let tasks = trusting
        .get(format!("{https}/api/v1/tasks"))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("https get");
    assert_eq!(tasks.status(), 200);

    // A client trusting another CA refuses the server; plain HTTP gets no API.
    let distrusting = reqwest::Client::builder()
        .tls_backend_preconfigured(
            (*kandev_tls::client_config(Some(&other_ca)).expect("ca")).clone(),
        )
        .timeout(DEADLINE)
        .build()
        .expect("client");
    assert!(
        distrusting
            .get(format!("{https}/healthz"))
            .send()
            .await
            .is_err()
    );
    assert!(
        client()
            .get(url(kandev.addr, "/healthz"))
            .send()
            .await
            .is_err(),
        "no plain HTTP"
    );

    // WSS with the same CA and a Bearer token.
    let request = {
        let mut request = format!("wss://localhost:{}/api/v1/ws", kandev.addr.port())
            .into_client_request()
            .expect("request");
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {ALICE}")).expect("value"),
        );
        request
    };
    let connector =
        tokio_tungstenite::Connector::Rustls(kandev_tls::client_config(Some(&ca)).expect("ca"));
    let (mut socket, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector))
            .await
            .expect("wss");
    let response = trusting
        .post(format!("{https}/api/v1/tasks"))
        .bearer_auth(ALICE)
        .json(&json!({"title": "over tls"}))
        .send()
        .await
        .expect("post");
    let (status, task) = json_of(response).await;
    assert_eq!(status, 201);
    assert_eq!(
        next_task_created(&mut socket).await["data"]["id"],
        task["id"]
    );
}

/// An authenticated API call as `token`.
async fn as_operator(
    kandev: &Kandev,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client()
        .request(method, url(kandev.addr, path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    json_of(request.send().await.expect("request")).await
}

#[tokio::test]
async fn answered_by_names_the_operator_in_the_record_its_message_and_the_history() {
    use reqwest::Method;
    let kandev = with_auth().await;
    let (status, _) = as_operator(
        &kandev,
        ALICE,
        Method::PATCH,
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, task) = as_operator(
        &kandev,
        BOB,
        Method::POST,
        "/api/v1/tasks",
        Some(json!({"title": "Paint"})),
    )
    .await;
    let task = task["id"].as_str().expect("task").to_owned();
    let (status, session) = as_operator(
        &kandev,
        BOB,
        Method::POST,
        &format!("/api/v1/tasks/{task}/sessions"),
        Some(json!({"agent": "mock", "prompt": "Pick for me"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let session = session["id"].as_str().expect("session").to_owned();
    let list = format!("/api/v1/clarifications?session_id={session}&status=pending");
    let pending = wait_for("the demo question", || async {
        let (_, v) = as_operator(&kandev, BOB, Method::GET, &list, None).await;
        v["clarifications"][0]["pending_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let (status, v) = as_operator(
        &kandev,
        ALICE,
        Method::POST,
        &format!("/api/v1/clarifications/{pending}/respond"),
        Some(json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]})),
    )
    .await;
    assert_eq!((status, v), (StatusCode::OK, json!({"status": "answered"})));
    let (_, record) = as_operator(
        &kandev,
        BOB,
        Method::GET,
        &format!("/api/v1/clarifications/{pending}"),
        None,
    )
    .await;
    assert_eq!(
        (record["answered_by"].as_str(), record["outcome"].as_str()),
        (Some("alice"), Some("answered")),
        "who answered, not who asked or who reads: {record}"
    );
    let (_, messages) = as_operator(
        &kandev,
        BOB,
        Method::GET,
        &format!("/api/v1/sessions/{session}/messages"),
        None,
    )
    .await;
    let card = messages["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["metadata"]["pending_id"] == pending.as_str())
        .expect("the clarification message")
        .clone();
    assert_eq!(card["metadata"]["answered_by"], "alice");
    assert_eq!(card["metadata"]["status"], "answered");
}
