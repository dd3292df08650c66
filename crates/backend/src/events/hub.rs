//! [`EventHub`]: broadcasts [`OperatorEvent`]s to every WebSocket subscriber.

use std::sync::Arc;

use axum::extract::ws::Utf8Bytes;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// The operator event types.
pub mod kind {
    /// A session's state, `pending_action` or capabilities changed; data is the session.
    pub const SESSION_UPDATED: &str = "session.updated";
    /// A new chat message.
    pub const MESSAGE_CREATED: &str = "message.created";
    /// A message's metadata changed (or, from another replica, it grew); data is the full
    /// message.
    pub const MESSAGE_UPDATED: &str = "message.updated";
    /// Text was appended to an agent message; data is the message's ids and kind, the
    /// appended `text` and the content's `length` after it (see
    /// [`feed::appended`](crate::events::feed::appended)).
    pub const MESSAGE_APPENDED: &str = "message.appended";
    /// A new pending clarification.
    pub const CLARIFICATION_CREATED: &str = "clarification.created";
    /// A clarification left `pending` (F7).
    pub const CLARIFICATION_SETTLED: &str = "clarification.settled";
    /// A stored notification.
    pub const NOTIFICATION: &str = "notification";
    /// A Settings override changed; data is the flag as resolved now.
    pub const RUNTIME_FLAGS_UPDATED: &str = "runtime_flags.updated";
    /// A new task.
    pub const TASK_CREATED: &str = "task.created";
    /// One of the task's sessions changed; data is the task with its sessions.
    pub const TASK_UPDATED: &str = "task.updated";
}

/// One operator event. Every subscriber receives its own clone, so cloning shares the
/// data and the text rather than copying them (a thousand sockets, a thousand clones).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorEvent {
    /// The event type, one of [`kind`].
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The resource, as the API returns it.
    pub data: Arc<Value>,
    /// This event as its WebSocket frame's text, rendered once for every subscriber.
    #[serde(skip)]
    text: Utf8Bytes,
    /// The session whose transcript this is, for a `message.*` event.
    #[serde(skip)]
    transcript: Option<Arc<str>>,
}

impl OperatorEvent {
    /// `{"type", "data"}` as JSON text.
    pub fn text(&self) -> &str {
        self.text.as_str()
    }

    /// The text as a WebSocket frame's payload, shared with every other subscriber's.
    pub fn frame(&self) -> Utf8Bytes {
        self.text.clone()
    }

    /// The session whose transcript this event is part of (`message.created`,
    /// `message.updated`, `message.appended`); `None` for a board event.
    pub fn transcript(&self) -> Option<&str> {
        self.transcript.as_deref()
    }
}

/// The session of a transcript event's `data`.
fn transcript_session(event_kind: &str, data: &Value) -> Option<Arc<str>> {
    match event_kind {
        kind::MESSAGE_CREATED | kind::MESSAGE_UPDATED | kind::MESSAGE_APPENDED => {
            data.get("session_id")?.as_str().map(Arc::from)
        }
        _ => None,
    }
}

/// The frame an [`OperatorEvent`] is sent as.
#[derive(Serialize)]
struct Frame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    data: &'a Value,
}

/// Broadcasts [`OperatorEvent`]s to every subscriber. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventHub {
    tx: broadcast::Sender<OperatorEvent>,
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

impl EventHub {
    /// A hub that buffers up to 4096 events per slow subscriber.
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(4096);
        Self { tx }
    }

    /// Sends `data` as a `kind` event; nobody listening is fine (and costs nothing).
    pub fn send(&self, kind: &'static str, data: impl Serialize) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        let data = serde_json::to_value(data).unwrap_or(Value::Null);
        let text = serde_json::to_string(&Frame { kind, data: &data })
            .unwrap_or_default()
            .into();
        let transcript = transcript_session(kind, &data);
        let data = Arc::new(data);
        let _ = self.tx.send(OperatorEvent {
            kind,
            data,
            text,
            transcript,
        });
    }

    /// A receiver of every event sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<OperatorEvent> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_get_events_in_order_as_type_and_data() {
        let hub = EventHub::new();
        hub.send(kind::SESSION_UPDATED, serde_json::json!({"id": "lost"}));
        let mut rx = hub.subscribe();
        hub.send(kind::MESSAGE_CREATED, serde_json::json!({"id": "m1"}));
        hub.send(kind::NOTIFICATION, serde_json::json!({"id": "n1"}));
        let first = rx.recv().await.expect("event");
        assert_eq!(
            serde_json::to_value(&first).expect("json"),
            serde_json::json!({"type": "message.created", "data": {"id": "m1"}})
        );
        assert_eq!(
            serde_json::from_str::<Value>(first.text()).expect("frame text"),
            serde_json::json!({"type": "message.created", "data": {"id": "m1"}})
        );
        assert_eq!(rx.recv().await.expect("event").kind, kind::NOTIFICATION);
    }
}
