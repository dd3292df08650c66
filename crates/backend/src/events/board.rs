//! [`Board`]: the tasks the feed has shown operators, each with its sessions as last
//! read, so that a session change reads only that session (one query) and builds its
//! task's view from what the feed already holds, instead of reading the task and all its
//! sessions back (three queries, which every operator event queued behind).
//!
//! It is right because every change to a session's view reaches the one feed task in
//! order: this process's changes through the publisher, other replicas' through the
//! change bus. When the bus may have lost notes, the board is forgotten and read again.
//! A task leaves the board when all its sessions have ended (an ended session's view no
//! longer changes), so it holds only live work.

use std::collections::HashMap;

use crate::model::{Session, Task, TaskView};
use crate::store::{StoreError, Stores};

/// The most tasks the board holds; past it, a change of another task is read whole, as
/// before there was a board. Far above the live tasks of one process.
const MOST_TASKS: usize = 10_000;

/// The tasks the feed has shown, with their sessions (oldest first).
#[derive(Debug, Default)]
pub(crate) struct Board {
    tasks: HashMap<String, Shown>,
}

/// One task as last shown.
#[derive(Debug)]
struct Shown {
    task: Task,
    sessions: Vec<Session>,
}

impl Shown {
    /// Puts `session` in place of its previous view, or among the others in the order
    /// the stores list them (`created_at`, then id).
    fn put(&mut self, session: Session) {
        if let Some(old) = self.sessions.iter_mut().find(|s| s.id == session.id) {
            *old = session;
            return;
        }
        let at = self
            .sessions
            .partition_point(|s| (s.created_at, &s.id) <= (session.created_at, &session.id));
        self.sessions.insert(at, session);
    }

    fn view(&self) -> TaskView {
        TaskView::new(self.task.clone(), self.sessions.clone())
    }

    fn ended(&self) -> bool {
        self.sessions.iter().all(|s| s.state.is_terminal())
    }
}

impl Board {
    /// The views a committed change of session `session_id` (of task `task_id`) shows:
    /// the session as read now, and its task with its sessions.
    pub async fn session_changed(
        &mut self,
        stores: &Stores,
        session_id: &str,
        task_id: &str,
    ) -> Result<(Option<Session>, Option<TaskView>), StoreError> {
        if let Some(shown) = self.tasks.get_mut(task_id) {
            let Some(session) = stores.session_view(session_id).await? else {
                return Ok((None, Some(shown.view())));
            };
            shown.put(session.clone());
            let view = shown.view();
            if shown.ended() {
                self.tasks.remove(task_id);
            }
            return Ok((Some(session), Some(view)));
        }
        let Some(view) = stores.task_view(task_id).await? else {
            return Ok((stores.session_view(session_id).await?, None));
        };
        let session = view.sessions.iter().find(|s| s.id == session_id).cloned();
        let shown = Shown {
            task: view.task.clone(),
            sessions: view.sessions.clone(),
        };
        if !shown.ended() && self.tasks.len() < MOST_TASKS {
            self.tasks.insert(task_id.to_owned(), shown);
        }
        Ok((session, Some(view)))
    }

    /// Drops everything held: the next change of each task reads it whole.
    pub fn forget(&mut self) {
        self.tasks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionState;
    use crate::model::Timestamp;

    fn session(id: &str, at: u64, state: SessionState) -> Session {
        static BASE: std::sync::LazyLock<Timestamp> = std::sync::LazyLock::new(Timestamp::now);
        let at = BASE.plus(std::time::Duration::from_millis(at));
        Session {
            id: id.into(),
            task_id: "t".into(),
            agent: "mock".into(),
            agent_info: serde_json::Value::Null,
            state,
            pending_action: None,
            client_capabilities: serde_json::Value::Null,
            flags: serde_json::Value::Null,
            acp_session_id: None,
            error: None,
            created_at: at,
            updated_at: at,
        }
    }

    fn ids(shown: &Shown) -> Vec<&str> {
        shown.sessions.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn a_session_takes_its_place_in_the_stores_order() {
        let mut shown = Shown {
            task: Task::new("T", ""),
            sessions: vec![],
        };
        shown.put(session("b", 2, SessionState::Idle));
        shown.put(session("a", 1, SessionState::Idle));
        shown.put(session("d", 2, SessionState::Idle));
        shown.put(session("c", 2, SessionState::Idle));
        assert_eq!(ids(&shown), ["a", "b", "c", "d"]);
        shown.put(session("c", 2, SessionState::Running));
        assert_eq!(ids(&shown), ["a", "b", "c", "d"]);
        assert_eq!(shown.sessions[2].state, SessionState::Running);
        assert!(!shown.ended());
        for id in ["a", "b", "c", "d"] {
            shown.put(session(id, 0, SessionState::Completed));
        }
        assert!(shown.ended());
    }

    /// What a step of the board's proptest does.
    #[derive(Debug, Clone)]
    enum Step {
        /// A new session of task `task`.
        Start { task: usize },
        /// Session `session` (of those started, modulo) tries to become `state`.
        Become { session: usize, state: usize },
        /// The bus may have lost notes.
        Forget,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            1 => (0..3usize).prop_map(|task| Step::Start { task }),
            4 => (0..64usize, 0..SessionState::ALL.len())
                .prop_map(|(session, state)| Step::Become { session, state }),
            1 => Just(Step::Forget),
        ]
    }

    /// After each committed change, the board shows what reading the task and the session
    /// back shows, whatever the order of starts, state changes and forgetting.
    async fn shows_what_is_stored(steps: Vec<Step>) {
        use crate::model::Fence;
        let stores = crate::testing::memory_stores().await;
        let mut tasks = Vec::new();
        for n in 0..3 {
            let task = Task::new(&format!("T{n}"), "");
            stores.tasks.create_task(&task).await.expect("task");
            tasks.push(task.id);
        }
        let mut sessions: Vec<(String, String)> = Vec::new();
        let mut board = Board::default();
        for step in steps {
            let (session, task) = match step {
                Step::Start { task } => {
                    let task = tasks[task].clone();
                    let made = stores.sessions.insert_session(&task, "mock").await;
                    let id = made.expect("session").id;
                    sessions.push((id.clone(), task.clone()));
                    (id, task)
                }
                Step::Become { session, state } => {
                    let Some(picked) = (!sessions.is_empty()).then(|| session % sessions.len())
                    else {
                        continue;
                    };
                    let (id, task) = sessions[picked].clone();
                    let next = SessionState::ALL[state];
                    let applied = stores.sessions.transition(&id, next, None, Fence::NONE);
                    if !applied.await.expect("transition") {
                        continue;
                    }
                    (id, task)
                }
                Step::Forget => {
                    board.forget();
                    continue;
                }
            };
            let (shown, view) = board
                .session_changed(&stores, &session, &task)
                .await
                .expect("views");
            assert_eq!(shown, stores.session_view(&session).await.expect("read"));
            assert_eq!(view, stores.task_view(&task).await.expect("read"));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn the_board_shows_what_reading_back_shows(
            steps in proptest::collection::vec(step(), 1..40)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(shows_what_is_stored(steps));
        }
    }
}
