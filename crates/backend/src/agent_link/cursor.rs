//! Which agent events a link has already handed to the session runtime, by their
//! sequence number (the notification envelope's `id`, numbered per session by agentctl).
//!
//! The link re-attaches with `after_seq` = the last number delivered, so agentctl
//! replays what a dying stream swallowed. agentctl may replay from further back than
//! that (an older `after_seq`, or a replay racing live frames), so an event whose number
//! is not above the last delivered one is a duplicate and is dropped here, never
//! reaching the runtime twice. A notification without a numeric id cannot be placed
//! and is always delivered.

/// The delivery cursor of one link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EventCursor {
    last: Option<u64>,
}

impl EventCursor {
    /// A cursor that counts everything up to `after_seq` as delivered already (a link
    /// resuming a session another process consumed).
    pub fn starting_after(after_seq: Option<u64>) -> Self {
        Self { last: after_seq }
    }

    /// Whether the event with envelope id `id` is new; if so it counts as delivered.
    pub fn admit(&mut self, id: &str) -> bool {
        let Ok(seq) = id.parse::<u64>() else {
            return true;
        };
        match self.last {
            Some(last) if seq <= last => false,
            _ => {
                self.last = Some(seq);
                true
            }
        }
    }

    /// The `after_seq` of the next attach: the last sequence number delivered.
    pub fn after_seq(&self) -> Option<u64> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_fresh_cursor_admits_anything_and_asks_for_no_replay() {
        let mut cursor = EventCursor::default();
        assert_eq!(cursor.after_seq(), None);
        assert!(cursor.admit("1"));
        assert_eq!(cursor.after_seq(), Some(1));
    }

    #[test]
    fn a_replay_from_further_back_delivers_only_the_missed_events() {
        let mut cursor = EventCursor::default();
        for seq in 1..=5 {
            assert!(cursor.admit(&seq.to_string()));
        }
        // agentctl replays 3..=7: 3, 4, 5 were delivered already.
        let delivered: Vec<u64> = (3..=7)
            .filter(|seq| cursor.admit(&seq.to_string()))
            .collect();
        assert_eq!(delivered, vec![6, 7]);
        assert_eq!(cursor.after_seq(), Some(7));
    }

    #[test]
    fn a_non_numeric_id_is_delivered_and_moves_nothing() {
        let mut cursor = EventCursor::default();
        assert!(cursor.admit("4"));
        assert!(cursor.admit("x"));
        assert!(cursor.admit(""));
        assert_eq!(cursor.after_seq(), Some(4));
        assert!(!cursor.admit("4"));
    }

    #[test]
    fn a_resumed_cursor_skips_what_the_previous_process_consumed() {
        let mut cursor = EventCursor::starting_after(Some(10));
        assert_eq!(cursor.after_seq(), Some(10));
        assert!(!cursor.admit("10"));
        assert!(!cursor.admit("2"));
        assert!(cursor.admit("11"));
        assert_eq!(EventCursor::starting_after(None), EventCursor::default());
    }

    proptest! {
        /// Whatever replays and repeats arrive, each number is delivered at most once,
        /// in increasing order, and `after_seq` is the largest one delivered.
        #[test]
        fn every_sequence_number_is_delivered_at_most_once_in_order(
            arrivals in proptest::collection::vec(0u64..50, 0..200)
        ) {
            let mut cursor = EventCursor::default();
            let delivered: Vec<u64> = arrivals
                .iter()
                .copied()
                .filter(|seq| cursor.admit(&seq.to_string()))
                .collect();
            prop_assert!(delivered.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(cursor.after_seq(), delivered.last().copied());
            // Every arrival above everything before it is delivered.
            let mut max: Option<u64> = None;
            for seq in arrivals {
                if max.is_none_or(|m| seq > m) {
                    prop_assert!(delivered.contains(&seq));
                    max = Some(seq);
                }
            }
        }
    }
}
