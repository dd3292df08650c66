//! The agent stream as the backend speaks it: requests matched with their responses, and
//! the events queued in order.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::wait::{DEADLINE, poll_until};

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// An agent stream (the WebSocket the backend speaks to agentctl) with request/response
/// correlation and a queue of the events (`notification` frames).
#[derive(Debug)]
pub struct Stream {
    out: mpsc::UnboundedSender<Message>,
    waiters: Waiters,
    events: mpsc::UnboundedReceiver<Value>,
    /// Every event taken from the queue so far, in order.
    pub seen: Vec<Value>,
    parked: VecDeque<Value>,
    closed: Arc<Mutex<Option<String>>>,
    next_id: AtomicU64,
    arrivals: Arc<Mutex<Vec<String>>>,
}

impl Stream {
    /// Connects to `url` with `token` as bearer (none: no `Authorization` header).
    pub async fn connect(
        url: &str,
        token: Option<&str>,
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        let mut request = url.into_client_request()?;
        if let Some(token) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}").parse().expect("header value"),
            );
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        let (mut sink, mut source) = socket.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Waiters = Arc::default();
        let closed: Arc<Mutex<Option<String>>> = Arc::default();
        let arrivals: Arc<Mutex<Vec<String>>> = Arc::default();
        let (events_tx, events) = mpsc::unbounded_channel();
        {
            let waiters = Arc::clone(&waiters);
            let closed = Arc::clone(&closed);
            let arrivals = Arc::clone(&arrivals);
            tokio::spawn(async move {
                while let Some(message) = source.next().await {
                    match message {
                        Ok(Message::Text(text)) => {
                            let frame: Value =
                                serde_json::from_str(&text).expect("agentctl sends JSON");
                            let id = frame["id"].as_str().unwrap_or("").to_owned();
                            let kind = frame["type"].as_str().unwrap_or("");
                            arrivals.lock().expect("lock").push(match kind {
                                "notification" => format!(
                                    "event {}",
                                    frame["payload"]["event"].as_str().unwrap_or("")
                                ),
                                other => format!("{other} {id}"),
                            });
                            if kind == "notification" {
                                let _ = events_tx.send(frame);
                            } else if let Some(waiter) = waiters.lock().expect("lock").remove(&id) {
                                let _ = waiter.send(frame);
                            } else {
                                // An uncorrelated error (undecodable frame): surface it as an event.
                                let _ = events_tx.send(frame);
                            }
                        }
                        Ok(Message::Close(frame)) => {
                            *closed.lock().expect("lock") =
                                Some(frame.map(|f| f.reason.to_string()).unwrap_or_default());
                            break;
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                closed.lock().expect("lock").get_or_insert_with(String::new);
            });
        }
        Ok(Self {
            out,
            waiters,
            events,
            seen: Vec::new(),
            parked: VecDeque::new(),
            closed,
            next_id: AtomicU64::new(1),
            arrivals,
        })
    }

    /// Every frame read so far, in arrival order: `event <name>` for a notification,
    /// `<type> <id>` for a response or an error.
    pub fn arrivals(&self) -> Vec<String> {
        self.arrivals.lock().expect("lock").clone()
    }

    /// Sends a raw text frame.
    pub fn send_text(&self, text: &str) {
        self.out
            .send(Message::Text(text.into()))
            .expect("writer alive");
    }

    /// Sends a request and waits for its `response` or `error` frame.
    ///
    /// # Panics
    /// When no answer comes within [`DEADLINE`] or the stream closes first.
    pub async fn request(&self, action: &str, payload: Value) -> Value {
        let id = format!("r{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().expect("lock").insert(id.clone(), tx);
        let frame = json!({"id": id, "type": "request", "action": action, "payload": payload});
        self.send_text(&frame.to_string());
        tokio::time::timeout(DEADLINE, rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {action} within {DEADLINE:?}"))
            .expect("stream closed before answering")
    }

    /// A request that must succeed; returns its payload.
    ///
    /// # Panics
    /// When the answer is not a `response` to `action`.
    pub async fn ok(&self, action: &str, payload: Value) -> Value {
        let frame = self.request(action, payload).await;
        assert_eq!(frame["type"], "response", "{action} failed: {frame}");
        assert_eq!(frame["action"], action);
        frame["payload"].clone()
    }

    /// A request that must fail; returns its error payload `{code, message}`.
    ///
    /// # Panics
    /// When the answer is not an `error`.
    pub async fn err(&self, action: &str, payload: Value) -> Value {
        let frame = self.request(action, payload).await;
        assert_eq!(
            frame["type"], "error",
            "{action} unexpectedly succeeded: {frame}"
        );
        frame["payload"].clone()
    }

    /// Waits for the next event (in stream order) whose `payload.event` is `name` and that
    /// satisfies `matches`; other events stay queued for later waits. Returns the payload.
    ///
    /// # Panics
    /// When none comes within [`DEADLINE`] or the stream closes first.
    pub async fn event_where(&mut self, name: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self
            .parked
            .iter()
            .position(|f| f["payload"]["event"] == name && matches(&f["payload"]))
        {
            let frame = self.parked.remove(pos).expect("present");
            self.seen.push(frame.clone());
            return frame["payload"].clone();
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => panic!(
                    "stream closed while waiting for {name}; parked: {:?}",
                    self.parked
                ),
                Err(_) => panic!(
                    "no {name} event within {DEADLINE:?}; parked: {:#?}",
                    self.parked
                ),
            };
            if frame["payload"]["event"] == name && matches(&frame["payload"]) {
                self.seen.push(frame.clone());
                return frame["payload"].clone();
            }
            self.parked.push_back(frame);
        }
    }

    /// Waits for the next uncorrelated `error` frame (an undecodable request); returns it.
    ///
    /// # Panics
    /// When none comes within [`DEADLINE`] or the stream closes first.
    pub async fn error_frame(&mut self) -> Value {
        if let Some(pos) = self.parked.iter().position(|f| f["type"] == "error") {
            return self.parked.remove(pos).expect("present");
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) if frame["type"] == "error" => return frame,
                Ok(Some(frame)) => self.parked.push_back(frame),
                Ok(None) => panic!("stream closed while waiting for an error frame"),
                Err(_) => panic!("no error frame within {DEADLINE:?}"),
            }
        }
    }

    /// Waits for the next `name` event; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event_where`].
    pub async fn event(&mut self, name: &str) -> Value {
        self.event_where(name, |_| true).await
    }

    /// Collects every event (whole frames) that arrives until `name` arrives (inclusive),
    /// in order.
    ///
    /// # Panics
    /// When `name` does not come within [`DEADLINE`] or the stream closes first.
    pub async fn events_until(&mut self, name: &str) -> Vec<Value> {
        let mut got: Vec<Value> = self.parked.drain(..).collect();
        if let Some(pos) = got.iter().position(|f| f["payload"]["event"] == name) {
            let rest = got.split_off(pos + 1);
            self.parked.extend(rest);
            self.seen.extend(got.iter().cloned());
            return got;
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => panic!("stream closed while waiting for {name}; got {got:#?}"),
                Err(_) => panic!("no {name} event within {DEADLINE:?}; got {got:#?}"),
            };
            let done = frame["payload"]["event"] == name;
            got.push(frame);
            if done {
                self.seen.extend(got.iter().cloned());
                return got;
            }
        }
    }

    /// Waits for the next `turn_completed` and asserts its `stop_reason`; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event`], or when the stop reason differs.
    pub async fn turn_ends(&mut self, stop_reason: &str) -> Value {
        let turn = self.event("turn_completed").await;
        assert_eq!(turn["stop_reason"], stop_reason, "{turn}");
        turn
    }

    /// Waits for the next `elicitation_settled` and asserts it settles `pending_id` with
    /// `outcome`; returns its payload.
    ///
    /// # Panics
    /// As [`Stream::event`], or when it settles another pending or another way.
    pub async fn settled(&mut self, pending_id: &str, outcome: &str) -> Value {
        let settled = self.event("elicitation_settled").await;
        assert_eq!(
            (settled["pending_id"].as_str(), settled["outcome"].as_str()),
            (Some(pending_id), Some(outcome)),
            "{settled}"
        );
        settled
    }

    /// Every event received and not yet taken, without waiting.
    pub fn drain_now(&mut self) -> Vec<Value> {
        let mut got: Vec<Value> = self.parked.drain(..).collect();
        while let Ok(frame) = self.events.try_recv() {
            got.push(frame);
        }
        got
    }

    /// Waits until agentctl closes the stream; returns the close reason.
    ///
    /// # Panics
    /// When it is still open after [`DEADLINE`].
    pub async fn closed(&self) -> String {
        poll_until("the stream to close", DEADLINE, || async {
            self.closed.lock().expect("lock").clone()
        })
        .await
    }

    /// Closes the WebSocket from this side.
    pub fn close(self) {
        let _ = self.out.send(Message::Close(None));
    }
}
