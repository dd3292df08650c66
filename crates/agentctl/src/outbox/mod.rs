//! The event outbox of one session: sequence numbers, the attached stream, and the
//! bounded history that keeps events for a stream that is not there (yet).
//!
//! Events belong to the session, not to a connection. Each event gets the next
//! per-session sequence number (the notification envelope's `id`) when it is emitted.
//! While a stream is attached, frames go straight to its writer; otherwise they are kept
//! (oldest dropped past the capacity, with a logged count) and flushed in order to the
//! next stream that attaches. Attaching a new stream closes the old one.
//!
//! Frames already handed to a stream are kept too, a short window of them
//! ([`REPLAY_WINDOW`]): a frame handed to a connection that was already dying never
//! arrives, so an attach that names the last sequence number it saw (`after_seq`) gets
//! everything after it again.

use std::collections::VecDeque;
use std::sync::Mutex;

use kandev_agent_stream::{AgentEvent, Envelope, action};
use tokio::sync::mpsc;

/// Default number of undelivered events kept while detached.
pub const DEFAULT_CAPACITY: usize = 10_000;
/// How many already-delivered events are kept for an `after_seq` replay.
pub const REPLAY_WINDOW: usize = 1_000;

/// What a connection's writer task is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// Send this JSON text frame.
    Frame(String),
    /// Close the WebSocket with this reason and stop.
    Close(String),
}

/// The writing end of one WebSocket connection.
#[derive(Debug, Clone)]
pub struct StreamSink {
    /// Identifies the connection, so a late detach cannot unhook a newer stream.
    pub connection_id: u64,
    /// The connection's writer queue.
    pub tx: mpsc::UnboundedSender<Outgoing>,
}

struct Inner {
    next_seq: u64,
    /// `(seq, frame)` in sequence order; the first `handed` were given to a stream.
    history: VecDeque<(u64, String)>,
    handed: usize,
    dropped: u64,
    sink: Option<StreamSink>,
}

impl Inner {
    fn trim(&mut self, capacity: usize, session_id: &str) {
        while self.handed > REPLAY_WINDOW {
            self.history.pop_front();
            self.handed -= 1;
        }
        while self.history.len() - self.handed > capacity {
            // Undelivered and over capacity: the oldest undelivered event is lost.
            let _ = self.history.remove(self.handed);
            self.dropped += 1;
            if self.dropped.is_power_of_two() {
                tracing::warn!(
                    session_id = %session_id,
                    dropped = self.dropped,
                    capacity,
                    "event buffer full while detached; dropping oldest events"
                );
            }
        }
    }
}

/// The outbox of one session.
pub struct Outbox {
    session_id: String,
    capacity: usize,
    inner: Mutex<Inner>,
}

