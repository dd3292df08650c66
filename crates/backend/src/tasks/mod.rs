//! Tasks: what an operator asks agents to work on. A task owns its sessions.

use serde::Serialize;
use sqlx::FromRow;

use crate::db::{Db, now};
use crate::sessions::{Session, SessionState};

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, FromRow)]
pub struct Task {
    /// UUID.
    pub id: String,
    /// Short name, shown on the board and in notifications.
    pub title: String,
    /// Longer text.
    pub description: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

const COLUMNS: &str = "id, title, description, created_at, updated_at";

/// Stores a new task.
pub async fn create(db: &Db, title: &str, description: &str) -> Result<Task, sqlx::Error> {
    let at = now();
    let task = Task {
        id: uuid::Uuid::new_v4().to_string(),
        title: title.to_owned(),
        description: description.to_owned(),
        created_at: at.clone(),
        updated_at: at,
    };
    sqlx::query(
        "INSERT INTO tasks (id, title, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&task.id)
    .bind(&task.title)
    .bind(&task.description)
    .bind(&task.created_at)
    .bind(&task.updated_at)
    .execute(db)
    .await?;
    Ok(task)
}

/// One task.
pub async fn get(db: &Db, id: &str) -> Result<Option<Task>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM tasks WHERE id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await
}

/// Every task, newest first.
pub async fn list(db: &Db) -> Result<Vec<Task>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tasks ORDER BY created_at DESC, id"
    ))
    .fetch_all(db)
    .await
}

/// A task as the API returns it: with its sessions, a summary `state` and `pending_action`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// The task's fields.
    #[serde(flatten)]
    pub task: Task,
    /// `WAITING_FOR_INPUT` when any session waits, else the newest session's state;
    /// null before the first session.
    pub state: Option<SessionState>,
    /// `"clarification"` while any live session of the task has a pending clarification.
    pub pending_action: Option<&'static str>,
    /// Its sessions, oldest first.
    pub sessions: Vec<Session>,
}

/// The task with its sessions.
pub async fn view(db: &Db, task: Task) -> Result<TaskView, sqlx::Error> {
    // One query for every session's pending count, however many sessions the task has.
    let counts = crate::clarifications::store::count_pending_by_session(db, &task.id).await?;
    let sessions: Vec<Session> = crate::sessions::store::list_for_task(db, &task.id)
        .await?
        .into_iter()
        .map(|row| {
            let pending = counts.get(&row.id).copied().unwrap_or(0);
            Session::from_row(row, pending)
        })
        .collect();
    let pending_action = sessions.iter().find_map(|s| s.pending_action);
    let state = if sessions
        .iter()
        .any(|s| s.state == SessionState::WaitingForInput)
    {
        Some(SessionState::WaitingForInput)
    } else {
        sessions.last().map(|s| s.state)
    };
    Ok(TaskView {
        task,
        state,
        pending_action,
        sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn create_get_list() {
        let db = crate::db::memory().await;
        assert!(list(&db).await.expect("list").is_empty());
        let a = create(&db, "First", "").await.expect("create");
        let b = create(&db, "Second", "more").await.expect("create");
        assert_eq!(get(&db, &a.id).await.expect("get"), Some(a.clone()));
        assert_eq!(get(&db, "nope").await.expect("get"), None);
        let all = list(&db).await.expect("list");
        assert_eq!(all, vec![b, a.clone()], "newest first");

        let v = view(&db, a.clone()).await.expect("view");
        assert_eq!((v.state, v.pending_action), (None, None));
        let s = crate::sessions::store::insert(&db, &a.id, "mock")
            .await
            .expect("session");
        crate::sessions::store::set_state(&db, &s.id, SessionState::Idle, None)
            .await
            .expect("state");
        let v = view(&db, a).await.expect("view");
        assert_eq!(v.state, Some(SessionState::Idle));
        assert_eq!(v.sessions.len(), 1);
        let json = serde_json::to_value(&v).expect("json");
        assert_eq!(json["title"], "First");
        assert_eq!(json["sessions"][0]["state"], "IDLE");
    }
}
