//! [`TaskStore`].

use async_trait::async_trait;

use super::engine::Db;
use crate::model::Task;
use crate::store::{StoreError, TaskStore};

const COLUMNS: &str = "id, title, description, created_at, updated_at";

#[async_trait]
impl TaskStore for Db {
    async fn create_task(&self, task: &Task) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO tasks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
        ))
        .bind(&task.id)
        .bind(&task.title)
        .bind(&task.description)
        .bind(task.created_at)
        .bind(task.updated_at)
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM tasks WHERE id = $1");
        let task = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(task)
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM tasks ORDER BY created_at DESC, id");
        Ok(sqlx::query_as(&sql).fetch_all(self.pool()).await?)
    }
}
