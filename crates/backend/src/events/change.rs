//! [`Change`]: one committed change an operator must see.

use serde_json::Value;

use crate::model::{Clarification, Message, Notification, SessionRecord};

/// A committed change. Those that carry their resource are sent as they are; the others
/// name what to read.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A task was created.
    TaskCreated {
        /// The task.
        task_id: String,
    },
    /// A session's state, `pending_action`, start facts or error changed (and so, maybe,
    /// its task's summary).
    SessionChanged {
        /// The session.
        session_id: String,
        /// Its task.
        task_id: String,
        /// The session as the write that changed it returned it, when it did: the feed
        /// shows it, or a later view it holds (by `view_seq`), instead of reading the
        /// session back. `None`: read back.
        written: Option<Box<SessionRecord>>,
    },
    /// A chat message was stored.
    MessageCreated(Message),
    /// A chat message's metadata (or a tool call's title) changed; the full message.
    MessageUpdated(Message),
    /// Text was appended to an open agent message: operators get only `appended` (and
    /// the length after it), not the whole content again.
    MessageAppended {
        /// The message after the append.
        message: Message,
        /// The text appended.
        appended: String,
    },
    /// A clarification was asked.
    ClarificationCreated(Clarification),
    /// A clarification left `pending` (F7), or its answer was recorded.
    ClarificationSettled(Clarification),
    /// A notification was dispatched.
    Notification(Notification),
    /// A runtime flag's Settings override changed; the flag as resolved now.
    FlagChanged(Value),
}
