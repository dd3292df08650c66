//! [`Board`]: the tasks the feed has shown operators, each with its sessions as last
//! seen, so that a session change builds the session's and its task's views from what
//! the feed holds and the session as its write returned it, instead of reading the task
//! and all its sessions back (three queries, which every operator event queued behind).
//! A change that carries no written session reads that one session back.
//!
//! It is right because every change to a session's view reaches the one feed task: this
//! process's changes through the publisher, other replicas' through the change bus. They
//! may reach it out of commit order (two writers publish after their commits), so each
//! session keeps its latest view by `view_seq`, which every write that changes the view
//! raises in the database. When the bus may have lost notes, the board is forgotten and
//! read again. A task leaves the board when all its sessions have ended (an ended
//! session's view no longer changes), so it holds only live work.

use std::collections::HashMap;

use crate::model::{Session, SessionRecord, Task, TaskView};
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
    sessions: Vec<SessionRecord>,
}

impl Shown {
    /// Puts `session` in place of its previous view unless that one is later (a higher
    /// `view_seq`), or among the others in the order the stores list them (`created_at`,
    /// then id). The session's view as held after it.
    fn put(&mut self, session: SessionRecord) -> Session {
        if let Some(old) = self.sessions.iter_mut().find(|s| s.id == session.id) {
            if session.view_seq >= old.view_seq {
                *old = session;
            }
            return Session::from(old.clone());
        }
        let at = self
            .sessions
            .partition_point(|s| (s.created_at, &s.id) <= (session.created_at, &session.id));
        self.sessions.insert(at, session.clone());
        Session::from(session)
    }

    fn view(&self) -> TaskView {
        let sessions = self.sessions.iter().cloned().map(Session::from).collect();
        TaskView::new(self.task.clone(), sessions)
    }

    fn ended(&self) -> bool {
        self.sessions.iter().all(|s| s.state.is_terminal())
    }
}

impl Board {
    /// The views a committed change of session `session_id` (of task `task_id`) shows:
    /// the session, and its task with its sessions. `written` is the session as the
    /// change's write returned it; without it the session is read back.
    pub async fn session_changed(
        &mut self,
        stores: &Stores,
        session_id: &str,
        task_id: &str,
        written: Option<SessionRecord>,
    ) -> Result<(Option<Session>, Option<TaskView>), StoreError> {
        if let Some(shown) = self.tasks.get_mut(task_id) {
            let session = match written {
                Some(written) => Some(written),
                None => stores.sessions.session(session_id).await?,
            };
            let Some(session) = session else {
                return Ok((None, Some(shown.view())));
            };
            let session = shown.put(session);
            let view = shown.view();
            if shown.ended() {
                self.tasks.remove(task_id);
            }
            return Ok((Some(session), Some(view)));
        }
        // What is read now is at least as late as what any change published so far
        // carries (each is committed before it is published); `put` keeps the later.
        let Some(task) = stores.tasks.task(task_id).await? else {
            let session = match written {
                Some(written) => Some(written),
                None => stores.sessions.session(session_id).await?,
            };
            return Ok((session.map(Session::from), None));
        };
        let sessions = stores
            .sessions
            .sessions_of_tasks(std::slice::from_ref(&task.id))
            .await?;
        let mut shown = Shown { task, sessions };
        let session = match written {
            Some(written) => Some(shown.put(written)),
            None => shown
                .sessions
                .iter()
                .find(|s| s.id == session_id)
                .cloned()
                .map(Session::from),
        };
        let view = shown.view();
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

    fn session(id: &str, at: u64, state: SessionState, view_seq: u64) -> SessionRecord {
        static BASE: std::sync::LazyLock<Timestamp> = std::sync::LazyLock::new(Timestamp::now);
        let at = BASE.plus(std::time::Duration::from_millis(at));
        SessionRecord::sample(id, state, at, view_seq)
    }

    fn ids(shown: &Shown) -> Vec<&str> {
        shown.sessions.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn a_session_takes_its_place_in_the_stores_order_and_keeps_its_latest_view() {
        use SessionState::*;
        let mut shown = Shown {
            task: Task::new("T", ""),
            sessions: vec![],
        };
        shown.put(session("b", 2, Idle, 1));
        shown.put(session("a", 1, Idle, 1));
        shown.put(session("d", 2, Idle, 1));
        shown.put(session("c", 2, Idle, 1));
        assert_eq!(ids(&shown), ["a", "b", "c", "d"]);
        assert_eq!(shown.put(session("c", 2, Running, 3)).state, Running);
        assert_eq!(ids(&shown), ["a", "b", "c", "d"]);
        assert_eq!(shown.sessions[2].state, Running);
        // An earlier view arriving late changes nothing; the held one is shown.
        assert_eq!(shown.put(session("c", 2, Idle, 2)).state, Running);
        assert_eq!(shown.sessions[2].state, Running);
        assert!(!shown.ended());
        for id in ["a", "b", "c", "d"] {
            shown.put(session(id, 0, Completed, 9));
        }
        assert!(shown.ended());
    }

    /// What a step of the board's proptest does.
    #[derive(Debug, Clone)]
    enum Step {
        /// A new session of task `task`; its change carries the written row or not.
        Start { task: usize, carried: bool },
        /// Session `session` (of those started, modulo) tries to become `state`; its
        /// change carries the written row or not.
        Become {
            session: usize,
            state: usize,
            carried: bool,
        },
        /// A row written earlier (of all written, modulo) reaches the feed late.
        Late { row: usize },
        /// The bus may have lost notes.
        Forget,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            1 => (0..3usize, any::<bool>()).prop_map(|(task, carried)| Step::Start { task, carried }),
            4 => (0..64usize, 0..SessionState::ALL.len(), any::<bool>())
                .prop_map(|(session, state, carried)| Step::Become { session, state, carried }),
            2 => (0..64usize).prop_map(|row| Step::Late { row }),
            1 => Just(Step::Forget),
        ]
    }

    /// After each change, the board shows what reading the task and the session back
    /// shows, whatever the order of starts, state changes, forgetting and rows arriving
    /// late, and whether a change carries its row or is read back.
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
        // Every row as its write left it.
        let mut written: Vec<SessionRecord> = Vec::new();
        let mut board = Board::default();
        for step in steps {
            let (session, task, carried) = match step {
                Step::Start { task, carried } => {
                    let task = tasks[task].clone();
                    let made = stores.sessions.insert_session(&task, "mock").await;
                    let id = made.expect("session").id;
                    sessions.push((id.clone(), task.clone()));
                    (id, task, carried)
                }
                Step::Become {
                    session,
                    state,
                    carried,
                } => {
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
                    (id, task, carried)
                }
                Step::Late { row } => {
                    let Some(late) =
                        (!written.is_empty()).then(|| written[row % written.len()].clone())
                    else {
                        continue;
                    };
                    let (id, task) = (late.id.clone(), late.task_id.clone());
                    let (shown, view) = board
                        .session_changed(&stores, &id, &task, Some(late))
                        .await
                        .expect("views");
                    assert_eq!(shown, stores.session_view(&id).await.expect("read"));
                    assert_eq!(view, stores.task_view(&task).await.expect("read"));
                    continue;
                }
                Step::Forget => {
                    board.forget();
                    continue;
                }
            };
            let row = stores.sessions.session(&session).await.expect("read");
            let row = row.expect("row");
            written.push(row.clone());
            let (shown, view) = board
                .session_changed(&stores, &session, &task, carried.then_some(row))
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
