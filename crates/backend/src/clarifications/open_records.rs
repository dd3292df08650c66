//! [`OpenRecords`]: the records this process opened and has not seen settled, so an
//! operator's verb finds the record it acts on without reading it back from the database
//! (docs/decisions/0013). Only a hint: a record is taken from here while its session is
//! live in this process, whose consumer alone writes it and evicts it here.
//!
//! It also lets an operator's verb wait for its outcome: the verb is forwarded to
//! agentctl, whose `elicitation_settled` the session's consumer applies; the verb's
//! handler waits (boundedly) for that application, so its answer says what the record
//! now holds without writing the record itself.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::model::{Clarification, ClarificationStatus};

/// How long an operator's verb waits for the consumer to apply agentctl's settlement
/// (a bound only: the record is written either way, when the event arrives).
const APPLY_WAIT: Duration = Duration::from_secs(5);

/// Open records by pending id, and the verbs waiting for a settlement to be applied.
/// Cheap operations under locks never held across an await.
#[derive(Debug, Default)]
pub struct OpenRecords {
    records: Mutex<HashMap<String, Clarification>>,
    /// Per pending id: the verbs waiting for the consumer to apply its settlement.
    waiting: Mutex<HashMap<String, Vec<oneshot::Sender<()>>>>,
}

/// A verb's wait for the consumer to apply the settlement of one record.
#[derive(Debug)]
pub struct Applied(oneshot::Receiver<()>);

impl Applied {
    /// Waits until the settlement is applied, at most [`APPLY_WAIT`]; whether it was.
    pub async fn wait(self) -> bool {
        matches!(tokio::time::timeout(APPLY_WAIT, self.0).await, Ok(Ok(())))
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

    /// Registers a wait for the settlement of `pending_id`, before the verb is
    /// forwarded (so the settlement cannot be applied before anyone waits for it).
    pub fn await_settlement(&self, pending_id: &str) -> Applied {
        let (applied, wait) = oneshot::channel();
        let mut waiting = lock(&self.waiting);
        let waiters = waiting.entry(pending_id.to_owned()).or_default();
        // Verbs that gave up (their caller went away, or the wait ran out) leave no trace.
        waiters.retain(|w| !w.is_closed());
        waiters.push(applied);
        Applied(wait)
    }

    /// The session's consumer applied agentctl's settlement of `pending_id`: every verb
    /// waiting for it may answer.
    pub fn settlement_applied(&self, pending_id: &str) {
        for waiter in lock(&self.waiting).remove(pending_id).unwrap_or_default() {
            let _ = waiter.send(());
        }
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
    async fn a_verb_waits_for_its_records_settlement_and_only_for_it() {
        let open = OpenRecords::default();
        let a = open.await_settlement("a");
        let b = open.await_settlement("b");
        open.settlement_applied("a");
        assert!(a.wait().await, "released once applied");
        // Another record's wait is still registered and not released.
        assert_eq!(lock(&open.waiting).get("b").map(Vec::len), Some(1));
        drop(b);
        let again = open.await_settlement("b");
        assert_eq!(
            lock(&open.waiting).get("b").map(Vec::len),
            Some(1),
            "a wait whose verb gave up is dropped"
        );
        open.settlement_applied("b");
        assert!(again.wait().await);
        assert!(lock(&open.waiting).is_empty());
    }
}
