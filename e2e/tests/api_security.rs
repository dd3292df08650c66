//! docs/architecture.md §10 at the HTTP level: the real `kandev` binary on a real socket, driven
//! the way an attacker's page, curl and the browser would (was the backend's
//! `tests/security.rs`). Each attack of issue 12 is a test named after it; each shows the
//! refusal and that nothing changed, and that the legitimate client still gets through.

use std::net::SocketAddr;

use kandev_backend::auth::token_sha256;
use kandev_testkit::{
    ApiResponse, DEADLINE, HttpClient, Kandev, KandevOptions, TestPki, poll_until, refused_start,
};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};

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

#[tokio::test]
async fn cross_site_websocket_hijacking_is_refused() {
    let kandev = Kandev::start_default().await;
    let own = format!("http://{}", kandev.addr());
    // A foreign page must not open the event stream.
    for origin in [
        EVIL,
        "null",
        "http://127.0.0.1:1",
        "http://localhost.evil.example",
    ] {
        let code = if origin == EVIL {
            "ORIGIN_NOT_ALLOWED"
        } else {
            ""
        };
        assert_ws_refused(&kandev, &[("origin", origin)], 403, code).await;
    }
    // The UI's own page and a client without Origin (curl, SDKs) still get the stream.
    let same_origin = ws(kandev.addr(), &[("origin", &own)])
        .await
        .expect("same origin");
    let no_origin = ws(kandev.addr(), &[]).await.expect("no Origin");
    created_task_is_seen(&kandev, &[], &mut [same_origin, no_origin]).await;
}

#[tokio::test]
async fn dns_rebinding_host_is_refused() {
    let kandev = Kandev::start_default().await;
    assert_eq!(
        create_task(&kandev, "secret roadmap", &[]).await.status,
        201
    );
    let port = kandev.addr().port();
    let evil_host = format!("evil.example:{port}");
    let rebound = [("host", evil_host.as_str())];
    for path in [
        "/api/v1/tasks",
        "/api/v1/runtime-flags",
        "/",
        "/app.js",
        "/api/v1/clarifications",
    ] {
        let got = send(&kandev, "GET", path, None, &rebound).await;
        assert_refused(&got, 403, "HOST_NOT_ALLOWED");
        assert!(
            !got.body.to_string().contains("secret roadmap"),
            "{path}: {got}"
        );
    }
    assert_eq!(create_task(&kandev, "planted", &rebound).await.status, 403);
    // The stream refuses a rebound name.
    assert_ws_refused(&kandev, &rebound, 403, "HOST_NOT_ALLOWED").await;
    assert_eq!(
        task_titles(&kandev, None).await,
        ["secret roadmap"],
        "nothing planted"
    );
    // The names the UI is served under.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let got = send(&kandev, "GET", "/", None, &[("host", &host)]).await;
        assert_eq!(got.status, 200, "{host}");
    }
    // /healthz stays probe-able by address (load balancers), and says nothing else.
    let health = send(&kandev, "GET", "/healthz", None, &rebound).await;
    assert_eq!(health.body, json!({"status": "ok"}));
}

#[tokio::test]
async fn allowed_hosts_and_origins_admit_a_proxy() {
    let kandev = with_toml(
        "\n[server]\nallowed_hosts = [\"kandev.example.com\"]\nallowed_origins = [\"https://ops.example.com\"]\n",
    )
    .await;
    let listed = send(
        &kandev,
        "GET",
        "/api/v1/tasks",
        None,
        &[("host", "kandev.example.com")],
    )
    .await;
    assert_eq!(listed.status, 200, "{listed}");
    for (title, headers, status) in [
        // A TLS-terminating proxy: the page is https://kandev.example.com, kandev speaks HTTP.
        (
            "via the proxy",
            &[
                ("host", "kandev.example.com"),
                ("origin", "https://kandev.example.com"),
            ][..],
            201,
        ),
        (
            "from ops",
            &[("origin", "https://ops.example.com")][..],
            201,
        ),
        (
            "from elsewhere",
            &[("origin", "https://ops.example.net")][..],
            403,
        ),
    ] {
        let got = create_task(&kandev, title, headers).await;
        assert_eq!(got.status, status, "{title}: {got}");
    }
    ws(kandev.addr(), &[("origin", "https://ops.example.com")])
        .await
        .expect("an allowed origin opens the stream");
}

