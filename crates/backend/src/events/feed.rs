//! The feed: drains the [`Publisher`](crate::events::Publisher)'s queue in order and sends
//! each change to the [`EventHub`] as operator events, reading the views a change names.
//! One task per process, so per-session order is publication order (a session change
//! repeated later in the queue is read and sent once, at its later place).
//!
//! A batch's events are [`Held`] and sent together, so every operator socket wakes and
//! writes once for them rather than once per database read between them; only a new
//! question does not wait for the reads after it.

use serde::Serialize;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use serde_json::{Value, json};

use crate::events::named::Named;
use crate::events::{Change, EventHub, kind};
use crate::model::Message;
use crate::store::{StoreError, Stores};

/// How many queued changes the feed takes at once.
const BATCH: usize = 256;

/// The most events held before they are sent anyway (one operator socket write's worth).
const MAX_HELD: usize = 64;

/// Runs until every publisher is gone. With `others` (replicas share the database),
/// each change is also queued there, by its ids, for the other replicas (the change bus).
pub async fn run(
    stores: Stores,
    mut changes: UnboundedReceiver<Change>,
    hub: EventHub,
    others: Option<UnboundedSender<Named>>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut held = Held::new(hub);
    while changes.recv_many(&mut batch, BATCH).await > 0 {
        for change in coalesce(std::mem::take(&mut batch)) {
            if let Some(others) = &others {
                let _ = others.send(Named::of(&change));
            }
            if let Err(err) = forward(&stores, &mut held, change).await {
                tracing::warn!(error = %err, "cannot read a changed resource for the operator feed");
            }
        }
        held.send();
    }
}

/// Drops each `SessionChanged` that a later one of the same session repeats in `batch`:
/// the views are read when forwarded, so the later one shows both changes, and it keeps
/// its place after everything published between them. Under load this spares the feed
/// (which every operator event waits behind) most of its reads.
fn coalesce(batch: Vec<Change>) -> Vec<Change> {
    let mut last = std::collections::HashMap::new();
    for (i, change) in batch.iter().enumerate() {
        if let Change::SessionChanged { session_id, .. } = change {
            last.insert(session_id.clone(), i);
        }
    }
    batch
        .into_iter()
        .enumerate()
        .filter(|(i, change)| match change {
            Change::SessionChanged { session_id, .. } => last.get(session_id) == Some(i),
            _ => true,
        })
        .map(|(_, change)| change)
        .collect()
}

/// Operator events not sent yet, in order. Each socket writes what the hub holds for it
/// in one go, so events sent back to back cost the sockets one wake-up and one write;
/// events sent either side of a database read cost two.
pub struct Held {
    hub: EventHub,
    events: Vec<(&'static str, Value)>,
    /// A new question is held: it goes out before the feed waits on anything.
    urgent: bool,
}

impl Held {
    /// Nothing held, for `hub`.
    pub fn new(hub: EventHub) -> Self {
        Self {
            hub,
            events: Vec::new(),
            urgent: false,
        }
    }

    fn push(&mut self, kind: &'static str, data: impl Serialize) {
        self.urgent |= kind == kind::CLARIFICATION_CREATED;
        self.events
            .push((kind, serde_json::to_value(data).unwrap_or(Value::Null)));
        if self.events.len() >= MAX_HELD {
            self.send();
        }
    }

    /// Called before a read: sends what is held if a new question is among it.
    fn before_read(&mut self) {
        if self.urgent {
            self.send();
        }
    }

