//! The pending elicitations of one session and their exactly-once rule.
//!
//! A [`PendingElicitation`] owns the parked ACP responder. The only way to get it back out
//! of a [`PendingSet`] is to *remove* the entry ([`PendingSet::take`],
//! [`PendingSet::take_if`], [`PendingSet::drain`]), all under one lock, so whoever removed
//! it is the only party that may respond. Every other contender sees the id as gone.

use std::collections::HashMap;
use std::sync::Mutex;

use kandev_agent_stream::ElicitationRequested;
use kandev_elicitation::MappedElicitation;
use tokio::sync::oneshot;

/// One parked `elicitation/create` request.
#[derive(Debug)]
pub struct PendingElicitation<R> {
    /// What was announced to the backend (`pending_id`, questions, …).
    pub requested: ElicitationRequested,
    /// The mapping the answer is validated and built against.
    pub mapped: MappedElicitation,
    /// The ACP responder; answering through it is the settlement.
    pub responder: R,
    /// Dropped with the entry, which tells the entry's deadline watcher to stop.
    pub settled: Option<oneshot::Sender<()>>,
}

impl<R> PendingElicitation<R> {
    /// The pending id.
    pub fn pending_id(&self) -> &str {
        &self.requested.pending_id
    }
}

/// Why [`PendingSet::take_if`] did not take an entry.
#[derive(Debug, PartialEq, Eq)]
pub enum TakeRefused<E> {
    /// No entry with that id: unknown, or already settled.
    NotFound,
    /// The check refused; the entry stays in the set.
    Rejected(E),
}

struct Slot<R> {
    order: u64,
    entry: PendingElicitation<R>,
}

struct Inner<R> {
    next_order: u64,
    entries: HashMap<String, Slot<R>>,
}

/// The pending elicitations of one session, keyed by pending id.
pub struct PendingSet<R> {
    inner: Mutex<Inner<R>>,
}

impl<R> Default for PendingSet<R> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                next_order: 0,
                entries: HashMap::new(),
            }),
        }
    }
}

impl<R> PendingSet<R> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<R>> {
        // A panic while holding the lock cannot leave a half-removed entry (every
        // operation is a single map call), so a poisoned lock is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parks `entry`. Returns it back if its id is already present (UUIDs make that a bug).
    pub fn insert(&self, entry: PendingElicitation<R>) -> Result<(), Box<PendingElicitation<R>>> {
        let mut inner = self.lock();
        if inner.entries.contains_key(entry.pending_id()) {
            return Err(Box::new(entry));
        }
        let order = inner.next_order;
        inner.next_order += 1;
        inner
            .entries
            .insert(entry.pending_id().to_owned(), Slot { order, entry });
        Ok(())
    }

    /// Removes and returns the entry; the caller now owns the only right to respond.
    pub fn take(&self, pending_id: &str) -> Option<PendingElicitation<R>> {
        self.lock()
            .entries
            .remove(pending_id)
            .map(|slot| slot.entry)
    }

    /// Runs `check` on the entry under the lock; removes it only when `check` succeeds.
    /// A refused check leaves the entry in place, still answerable.
    pub fn take_if<T, E>(
        &self,
        pending_id: &str,
        check: impl FnOnce(&PendingElicitation<R>) -> Result<T, E>,
    ) -> Result<(PendingElicitation<R>, T), TakeRefused<E>> {
        let mut inner = self.lock();
        let slot = inner.entries.get(pending_id).ok_or(TakeRefused::NotFound)?;
        let value = check(&slot.entry).map_err(TakeRefused::Rejected)?;
        let slot = inner
            .entries
            .remove(pending_id)
            .ok_or(TakeRefused::NotFound)?;
        Ok((slot.entry, value))
    }

    /// Removes every entry, oldest first.
    pub fn drain(&self) -> Vec<PendingElicitation<R>> {
        let mut slots: Vec<Slot<R>> = self.lock().entries.drain().map(|(_, slot)| slot).collect();
        slots.sort_by_key(|slot| slot.order);
        slots.into_iter().map(|slot| slot.entry).collect()
    }

    /// What was announced for each entry still pending, oldest first.
    pub fn list(&self) -> Vec<ElicitationRequested> {
        let inner = self.lock();
        let mut slots: Vec<&Slot<R>> = inner.entries.values().collect();
        slots.sort_by_key(|slot| slot.order);
        slots
            .into_iter()
            .map(|slot| slot.entry.requested.clone())
            .collect()
    }

    /// Whether `pending_id` is still pending.
    pub fn contains(&self, pending_id: &str) -> bool {
        self.lock().entries.contains_key(pending_id)
    }

