//! Opening one authenticated agent-stream WebSocket to an agentctl, over `ws://` or
//! `wss://` (verified against the system roots or the configured CA).

use std::path::Path;
use std::sync::Arc;

use kandev_agent_stream::STREAM_PATH;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// An open agent stream.
pub(crate) type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Where the stream is and how to authenticate.
#[derive(Clone)]
pub(crate) struct Endpoint {
    url: String,
    token: String,
    /// Set for `wss://`: whom to trust.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `base` is agentctl's address (`ws://host:port`, `http://…` or bare `host:port`);
    /// the stream path is appended unless already there.
    /// A plain `ws://` endpoint (the local executor).
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            url: stream_url(base),
            token: token.to_owned(),
            tls: None,
        }
    }

    /// A remote endpoint: for `wss://`, verified against `ca_cert` (PEM) or, without
    /// one, the system's root certificates.
    pub fn remote(
        base: &str,
        token: &str,
        ca_cert: Option<&Path>,
    ) -> Result<Self, kandev_tls::TlsError> {
        let mut endpoint = Self::new(base, token);
        if endpoint.url.starts_with("wss://") {
            endpoint.tls = Some(kandev_tls::client_config(ca_cert)?);
        }
        Ok(endpoint)
    }

    /// The full stream URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Why a connect failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    /// Retrying cannot help: agentctl refused the token, or the URL is unusable.
    #[error("{0}")]
    Rejected(String),
    /// Maybe temporary: nothing listening, connection reset, unexpected HTTP status.
    #[error("{0}")]
    Failed(String),
}

/// The full stream URL for a configured base.
pub(crate) fn stream_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    let base = if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if base.starts_with("ws://") || base.starts_with("wss://") {
        base.to_owned()
    } else {
        format!("ws://{base}")
    };
    if base.ends_with(STREAM_PATH) {
        base
    } else {
        format!("{base}{STREAM_PATH}")
    }
}

/// Opens the stream with `Authorization: Bearer <token>`.
pub(crate) async fn open(endpoint: &Endpoint) -> Result<WsStream, DialError> {
    let url = &endpoint.url;
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|err| DialError::Rejected(format!("invalid agentctl url {url}: {err}")))?;
    let bearer = HeaderValue::from_str(&format!("Bearer {}", endpoint.token)).map_err(|_| {
        DialError::Rejected("the agentctl token has characters not allowed in a header".into())
    })?;
    request.headers_mut().insert(header::AUTHORIZATION, bearer);
    let connector = endpoint.tls.clone().map(Connector::Rustls);
    let config =
        WebSocketConfig::default().read_buffer_size(kandev_agent_stream::READ_BUFFER_BYTES);
    // TCP_NODELAY: agent-stream frames are small and every answer is latency-bound.
    match tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, connector)
        .await
    {
        Ok((ws, _response)) => Ok(ws),
        Err(err) => Err(classify(url, err)),
    }
}

fn classify(url: &str, err: WsError) -> DialError {
    match err {
        WsError::Http(response) => {
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                DialError::Rejected(format!(
                    "agentctl at {url} rejected the token (HTTP {status}); check the executor token"
                ))
            } else {
                DialError::Failed(format!(
                    "agentctl at {url} answered HTTP {status} instead of opening the stream"
                ))
            }
        }
        WsError::Url(err) => DialError::Rejected(format!("invalid agentctl url {url}: {err}")),
        // A certificate that does not verify will not verify on the next try either.
        WsError::Io(err) if tls_failure(&err).is_some() => DialError::Rejected(format!(
            "TLS with agentctl at {url} failed: {}; check executor.ca_cert and agentctl's --tls-cert",
            tls_failure(&err)
                .map(ToString::to_string)
                .unwrap_or_default()
        )),
        WsError::Io(err) => DialError::Failed(format!("could not connect to {url}: {err}")),
        WsError::Tls(err) => {
            DialError::Rejected(format!("TLS with agentctl at {url} failed: {err}"))
        }
        other => DialError::Failed(format!("could not open the agent stream at {url}: {other}")),
    }
}

/// The rustls error inside an I/O error from the handshake, if that is what it is.
fn tls_failure(err: &std::io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_path_is_appended_once_and_http_becomes_ws() {
        assert_eq!(
            stream_url("ws://10.0.0.5:7740"),
            "ws://10.0.0.5:7740/api/v1/agent/stream"
        );
        assert_eq!(
            stream_url("ws://10.0.0.5:7740/"),
            "ws://10.0.0.5:7740/api/v1/agent/stream"
        );
        assert_eq!(stream_url("http://h:1"), "ws://h:1/api/v1/agent/stream");
        assert_eq!(stream_url("https://h"), "wss://h/api/v1/agent/stream");
        assert_eq!(
            stream_url("127.0.0.1:9"),
            "ws://127.0.0.1:9/api/v1/agent/stream"
        );
        assert_eq!(
            stream_url("ws://h:1/api/v1/agent/stream"),
            "ws://h:1/api/v1/agent/stream"
        );
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let endpoint = Endpoint::new("ws://h:1", "s3cr3t-token");
        assert!(!format!("{endpoint:?}").contains("s3cr3t"));
    }

    #[tokio::test]
    async fn nothing_listening_is_a_retryable_failure_naming_the_url() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let endpoint = Endpoint::new(&format!("ws://{addr}"), "t");
        match open(&endpoint).await {
            Err(DialError::Failed(message)) => assert!(message.contains(&addr.to_string())),
            other => panic!("expected a retryable failure, got {other:?}"),
        }
    }
}
