//! A lean operator: the `/api/v1/ws` events forwarded through a channel (no per-event
//! scanning, so the measurement is not the client's), and keep-alive HTTP/1.1 JSON
//! connections as a browser would hold them, each request carrying the operator's token
//! (the bench runs kandev with auth on, as it is deployed).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::agent::wall_ns;

/// The bench operator's name in `[[auth.operators]]`.
pub const OPERATOR: &str = "bench";

/// The bench operator's token (loopback only, throwaway).
pub const TOKEN: &str = "kdv_bench_operator_token";

/// `Authorization` of every bench request.
pub fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// A `clarification.created` event as an operator client got it.
#[derive(Debug, Clone)]
pub struct Created {
    /// The event's `data`: the clarification record.
    pub data: Value,
    /// When the client read it, wall-clock nanoseconds.
    pub seen_ns: u128,
}

/// Subscribes to the operator WebSocket, following the board only, and forwards every
/// `clarification.created` event.
pub async fn clarifications_created(
    addr: SocketAddr,
) -> Result<mpsc::UnboundedReceiver<Created>, String> {
    let (tx, rx) = mpsc::unbounded_channel();
    on_created(addr, move |mut event, seen_ns| {
        tx.send(Created {
            data: event["data"].take(),
            seen_ns,
        })
        .is_ok()
    })
    .await?;
    Ok(rx)
}

/// What a bench operator's socket follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follows {
    /// The board only, as the web UI's board and needs-you pages do: it watches no
    /// session's transcript from its connect (`?watch=`).
    Board,
    /// The board and every session's transcript (a socket that names no watch).
    EveryTranscript,
}

impl Follows {
    /// The event stream's path for a socket that follows this.
    fn path(self) -> &'static str {
        match self {
            Self::Board => "/api/v1/ws?watch=",
            Self::EveryTranscript => "/api/v1/ws",
        }
    }
}

/// Reads an operator WebSocket in a task of its own, handing each text frame and when it
/// was read (wall-clock ns) to `on_frame`, until the socket closes or `on_frame` says stop.
async fn on_frames(
    addr: SocketAddr,
    follows: Follows,
    mut on_frame: impl FnMut(&str, u128) -> bool + Send + 'static,
) -> Result<(), String> {
    let socket = connect(addr, follows, None).await?;
    tokio::spawn(async move {
        let (_write, mut read) = socket.split();
        while let Some(Ok(message)) = read.next().await {
            let Message::Text(text) = message else {
                continue;
            };
            if !on_frame(text.as_str(), wall_ns()) {
                break;
            }
        }
    });
    Ok(())
}

/// [`on_frames`] for the `clarification.created` events only, parsed.
async fn on_created(
    addr: SocketAddr,
    mut on_event: impl FnMut(Value, u128) -> bool + Send + 'static,
) -> Result<(), String> {
    on_frames(addr, Follows::Board, move |text, seen_ns| {
        // Cheap pre-filter: most events are not clarifications.
        if !text.contains("clarification.created") {
            return true;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(event) if event["type"] == "clarification.created" => on_event(event, seen_ns),
            _ => true,
        }
    })
    .await
}

/// An operator WebSocket on `addr`'s event stream following every transcript,
/// authenticated as the bench operator, on a socket whose kernel receive buffer is
/// `recv_buffer` bytes, when given: a reader that stops reading then holds back kandev's
/// writes at once, instead of after the megabytes a tuned buffer takes.
pub async fn connect_ws_with(
    addr: SocketAddr,
    recv_buffer: Option<u32>,
) -> Result<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>, String>
{
    connect(addr, Follows::EveryTranscript, recv_buffer).await
}

/// [`connect_ws_with`] on a socket that `follows` the board or every transcript.
async fn connect(
    addr: SocketAddr,
    follows: Follows,
    recv_buffer: Option<u32>,
) -> Result<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>, String>
{
    let url = format!("ws://{addr}{}", follows.path());
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|err| format!("operator WebSocket {url}: {err}"))?;
    let auth = bearer()
        .parse()
        .map_err(|err| format!("operator WebSocket token: {err}"))?;
    request.headers_mut().insert("authorization", auth);
    let tcp = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(|err| format!("operator WebSocket {url}: {err}"))?;
    if let Some(bytes) = recv_buffer {
        tcp.set_recv_buffer_size(bytes)
            .map_err(|err| format!("operator WebSocket {url}: receive buffer: {err}"))?;
    }
    let stream = tcp
        .connect(addr)
        .await
        .map_err(|err| format!("operator WebSocket {url}: {err}"))?;
    stream
        .set_nodelay(true)
        .map_err(|err| format!("operator WebSocket {url}: {err}"))?;
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    let (socket, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config()))
        .await
        .map_err(|err| format!("operator WebSocket {url}: {err}"))?;
    Ok(socket)
}

