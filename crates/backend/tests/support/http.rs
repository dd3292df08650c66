//! The HTTP client of the backend tests: `reqwest`, one connection per request.

use std::net::SocketAddr;
use std::sync::OnceLock;

use serde_json::Value;

use super::DEADLINE;

/// One client for every test of this binary. No idle connections are kept: each
/// `#[tokio::test]` has its own runtime, a pooled connection would outlive the runtime
/// that opened it, and an idle keep-alive connection would hold kandev's graceful
/// shutdown open. No proxy: the tests talk to loopback only.
fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // reqwest is built with rustls but no provider of its own (the workspace picks ring).
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(DEADLINE)
            .build()
            .expect("an HTTP client")
    })
}

/// One request; returns the status and the JSON body (null when empty or not JSON).
///
/// The body is always sent as `application/json` (empty without one), so a route that
/// reads a JSON body sees a JSON request even when a test sends none.
pub async fn http(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let response = client()
        .request(method.clone(), format!("http://{addr}{path}"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.map(|b| b.to_string()).unwrap_or_default())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path} on {addr}: {e}"));
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .unwrap_or_else(|e| panic!("{method} {path} on {addr}: reading the body: {e}"));
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// `GET path` as text (a Prometheus scrape); returns the status and the body.
pub async fn get_text(addr: SocketAddr, path: &str) -> (u16, String) {
    let response = client()
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path} on {addr}: {e}"));
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("GET {path} on {addr}: reading the body: {e}"));
    (status, text)
}
