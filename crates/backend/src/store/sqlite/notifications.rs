//! [`NotificationStore`] on SQLite.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteDb, time};
use crate::model::Notification;
use crate::store::{NotificationStore, StoreError};

const COLUMNS: &str = "id, event, task_id, session_id, title, body, created_at";

fn notification(row: &SqliteRow) -> Result<Notification, StoreError> {
    Ok(Notification {
        id: row.try_get("id")?,
        event: row.try_get("event")?,
        task_id: row.try_get("task_id")?,
        session_id: row.try_get("session_id")?,
        title: row.try_get("title")?,
        body: row.try_get("body")?,
        created_at: time(row, "created_at")?,
    })
}

#[async_trait]
impl NotificationStore for SqliteDb {
    async fn insert_notification(&self, n: &Notification) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO notifications ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(&n.id)
        .bind(&n.event)
        .bind(&n.task_id)
        .bind(&n.session_id)
        .bind(&n.title)
        .bind(&n.body)
        .bind(n.created_at.to_rfc3339())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn notification(&self, id: &str) -> Result<Option<Notification>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM notifications WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(notification)
        .transpose()
    }

    async fn notifications(&self) -> Result<Vec<Notification>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM notifications ORDER BY created_at DESC, id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(notification)
        .collect()
    }
}
