//! Read compositions the API and the feed share: a session or a task as the API returns
//! it, the views a batch of changes names, and the board — each in a constant number of
//! queries.

use std::collections::HashMap;

use crate::model::{Session, SessionRecord, Task, TaskView};
use crate::store::{StoreError, Stores};

/// Tasks with their sessions, and those sessions by id: what the feed sends for a batch
/// of changes.
#[derive(Debug, Default)]
pub struct TaskViews {
    /// Each task's view, by task id.
    pub tasks: HashMap<String, TaskView>,
    /// Each session of those tasks as the API returns it, by session id.
    pub sessions: HashMap<String, Session>,
}

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
            .await?;
        Ok(with_sessions(vec![task], sessions).pop())
    }

    /// Tasks `ids` with their sessions, and each of those sessions: two queries however
    /// many tasks, so a busy feed reads a whole batch's views at once.
    pub async fn task_views(&self, ids: &[String]) -> Result<TaskViews, StoreError> {
        if ids.is_empty() {
            return Ok(TaskViews::default());
        }
        let tasks = self.tasks.tasks_with_ids(ids).await?;
        let records = self.sessions.sessions_of_tasks(ids).await?;
        let views = with_sessions(tasks, records);
        let sessions = views
            .iter()
            .flat_map(|view| &view.sessions)
            .map(|session| (session.id.clone(), session.clone()))
            .collect();
        let tasks = views
            .into_iter()
            .map(|view| (view.task.id.clone(), view))
            .collect();
        Ok(TaskViews { tasks, sessions })
    }

    /// Every task, newest first, with its sessions: two queries however many tasks.
    pub async fn board(&self) -> Result<Vec<TaskView>, StoreError> {
        let tasks = self.tasks.tasks().await?;
        let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
        let records = self.sessions.sessions_of_tasks(&ids).await?;
        Ok(with_sessions(tasks, records))
    }
}

/// Each of `tasks`, in its order, with its sessions among `records` (in theirs).
fn with_sessions(tasks: Vec<Task>, records: Vec<SessionRecord>) -> Vec<TaskView> {
    let mut by_task: HashMap<String, Vec<Session>> = HashMap::new();
    for record in records {
        by_task
            .entry(record.task_id.clone())
            .or_default()
            .push(Session::from(record));
    }
    tasks
        .into_iter()
        .map(|task| {
            let sessions = by_task.remove(&task.id).unwrap_or_default();
            TaskView::new(task, sessions)
        })
        .collect()
}
