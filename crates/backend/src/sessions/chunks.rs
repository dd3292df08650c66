//! Coalescing a burst of agent text: when the consumer takes a text chunk, the chunks of
//! the same kind already queued right behind it are merged into one append (one write,
//! one published change). Nothing waits for more chunks to arrive — what is queued now
//! is what is merged — so merging adds no latency, and a batch is bounded by
//! [`MAX_BYTES`] of text and [`MAX_EVENTS`] events.

use kandev_agent_stream::AgentEvent;

use crate::agent_link::LinkEvent;
use crate::model::MessageKind;
use crate::sessions::transcript::text_chunk;

/// The most text one batch merges (unless its first chunk alone is longer).
pub const MAX_BYTES: usize = 4096;
/// The most chunk events one batch merges.
pub const MAX_EVENTS: usize = 256;

/// What the consumer applies next: one event as it came, or a run of text chunks.
#[derive(Debug)]
pub enum Step {
    /// An event that is not a text chunk.
    Event(LinkEvent),
    /// `events` consecutive text chunks of `kind`, their text concatenated.
    Text {
        /// Message or thought.
        kind: MessageKind,
        /// The chunks' text, in order.
        text: String,
        /// How many chunk events it stands for.
        events: usize,
    },
}

/// The kind and text of a link event that is an agent text chunk.
fn chunk(event: &LinkEvent) -> Option<(MessageKind, &str)> {
    match event {
        LinkEvent::Agent(AgentEvent::SessionUpdate { update }) => text_chunk(update),
        _ => None,
    }
}

