//! Read compositions the API and the feed share: a session or a task as the API returns
//! it, and the board — each in a constant number of queries.

use crate::model::{Session, TaskView};
use crate::store::{StoreError, Stores};

impl Stores {
    /// Session `id` as the API returns it.
    pub async fn session_view(&self, id: &str) -> Result<Option<Session>, StoreError> {
        Ok(self.sessions.session(id).await?.map(Session::from))
    }

    /// Task `id` with its sessions: two queries.
    pub async fn task_view(&self, id: &str) -> Result<Option<TaskView>, StoreError> {
        let Some(task) = self.tasks.task(id).await? else {
            return Ok(None);
        };
        let sessions = self
            .sessions
            .sessions_of_tasks(std::slice::from_ref(&task.id))
            .await?
            .into_iter()
            .map(Session::from)
            .collect();
        Ok(Some(TaskView::new(task, sessions)))
    }

    /// Every task, newest first, with its sessions: two queries however many tasks.
    pub async fn board(&self) -> Result<Vec<TaskView>, StoreError> {
        let tasks = self.tasks.tasks().await?;
        let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
        let mut by_task: std::collections::HashMap<String, Vec<Session>> =
            std::collections::HashMap::new();
        for record in self.sessions.sessions_of_tasks(&ids).await? {
            by_task
                .entry(record.task_id.clone())
                .or_default()
                .push(Session::from(record));
        }
        Ok(tasks
            .into_iter()
            .map(|task| {
                let sessions = by_task.remove(&task.id).unwrap_or_default();
                TaskView::new(task, sessions)
            })
            .collect())
    }
}