    /// How many are pending.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    fn entry(id: &str) -> PendingElicitation<u32> {
        PendingElicitation {
            requested: ElicitationRequested {
                pending_id: id.to_owned(),
                acp_session_id: "acp-1".to_owned(),
                tool_call_id: None,
                message: "m".to_owned(),
                questions: Vec::new(),
                expires_at: None,
                on_deadline: None,
            },
            mapped: MappedElicitation {
                session_id: "acp-1".to_owned(),
                tool_call_id: None,
                message: "m".to_owned(),
                questions: Vec::new(),
            },
            responder: 0,
            settled: None,
        }
    }

    #[test]
    fn take_removes_once() {
        let set = PendingSet::default();
        set.insert(entry("a")).expect("fresh id");
        assert!(set.take("a").is_some());
        assert!(set.take("a").is_none());
        assert!(set.take("never").is_none());
    }

    #[test]
    fn duplicate_insert_is_refused() {
        let set = PendingSet::default();
        set.insert(entry("a")).expect("fresh id");
        assert!(set.insert(entry("a")).is_err());
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn rejected_check_keeps_the_entry() {
        let set = PendingSet::default();
        set.insert(entry("a")).expect("fresh id");
        let refused = set.take_if("a", |_| Err::<(), _>("bad answer"));
        assert_eq!(
            refused.map(|_| ()),
            Err(TakeRefused::Rejected("bad answer"))
        );
        assert!(set.contains("a"));
        let (taken, value) = set.take_if("a", |_| Ok::<_, ()>(7)).expect("now accepted");
        assert_eq!((taken.pending_id(), value), ("a", 7));
        assert!(matches!(
            set.take_if("a", |_| Ok::<_, ()>(())),
            Err(TakeRefused::NotFound)
        ));
    }

    #[test]
    fn list_and_drain_are_oldest_first() {
        let set = PendingSet::default();
        for id in ["c", "a", "b"] {
            set.insert(entry(id)).expect("fresh id");
        }
        let listed: Vec<String> = set.list().into_iter().map(|r| r.pending_id).collect();
        assert_eq!(listed, ["c", "a", "b"]);
        let drained: Vec<String> = set
            .drain()
            .iter()
            .map(|e| e.pending_id().to_owned())
            .collect();
        assert_eq!(drained, ["c", "a", "b"]);
        assert!(set.is_empty());
    }

    #[test]
    fn concurrent_takers_get_exactly_one_winner() {
        let set = Arc::new(PendingSet::default());
        set.insert(entry("x")).expect("fresh id");
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let set = Arc::clone(&set);
                std::thread::spawn(move || {
                    if i % 2 == 0 {
                        set.take("x").is_some()
                    } else {
                        set.take_if("x", |_| Ok::<_, ()>(())).is_ok()
                    }
                })
            })
            .collect();
        let winners = handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .filter(|won| *won);
        assert_eq!(winners.count(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Take(u8),
        TakeIf(u8, bool),
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..6).prop_map(Op::Insert),
            (0u8..6).prop_map(Op::Take),
            (0u8..6, any::<bool>()).prop_map(|(id, ok)| Op::TakeIf(id, ok)),
            Just(Op::Drain),
        ]
    }

    proptest! {
        /// Whatever the sequence, an inserted entry comes out at most once, and an entry
        /// that never came out is still listed.
        #[test]
        fn every_entry_is_settled_at_most_once(ops in proptest::collection::vec(op(), 0..60)) {
            let set = PendingSet::default();
            let mut live: HashSet<String> = HashSet::new();
            for op in ops {
                match op {
                    Op::Insert(id) => {
                        let id = id.to_string();
                        let inserted = set.insert(entry(&id)).is_ok();
                        prop_assert_eq!(inserted, live.insert(id));
                    }
                    Op::Take(id) => {
                        let id = id.to_string();
                        prop_assert_eq!(set.take(&id).is_some(), live.remove(&id));
                    }
                    Op::TakeIf(id, ok) => {
                        let id = id.to_string();
                        let result = set.take_if(&id, |_| if ok { Ok(()) } else { Err(()) });
                        match result {
                            Ok(_) => prop_assert!(ok && live.remove(&id)),
                            Err(TakeRefused::Rejected(())) => prop_assert!(!ok && live.contains(&id)),
                            Err(TakeRefused::NotFound) => prop_assert!(!live.contains(&id)),
                        }
                    }
                    Op::Drain => {
                        let drained: HashSet<String> =
                            set.drain().iter().map(|e| e.pending_id().to_owned()).collect();
                        prop_assert_eq!(&drained, &live);
                        live.clear();
                    }
                }
                let listed: HashSet<String> = set.list().into_iter().map(|r| r.pending_id).collect();
                prop_assert_eq!(&listed, &live);
            }
        }
    }
}
