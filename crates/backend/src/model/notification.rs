//! Operator notifications: one sentence naming the task, never the question text (F9).

use serde::Serialize;

use crate::model::id::new_record_id;
use crate::model::time::Timestamp;

/// Event of the notification sent once per new clarification (on by default).
pub const CLARIFICATION_REQUESTED: &str = "session.clarification_requested";
/// Event of the notification sent when a turn ends (off by default).
pub const TURN_FINISHED: &str = "session.turn_finished";

/// A stored notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Notification {
    /// UUID.
    pub id: String,
    /// `session.clarification_requested` | `session.turn_finished`.
    pub event: String,
    /// The task.
    pub task_id: String,
    /// The session.
    pub session_id: String,
    /// Short title.
    pub title: String,
    /// One sentence naming the task.
    pub body: String,
    /// When it was dispatched.
    pub created_at: Timestamp,
}

impl Notification {
    /// "The agent working on “T” is waiting for your answer." — the task, never the question.
    pub fn clarification_requested(task_title: &str, task_id: &str, session_id: &str) -> Self {
        Self::new(
            CLARIFICATION_REQUESTED,
            "Input needed",
            format!("The agent working on “{task_title}” is waiting for your answer."),
            task_id,
            session_id,
        )
    }

    /// "The agent finished its turn on “T”."
    pub fn turn_finished(task_title: &str, task_id: &str, session_id: &str) -> Self {
        Self::new(
            TURN_FINISHED,
            "Turn finished",
            format!("The agent finished its turn on “{task_title}”."),
            task_id,
            session_id,
        )
    }

    fn new(event: &str, title: &str, body: String, task_id: &str, session_id: &str) -> Self {
        Self {
            id: new_record_id(),
            event: event.to_owned(),
            task_id: task_id.to_owned(),
            session_id: session_id.to_owned(),
            title: title.to_owned(),
            body,
            created_at: Timestamp::now(),
        }
    }
}
