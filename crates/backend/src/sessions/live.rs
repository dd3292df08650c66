//! [`LiveSession`]: a session whose agentctl link is up (or re-attaching); [`LiveSessions`]:
//! every one live in this process, which is how the clarifications reach an agent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::agent_link::DynLink;
use crate::clarifications::{SessionAgents, SessionRef};
use crate::model::{Fence, Message};

/// A session live in this process. Shared by the registry, its consumer and requests;
/// what it keeps in memory is atomics and one slot taken under a short lock never held
/// across an await, so nothing waits on it for long.
pub struct LiveSession {
    /// Session id.
    pub id: String,
    /// Its task.
    pub task_id: String,
    /// Its task's title (for notifications).
    pub task_title: String,
    /// The configured agent id.
    pub agent: String,
    pub(crate) link: DynLink,
    /// The generation of the lease it is live here under: every write acting for it
    /// carries it (docs/architecture.md §12).
    pub fence: Fence,
    ended: AtomicBool,
    turn: AtomicU64,
    /// The prompt message of the turn being started, until it is announced.
    prompt: Mutex<Option<Message>>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl LiveSession {
    /// A live session over `link`, under the lease `fence` names.
    pub fn new(
        id: &str,
        task_id: &str,
        task_title: &str,
        agent: &str,
        link: DynLink,
        fence: Fence,
    ) -> Self {
        Self {
            id: id.to_owned(),
            task_id: task_id.to_owned(),
            task_title: task_title.to_owned(),
            agent: agent.to_owned(),
            link,
            fence,
            ended: AtomicBool::new(false),
            turn: AtomicU64::new(0),
            prompt: Mutex::new(None),
        }
    }

    /// The session as the clarifications name it.
    pub fn session_ref(&self) -> SessionRef {
        SessionRef {
            session_id: self.id.clone(),
            task_id: self.task_id.clone(),
            task_title: self.task_title.clone(),
            fence: self.fence,
        }
    }

    /// Whether it has ended (stopped, failed, shut down): its events are no longer applied.
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Marks it ended; true for the one caller that ended it.
    pub fn end(&self) -> bool {
        !self.ended.swap(true, Ordering::SeqCst)
    }

    /// A prompt started a new turn: the transcript's open text message closes.
    pub fn next_turn(&self) {
        self.turn.fetch_add(1, Ordering::SeqCst);
    }

    /// How many turns have been started here.
    pub fn turn(&self) -> u64 {
        self.turn.load(Ordering::SeqCst)
    }

    /// Keeps the stored prompt of the turn being started until [`Self::announce_prompt`].
    /// Its request announces it once agentctl took it; but the agent may already be
    /// answering, and the consumer announces it first when it is about to apply one of
    /// the turn's events, so operators see the prompt before anything the turn writes.
    pub fn hold_prompt(&self, message: Message) {
        *self.prompt_slot() = Some(message);
    }

    /// Hands the held prompt, if it is still held, to `announce`, under the slot's lock:
    /// whichever of the request and the consumer comes first announces it, once, and the
    /// other finds it announced.
    pub fn announce_prompt(&self, announce: impl FnOnce(Message)) {
        let mut slot = self.prompt_slot();
        if let Some(message) = slot.take() {
            announce(message);
        }
    }

    /// Drops the held prompt unannounced: agentctl never took it.
    pub fn forget_prompt(&self) {
        self.prompt_slot().take();
    }

    fn prompt_slot(&self) -> MutexGuard<'_, Option<Message>> {
        // A poisoned lock still holds a whole message or none.
        self.prompt.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every session live in this process, by id. Only inserted into and removed from, each
/// under a short lock that is never held across an await.
#[derive(Debug, Default)]
pub struct LiveSessions {
    map: Mutex<HashMap<String, Arc<LiveSession>>>,
}

impl LiveSessions {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        // A poisoned lock still holds a valid map: nothing is left half-changed in it.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many sessions are live here.
    pub fn count(&self) -> usize {
        self.map().len()
    }

    /// The live session `id`, if its link is up here.
    pub fn get(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.map().get(id).cloned()
    }

    /// Every session live here, at this moment.
    pub fn all(&self) -> Vec<Arc<LiveSession>> {
        self.map().values().cloned().collect()
    }

    /// Makes `live` live here.
    pub(crate) fn insert(&self, live: Arc<LiveSession>) {
        self.map().insert(live.id.clone(), live);
    }

    /// Session `id` is no longer live here.
    pub(crate) fn remove(&self, id: &str) {
        self.map().remove(id);
    }
}

impl SessionAgents for LiveSessions {
    fn link_of(&self, session_id: &str) -> Option<(DynLink, Fence)> {
        self.get(session_id)
            .map(|live| (Arc::clone(&live.link), live.fence))
    }
}
