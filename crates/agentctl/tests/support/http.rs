//! The HTTP client of the agentctl tests (`/healthz`, the MCP endpoint's auth): `reqwest`.

use std::sync::OnceLock;

use super::DEADLINE;

/// One client per test binary. No idle connections (each `#[tokio::test]` has its own
/// runtime, which a pooled connection would outlive) and no proxy (loopback only).
pub fn client() -> &'static reqwest::Client {
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

/// Sends `request`; returns the status and the body text.
pub async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("an HTTP response");
    let status = response.status().as_u16();
    (status, response.text().await.expect("the body"))
}
