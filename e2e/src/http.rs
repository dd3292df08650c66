//! A minimal HTTP/1.1 JSON client for the operator API (one connection per request,
//! `Connection: close`), so the suite needs no HTTP client crate.

use std::fmt;
use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
        let mut stream = TcpStream::connect(self.addr).await?;
        let payload = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\n",
            self.addr
        );
        if body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", payload.len()));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(payload.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse_response(&raw)
            .ok_or_else(|| std::io::Error::other(format!("unparseable response: {raw:?}")))
    }
}

/// Parses a whole `Connection: close` response (plain or chunked body).
fn parse_response(raw: &[u8]) -> Option<ApiResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("transfer-encoding:") && lower.contains("chunked")
    });
    let body = if chunked {
        let mut body = Vec::new();
        loop {
            let end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(&rest[..end]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[end + 2..];
            if size == 0 {
                break;
            }
            body.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        body
    } else {
        rest.to_vec()
    };
    let text = String::from_utf8_lossy(&body);
    let body = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned()))
    };
    Some(ApiResponse { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_plain_json_response() {
        let raw = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{\"error\": 1}\n";
        let r = parse_response(raw).expect("parses");
        assert_eq!(r.status, 404);
        assert_eq!(r.body, json!({"error": 1}));
    }

    #[test]
    fn parses_a_chunked_response_and_an_empty_body() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n4\r\n: 1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw).expect("chunked").body, json!({"a": 1}));
        let raw = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(parse_response(raw).expect("empty").body, Value::Null);
        assert!(parse_response(b"garbage").is_none());
    }
}