#[tokio::test]
async fn cross_origin_task_creation_is_refused() {
    let kandev = Kandev::start_default().await;
    let got = create_task(&kandev, "planted by evil.example", &[("origin", EVIL)]).await;
    assert_refused(&got, 403, "ORIGIN_NOT_ALLOWED");
    // Other state changes from the foreign page: the flag toggle.
    let flags = || async {
        kandev
            .api()
            .get("/api/v1/runtime-flags")
            .await
            .expect_status(200, "flags")
    };
    let flags_before = flags().await;
    let got = send(
        &kandev,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
        &[("origin", EVIL)],
    )
    .await;
    assert_refused(&got, 403, "ORIGIN_NOT_ALLOWED");
    assert_eq!(flags().await, flags_before, "flag unchanged");
    assert!(
        task_titles(&kandev, None).await.is_empty(),
        "no task was created"
    );
    // Same-origin pages and curl-style clients still create tasks.
    let own = format!("http://{}", kandev.addr());
    assert_eq!(
        create_task(&kandev, "from the UI", &[("origin", &own)])
            .await
            .status,
        201
    );
    assert_eq!(create_task(&kandev, "from curl", &[]).await.status, 201);
    assert_eq!(task_titles(&kandev, None).await.len(), 2);
}

#[tokio::test]
async fn clickjacking_is_refused_by_the_frame_headers() {
    let kandev = Kandev::start_default().await;
    for path in ["/", "/api/v1/tasks", "/nope"] {
        let got = send(&kandev, "GET", path, None, &[]).await;
        assert_eq!(got.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            got.header("content-security-policy"),
            Some("frame-ancestors 'none'"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn missing_wrong_and_right_tokens_on_http() {
    let kandev = with_auth().await;
    let missing = send(&kandev, "GET", "/api/v1/tasks", None, &[]).await;
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"kandev\"")
    );
    let basic = basic("alice", ALICE);
    for (headers, code) in [
        (&[][..], "AUTH_REQUIRED"),
        (
            &[("authorization", "Bearer kdv_not_a_token")][..],
            "INVALID_TOKEN",
        ),
        (&[("authorization", basic.as_str())][..], "INVALID_TOKEN"),
    ] {
        let got = send(&kandev, "GET", "/api/v1/tasks", None, headers).await;
        assert_refused(&got, 401, code);
    }
    // A state change without credentials does nothing.
    for (title, headers, code) in [
        ("anonymous", &[][..], "AUTH_REQUIRED"),
        (
            "guessed",
            &[("authorization", "Bearer kdv_guess")][..],
            "INVALID_TOKEN",
        ),
    ] {
        assert_refused(&create_task(&kandev, title, headers).await, 401, code);
    }
    assert!(task_titles(&kandev, Some(ALICE)).await.is_empty());
    // The right token, and who it is.
    let got = create_task(&kandev, "by alice", &[("authorization", &bearer(ALICE))]).await;
    assert_eq!(got.status, 201, "{got}");
    for (token, name) in [(ALICE, "alice"), (BOB, "bob")] {
        assert_eq!(
            me(&kandev, &[("authorization", &bearer(token))]).await.body,
            json!({"operator": name, "auth_required": true})
        );
    }
    // Open without credentials: the health probe and the UI's files (the sign-in page);
    // unknown API paths need credentials too.
    for (path, status) in [
        ("/healthz", 200),
        ("/", 200),
        ("/app.js", 200),
        ("/api/v1/nope", 401),
    ] {
        assert_eq!(
            send(&kandev, "GET", path, None, &[]).await.status,
            status,
            "{path}"
        );
    }
}

#[test]
fn basic_credentials_are_encoded_as_rfc_7617_says() {
    assert_eq!(
        basic("Aladdin", "open sesame"),
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
    assert_eq!(basic("a", "b"), "Basic YTpi");
    assert_eq!(basic("ab", "c"), "Basic YWI6Yw==");
}

#[tokio::test]
async fn without_auth_the_operator_is_local() {
    let kandev = Kandev::start_default().await;
    assert_eq!(
        me(&kandev, &[]).await.expect_status(200, "me"),
        json!({"operator": "local", "auth_required": false})
    );
}

#[tokio::test]
async fn missing_wrong_and_right_credentials_on_the_websocket() {
    let kandev = with_auth().await;
    for (what, headers, code) in [
        ("no credentials", &[][..], "AUTH_REQUIRED"),
        (
            "a wrong token",
            &[("authorization", "Bearer kdv_wrong")][..],
            "INVALID_TOKEN",
        ),
        (
            "a forged cookie",
            &[("cookie", "kandev_session=alice.99999999999.00")][..],
            "",
        ),
    ] {
        eprintln!("{what}");
        assert_ws_refused(&kandev, headers, 401, code).await;
    }
    let by_token = ws(kandev.addr(), &[("authorization", &bearer(ALICE))])
        .await
        .expect("a Bearer token opens the stream");
    let cookie = sign_in(&kandev, BOB).await;
    let own = format!("http://{}", kandev.addr());
    let by_cookie = ws(kandev.addr(), &[("cookie", &cookie), ("origin", &own)])
        .await
        .expect("the session cookie opens the stream");
    created_task_is_seen(
        &kandev,
        &[("authorization", &bearer(ALICE))],
        &mut [by_token, by_cookie],
    )
    .await;
}

/// Signs in with `token`; returns the `name=value` of the session cookie.
async fn sign_in(kandev: &Kandev, token: &str) -> String {
    let got = login(kandev, token, &[]).await;
    assert_eq!(got.status, 200, "{got}");
    let set_cookie = got.header("set-cookie").expect("a cookie");
    set_cookie.split(';').next().expect("pair").to_owned()
}

#[tokio::test]
async fn browser_sign_in_sets_an_http_only_strict_cookie_and_sign_out_clears_it() {
    let kandev = with_auth().await;
    let wrong = login(&kandev, "kdv_wrong", &[]).await;
    assert!(wrong.header("set-cookie").is_none());
    assert_refused(&wrong, 401, "INVALID_TOKEN");

    let response = login(&kandev, ALICE, &[]).await;
    let set_cookie = response.header("set-cookie").expect("cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains(ALICE), "the cookie is not the token");
    assert_eq!(response.body["operator"], "alice");
    let cookie = set_cookie.split(';').next().expect("pair").to_owned();
    assert_eq!(
        me(&kandev, &[("cookie", &cookie)]).await.body["operator"],
        "alice"
    );

    // Signing in from another site (login CSRF) is refused like any cross-origin POST.
    let csrf = login(&kandev, ALICE, &[("origin", EVIL)]).await;
    assert!(csrf.header("set-cookie").is_none());
    assert_eq!(csrf.status, 403);

    let out = send(
        &kandev,
        "POST",
        "/api/v1/auth/logout",
        None,
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(out.status, 204);
    let cleared = out.header("set-cookie").expect("cleared");
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
    assert_eq!(
        me(&replica, &[("cookie", &cookie)]).await.body["operator"],
        "alice"
    );
    // Rotating alice's token signs her out everywhere.
    let rotated = with_toml(&format!(
        "\n[auth]\nrequired = true\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
        token_sha256("kdv_rotated")
    ))
    .await;
    let got = me(&rotated, &[("cookie", &cookie)]).await;
    assert_refused(&got, 401, "INVALID_SESSION");
}

/// reqwest is built without a crypto provider of its own (the workspace uses ring only).
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[tokio::test]
async fn failed_attempts_are_rate_limited_per_address() {
    let kandev = with_auth().await;
    for attempt in 0..10 {
        let guess = bearer(&format!("kdv_guess_{attempt}"));
        let got = send(
            &kandev,
            "GET",
            "/api/v1/tasks",
            None,
            &[("authorization", &guess)],
        )
        .await;
        assert_eq!(got.status, 401, "attempt {attempt}");
    }
    let locked = send(
        &kandev,
        "GET",
        "/api/v1/tasks",
        None,
        &[("authorization", "Bearer kdv_guess_10")],
    )
    .await;
    let retry_after: u64 = locked
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_refused(&locked, 429, "TOO_MANY_ATTEMPTS");
    // Locked means locked: even the right token, and sign-in, wait; nothing is done.
    let got = create_task(
        &kandev,
        "while locked",
        &[("authorization", &bearer(ALICE))],
    )
    .await;
    assert_refused(&got, 429, "TOO_MANY_ATTEMPTS");
    assert_eq!(login(&kandev, ALICE, &[]).await.status, 429);
    // Another address is not affected (Linux routes all of 127/8 to lo).
    install_crypto();
    let elsewhere = reqwest::Client::builder()
        .no_proxy()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .timeout(DEADLINE)
        .build()
        .expect("client");
    let response = elsewhere
        .get(format!("http://{}/api/v1/tasks", kandev.addr()))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("get");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"], json!([]), "nothing was created while locked");
    // Requests without credentials are not guesses: they never lock anyone out.
    let fresh = with_auth().await;
    for _ in 0..15 {
        assert_eq!(
            send(&fresh, "GET", "/api/v1/tasks", None, &[]).await.status,
            401
        );
    }
}

#[tokio::test]
async fn tokens_never_appear_in_the_logs() {
    let kandev = Kandev::start(
        KandevOptions::new()
            .toml(&auth_toml())
            .env("RUST_LOG", "debug"),
    )
    .await;
    let wrong = "kdv_wrong_guess_that_must_not_be_logged";
    send(
        &kandev,
        "GET",
        "/api/v1/tasks",
        None,
        &[("authorization", &bearer(wrong))],
    )
    .await;
    login(&kandev, wrong, &[]).await;
    let cookie = sign_in(&kandev, ALICE).await;
    let got = create_task(&kandev, "logged task", &[("authorization", &bearer(BOB))]).await;
    assert_eq!(got.status, 201);
    let _ = ws(kandev.addr(), &[("cookie", &cookie)]).await.expect("ws");
    kandev.wait_log("operator signed in", 1).await;
    kandev.wait_log("request refused", 1).await;
    let log = kandev.log();
    let cookie_value = cookie.split_once('=').expect("pair").1;
    for secret in [ALICE, BOB, wrong, cookie_value, &token_sha256(ALICE)] {
        assert!(!log.contains(secret), "a secret reached the log:\n{log}");
    }
}

/// Starts kandev with `toml` and `env`, expects exit code 2 and a stderr naming every
/// one of `needles`; returns the stderr.
async fn assert_start_refused(toml: &str, env: &[(&str, &str)], needles: &[&str]) -> String {
    let (code, stderr) = refused_start(toml, env).await;
    assert_eq!(code, Some(2), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    stderr
}

#[tokio::test]
async fn a_non_loopback_listen_without_auth_refuses_to_start() {
    let everywhere = [("KANDEV_LISTEN", "0.0.0.0:0")];
    let stderr =
        assert_start_refused("", &everywhere, &["auth.operators", "kandev operator add"]).await;
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert_start_refused(
        "[auth]\nrequired = false\n",
        &everywhere,
        &["auth.required"],
    )
    .await;
}

#[tokio::test]
async fn a_non_loopback_listen_with_an_operator_serves_only_operators() {
    let kandev = Kandev::start(
        KandevOptions::new()
            .toml(&format!(
                "\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
                token_sha256(ALICE)
            ))
            .env("KANDEV_LISTEN", "0.0.0.0:0"),
    )
    .await;
    let api = HttpClient::new(SocketAddr::from(([127, 0, 0, 1], kandev.addr().port())));
    let anonymous = api.send("GET", "/api/v1/tasks", None, &[]).await;
    assert_eq!(anonymous.status, 401, "auth is on by default off loopback");
    let alice = api
        .send(
            "GET",
            "/api/v1/tasks",
            None,
            &[("authorization", &bearer(ALICE))],
        )
        .await;
    assert_eq!(alice.status, 200);
}

#[tokio::test]
async fn a_mistyped_auth_section_is_a_startup_error() {
    assert_start_refused(
        "[auht]\nrequired = true\n",
        &[("KANDEV_LISTEN", "127.0.0.1:0")],
        &["`auht`", "did you mean `auth`?"],
    )
    .await;
    assert_start_refused(
        "",
        &[("KANDEV_AUTH__REQUIERD", "true")],
        &["KANDEV_AUTH__REQUIRED"],
    )
    .await;
}

/// A reqwest client that trusts only `ca`.
fn trusting(ca: &std::path::Path) -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured((*kandev_tls::client_config(Some(ca)).expect("ca")).clone())
        .timeout(DEADLINE)
        .build()
        .expect("client")
}

#[tokio::test]
async fn https_and_wss_with_a_test_ca() {
    let pki_dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(pki_dir.path(), "kandev");
    let other = TestPki::new(pki_dir.path(), "other");
    let kandev = with_toml(&format!(
        "{}\n[server.tls]\ncert = {:?}\nkey = {:?}\n",
        auth_toml(),
        pki.cert.display().to_string(),
        pki.key.display().to_string()
    ))
    .await;
    let trusting_client = trusting(&pki.ca);
    let https = format!("https://localhost:{}", kandev.addr().port());
    let response = trusting_client
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
    let tasks = trusting_client
        .get(format!("{https}/api/v1/tasks"))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("https get");
    assert_eq!(tasks.status(), 200);

    // A client trusting another CA refuses the server; plain HTTP gets no API.
    assert!(
        trusting(&other.ca)
            .get(format!("{https}/healthz"))
            .send()
            .await
            .is_err()
    );
    assert!(
        kandev
            .api()
            .try_request("GET", "/healthz", None)
            .await
            .is_err(),
        "no plain HTTP"
    );

    // WSS with the same CA and a Bearer token.
    let mut request = format!("wss://localhost:{}/api/v1/ws", kandev.addr().port())
        .into_client_request()
        .expect("request");
    request.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&bearer(ALICE)).expect("value"),
    );
    let connector =
        tokio_tungstenite::Connector::Rustls(kandev_tls::client_config(Some(&pki.ca)).expect("ca"));
    let (mut socket, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector))
            .await
            .expect("wss");
    let response = trusting_client
        .post(format!("{https}/api/v1/tasks"))
        .bearer_auth(ALICE)
        .json(&json!({"title": "over tls"}))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 201);
    let task: Value = response.json().await.expect("the task");
    assert_eq!(
        next_task_created(&mut socket).await["data"]["id"],
        task["id"]
    );
}

#[tokio::test]
async fn answered_by_names_the_operator_in_the_record_its_message_and_the_history() {
    let kandev = with_auth().await;
    let flag = as_operator(
        &kandev,
        ALICE,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
    )
    .await;
    assert_eq!(flag.status, 200);
    let task = as_operator(
        &kandev,
        BOB,
        "POST",
        "/api/v1/tasks",
        Some(json!({"title": "Paint"})),
    )
    .await;
    let task = task.body["id"].as_str().expect("task").to_owned();
    let session = as_operator(
        &kandev,
        BOB,
        "POST",
        &format!("/api/v1/tasks/{task}/sessions"),
        Some(json!({"agent": "mock", "prompt": "Pick for me"})),
    )
    .await
    .expect_status(201, "start session");
    let session = session["id"].as_str().expect("session").to_owned();
    let list = format!("/api/v1/clarifications?session_id={session}&status=pending");
    let pending = poll_until("the demo question", DEADLINE, || async {
        let got = as_operator(&kandev, BOB, "GET", &list, None).await;
        got.body["clarifications"][0]["pending_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let answer = json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]});
    let respond = format!("/api/v1/clarifications/{pending}/respond");
    let got = as_operator(&kandev, ALICE, "POST", &respond, Some(answer)).await;
    assert_eq!((got.status, got.body), (200, json!({"status": "answered"})));
    let record = as_operator(
        &kandev,
        BOB,
        "GET",
        &format!("/api/v1/clarifications/{pending}"),
        None,
    )
    .await
    .body;
    assert_eq!(
        (record["answered_by"].as_str(), record["outcome"].as_str()),
        (Some("alice"), Some("answered")),
        "who answered, not who asked or who reads: {record}"
    );
    let messages = as_operator(
        &kandev,
        BOB,
        "GET",
        &format!("/api/v1/sessions/{session}/messages"),
        None,
    )
    .await
    .body;
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