    /// Sends what is held, in order.
    pub fn send(&mut self) {
        for (kind, data) in self.events.drain(..) {
            let question = (kind == kind::CLARIFICATION_CREATED)
                .then(|| data["pending_id"].as_str().unwrap_or_default().to_owned());
            self.hub.send_value(kind, data);
            if let Some(pending_id) = question {
                // Hop span (kandev_log::hops): the broadcast is out.
                let _pushed = tracing::debug_span!(target: "kandev::timing", "backend.pushed", pending_id = %pending_id);
            }
        }
        self.urgent = false;
    }
}

/// Holds the operator events of one change.
pub async fn forward(stores: &Stores, held: &mut Held, change: Change) -> Result<(), StoreError> {
    match change {
        Change::TaskCreated { task_id } => {
            held.before_read();
            if let Some(view) = stores.task_view(&task_id).await? {
                held.push(kind::TASK_CREATED, view);
            }
        }
        Change::SessionChanged {
            session_id,
            task_id,
        } => {
            held.before_read();
            let session = stores.session_view(&session_id).await?;
            let task = stores.task_view(&task_id).await?;
            if let Some(view) = session {
                held.push(kind::SESSION_UPDATED, view);
            }
            if let Some(view) = task {
                held.push(kind::TASK_UPDATED, view);
            }
        }
        Change::MessageCreated(message) => held.push(kind::MESSAGE_CREATED, message),
        Change::MessageUpdated(message) => held.push(kind::MESSAGE_UPDATED, message),
        Change::MessageAppended { message, appended } => {
            held.push(kind::MESSAGE_APPENDED, self::appended(&message, &appended));
        }
        Change::ClarificationCreated(record) => held.push(kind::CLARIFICATION_CREATED, &record),
        Change::ClarificationSettled(record) => held.push(kind::CLARIFICATION_SETTLED, record),
        Change::Notification(n) => held.push(kind::NOTIFICATION, n),
        Change::FlagChanged(flag) => held.push(kind::RUNTIME_FLAGS_UPDATED, flag),
    }
    Ok(())
}

/// The data of a `message.appended` event: what a client needs to place `text` (the
/// message's ids, `type`, `author_type`, `seq`, `updated_at`) and `length`, the content's
/// length after the append in UTF-16 code units (a JavaScript string's `length`), so a
/// client whose copy is not `length - text.length` long knows it missed text. Never the
/// whole content: that is what appends spare.
pub fn appended(message: &Message, text: &str) -> Value {
    json!({
        "id": message.id,
        "session_id": message.session_id,
        "task_id": message.task_id,
        "seq": message.seq,
        "type": message.kind,
        "author_type": message.author_type,
        "updated_at": message.updated_at,
        "text": text,
        "length": message.content.encode_utf16().count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> Change {
        Change::SessionChanged {
            session_id: id.into(),
            task_id: "t".into(),
        }
    }

    fn kinds(
        rx: &mut tokio::sync::broadcast::Receiver<crate::events::OperatorEvent>,
    ) -> Vec<&'static str> {
        std::iter::from_fn(|| rx.try_recv().ok().map(|e| e.kind)).collect()
    }

    #[test]
    fn events_wait_for_the_batch_but_a_new_question_does_not_wait_for_a_read() {
        let hub = EventHub::new();
        let mut rx = hub.subscribe();
        let mut held = Held::new(hub);
        held.push(kind::CLARIFICATION_SETTLED, json!({"pending_id": "p1"}));
        held.push(kind::MESSAGE_UPDATED, json!({"id": "m1"}));
        held.before_read();
        assert_eq!(kinds(&mut rx), Vec::<&str>::new(), "held across the read");
        held.push(kind::SESSION_UPDATED, json!({"id": "s"}));
        held.send();
        assert_eq!(
            kinds(&mut rx),
            [
                kind::CLARIFICATION_SETTLED,
                kind::MESSAGE_UPDATED,
                kind::SESSION_UPDATED
            ]
        );
        held.push(kind::CLARIFICATION_CREATED, json!({"pending_id": "p2"}));
        held.push(kind::MESSAGE_CREATED, json!({"id": "m2"}));
        held.before_read();
        assert_eq!(
            kinds(&mut rx),
            [kind::CLARIFICATION_CREATED, kind::MESSAGE_CREATED],
            "a new question is out before the feed reads"
        );
        held.push(kind::SESSION_UPDATED, json!({"id": "s"}));
        held.before_read();
        assert_eq!(kinds(&mut rx), Vec::<&str>::new(), "and only it");
        for i in 0..MAX_HELD {
            held.push(kind::MESSAGE_UPDATED, json!({"id": i}));
        }
        assert_eq!(kinds(&mut rx).len(), MAX_HELD, "a full hold goes out");
    }

    #[test]
    fn a_repeated_session_change_keeps_only_its_last_place() {
        let created = Change::TaskCreated {
            task_id: "t".into(),
        };
        let batch = vec![
            session("a"),
            created.clone(),
            session("b"),
            session("a"),
            session("c"),
        ];
        assert_eq!(
            coalesce(batch),
            vec![created, session("b"), session("a"), session("c")]
        );
        assert_eq!(coalesce(vec![session("a")]), vec![session("a")]);
    }
}
