//! A [`Change`] by its ids: what a replica sends the others on the change bus, small
//! enough for PostgreSQL's `NOTIFY`, and read back into the change by the receiver.

use serde::{Deserialize, Serialize};

use crate::events::Change;
use crate::flags::Flags;
use crate::store::{StoreError, Stores};

/// A [`Change`] by its ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Named {
    /// [`Change::TaskCreated`].
    TaskCreated {
        /// The task.
        task: String,
    },
    /// [`Change::SessionChanged`].
    SessionChanged {
        /// The session.
        session: String,
        /// Its task.
        task: String,
    },
    /// [`Change::MessageCreated`].
    MessageCreated {
        /// The message.
        message: String,
    },
    /// [`Change::MessageUpdated`].
    MessageUpdated {
        /// The message.
        message: String,
    },
    /// [`Change::ClarificationCreated`].
    ClarificationCreated {
        /// The record.
        pending: String,
    },
    /// [`Change::ClarificationSettled`].
    ClarificationSettled {
        /// The record.
        pending: String,
    },
    /// [`Change::Notification`].
    Notification {
        /// The notification.
        id: String,
    },
    /// [`Change::FlagChanged`].
    FlagChanged {
        /// The flag's key.
        key: String,
    },
}

impl Named {
    /// The ids of `change`.
    pub fn of(change: &Change) -> Self {
        match change {
            Change::TaskCreated { task_id } => Self::TaskCreated {
                task: task_id.clone(),
            },
            Change::SessionChanged {
                session_id,
                task_id,
                ..
            } => Self::SessionChanged {
                session: session_id.clone(),
                task: task_id.clone(),
            },
            Change::MessageCreated(m) => Self::MessageCreated {
                message: m.id.clone(),
            },
            // Other replicas read the row back, so an append reaches their operators as
            // a `message.updated` of the whole message: correct, just not as small.
            Change::MessageUpdated(m) | Change::MessageAppended { message: m, .. } => {
                Self::MessageUpdated {
                    message: m.id.clone(),
                }
            }
            Change::ClarificationCreated(r) => Self::ClarificationCreated {
                pending: r.pending_id.clone(),
            },
            Change::ClarificationSettled(r) => Self::ClarificationSettled {
                pending: r.pending_id.clone(),
            },
            Change::Notification(n) => Self::Notification { id: n.id.clone() },
            Change::FlagChanged(flag) => Self::FlagChanged {
                key: flag
                    .get("key")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            },
        }
    }

    /// The change again, read from the stores (`None` when what it names is gone).
    pub async fn read(self, stores: &Stores, flags: &Flags) -> Result<Option<Change>, StoreError> {
        Ok(match self {
            Self::TaskCreated { task } => Some(Change::TaskCreated { task_id: task }),
            Self::SessionChanged { session, task } => Some(Change::SessionChanged {
                session_id: session,
                task_id: task,
                written: None,
            }),
            Self::MessageCreated { message } => stores
                .messages
                .message(&message)
                .await?
                .map(Change::MessageCreated),
            Self::MessageUpdated { message } => stores
                .messages
                .message(&message)
                .await?
                .map(Change::MessageUpdated),
            Self::ClarificationCreated { pending } => stores
                .clarifications
                .clarification(&pending)
                .await?
                .map(Change::ClarificationCreated),
            Self::ClarificationSettled { pending } => stores
                .clarifications
                .clarification(&pending)
                .await?
                .map(Change::ClarificationSettled),
            Self::Notification { id } => stores
                .notifications
                .notification(&id)
                .await?
                .map(Change::Notification),
            Self::FlagChanged { key } => match flags.resolve(&key).await {
                Ok(flag) => Some(Change::FlagChanged(
                    serde_json::to_value(&flag).unwrap_or_default(),
                )),
                Err(err) => {
                    tracing::warn!(%key, error = %err, "cannot resolve a flag another replica changed");
                    None
                }
            },
        })
    }
}