/// The step that starts with `first`: if it is a text chunk, the chunks of its kind that
/// `queued` yields right behind it are merged in, up to the bounds. `queued` must not
/// wait (a `try_recv`). The first event taken that does not join — another kind, not a
/// chunk, or past a bound — is returned too: the caller applies it next, so nothing is
/// lost or reordered.
pub fn next_step(
    first: LinkEvent,
    mut queued: impl FnMut() -> Option<LinkEvent>,
) -> (Step, Option<LinkEvent>) {
    let Some((kind, text)) = chunk(&first) else {
        return (Step::Event(first), None);
    };
    let mut text = text.to_owned();
    let mut events = 1;
    let mut held = None;
    while events < MAX_EVENTS {
        let Some(next) = queued() else {
            break;
        };
        match chunk(&next) {
            Some((k, more)) if k == kind && text.len() + more.len() <= MAX_BYTES => {
                text.push_str(more);
                events += 1;
            }
            _ => {
                held = Some(next);
                break;
            }
        }
    }
    (Step::Text { kind, text, events }, held)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use serde_json::json;

    use super::*;

    fn chunk_of(kind: &str, text: &str) -> LinkEvent {
        LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": kind,
                "content": {"type": "text", "text": text}}}),
        })
    }

    fn message(text: &str) -> LinkEvent {
        chunk_of("agent_message_chunk", text)
    }

    fn name(event: &LinkEvent) -> &'static str {
        match event {
            LinkEvent::Agent(AgentEvent::SessionUpdate { .. }) => "update",
            LinkEvent::Disconnected => "disconnected",
            LinkEvent::Lost { .. } => "lost",
            _ => "other",
        }
    }

    /// Steps over `events` the way the consumer takes them; each as `(kind, text,
    /// events)`, a non-chunk event by its name.
    fn steps(events: Vec<LinkEvent>) -> Vec<(String, String, usize)> {
        let mut queue: VecDeque<LinkEvent> = events.into();
        let mut held = None;
        let mut out = Vec::new();
        while let Some(first) = held.take().or_else(|| queue.pop_front()) {
            let (step, next) = next_step(first, || queue.pop_front());
            held = next;
            out.push(match step {
                Step::Text { kind, text, events } => (kind.as_str().to_owned(), text, events),
                Step::Event(e) => (name(&e).to_owned(), String::new(), 1),
            });
        }
        out
    }

    #[test]
    fn queued_chunks_of_one_kind_merge_into_one_step() {
        let got = steps(vec![message("Hel"), message("lo"), message(", you")]);
        assert_eq!(got, [("message".into(), "Hello, you".into(), 3)]);
    }

    #[test]
    fn a_different_kind_or_a_non_text_chunk_starts_a_new_step_in_order() {
        let image = LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "image", "data": ""}}}),
        });
        let got = steps(vec![
            message("a"),
            message("b"),
            chunk_of("agent_thought_chunk", "t1"),
            chunk_of("agent_thought_chunk", "t2"),
            message("c"),
            image,
            message("d"),
        ]);
        let kinds: Vec<(&str, &str, usize)> = got
            .iter()
            .map(|(k, t, n)| (k.as_str(), t.as_str(), *n))
            .collect();
        assert_eq!(
            kinds,
            [
                ("message", "ab", 2),
                ("thought", "t1t2", 2),
                ("message", "c", 1),
                ("update", "", 1),
                ("message", "d", 1),
            ]
        );
    }

    #[test]
    fn a_non_chunk_event_taken_while_draining_is_held_and_comes_next() {
        let mut queue: VecDeque<LinkEvent> =
            vec![message("b"), LinkEvent::Disconnected, message("c")].into();
        let (step, held) = next_step(message("a"), || queue.pop_front());
        assert!(matches!(step, Step::Text { ref text, events: 2, .. } if text == "ab"));
        assert!(matches!(held, Some(LinkEvent::Disconnected)), "{held:?}");
        // Nothing was taken past the held event.
        assert_eq!(queue.len(), 1);
        let got = steps(vec![
            message("a"),
            LinkEvent::Disconnected,
            message("b"),
            LinkEvent::Lost {
                reason: "gone".into(),
            },
        ]);
        let names: Vec<&str> = got.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(names, ["message", "disconnected", "message", "lost"]);
    }

    #[test]
    fn a_step_stops_at_the_byte_bound_and_at_the_event_bound() {
        // 100 chunks of 100 bytes: 40 fit in 4096 bytes, the 41st starts the next step.
        let hundred = "x".repeat(100);
        let got = steps((0..100).map(|_| message(&hundred)).collect());
        let sizes: Vec<(usize, usize)> = got.iter().map(|(_, t, n)| (t.len(), *n)).collect();
        assert_eq!(sizes, [(4000, 40), (4000, 40), (2000, 20)]);
        // A first chunk longer than the bound goes alone; nothing joins it.
        let long = "y".repeat(MAX_BYTES + 1);
        let got = steps(vec![message(&long), message("z")]);
        let sizes: Vec<(usize, usize)> = got.iter().map(|(_, t, n)| (t.len(), *n)).collect();
        assert_eq!(sizes, [(MAX_BYTES + 1, 1), (1, 1)]);
        // 600 one-byte chunks: the event bound cuts first.
        let got = steps((0..600).map(|_| message(".")).collect());
        let counts: Vec<usize> = got.iter().map(|(_, _, n)| *n).collect();
        assert_eq!(counts, [MAX_EVENTS, MAX_EVENTS, 600 - 2 * MAX_EVENTS]);
        let total: String = got.iter().map(|(_, t, _)| t.as_str()).collect();
        assert_eq!(total, ".".repeat(600));
    }

    #[test]
    fn a_lone_chunk_or_a_non_chunk_event_takes_nothing_more() {
        let mut taken = 0;
        let (step, held) = next_step(message("a"), || {
            taken += 1;
            None
        });
        assert!(matches!(step, Step::Text { events: 1, .. }));
        assert!(held.is_none());
        assert_eq!(taken, 1, "asked the queue once, found it empty");
        let (step, held) = next_step(LinkEvent::Disconnected, || {
            panic!("a non-chunk event drains nothing")
        });
        assert!(matches!(step, Step::Event(LinkEvent::Disconnected)));
        assert!(held.is_none());
    }
}
