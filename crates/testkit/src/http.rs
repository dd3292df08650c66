//! The suite's HTTP client of the operator API: `reqwest`, one connection per request,
//! JSON in and out.

use std::fmt;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

/// Longest any one request may take: far beyond the slowest route (an answer waits for
/// agentctl's acknowledgement), so a hung request fails the test instead of hanging it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// One client for the whole process. No idle connections are kept: each
/// `#[tokio::test]` has its own runtime, which a pooled connection would outlive, and an
/// idle keep-alive connection would hold kandev's graceful shutdown open. No proxy: the
/// suite talks to loopback only. [`HttpClient`] sends through it; a test calls it directly
/// for a request HttpClient does not shape (its own headers, a non-JSON body).
pub fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // reqwest is built with rustls but no provider of its own (the workspace picks ring).
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("an HTTP client")
    })
}

/// A response: status, headers and JSON body (`Value::Null` for an empty body, a string
/// for a body that is not JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    /// HTTP status code.
    pub status: u16,
    /// The parsed body.
    pub body: Value,
    /// The response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl fmt::Display for ApiResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.body)
    }
}

impl ApiResponse {
    /// The body, after asserting the status is `status`.
    ///
    /// # Panics
    /// When the status differs, showing the whole response and `context`.
    pub fn expect_status(self, status: u16, context: &str) -> Value {
        assert_eq!(self.status, status, "{context}: got {self}");
        self.body
    }

    /// The value of header `name` (the first, when repeated), if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `error.code` of an error body (`""` when there is none).
    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }
}

/// The operator API of one kandev.
#[derive(Debug, Clone, Copy)]
pub struct HttpClient {
    addr: SocketAddr,
}

impl HttpClient {
    /// A client of `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr }
    }

    /// `method path` with an optional JSON body.
    ///
    /// # Panics
    /// On a transport failure (the backend is gone), naming the request.
    pub async fn request(&self, method: &str, path: &str, body: Option<&Value>) -> ApiResponse {
        match self.try_request(method, path, body).await {
            Ok(response) => response,
            Err(err) => panic!("{method} {path} on {}: {err}", self.addr),
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> ApiResponse {
        self.request("GET", path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> ApiResponse {
        self.request("POST", path, Some(body)).await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> ApiResponse {
        self.request("PATCH", path, Some(body)).await
    }

    /// Like [`HttpClient::request`], reporting a transport failure as an error.
    pub async fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<ApiResponse> {
        self.try_send(method, path, body, &[]).await
    }

    /// `method path` with an optional JSON body and extra request headers, the way a
    /// browser, a proxy or an attacker's page would send them (`host`, `origin`,
    /// `authorization`, `cookie`, …).
    ///
    /// # Panics
    /// On a transport failure, naming the request.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> ApiResponse {
        match self.try_send(method, path, body, headers).await {
            Ok(response) => response,
            Err(err) => panic!("{method} {path} on {}: {err}", self.addr),
        }
    }

    /// `GET path` as text (a Prometheus scrape): the status and the body as sent.
    ///
    /// # Panics
    /// On a transport failure, naming the request.
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let response = client()
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await
            .unwrap_or_else(|err| panic!("GET {path} on {}: {err}", self.addr));
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .unwrap_or_else(|err| panic!("GET {path} on {}: reading the body: {err}", self.addr));
        (status, text)
    }

    /// Like [`HttpClient::send`], reporting a transport failure as an error.
    pub async fn try_send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<ApiResponse> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let method =
            reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let mut request = client()
            .request(method, format!("http://{}{path}", self.addr))
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.map_err(std::io::Error::other)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(std::io::Error::other)?;
        Ok(ApiResponse {
            status,
            body: parse_body(&bytes),
            headers,
        })
    }
}

/// A body as JSON: `Value::Null` when empty, a string when it is not JSON.
fn parse_body(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_is_json_null_when_empty_and_text_when_not_json() {
        assert_eq!(parse_body(b"{\"error\": 1}\n"), json!({"error": 1}));
        assert_eq!(parse_body(b""), Value::Null);
        assert_eq!(parse_body(b" \n"), Value::Null);
        assert_eq!(parse_body(b"Not Found"), json!("Not Found"));
    }
}
