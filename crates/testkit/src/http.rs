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

/// A response: status and JSON body (`Value::Null` for an empty body, a string for a
/// body that is not JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    /// HTTP status code.
    pub status: u16,
    /// The parsed body.
    pub body: Value,
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
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut request = client()
            .request(method, format!("http://{}{path}", self.addr))
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(std::io::Error::other)?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(std::io::Error::other)?;
        Ok(ApiResponse {
            status,
            body: parse_body(&bytes),
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
