//! [`TaskStore`]: tasks.

use async_trait::async_trait;

use crate::model::Task;
use crate::store::StoreError;

/// Where tasks are kept.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Stores a new task.
    async fn create_task(&self, task: &Task) -> Result<(), StoreError>;

    /// One task.
    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError>;

    /// Every task, newest first.
    async fn tasks(&self) -> Result<Vec<Task>, StoreError>;
}