/// An operator socket's settings: tungstenite zeroes up to its read buffer (128 KiB by
/// default) on every read, which across a thousand sockets is the bench's own CPU, not
/// kandev's; 16 KiB still takes a burst of frames in one read.
fn config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(16 * 1024)
}

/// One watching operator, following the board only: records when it read each
/// `clarification.created` (by the record's message) into `seen`, until the socket closes.
pub async fn watch(addr: SocketAddr, seen: Arc<Mutex<Vec<(String, u128)>>>) -> Result<(), String> {
    on_created(addr, move |event, seen_ns| {
        if let Some(tag) = event["data"]["message"].as_str() {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((tag.to_owned(), seen_ns));
        }
        true
    })
    .await
}

/// One watching operator, following every transcript, that records when it first read
/// each `END:<tag>` marker of a streamed message, whatever event carried it (`message.updated` with the whole text, or
/// `message.appended` with the new text).
pub async fn watch_markers(
    addr: SocketAddr,
    seen: Arc<Mutex<std::collections::HashMap<String, u128>>>,
) -> Result<(), String> {
    on_frames(addr, Follows::EveryTranscript, move |text, seen_ns| {
        for marker in markers(text) {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(marker.to_owned())
                .or_insert(seen_ns);
        }
        true
    })
    .await
}

/// The `END:<tag>` markers in `text` (a tag runs to the next space).
pub fn markers(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("END:").filter_map(|(at, _)| {
        let rest = &text[at + 4..];
        let tag = &rest[..rest.find(' ')?];
        (!tag.is_empty()).then_some(tag)
    })
}

/// One kept-alive connection to the operator API.
pub struct KeepAlive {
    addr: SocketAddr,
    stream: BufReader<TcpStream>,
}

impl KeepAlive {
    /// Connects.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            addr,
            stream: BufReader::new(stream),
        })
    }

    /// `POST path` with a JSON body → `(status, body)`; reconnects once if the server
    /// closed the idle connection.
    pub async fn post(&mut self, path: &str, body: &Value) -> std::io::Result<(u16, Value)> {
        match self.try_post(path, body).await {
            Ok(r) => Ok(r),
            Err(_) => {
                *self = Self::connect(self.addr).await?;
                self.try_post(path, body).await
            }
        }
    }

    async fn try_post(&mut self, path: &str, body: &Value) -> std::io::Result<(u16, Value)> {
        let payload = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
            self.addr,
            bearer(),
            payload.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let mut status_line = String::new();
        if self.stream.read_line(&mut status_line).await? == 0 {
            return Err(std::io::Error::other("connection closed"));
        }
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut raw = vec![0u8; length];
        self.stream.read_exact(&mut raw).await?;
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Ok((status, body))
    }
}

/// An operator's idle keep-alive connections: a request takes one (or opens a new one
/// when all are busy) and gives it back, so an answer never waits for another's response.
pub struct Connections {
    addr: SocketAddr,
    idle: Mutex<Vec<KeepAlive>>,
}

impl Connections {
    /// None open yet.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            idle: Mutex::default(),
        }
    }

    /// `POST path` on an idle connection or a new one.
    pub async fn post(&self, path: &str, body: &Value) -> std::io::Result<(u16, Value)> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut http = match idle {
            Some(http) => http,
            None => KeepAlive::connect(self.addr).await?,
        };
        let response = http.post(path, body).await;
        if response.is_ok() {
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(http);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Serves `responses` in order on one connection, then closes it.
    async fn server(responses: Vec<&'static str>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let mut socket = BufReader::new(socket);
            for response in responses {
                // Read one request: head, then its Content-Length body.
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    socket.read_line(&mut line).await.expect("read");
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        length = v.trim().parse().expect("length");
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                socket.read_exact(&mut body).await.expect("body");
                socket
                    .get_mut()
                    .write_all(response.as_bytes())
                    .await
                    .expect("write");
            }
        });
        addr
    }

    #[test]
    fn markers_are_read_from_any_event_text() {
        let frame = r#"{"type":"message.updated","data":{"content":"chunk 1 END:s3/1   more END:s4/2 END:"}}"#;
        assert_eq!(markers(frame).collect::<Vec<_>>(), ["s3/1", "s4/2"]);
    }

    #[tokio::test]
    async fn two_posts_share_one_connection() {
        let addr = server(vec![
            "HTTP/1.1 200 OK\r\ncontent-length: 21\r\n\r\n{\"status\":\"answered\"}",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}",
        ])
        .await;
        let mut client = KeepAlive::connect(addr).await.expect("connect");
        let first = client.post("/a", &json!({"x": 1})).await.expect("first");
        assert_eq!(first, (200, json!({"status": "answered"})));
        let second = client.post("/b", &json!({})).await.expect("second");
        assert_eq!(second, (404, json!({})));
    }
}
