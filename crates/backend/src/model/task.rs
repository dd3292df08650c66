//! Tasks: what an operator asks agents to work on, and the task as the board shows it
//! ([`TaskView`]: with its sessions and a summary state).

use serde::Serialize;

use crate::model::id::new_record_id;
use crate::model::session::{Session, SessionState};
use crate::model::time::Timestamp;

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Task {
    /// UUID.
    pub id: String,
    /// Short name, shown on the board and in notifications.
    pub title: String,
    /// Longer text.
    pub description: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl Task {
    /// A new task, created now.
    pub fn new(title: &str, description: &str) -> Self {
        let at = Timestamp::now();
        Self {
            id: new_record_id(),
            title: title.to_owned(),
            description: description.to_owned(),
            created_at: at,
            updated_at: at,
        }
    }
}

/// A task as the API returns it: with its sessions, a summary `state` and `pending_action`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// The task's fields.
    #[serde(flatten)]
    pub task: Task,
    /// `WAITING_FOR_INPUT` when any session waits, else the newest session's state;
    /// null before the first session.
    pub state: Option<SessionState>,
    /// `"clarification"` while any live session of the task has a pending clarification.
    pub pending_action: Option<&'static str>,
    /// Its sessions, oldest first.
    pub sessions: Vec<Session>,
}

impl TaskView {
    /// The view of `task` with `sessions` (oldest first).
    pub fn new(task: Task, sessions: Vec<Session>) -> Self {
        let pending_action = sessions.iter().find_map(|s| s.pending_action);
        let state = if sessions
            .iter()
            .any(|s| s.state == SessionState::WaitingForInput)
        {
            Some(SessionState::WaitingForInput)
        } else {
            sessions.last().map(|s| s.state)
        };
        Self {
            task,
            state,
            pending_action,
            sessions,
        }
    }
}
