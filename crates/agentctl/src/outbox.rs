//! The event outbox of one session: sequence numbers, the attached stream, and the
//! bounded buffer that keeps events while no stream is attached.
//!
//! Events belong to the session, not to a connection. Each event gets the next
//! per-session sequence number (the notification envelope's `id`) when it is emitted.
//! While a stream is attached, frames go straight to its writer; otherwise they are
//! buffered (oldest dropped past [`Outbox::capacity`], with a logged count) and flushed
//! in order to the next stream that attaches. Attaching a new stream closes the old one.

use std::collections::VecDeque;
use std::sync::Mutex;

use kandev_agent_stream::{AgentEvent, Envelope, action};
use tokio::sync::mpsc;

/// Default number of events kept while detached.
pub const DEFAULT_CAPACITY: usize = 10_000;

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
    buffer: VecDeque<String>,
    dropped: u64,
    sink: Option<StreamSink>,
}

/// The outbox of one session.
pub struct Outbox {
    session_id: String,
    capacity: usize,
    inner: Mutex<Inner>,
}

impl Outbox {
    /// An outbox that buffers at most `capacity` events while detached.
    pub fn new(session_id: impl Into<String>, capacity: usize) -> Self {
        Self {
            session_id: session_id.into(),
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                next_seq: 1,
                buffer: VecDeque::new(),
                dropped: 0,
                sink: None,
            }),
        }
    }

    /// How many events are kept while detached.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Numbers `event` and sends it to the attached stream, or buffers it.
    /// Returns its sequence number.
    pub fn emit(&self, event: &AgentEvent) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let frame = Envelope::notification(seq.to_string(), action::AGENT_EVENT, event).to_text();
        let frame = match &inner.sink {
            Some(sink) => match sink.tx.send(Outgoing::Frame(frame)) {
                Ok(()) => return seq,
                Err(mpsc::error::SendError(Outgoing::Frame(frame))) => {
                    // The writer is gone: the stream dropped. Keep the event for the next one.
                    inner.sink = None;
                    tracing::info!(session_id = %self.session_id, "agent stream gone; buffering events");
                    frame
                }
                Err(_) => return seq,
            },
            None => frame,
        };
        self.buffer(&mut inner, frame);
        seq
    }

    fn buffer(&self, inner: &mut Inner, frame: String) {
        inner.buffer.push_back(frame);
        if inner.buffer.len() > self.capacity {
            inner.buffer.pop_front();
            inner.dropped += 1;
            if inner.dropped.is_power_of_two() {
                tracing::warn!(
                    session_id = %self.session_id,
                    dropped = inner.dropped,
                    capacity = self.capacity,
                    "event buffer full while detached; dropping oldest events"
                );
            }
        }
    }

    /// Attaches `sink`: sends `first` (the attach/start response) if given, then every
    /// buffered event in order, then routes new events there. A previously attached stream
    /// is told to close. Returns how many buffered events were flushed.
    pub fn attach(&self, sink: StreamSink, first: Option<String>) -> usize {
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
        if let Some(first) = first {
            let _ = sink.tx.send(Outgoing::Frame(first));
        }
        let flushed = inner.buffer.len();
        while let Some(frame) = inner.buffer.pop_front() {
            if let Err(mpsc::error::SendError(Outgoing::Frame(frame))) =
                sink.tx.send(Outgoing::Frame(frame))
            {
                // The new stream died while we flushed: keep the rest for the next one.
                inner.buffer.push_front(frame);
                return flushed - inner.buffer.len();
            }
        }
        inner.sink = Some(sink);
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
            tracing::info!(session_id = %self.session_id, "agent stream detached; buffering events");
        }
    }

    /// Whether a stream is attached.
    pub fn is_attached(&self) -> bool {
        self.lock().sink.is_some()
    }

    /// How many events are buffered.
    pub fn buffered(&self) -> usize {
        self.lock().buffer.len()
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
        assert_eq!(outbox.attach(sink, Some("RESPONSE".to_owned())), 2);
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
        outbox.attach(sink, None);
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
        outbox.attach(first, None);
        drop(first_rx);
        outbox.emit(&event("lost-writer"));
        assert!(!outbox.is_attached());
        assert_eq!(outbox.buffered(), 1);

        let (second, mut second_rx) = sink(2);
        outbox.attach(second, None);
        let (third, mut third_rx) = sink(3);
        outbox.attach(third, None);
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
        outbox.attach(old, None);
        let (new, _new_rx) = sink(2);
        outbox.attach(new, None);
        outbox.detach(1);
        assert!(outbox.is_attached());
        outbox.detach(2);
        assert!(!outbox.is_attached());
    }
}
