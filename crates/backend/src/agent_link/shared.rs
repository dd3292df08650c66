//! The state one link shares between callers of `request` and its supervisor task:
//! whether the stream is up (and its writer queue), the table of requests waiting
//! for an answer, and the session the stream is bound to.
//!
//! One mutex guards all of it so that "is the stream up" and "register a waiter and
//! queue the frame" happen together: a request is either sent on a live stream and
//! failed by the next disconnect, or refused with `NotConnected` having sent nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kandev_agent_stream::Envelope;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message;

use super::cursor::EventCursor;
use super::local::LocalAgentctl;
use super::{LinkError, LinkOptions};

/// The frames queued for the current connection's writer.
pub(crate) type Outgoing = mpsc::UnboundedReceiver<Message>;

#[derive(Default)]
struct LinkState {
    /// The current connection's writer queue; `None` while the stream is down.
    outgoing: Option<mpsc::UnboundedSender<Message>>,
    /// Requests sent on the current connection, by envelope id.
    waiting: HashMap<String, oneshot::Sender<Envelope>>,
    /// The session a successful start/attach bound the stream to.
    bound_session: Option<String>,
    /// `shutdown` was called or the link was dropped: never connect again.
    closed: bool,
    /// The agent events already handed to the session runtime.
    cursor: EventCursor,
}

