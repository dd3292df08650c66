//! [`NotificationStore`].

use async_trait::async_trait;

use super::engine::{Conn, Db};
use crate::model::Notification;
use crate::store::{NotificationStore, StoreError};

const COLUMNS: &str = "id, event, task_id, session_id, title, body, created_at";

/// Inserts `n` on `conn` (inside the caller's transaction, when it has one).
pub(super) async fn insert(conn: &mut Conn, n: &Notification) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO notifications ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
    ))
    .bind(&n.id)
    .bind(&n.event)
    .bind(&n.task_id)
    .bind(&n.session_id)
    .bind(&n.title)
    .bind(&n.body)
    .bind(n.created_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The columns of a notification row, for an insert written into another statement.
pub(crate) const NOTIFICATION_COLUMNS: &str = COLUMNS;

#[async_trait]
impl NotificationStore for Db {
    async fn insert_notification(&self, n: &Notification) -> Result<(), StoreError> {
        insert(&mut *self.writer().await?, n).await
    }

    async fn notification(&self, id: &str) -> Result<Option<Notification>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM notifications WHERE id = $1");
        let found = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(found)
    }

    async fn notifications(&self) -> Result<Vec<Notification>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM notifications ORDER BY created_at DESC, id");
        Ok(sqlx::query_as(&sql).fetch_all(self.pool()).await?)
    }
}
