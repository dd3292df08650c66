//! The feed: drains the [`Publisher`](crate::events::Publisher)'s queue in order and sends
//! each change to the [`EventHub`] as operator events, reading the views a change names.
//! One task per process, so per-session order is publication order (a session change
//! repeated later in the queue is read and sent once, at its later place).

use std::collections::BTreeSet;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use serde_json::{Value, json};

use crate::events::named::Named;
use crate::events::{Change, EventHub, kind};
use crate::model::Message;
use crate::store::{StoreError, Stores, TaskViews};

/// How many queued changes the feed takes at once.
const BATCH: usize = 256;

/// Runs until every publisher is gone. With `others` (replicas share the database),
/// each change is also queued there, by its ids, for the other replicas (the change bus).
pub async fn run(
    stores: Stores,
    mut changes: UnboundedReceiver<Change>,
    hub: EventHub,
    others: Option<UnboundedSender<Named>>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while changes.recv_many(&mut batch, BATCH).await > 0 {
        let batch = coalesce(std::mem::take(&mut batch));
        if let Some(others) = &others {
            for change in &batch {
                let _ = others.send(Named::of(change));
            }
        }
        send_batch(&stores, &hub, batch).await;
    }
}

/// Sends a batch's operator events in order. The views it names are read together, two
/// queries however many sessions it changed, when the first change that shows one comes
/// up: the changes before it (a new question among them) go out without waiting for
/// reads, and a busy feed no longer reads three times per session change (on PostgreSQL
/// those reads, one after another, were what a question waited behind under load).
async fn send_batch(stores: &Stores, hub: &EventHub, batch: Vec<Change>) {
    let task_ids: Vec<String> = batch
        .iter()
        .filter_map(shown_task)
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut views: Option<TaskViews> = None;
    for change in batch {
        if shown_task(&change).is_some() && views.is_none() {
            match stores.task_views(&task_ids).await {
                Ok(read) => views = Some(read),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read a batch's views for the operator feed; reading them one by one");
                }
            }
        }
        let sent = match &views {
            Some(views) => {
                send_with(hub, views, change);
                Ok(())
            }
            None => forward(stores, hub, change).await,
        };
        if let Err(err) = sent {
            tracing::warn!(error = %err, "cannot read a changed resource for the operator feed");
        }
    }
}

/// The task whose view (and sessions) `change` shows, if it shows any.
fn shown_task(change: &Change) -> Option<&str> {
    match change {
        Change::TaskCreated { task_id } | Change::SessionChanged { task_id, .. } => Some(task_id),
        _ => None,
    }
}

/// Sends the operator events of one change, its views taken from `views`.
fn send_with(hub: &EventHub, views: &TaskViews, change: Change) {
    match change {
        Change::TaskCreated { task_id } => {
            if let Some(view) = views.tasks.get(&task_id) {
                hub.send(kind::TASK_CREATED, view);
            }
        }
        Change::SessionChanged {
            session_id,
            task_id,
        } => {
            if let Some(view) = views.sessions.get(&session_id) {
                hub.send(kind::SESSION_UPDATED, view);
            }
            if let Some(view) = views.tasks.get(&task_id) {
                hub.send(kind::TASK_UPDATED, view);
            }
        }
        other => sent_as_is(hub, other),
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

/// Sends the operator events of one change, reading the views it names (a change a peer
/// replica noted, or a batch whose joint read failed).
pub async fn forward(stores: &Stores, hub: &EventHub, change: Change) -> Result<(), StoreError> {
    match change {
        Change::TaskCreated { task_id } => {
            if let Some(view) = stores.task_view(&task_id).await? {
                hub.send(kind::TASK_CREATED, view);
            }
        }
        Change::SessionChanged {
            session_id,
            task_id,
        } => {
            // Both read before either is sent: the sockets wake and write once for the
            // pair, not once after each read (with many sockets, a wake-up and a write
            // each is most of what an event costs).
            let session = stores.session_view(&session_id).await?;
            let task = stores.task_view(&task_id).await?;
            if let Some(view) = session {
                hub.send(kind::SESSION_UPDATED, view);
            }
            if let Some(view) = task {
                hub.send(kind::TASK_UPDATED, view);
            }
        }
        other => sent_as_is(hub, other),
    }
    Ok(())
}

/// Sends a change that carries what operators see (no view to read).
fn sent_as_is(hub: &EventHub, change: Change) {
    match change {
        Change::MessageCreated(message) => hub.send(kind::MESSAGE_CREATED, message),
        Change::MessageUpdated(message) => hub.send(kind::MESSAGE_UPDATED, message),
        Change::MessageAppended { message, appended } => {
            hub.send(kind::MESSAGE_APPENDED, self::appended(&message, &appended));
        }
        Change::ClarificationCreated(record) => {
            hub.send(kind::CLARIFICATION_CREATED, &record);
            // Hop span (kandev_log::hops): the broadcast is out.
            let _pushed = tracing::debug_span!(target: "kandev::timing", "backend.pushed", pending_id = %record.pending_id);
        }
        Change::ClarificationSettled(record) => hub.send(kind::CLARIFICATION_SETTLED, record),
        Change::Notification(n) => hub.send(kind::NOTIFICATION, n),
        Change::FlagChanged(flag) => hub.send(kind::RUNTIME_FLAGS_UPDATED, flag),
        // Views: sent by the callers, which read them.
        Change::TaskCreated { .. } | Change::SessionChanged { .. } => {}
    }
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

    #[tokio::test]
    async fn a_batch_sends_its_events_in_order_with_the_views_it_names_read_together() {
        let stores = crate::testing::memory_stores().await;
        let task = crate::model::Task::new("T", "");
        stores.tasks.create_task(&task).await.expect("task");
        let a = stores
            .sessions
            .insert_session(&task.id, "mock")
            .await
            .expect("a");
        let b = stores
            .sessions
            .insert_session(&task.id, "mock")
            .await
            .expect("b");
        let hub = EventHub::new();
        let mut events = hub.subscribe();
        let changed = |id: &str| Change::SessionChanged {
            session_id: id.into(),
            task_id: task.id.clone(),
        };
        let batch = vec![
            Change::FlagChanged(json!({"key": "first"})),
            Change::TaskCreated {
                task_id: task.id.clone(),
            },
            changed(&a.id),
            Change::FlagChanged(json!({"key": "between"})),
            changed(&b.id),
            changed("gone"),
        ];
        send_batch(&stores, &hub, batch).await;
        let mut sent = Vec::new();
        while let Ok(event) = events.try_recv() {
            let id = event.data["id"].as_str().or(event.data["key"].as_str());
            sent.push((event.kind, id.unwrap_or_default().to_owned()));
        }
        let t = task.id.clone();
        assert_eq!(
            sent,
            vec![
                (kind::RUNTIME_FLAGS_UPDATED, "first".to_owned()),
                (kind::TASK_CREATED, t.clone()),
                (kind::SESSION_UPDATED, a.id.clone()),
                (kind::TASK_UPDATED, t.clone()),
                (kind::RUNTIME_FLAGS_UPDATED, "between".to_owned()),
                (kind::SESSION_UPDATED, b.id.clone()),
                (kind::TASK_UPDATED, t.clone()),
                // A session gone sends no session view; its task's still goes out.
                (kind::TASK_UPDATED, t),
            ]
        );
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
