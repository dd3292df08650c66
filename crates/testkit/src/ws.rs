//! The operator event stream, `GET /api/v1/ws`: every `{"type", "data"}` event is kept,
//! so a test can wait for one that may already have arrived.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::SinkExt;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// A connected operator WebSocket; events are collected in the background.
#[derive(Debug)]
pub struct OperatorWs {
    events: Arc<Mutex<Vec<Value>>>,
    /// Bumped on every event (and on close), so waits are event-driven.
    changed: watch::Receiver<usize>,
    reader: JoinHandle<()>,
    /// Frames for the socket's writer task.
    outgoing: mpsc::UnboundedSender<Message>,
    writer: JoinHandle<()>,
}

impl OperatorWs {
    /// Connects to `ws://addr/api/v1/ws`.
    ///
    /// # Panics
    /// When the handshake fails.
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::open(format!("ws://{addr}/api/v1/ws")).await
    }

    /// Connects to `ws://addr/api/v1/ws?watch=…`, following only these sessions'
    /// transcripts from the first event (which is the `watching` acknowledgement).
    ///
    /// # Panics
    /// When the handshake fails.
    pub async fn connect_watching(addr: SocketAddr, sessions: &[&str]) -> Self {
        Self::open(format!(
            "ws://{addr}/api/v1/ws?watch={}",
            sessions.join(",")
        ))
        .await
    }

    /// Connects to `url`.
    async fn open(url: String) -> Self {
        let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap_or_else(|err| panic!("operator WebSocket {url}: {err}"));
        let events = Arc::new(Mutex::new(Vec::new()));
        let (tx, changed) = watch::channel(0usize);
        let sink = Arc::clone(&events);
        let (mut write, mut read) = socket.split();
        let (outgoing, mut to_send) = mpsc::unbounded_channel();
        let writer = tokio::spawn(async move {
            while let Some(message) = to_send.recv().await {
                if write.send(message).await.is_err() {
                    return;
                }
            }
        });
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = read.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let event = serde_json::from_str(text.as_str())
                    .unwrap_or_else(|_| Value::String(text.to_string()));
                let len = {
                    let mut all = sink.lock().unwrap_or_else(PoisonError::into_inner);
                    all.push(event);
                    all.len()
                };
                tx.send_replace(len);
            }
            // Closed: wake waiters so they can report it.
            tx.send_modify(|_| {});
        });
        Self {
            events,
            changed,
            reader,
            outgoing,
            writer,
        }
    }

    /// Sends `frame` to kandev as a text frame (in order with the others sent).
    pub fn send(&self, frame: &Value) {
        let _ = self.outgoing.send(Message::text(frame.to_string()));
    }

    /// Asks kandev for these sessions' transcripts only (`None`: every one) and waits
    /// for the `watching` event that says it applies.
    ///
    /// # Panics
    /// When no such event arrives within `deadline`.
    pub async fn watch(&self, sessions: Option<&[&str]>, deadline: Duration) {
        let mut asked: Option<Vec<&str>> = sessions.map(<[&str]>::to_vec);
        if let Some(ids) = &mut asked {
            ids.sort_unstable();
            ids.dedup();
        }
        let asked = serde_json::json!(asked);
        let seen = self.of_type("watching").len();
        self.send(&serde_json::json!({"type": "watch", "data": {"sessions": asked}}));
        self.wait_for("a watching acknowledgement", deadline, |_| {
            let acknowledged = self.of_type("watching");
            acknowledged.len() > seen
                && acknowledged.last().map(|e| &e["data"]["sessions"]) == Some(&asked)
        })
        .await;
    }

    /// Every event received so far, in order.
    pub fn events(&self) -> Vec<Value> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events of type `kind` received so far, in order.
    pub fn of_type(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }

    /// The first event (from the start of the stream) for which `predicate` holds.
    ///
    /// # Panics
    /// When none arrives within `deadline`, listing the event types seen.
    pub async fn wait_for(
        &self,
        what: &str,
        deadline: Duration,
        predicate: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut changed = self.changed.clone();
        let until = tokio::time::Instant::now() + deadline;
        loop {
            changed.borrow_and_update();
            if let Some(found) = self.events().into_iter().find(|e| predicate(e)) {
                return found;
            }
            if self.reader.is_finished() {
                panic!(
                    "operator WebSocket closed while waiting for {what}; got {:?}",
                    self.summary()
                );
            }
            match tokio::time::timeout_at(until, changed.changed()).await {
                Ok(Ok(())) => {}
                // The sender is gone: the reader is finishing; let it, then re-check.
                Ok(Err(_)) => tokio::task::yield_now().await,
                Err(_) => panic!(
                    "timed out after {deadline:?} waiting for {what} on the operator WebSocket; got {:?}",
                    self.summary()
                ),
            }
        }
    }

    /// The first event of type `kind` whose `data` satisfies `predicate`.
    pub async fn wait_for_type(
        &self,
        kind: &str,
        deadline: Duration,
        predicate: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_for(kind, deadline, |e| {
            e["type"] == kind && predicate(&e["data"])
        })
        .await
    }

    /// `type` of every event so far (for failure messages).
    pub fn summary(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }
}

impl Drop for OperatorWs {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A WebSocket server on `/api/v1/ws` that sends `events` and then closes.
    async fn server(events: Vec<&'static str>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut ws = tokio_tungstenite::accept_async(tcp)
                .await
                .expect("handshake");
            for event in events {
                ws.send(Message::text(event)).await.expect("send");
            }
            let _ = ws.close(None).await;
        });
        addr
    }

    #[tokio::test]
    async fn keeps_every_event_and_finds_one_that_already_arrived() {
        let addr = server(vec![
            r#"{"type":"session.updated","data":{"id":"s1","state":"RUNNING"}}"#,
            r#"{"type":"clarification.created","data":{"pending_id":"p1"}}"#,
        ])
        .await;
        let ws = OperatorWs::connect(addr).await;
        let found = ws
            .wait_for_type("clarification.created", Duration::from_secs(10), |d| {
                d["pending_id"] == "p1"
            })
            .await;
        assert_eq!(found["data"]["pending_id"], "p1");
        // Already received: found again from the start of the stream.
        ws.wait_for_type("session.updated", Duration::from_secs(10), |d| {
            d["id"] == "s1"
        })
        .await;
        assert_eq!(ws.summary(), ["session.updated", "clarification.created"]);
        assert_eq!(ws.of_type("session.updated").len(), 1);
    }

    #[tokio::test]
    #[should_panic(expected = "closed while waiting for never")]
    async fn a_closed_stream_fails_the_wait_at_once() {
        let addr = server(vec![r#"{"type":"a","data":{}}"#]).await;
        let ws = OperatorWs::connect(addr).await;
        ws.wait_for("never", Duration::from_secs(20), |_| false)
            .await;
    }
}