/// See the module docs.
pub(crate) struct Shared {
    /// The backend's session id (for spans, and the default for re-attach).
    pub session_id: String,
    /// Timeouts.
    pub options: LinkOptions,
    /// The agentctl this link started, for a local executor.
    pub process: Option<LocalAgentctl>,
    next_id: AtomicU64,
    state: Mutex<LinkState>,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    pub fn new(session_id: &str, options: LinkOptions, process: Option<LocalAgentctl>) -> Self {
        Self {
            session_id: session_id.to_owned(),
            options,
            process,
            next_id: AtomicU64::new(1),
            state: Mutex::new(LinkState::default()),
            shutdown: watch::Sender::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh request id, unique within this link across reconnects.
    pub fn next_id(&self) -> String {
        self.next_id.fetch_add(1, Ordering::Relaxed).to_string()
    }

    /// Registers a waiter and queues the request frame, or refuses with
    /// `NotConnected` without sending anything.
    pub fn send_request(
        &self,
        action: &str,
        payload: Value,
    ) -> Result<(String, oneshot::Receiver<Envelope>), LinkError> {
        let mut state = self.lock();
        let Some(outgoing) = state.outgoing.clone() else {
            return Err(LinkError::NotConnected);
        };
        let id = self.next_id();
        let frame = Envelope::request(id.clone(), action, &payload).to_text();
        let (tx, rx) = oneshot::channel();
        // Registered before the frame is queued, so even an instant answer finds its waiter.
        state.waiting.insert(id.clone(), tx);
        if outgoing.send(Message::text(frame)).is_err() {
            state.waiting.remove(&id);
            return Err(LinkError::NotConnected);
        }
        tracing::debug!(request_id = %id, "request sent");
        Ok((id, rx))
    }

    /// Drops the waiter of a request that timed out; a late answer is then ignored.
    pub fn forget(&self, id: &str) {
        self.lock().waiting.remove(id);
    }

    /// Hands a `response` or `error` frame to its waiter. Returns false when nobody
    /// waits for it (it came after its timeout).
    pub fn resolve(&self, envelope: Envelope) -> bool {
        let waiter = self.lock().waiting.remove(&envelope.id);
        match waiter {
            Some(waiter) => waiter.send(envelope).is_ok(),
            None => false,
        }
    }

    /// Makes a new connection usable for requests and returns its writer queue;
    /// `None` once the link is closed.
    pub fn publish(&self) -> Option<Outgoing> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        state.outgoing = Some(tx);
        Some(rx)
    }

    /// The stream is down: new requests are refused, and every request waiting on
    /// the old connection fails with `NotConnected` (its waiter is dropped).
    pub fn disconnect(&self) {
        let mut state = self.lock();
        state.outgoing = None;
        let failed = state.waiting.len();
        state.waiting.clear();
        if failed > 0 {
            tracing::warn!(failed, "requests in flight failed: agent stream dropped");
        }
    }

    /// Closes the link for good and tells the supervisor to stop.
    pub fn close(&self) {
        {
            let mut state = self.lock();
            state.closed = true;
        }
        // Signal first, so the supervisor sees a shutdown (and sends a close frame)
        // rather than just its writer queue vanishing.
        self.shutdown.send_replace(true);
        self.disconnect();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Whether requests can be sent right now.
    pub fn is_connected(&self) -> bool {
        self.lock().outgoing.is_some()
    }

    /// Records that the stream is bound to `session_id`.
    pub fn mark_bound(&self, session_id: String) {
        self.lock().bound_session = Some(session_id);
    }

    /// The session to re-attach after a drop, if any was started.
    pub fn bound_session(&self) -> Option<String> {
        self.lock().bound_session.clone()
    }

    /// Counts everything up to `after_seq` as delivered (a link resuming a session).
    pub fn resume_after(&self, after_seq: Option<u64>) {
        self.lock().cursor = EventCursor::starting_after(after_seq);
    }

    /// Runs `deliver` if the agent event with envelope id `id` is new (it then counts
    /// as delivered); returns false for a replay of one already delivered.
    ///
    /// Admitting and delivering happen under one lock, so whoever reads
    /// [`Shared::after_seq`] knows every event up to that number is already in the
    /// runtime's queue.
    pub fn deliver_if_new(&self, id: &str, deliver: impl FnOnce()) -> bool {
        let mut state = self.lock();
        if !state.cursor.admit(id) {
            return false;
        }
        deliver();
        true
    }

    /// The last event sequence number delivered, for the next attach's `after_seq`.
    pub fn after_seq(&self) -> Option<u64> {
        self.lock().cursor.after_seq()
    }

    /// Resolves once `close` has been called.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use kandev_agent_stream::{FrameType, action};
    use serde_json::json;

    use super::*;

    fn shared() -> Shared {
        Shared::new("s-1", LinkOptions::default(), None)
    }

    #[test]
    fn a_request_while_down_is_refused_and_queues_nothing() {
        let shared = shared();
        assert!(matches!(
            shared.send_request(action::PROMPT, json!({"text": "hi"})),
            Err(LinkError::NotConnected)
        ));
        let mut outgoing = shared.publish().expect("open link");
        shared.disconnect();
        assert!(matches!(
            shared.send_request(action::PROMPT, json!({"text": "hi"})),
            Err(LinkError::NotConnected)
        ));
        assert!(
            outgoing.try_recv().is_err(),
            "nothing may be queued while down"
        );
    }

    #[test]
    fn answers_reach_their_own_waiter_and_disconnect_fails_the_rest() {
        let shared = shared();
        let mut outgoing = shared.publish().expect("open link");
        let (first, mut first_rx) = shared
            .send_request(action::PROMPT, json!({}))
            .expect("sent");
        let (second, mut second_rx) = shared
            .send_request(action::CANCEL, json!({}))
            .expect("sent");
        assert_ne!(first, second);
        let queued: Vec<Envelope> = (0..2)
            .map(|_| {
                let Ok(Message::Text(text)) = outgoing.try_recv() else {
                    panic!("frame queued")
                };
                serde_json::from_str(text.as_str()).expect("envelope")
            })
            .collect();
        assert_eq!(queued[0].id, first);
        assert_eq!(queued[1].action, action::CANCEL);

        let answer = Envelope::response_to(&queued[1], &json!({"success": true}));
        assert!(shared.resolve(answer));
        let got = second_rx.try_recv().expect("second answered");
        assert_eq!(got.frame_type, FrameType::Response);
        assert!(first_rx.try_recv().is_err(), "first still waiting");

        shared.disconnect();
        assert!(matches!(
            first_rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        assert!(!shared.is_connected());
    }

    #[test]
    fn a_forgotten_request_ignores_its_late_answer() {
        let shared = shared();
        let _outgoing = shared.publish().expect("open link");
        let (id, _rx) = shared
            .send_request(action::PROMPT, json!({}))
            .expect("sent");
        shared.forget(&id);
        let late = Envelope::response_to(
            &Envelope::request(id, action::PROMPT, &json!({})),
            &json!({"accepted": true}),
        );
        assert!(!shared.resolve(late));
    }

    #[test]
    fn a_closed_link_never_publishes_again() {
        let shared = shared();
        let _outgoing = shared.publish().expect("open link");
        shared.close();
        assert!(shared.is_closed());
        assert!(!shared.is_connected());
        assert!(shared.publish().is_none());
        assert!(*shared.shutdown_signal().borrow());
    }
}
