//! [`Notifier`]: dispatches operator notifications as configured — stored, listed by
//! `GET /api/v1/notifications`, pushed on the operator WebSocket. Bodies name the task,
//! never the question text (F9). Beside them, [`Webhooks`] writes the deliveries of the
//! outbound webhooks (docs/architecture.md §15).

use crate::config::NotificationsConfig;
use crate::events::{Change, Publisher};
use crate::model::Notification;
use crate::reach::Webhooks;
use crate::store::{StoreError, Stores};

/// Stores and pushes notifications according to the configuration. Cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    stores: Stores,
    publisher: Publisher,
    config: NotificationsConfig,
    webhooks: Webhooks,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier writing to `stores` and publishing on `publisher`.
    pub fn new(stores: Stores, publisher: Publisher, config: NotificationsConfig) -> Self {
        let webhooks = Webhooks::new(stores.clone(), std::sync::Arc::new(config.clone()), false);
        Self {
            stores,
            publisher,
            config,
            webhooks,
        }
    }

    /// The same, writing webhook deliveries through `webhooks`.
    pub fn with_webhooks(self, webhooks: Webhooks) -> Self {
        Self { webhooks, ..self }
    }

    /// The outbound webhooks.
    pub fn webhooks(&self) -> &Webhooks {
        &self.webhooks
    }

    /// The notification that a clarification awaits the operator (on by default), to be
    /// stored in the commit that opens the record; `None` when configured off.
    pub fn clarification_requested(
        &self,
        task_title: &str,
        task_id: &str,
        session_id: &str,
    ) -> Option<Notification> {
        self.config
            .clarification_requested
            .then(|| Notification::clarification_requested(task_title, task_id, session_id))
    }

    /// Pushes a notification already stored (with the record it announces).
    pub fn announce(&self, n: Notification) {
        tracing::info!(session_id = %n.session_id, event = %n.event, "notification dispatched");
        self.publisher.publish(Change::Notification(n));
    }

    /// A turn ended (off by default).
    pub async fn turn_finished(
        &self,
        task_title: &str,
        task_id: &str,
        session_id: &str,
    ) -> Result<Option<Notification>, StoreError> {
        if let Err(err) = self
            .webhooks
            .turn_finished(task_title, task_id, session_id)
            .await
        {
            tracing::warn!(session_id, error = %err, "turn_finished webhooks not written");
        }
        if !self.config.turn_finished {
            return Ok(None);
        }
        self.dispatch(Notification::turn_finished(task_title, task_id, session_id))
            .await
            .map(Some)
    }

    async fn dispatch(&self, n: Notification) -> Result<Notification, StoreError> {
        self.stores.notifications.insert_notification(&n).await?;
        self.announce(n.clone());
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    async fn stores() -> Stores {
        Stores::from_engine(Arc::new(
            crate::store::sqlite::SqliteDb::memory().await.expect("db"),
        ))
    }

    #[tokio::test]
    async fn clarification_requested_is_on_and_turn_finished_off_by_default() {
        let stores = stores().await;
        let (publisher, mut changes) = Publisher::new();
        let n = Notifier::new(stores.clone(), publisher, NotificationsConfig::default());
        let made = n
            .clarification_requested("Fix the login page", "t1", "s1")
            .expect("on by default");
        assert!(made.body.contains("Fix the login page"));
        assert!(
            n.turn_finished("Fix", "t1", "s1")
                .await
                .expect("ok")
                .is_none()
        );
        // The record's open stores it (one commit, the store's conformance tests pin
        // that); the notifier only pushes it once stored.
        assert_eq!(
            stores.notifications.notifications().await.expect("list"),
            vec![]
        );
        n.announce(made.clone());
        assert_eq!(changes.recv().await, Some(Change::Notification(made)));
    }

    #[tokio::test]
    async fn configuration_switches_each_event() {
        let stores = stores().await;
        let config = NotificationsConfig {
            clarification_requested: false,
            turn_finished: true,
            ..NotificationsConfig::default()
        };
        let n = Notifier::new(stores.clone(), Publisher::new().0, config);
        assert!(n.clarification_requested("T", "t", "s").is_none());
        let made = n
            .turn_finished("T", "t", "s")
            .await
            .expect("ok")
            .expect("on");
        assert_eq!(made.event, crate::model::notification::TURN_FINISHED);
        assert_eq!(
            stores
                .notifications
                .notifications()
                .await
                .expect("list")
                .len(),
            1
        );
    }
}
