//! Who may call: tokens and Basic credentials on HTTP and on the WebSocket, the local
//! operator without auth, the rate limit on guesses, and tokens kept out of the logs.

use kandev_backend::auth::token_sha256;
use kandev_testkit::{DEADLINE, Kandev, KandevOptions};
use serde_json::{Value, json};

use super::{
    ALICE, BOB, assert_refused, assert_ws_refused, auth_toml, basic, bearer, create_task,
    created_task_is_seen, install_crypto, login, me, send, sign_in, task_titles, with_auth, ws,
};

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
