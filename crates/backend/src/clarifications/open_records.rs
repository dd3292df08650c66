//! [`OpenRecords`]: the records this process opened and has not seen settled, so an
//! operator's verb finds the record it acts on without reading it back from the database
//! (docs/decisions/0013). Only a hint: a record is taken from here while its session is
//! live in this process — which then makes every settlement of it and evicts it — and the
//! settlement's conditional update stays the arbiter of what happens to it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::model::clarification::Standing;
use crate::model::{Clarification, ClarificationStatus};

/// How long agentctl's settlement of a record waits for an operator's answer to it that
/// is in flight here (a bound only: the conditional updates decide either way).
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Open records by pending id, and the operator answers in flight. Cheap operations
/// under locks never held across an await.
#[derive(Debug, Default)]
pub struct OpenRecords {
    records: Mutex<HashMap<String, Clarification>>,
    /// Per pending id: closed when the answer's delivery and settlement are done, with the
    /// standing the settlement committed, when it made one.
    answering: Mutex<HashMap<String, watch::Receiver<Option<Standing>>>>,
}

/// An operator's answer in flight for one record; dropping it says it is done.
#[derive(Debug)]
pub struct Answering<'a> {
    open: &'a OpenRecords,
    pending_id: String,
    done: watch::Sender<Option<Standing>>,
}

impl Answering<'_> {
    /// The answer's settlement committed `record`.
    pub fn settled(&self, record: &Clarification) {
        self.done.send_replace(Some(Standing::of(record)));
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        lock(&self.open.answering).remove(&self.pending_id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain inserts and removals: a poisoned lock still holds a valid map.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OpenRecords {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Clarification>> {
        lock(&self.records)
    }

    /// Marks an operator's answer to `pending_id` in flight until the guard drops: from
    /// before it is forwarded until its settlement is committed (or it failed).
    pub fn answering(&self, pending_id: &str) -> Answering<'_> {
        let (done, waiting) = watch::channel(None);
        lock(&self.answering).insert(pending_id.to_owned(), waiting);
        Answering {
            open: self,
            pending_id: pending_id.to_owned(),
            done,
        }
    }

    /// Whether an operator's answer to `pending_id` is in flight here.
    pub fn is_answering(&self, pending_id: &str) -> bool {
        lock(&self.answering).contains_key(pending_id)
    }

    /// Waits (boundedly) until no operator answer to `pending_id` is in flight here, and
    /// returns the standing its settlement committed, if it made one: agentctl's own
    /// settlement, which follows an accepted answer at once, is then decided against it
    /// (most often: nothing to write) instead of queueing a no-op write behind the
    /// answer's on the agent's path.
    pub async fn answer_settled(&self, pending_id: &str) -> Option<Standing> {
        let mut waiting = lock(&self.answering).get(pending_id).cloned()?;
        // Returns once the guard (the sender) is gone.
        let _ = tokio::time::timeout(ANSWER_WAIT, async {
            while waiting.changed().await.is_ok() {}
        })
        .await;
        *waiting.borrow()
    }

    /// Remembers `record`, just opened here.
    pub fn opened(&self, record: &Clarification) {
        if record.status == ClarificationStatus::Pending {
            self.map().insert(record.pending_id.clone(), record.clone());
        }
    }

    /// Forgets `record` once it left `pending`.
    pub fn changed(&self, record: &Clarification) {
        if record.status != ClarificationStatus::Pending {
            self.map().remove(&record.pending_id);
        }
    }

    /// The open record `pending_id`, when it was opened here.
    pub fn get(&self, pending_id: &str) -> Option<Clarification> {
        self.map().get(pending_id).cloned()
    }

    /// Forgets every record of session `session_id` (it is no longer live here).
    pub fn forget_session(&self, session_id: &str) {
        self.map()
            .retain(|_, record| record.session_id != session_id);
    }

    /// How many records are remembered.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Source, Timestamp};

    fn record(id: &str, session: &str) -> Clarification {
        crate::model::NewClarification {
            pending_id: id.into(),
            source: Source::Elicitation,
            task_id: "t".into(),
            session_id: session.into(),
            tool_call_id: None,
            message: "Pick".into(),
            questions: vec![],
            expires_at: None,
            on_deadline: None,
        }
        .pending_at("m", Timestamp::now())
    }

    #[test]
    fn a_record_is_remembered_until_it_is_settled_or_its_session_leaves() {
        let open = OpenRecords::default();
        open.opened(&record("a", "s1"));
        open.opened(&record("b", "s1"));
        open.opened(&record("c", "s2"));
        assert_eq!(open.get("a").map(|r| r.session_id), Some("s1".into()));

        let mut answered = record("a", "s1");
        answered.answered_by = Some("alice".into());
        open.changed(&answered);
        assert!(
            open.get("a").is_some(),
            "still pending: an answer noted only"
        );
        answered.status = ClarificationStatus::Answered;
        open.changed(&answered);
        assert_eq!(open.get("a"), None);

        open.forget_session("s1");
        assert_eq!(open.get("b"), None);
        assert!(open.get("c").is_some());
        assert_eq!(open.len(), 1);

        let mut settled = record("d", "s2");
        settled.status = ClarificationStatus::Expired;
        open.opened(&settled);
        assert_eq!(open.get("d"), None, "a settled record is never remembered");
    }

    #[tokio::test]
    async fn agentctls_settlement_waits_for_an_answer_in_flight_and_only_for_it() {
        let open = std::sync::Arc::new(OpenRecords::default());
        // Nothing in flight: no wait at all.
        let none = tokio::time::timeout(Duration::from_secs(1), open.answer_settled("a"))
            .await
            .expect("no wait");
        assert_eq!(none, None);
        let answering = open.answering("a");
        let waiter = tokio::spawn({
            let open = std::sync::Arc::clone(&open);
            async move { open.answer_settled("a").await }
        });
        tokio::time::timeout(Duration::from_secs(1), open.answer_settled("b"))
            .await
            .expect("another record does not wait");
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "waits while the answer is in flight");
        assert!(open.is_answering("a") && !open.is_answering("b"));
        let mut settled = record("a", "s1");
        settled.status = ClarificationStatus::Answered;
        answering.settled(&settled);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "waits until the guard is gone");
        drop(answering);
        let standing = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("released when the answer is done")
            .expect("task");
        assert_eq!(standing, Some(Standing::of(&settled)));
        assert!(lock(&open.answering).is_empty());
    }
}
