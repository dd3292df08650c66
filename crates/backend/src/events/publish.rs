//! [`Publisher`]: where modules hand over a [`Change`] once it is committed.

use tokio::sync::mpsc;

use crate::events::Change;
use crate::model::SessionRecord;

/// Queues committed changes for the feed, in the order they are published. Never
/// blocks and never drops: the queue is unbounded and the feed drains it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Publisher {
    tx: mpsc::UnboundedSender<Change>,
}

impl Publisher {
    /// A publisher and the receiving end the feed drains.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Change>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Publishes one change (a feed that is gone — the process stopping — is fine).
    pub fn publish(&self, change: Change) {
        let _ = self.tx.send(change);
    }

    /// `SessionChanged` for a session of a task, to be read back.
    pub fn session_changed(&self, session_id: &str, task_id: &str) {
        self.session_written(session_id, task_id, None);
    }

    /// `SessionChanged` carrying the session as its write returned it, or to be read
    /// back when the write returned none.
    pub fn session_written(&self, session_id: &str, task_id: &str, written: Option<SessionRecord>) {
        self.publish(Change::SessionChanged {
            session_id: session_id.to_owned(),
            task_id: task_id.to_owned(),
            written: written.map(Box::new),
        });
    }
}
