//! Configurations that must not serve as written (a listen beyond loopback without auth, a
//! mistyped `[auth]`), and HTTPS and WSS with a test CA.

use std::net::SocketAddr;

use kandev_backend::auth::token_sha256;
use kandev_testkit::{DEADLINE, HttpClient, Kandev, KandevOptions, TestPki, refused_start};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::{ALICE, auth_toml, bearer, install_crypto, next_task_created, with_toml};

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