impl Outbox {
    /// An outbox that keeps at most `capacity` undelivered events.
    pub fn new(session_id: impl Into<String>, capacity: usize) -> Self {
        Self {
            session_id: session_id.into(),
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                next_seq: 1,
                history: VecDeque::new(),
                handed: 0,
                dropped: 0,
                sink: None,
            }),
        }
    }

    /// How many undelivered events are kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Numbers `event` and sends it to the attached stream, or keeps it.
    /// Returns its sequence number.
    pub fn emit(&self, event: &AgentEvent) -> u64 {
        self.emit_if(event, || true).unwrap_or_default()
    }

    /// Runs `before` under the outbox lock and emits `event` only if it returned true.
    ///
    /// Registering state and announcing it in one critical section keeps the announcement
    /// ahead of any event that another task emits about that state (a pending elicitation
    /// settled by a concurrent cancel is never reported before it was requested).
    pub fn emit_if(&self, event: &AgentEvent, before: impl FnOnce() -> bool) -> Option<u64> {
        let mut inner = self.lock();
        before().then(|| self.push(&mut inner, event))
    }

    /// Runs `make` under the outbox lock and emits the event it returns, if any.
    ///
    /// Doing the work an event reports in the same critical section orders the event ahead
    /// of everything that work causes: an answer sent to the agent here is settled on the
    /// stream before the agent's reply to it (its text, its `turn_completed`) can be
    /// emitted by the task that reads the agent. `make` must not block.
    pub fn emit_made(&self, make: impl FnOnce() -> Option<AgentEvent>) -> Option<u64> {
        let mut inner = self.lock();
        let event = make()?;
        Some(self.push(&mut inner, &event))
    }

    /// Runs `f` under the outbox lock, so a frame `f` sends on the attached stream's writer
    /// is ordered against every event: after those emitted before, before those emitted
    /// after. `f` must not block.
    pub fn in_order<T>(&self, f: impl FnOnce() -> T) -> T {
        let _inner = self.lock();
        f()
    }

    /// Numbers `event` and hands it over or keeps it; the caller holds the lock.
    fn push(&self, inner: &mut Inner, event: &AgentEvent) -> u64 {
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let frame = Envelope::notification(seq.to_string(), action::AGENT_EVENT, event).to_text();
        inner.history.push_back((seq, frame.clone()));
        // While a sink is attached every older frame has been handed over, so this one
        // goes out in order.
        if let Some(sink) = &inner.sink {
            if sink.tx.send(Outgoing::Frame(frame)).is_ok() {
                inner.handed += 1;
            } else {
                // The writer is gone: the stream dropped. Keep the event for the next one.
                inner.sink = None;
                tracing::info!(session_id = %self.session_id, "agent stream gone; keeping events");
            }
        }
        inner.trim(self.capacity, &self.session_id);
        seq
    }

    /// Attaches `sink`: sends `first` (the attach/start response) if given, then every kept
    /// event after `after_seq` (default: every event not yet handed to a stream) in order,
    /// then routes new events there. A previously attached stream is told to close.
    /// Returns how many events were flushed.
    pub fn attach(&self, sink: StreamSink, first: Option<String>, after_seq: Option<u64>) -> usize {
        let mut inner = self.lock();
        if let Some(old) = inner.sink.take()
            && old.connection_id != sink.connection_id
        {
            let _ = old.tx.send(Outgoing::Close(
                "replaced by a newer agent stream".to_owned(),
            ));
        }
        if inner.dropped > 0 {
            tracing::warn!(
                session_id = %self.session_id,
                dropped = inner.dropped,
                "events were dropped while no agent stream was attached"
            );
            inner.dropped = 0;
        }
        let start = match after_seq {
            Some(after) => {
                if let Some((oldest, _)) = inner.history.front()
                    && *oldest > after + 1
                {
                    tracing::warn!(
                        session_id = %self.session_id,
                        after_seq = after,
                        oldest_kept = *oldest,
                        "events after after_seq are no longer kept; replaying what is"
                    );
                }
                inner.history.partition_point(|(seq, _)| *seq <= after)
            }
            None => inner.handed,
        };
        if let Some(first) = first {
            let _ = sink.tx.send(Outgoing::Frame(first));
        }
        let mut flushed = 0;
        for (_, frame) in inner.history.iter().skip(start) {
            if sink.tx.send(Outgoing::Frame(frame.clone())).is_err() {
                // The new stream died while we flushed: keep the rest for the next one.
                inner.handed = inner.handed.max(start + flushed);
                return flushed;
            }
            flushed += 1;
        }
        inner.handed = inner.history.len();
        inner.sink = Some(sink);
        inner.trim(self.capacity, &self.session_id);
        flushed
    }

    /// Detaches the stream `connection_id`, if it is still the attached one.
    pub fn detach(&self, connection_id: u64) {
        let mut inner = self.lock();
        if inner
            .sink
            .as_ref()
            .is_some_and(|sink| sink.connection_id == connection_id)
        {
            inner.sink = None;
            tracing::info!(session_id = %self.session_id, "agent stream detached; keeping events");
        }
    }

    /// Whether a stream is attached.
    pub fn is_attached(&self) -> bool {
        self.lock().sink.is_some()
    }

    /// How many events wait for a stream.
    pub fn buffered(&self) -> usize {
        let inner = self.lock();
        inner.history.len() - inner.handed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn event(line: &str) -> AgentEvent {
        AgentEvent::AgentStderr {
            line: line.to_owned(),
        }
    }

    fn sink(id: u64) -> (StreamSink, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            StreamSink {
                connection_id: id,
                tx,
            },
            rx,
        )
    }

    fn frames(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<Outgoing> {
        let mut out = Vec::new();
        while let Ok(item) = rx.try_recv() {
            out.push(item);
        }
        out
    }

    fn id_and_line(item: &Outgoing) -> (String, String) {
        let Outgoing::Frame(text) = item else {
            panic!("expected a frame, got {item:?}")
        };
        let value: Value = serde_json::from_str(text).expect("JSON");
        (
            value["id"].as_str().expect("id").to_owned(),
            value["payload"]["line"].as_str().unwrap_or("").to_owned(),
        )
    }

    #[test]
    fn detached_events_flush_in_order_after_the_first_frame() {
        let outbox = Outbox::new("s", 10);
        assert_eq!(outbox.emit(&event("a")), 1);
        assert_eq!(outbox.emit(&event("b")), 2);
        let (sink, mut rx) = sink(1);
        assert_eq!(outbox.attach(sink, Some("RESPONSE".to_owned()), None), 2);
        outbox.emit(&event("c"));
        let got = frames(&mut rx);
        assert_eq!(got[0], Outgoing::Frame("RESPONSE".to_owned()));
        let rest: Vec<_> = got[1..].iter().map(id_and_line).collect();
        assert_eq!(
            rest,
            [
                ("1".into(), "a".into()),
                ("2".into(), "b".into()),
                ("3".into(), "c".into())
            ]
        );
    }

    #[test]
    fn buffer_is_bounded_and_drops_oldest() {
        let outbox = Outbox::new("s", 3);
        for line in ["a", "b", "c", "d", "e"] {
            outbox.emit(&event(line));
        }
        assert_eq!(outbox.buffered(), 3);
        let (sink, mut rx) = sink(1);
        outbox.attach(sink, None, None);
        let lines: Vec<_> = frames(&mut rx)
            .iter()
            .map(id_and_line)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(lines, ["c", "d", "e"]);
    }

    #[test]
    fn a_dropped_stream_buffers_and_a_new_one_replaces_the_old() {
        let outbox = Outbox::new("s", 10);
        let (first, first_rx) = sink(1);
        outbox.attach(first, None, None);
        drop(first_rx);
        outbox.emit(&event("lost-writer"));
        assert!(!outbox.is_attached());
        assert_eq!(outbox.buffered(), 1);

        let (second, mut second_rx) = sink(2);
        outbox.attach(second, None, None);
        let (third, mut third_rx) = sink(3);
        outbox.attach(third, None, None);
        let second_got = frames(&mut second_rx);
        assert_eq!(
            second_got.last(),
            Some(&Outgoing::Close(
                "replaced by a newer agent stream".to_owned()
            ))
        );
        outbox.emit(&event("after"));
        let third_lines: Vec<_> = frames(&mut third_rx)
            .iter()
            .map(id_and_line)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(third_lines, ["after"]);
    }

    #[test]
    fn a_stale_detach_does_not_unhook_the_newer_stream() {
        let outbox = Outbox::new("s", 10);
        let (old, _old_rx) = sink(1);
        outbox.attach(old, None, None);
        let (new, _new_rx) = sink(2);
        outbox.attach(new, None, None);
        outbox.detach(1);
        assert!(outbox.is_attached());
        outbox.detach(2);
        assert!(!outbox.is_attached());
    }

    #[test]
    fn after_seq_replays_frames_already_handed_to_a_dying_stream() {
        let outbox = Outbox::new("s", 10);
        let (first, mut first_rx) = sink(1);
        outbox.attach(first, None, None);
        for line in ["a", "b", "c"] {
            outbox.emit(&event(line));
        }
        // The first stream "saw" only seq 1 before it died; b and c were in flight.
        assert_eq!(frames(&mut first_rx).len(), 3);
        outbox.detach(1);
        outbox.emit(&event("d"));
        let (second, mut second_rx) = sink(2);
        assert_eq!(outbox.attach(second, None, Some(1)), 3);
        let got: Vec<_> = frames(&mut second_rx).iter().map(id_and_line).collect();
        assert_eq!(
            got,
            [
                ("2".into(), "b".into()),
                ("3".into(), "c".into()),
                ("4".into(), "d".into())
            ]
        );
    }

    #[test]
    fn without_after_seq_only_undelivered_events_are_flushed() {
        let outbox = Outbox::new("s", 10);
        let (first, _first_rx) = sink(1);
        outbox.attach(first, None, None);
        outbox.emit(&event("seen"));
        outbox.detach(1);
        outbox.emit(&event("kept"));
        let (second, mut second_rx) = sink(2);
        outbox.attach(second, None, None);
        let lines: Vec<_> = frames(&mut second_rx)
            .iter()
            .map(id_and_line)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(lines, ["kept"]);
    }

    #[test]
    fn emit_if_runs_the_registration_first_and_can_skip() {
        let outbox = Outbox::new("s", 10);
        let mut ran = false;
        assert_eq!(
            outbox.emit_if(&event("no"), || {
                ran = true;
                false
            }),
            None
        );
        assert!(ran);
        assert_eq!(outbox.emit_if(&event("yes"), || true), Some(1));
    }

    /// From inside an outbox critical section: another thread emits `line`, and that
    /// emit must still be held back when this returns.
    fn emit_elsewhere_is_held<'scope>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        outbox: &'scope Outbox,
        line: &'static str,
    ) {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        scope.spawn(move || {
            outbox.emit(&event(line));
            let _ = done_tx.send(());
        });
        assert_eq!(
            done_rx.recv_timeout(std::time::Duration::from_millis(50)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout),
            "the emit of `{line}` got in during the critical section"
        );
    }

    #[test]
    fn an_event_emitted_while_made_waits_for_the_made_one() {
        let outbox = Outbox::new("s", 10);
        let (sink, mut rx) = sink(1);
        outbox.attach(sink, None, None);
        std::thread::scope(|scope| {
            outbox.emit_made(|| {
                // What the made event's work causes (the agent's reply) is emitted by
                // another thread; it must not get in while the work is being reported.
                emit_elsewhere_is_held(scope, &outbox, "reply");
                Some(event("settled"))
            });
        });
        let lines: Vec<_> = frames(&mut rx)
            .iter()
            .map(id_and_line)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(lines, ["settled", "reply"]);
        assert_eq!(outbox.emit_made(|| None), None);
    }

    #[test]
    fn a_frame_sent_in_order_sits_between_the_events_before_and_after_it() {
        // The re-attach's pending lists: the backend reconciles its records against a
        // list, so an event announcing something the list lacks must come after the list.
        let outbox = Outbox::new("s", 10);
        let (sink, mut rx) = sink(1);
        let writer = sink.tx.clone();
        outbox.attach(sink, None, None);
        outbox.emit(&event("before"));
        std::thread::scope(|scope| {
            outbox.in_order(|| {
                // An event emitted after the snapshot must not get in before its answer.
                emit_elsewhere_is_held(scope, &outbox, "after");
                let _ = writer.send(Outgoing::Frame("LIST".to_owned()));
            });
        });
        let got = frames(&mut rx);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(id_and_line(&got[0]).1, "before");
        assert_eq!(got[1], Outgoing::Frame("LIST".to_owned()));
        assert_eq!(id_and_line(&got[2]).1, "after");
    }
}
