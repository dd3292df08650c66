//! [`NotificationStore`]: dispatched notifications.

use async_trait::async_trait;

use crate::model::Notification;
use crate::store::StoreError;

/// Where notifications are kept.
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// Stores one.
    async fn insert_notification(&self, notification: &Notification) -> Result<(), StoreError>;

    /// One notification.
    async fn notification(&self, id: &str) -> Result<Option<Notification>, StoreError>;

    /// Every notification, newest first.
    async fn notifications(&self) -> Result<Vec<Notification>, StoreError>;
}
