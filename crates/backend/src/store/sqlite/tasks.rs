//! [`TaskStore`] on SQLite.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteDb, time};
use crate::model::Task;
use crate::store::{StoreError, TaskStore};

const COLUMNS: &str = "id, title, description, created_at, updated_at";

fn task(row: &SqliteRow) -> Result<Task, StoreError> {
    Ok(Task {
        id: row.try_get("id")?,
        title: row.try_get("title")?,
        description: row.try_get("description")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

#[async_trait]
impl TaskStore for SqliteDb {
    async fn create_task(&self, task: &Task) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tasks (id, title, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&task.id)
        .bind(&task.title)
        .bind(&task.description)
        .bind(task.created_at.to_rfc3339())
        .bind(task.updated_at.to_rfc3339())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        sqlx::query(&format!("SELECT {COLUMNS} FROM tasks WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(task)
            .transpose()
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks ORDER BY created_at DESC, id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(task)
        .collect()
    }
}
