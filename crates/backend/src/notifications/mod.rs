//! Operator notifications: stored, listed by `GET /api/v1/notifications`, pushed on
//! the operator WebSocket. Bodies name the task, never the question text (F9).

use serde::Serialize;
use sqlx::FromRow;

use crate::config::NotificationsConfig;
use crate::db::{Db, now};
use crate::events::{EventHub, NOTIFICATION};

/// Event of the notification sent once per new clarification (on by default).
pub const CLARIFICATION_REQUESTED: &str = "session.clarification_requested";
/// Event of the notification sent when a turn ends (off by default).
pub const TURN_FINISHED: &str = "session.turn_finished";

/// A stored notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, FromRow)]
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
    /// RFC 3339.
    pub created_at: String,
}

/// Newest first.
pub async fn list(db: &Db) -> Result<Vec<Notification>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, event, task_id, session_id, title, body, created_at FROM notifications ORDER BY created_at DESC, id",
    )
    .fetch_all(db)
    .await
}

/// Stores and pushes notifications according to the configuration.
#[derive(Debug, Clone)]
pub struct Notifier {
    db: Db,
    hub: EventHub,
    config: NotificationsConfig,
}

impl Notifier {
    /// A notifier writing to `db` and pushing on `hub`.
    pub fn new(db: Db, hub: EventHub, config: NotificationsConfig) -> Self {
        Self { db, hub, config }
    }

    /// A clarification awaits the operator. The body names the task only.
    pub async fn clarification_requested(
        &self,
        task_title: &str,
        task_id: &str,
        session_id: &str,
    ) -> Result<Option<Notification>, sqlx::Error> {
        if !self.config.clarification_requested {
            return Ok(None);
        }
        let body = format!("The agent working on “{task_title}” is waiting for your answer.");
        self.dispatch(
            CLARIFICATION_REQUESTED,
            "Input needed",
            &body,
            task_id,
            session_id,
        )
        .await
        .map(Some)
    }

    /// A turn ended.
    pub async fn turn_finished(
        &self,
        task_title: &str,
        task_id: &str,
        session_id: &str,
    ) -> Result<Option<Notification>, sqlx::Error> {
        if !self.config.turn_finished {
            return Ok(None);
        }
        let body = format!("The agent finished its turn on “{task_title}”.");
        self.dispatch(TURN_FINISHED, "Turn finished", &body, task_id, session_id)
            .await
            .map(Some)
    }

    async fn dispatch(
        &self,
        event: &str,
        title: &str,
        body: &str,
        task_id: &str,
        session_id: &str,
    ) -> Result<Notification, sqlx::Error> {
        let n = Notification {
            id: uuid::Uuid::new_v4().to_string(),
            event: event.to_owned(),
            task_id: task_id.to_owned(),
            session_id: session_id.to_owned(),
            title: title.to_owned(),
            body: body.to_owned(),
            created_at: now(),
        };
        sqlx::query(
            "INSERT INTO notifications (id, event, task_id, session_id, title, body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&n.id)
        .bind(&n.event)
        .bind(&n.task_id)
        .bind(&n.session_id)
        .bind(&n.title)
        .bind(&n.body)
        .bind(&n.created_at)
        .execute(&self.db)
        .await?;
        tracing::info!(session_id, event, "notification dispatched");
        self.hub.publish(NOTIFICATION, &n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn clarification_requested_is_on_and_turn_finished_off_by_default() {
        let db = crate::db::memory().await;
        let hub = EventHub::new();
        let mut rx = hub.subscribe();
        let n = Notifier::new(db.clone(), hub, NotificationsConfig::default());
        let made = n
            .clarification_requested("Fix the login page", "t1", "s1")
            .await
            .expect("dispatch")
            .expect("on by default");
        assert_eq!(made.event, CLARIFICATION_REQUESTED);
        assert!(made.body.contains("Fix the login page"));
        assert!(
            n.turn_finished("Fix", "t1", "s1")
                .await
                .expect("ok")
                .is_none()
        );
        assert_eq!(list(&db).await.expect("list"), vec![made.clone()]);
        let pushed = rx.recv().await.expect("pushed");
        assert_eq!(pushed.kind, NOTIFICATION);
        assert_eq!(pushed.data["id"], made.id);
    }

    #[tokio::test]
    async fn configuration_switches_each_event() {
        let db = crate::db::memory().await;
        let config = NotificationsConfig {
            clarification_requested: false,
            turn_finished: true,
        };
        let n = Notifier::new(db.clone(), EventHub::new(), config);
        assert!(
            n.clarification_requested("T", "t", "s")
                .await
                .expect("ok")
                .is_none()
        );
        let made = n
            .turn_finished("T", "t", "s")
            .await
            .expect("ok")
            .expect("on");
        assert_eq!(made.event, TURN_FINISHED);
        assert_eq!(list(&db).await.expect("list").len(), 1);
    }
}
