//! The feed: drains the [`Publisher`](crate::events::Publisher)'s queue in order and sends
//! each change to the [`EventHub`] as operator events, reading the views a change names.
//! One task per process, so per-session order is publication order.

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::events::bus::Named;
use crate::events::{Change, EventHub, kind};
use crate::store::{StoreError, Stores};

/// Runs until every publisher is gone. With `others` (replicas share the database),
/// each change is also queued there, by its ids, for the other replicas ([`super::bus`]).
pub async fn run(
    stores: Stores,
    mut changes: UnboundedReceiver<Change>,
    hub: EventHub,
    others: Option<UnboundedSender<Named>>,
) {
    while let Some(change) = changes.recv().await {
        if let Some(others) = &others {
            let _ = others.send(Named::of(&change));
        }
        if let Err(err) = forward(&stores, &hub, change).await {
            tracing::warn!(error = %err, "cannot read a changed resource for the operator feed");
        }
    }
}

/// Sends the operator events of one change.
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
            if let Some(view) = stores.session_view(&session_id).await? {
                hub.send(kind::SESSION_UPDATED, view);
            }
            if let Some(view) = stores.task_view(&task_id).await? {
                hub.send(kind::TASK_UPDATED, view);
            }
        }
        Change::MessageCreated(message) => hub.send(kind::MESSAGE_CREATED, message),
        Change::MessageUpdated(message) => hub.send(kind::MESSAGE_UPDATED, message),
        Change::ClarificationCreated(record) => {
            hub.send(kind::CLARIFICATION_CREATED, &record);
            kandev_agent_stream::timing::hop(
                kandev_agent_stream::timing::hop::BACKEND_PUSHED,
                &record.pending_id,
            );
        }
        Change::ClarificationSettled(record) => hub.send(kind::CLARIFICATION_SETTLED, record),
        Change::Notification(n) => hub.send(kind::NOTIFICATION, n),
        Change::FlagChanged(flag) => hub.send(kind::RUNTIME_FLAGS_UPDATED, flag),
    }
    Ok(())
}
