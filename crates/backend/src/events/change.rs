//! [`Change`]: one committed change an operator must see.

use serde::Serialize;
use serde_json::Value;

use crate::model::{Clarification, Message, MessageKind, Notification, SessionRecord, Timestamp};

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
    /// Text was appended to an open agent message: operators get only the text (and the
    /// length after it), not the whole content again.
    MessageAppended(Appended),
    /// A clarification was asked.
    ClarificationCreated(Clarification),
    /// A clarification left `pending` (F7), or its answer was recorded.
    ClarificationSettled(Clarification),
    /// A notification was dispatched.
    Notification(Notification),
    /// A runtime flag's Settings override changed; the flag as resolved now.
    FlagChanged(Value),
}

/// The data of a `message.appended` event: what a client needs to place `text` (the
/// message's ids, `type`, `author_type`, `seq`, `updated_at`) and `length`, the content's
/// length after the append in UTF-16 code units (a JavaScript string's `length`), so a
/// client whose copy is not `length - text.length` long knows it missed text. Never the
/// whole content: that is what appends spare.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Appended {
    /// The message.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// Its position in the session.
    pub seq: i64,
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// Who wrote it.
    pub author_type: String,
    /// When the text was appended.
    pub updated_at: Timestamp,
    /// The text appended.
    pub text: String,
    /// The content's length after the append, in UTF-16 code units.
    pub length: usize,
}

impl Appended {
    /// `text` appended to `message` (as it was stored, whatever its content) at
    /// `updated_at`, the content then `length` UTF-16 code units long.
    pub fn new(message: &Message, updated_at: Timestamp, text: &str, length: usize) -> Self {
        Self {
            id: message.id.clone(),
            session_id: message.session_id.clone(),
            task_id: message.task_id.clone(),
            seq: message.seq,
            kind: message.kind,
            author_type: message.author_type.clone(),
            updated_at,
            text: text.to_owned(),
            length,
        }
    }
}
