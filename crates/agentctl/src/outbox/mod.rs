//! The event outbox of one session: sequence numbers, the attached stream, and the
//! bounded history that keeps events for a stream that is not there (yet).
//!
//! Events belong to the session, not to a connection. Each event gets the next
//! per-session sequence number (the notification envelope's `id`) when it is emitted.
//! While a stream is attached, frames go straight to its writer; otherwise they are kept
//! (oldest dropped past the capacity, with a logged count) and flushed in order to the
//! next stream that attaches. Attaching a new stream closes the old one.
//!
//! Plain text chunks are held for a moment and go out as one event
//! ([`crate::streamed_text`]); every other event first sends the text held before it.
//!
//! Frames already handed to a stream are kept too, a short window of them
//! ([`REPLAY_WINDOW`]): a frame handed to a connection that was already dying never
//! arrives, so an attach that names the last sequence number it saw (`after_seq`) gets
//! everything after it again.

use std::collections::VecDeque;
use std::sync::Mutex;

use kandev_agent_stream::{AgentEvent, Envelope, action};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::streamed_text::{HeldText, TextChunk};

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
    /// Text chunks not yet emitted, and how many runs of them there have been.
    held: Option<HeldText>,
    runs: u64,
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
                held: None,
                runs: 0,
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

    /// The lock, with any held text emitted: whatever the caller emits or sends next
    /// comes after it.
    fn lock_flushed(&self) -> std::sync::MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        self.flush_held(&mut inner);
        inner
    }

    /// Numbers `event` and sends it to the attached stream, or keeps it.
    /// Returns its sequence number.
    pub fn emit(&self, event: &AgentEvent) -> u64 {
        self.emit_if(event, || true).unwrap_or_default()
    }

    /// Emits the agent's `session/update` `params`: a plain text chunk is held to go out
    /// with the chunks right behind it; anything else goes out now, after the text held.
    /// When this chunk starts a run, returns the run's number: the caller flushes it
    /// ([`Self::flush_run`]) after [`crate::streamed_text::WINDOW`].
    pub fn emit_update(&self, params: Value) -> Option<u64> {
        let mut inner = self.lock();
        let chunk = match TextChunk::from_params(params) {
            Ok(chunk) => chunk,
            Err(params) => {
                self.flush_held(&mut inner);
                self.push(&mut inner, &AgentEvent::SessionUpdate { update: params });
                return None;
            }
        };
        let started = if let Some(held) = &mut inner.held
            && held.joins(&chunk)
        {
            held.join(&chunk);
            None
        } else {
            self.flush_held(&mut inner);
            inner.runs += 1;
            inner.held = Some(HeldText::new(chunk, inner.runs));
            Some(inner.runs)
        };
        if inner.held.as_ref().is_some_and(HeldText::is_full) {
            self.flush_held(&mut inner);
            return None;
        }
        started
    }

    /// Emits the text held, if it is still the run `run` (a later run keeps its own time).
    pub fn flush_run(&self, run: u64) {
        let mut inner = self.lock();
        if inner.held.as_ref().is_some_and(|held| held.run == run) {
            self.flush_held(&mut inner);
        }
    }

    /// Emits the text held as one `session_update`; the caller holds the lock.
    fn flush_held(&self, inner: &mut Inner) {
        if let Some(held) = inner.held.take() {
            let update = held.into_params();
            self.push(inner, &AgentEvent::SessionUpdate { update });
        }
    }

    /// Runs `before` under the outbox lock and emits `event` only if it returned true.
    ///
    /// Registering state and announcing it in one critical section keeps the announcement
    /// ahead of any event that another task emits about that state (a pending elicitation
    /// settled by a concurrent cancel is never reported before it was requested).
    pub fn emit_if(&self, event: &AgentEvent, before: impl FnOnce() -> bool) -> Option<u64> {
        let mut inner = self.lock_flushed();
        before().then(|| self.push(&mut inner, event))
    }

    /// Runs `make` under the outbox lock and emits the event it returns, if any.
    ///
    /// Doing the work an event reports in the same critical section orders the event ahead
    /// of everything that work causes: an answer sent to the agent here is settled on the
    /// stream before the agent's reply to it (its text, its `turn_completed`) can be
    /// emitted by the task that reads the agent. `make` must not block.
    pub fn emit_made(&self, make: impl FnOnce() -> Option<AgentEvent>) -> Option<u64> {
        let mut inner = self.lock_flushed();
        let event = make()?;
        Some(self.push(&mut inner, &event))
    }

    /// Runs `f` under the outbox lock, so a frame `f` sends on the attached stream's writer
    /// is ordered against every event: after those emitted before, before those emitted
    /// after. `f` must not block.
    pub fn in_order<T>(&self, f: impl FnOnce() -> T) -> T {
        let _inner = self.lock_flushed();
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
        let mut inner = self.lock_flushed();
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
mod tests;
