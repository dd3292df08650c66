//! The outbox's numbering, buffering, replay and ordering; and held text.

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

fn chunk(text: &str) -> Value {
    serde_json::json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text}}})
}

/// Each frame as its sequence number and what it carries: a session update's text (or
/// its `sessionUpdate` when it has none), an stderr line as it is.
fn seq_and_content(item: &Outgoing) -> (u64, String) {
    let Outgoing::Frame(text) = item else {
        panic!("expected a frame, got {item:?}")
    };
    let value: Value = serde_json::from_str(text).expect("JSON");
    let payload = &value["payload"];
    let content = match payload["event"].as_str() {
        Some("session_update") => {
            let update = &payload["update"]["update"];
            update["content"]["text"]
                .as_str()
                .or(update["sessionUpdate"].as_str())
                .unwrap_or_default()
        }
        _ => payload["line"].as_str().unwrap_or_default(),
    };
    let seq = value["id"].as_str().and_then(|id| id.parse().ok());
    (seq.expect("numbered"), content.to_owned())
}

fn attached() -> (Outbox, mpsc::UnboundedReceiver<Outgoing>) {
    let outbox = Outbox::new("s", 10);
    let (sink, rx) = sink(1);
    outbox.attach(sink, None, None);
    (outbox, rx)
}

fn sent(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<(u64, String)> {
    frames(rx).iter().map(seq_and_content).collect()
}

#[test]
fn held_chunks_go_out_as_one_event_right_before_the_next_other_event() {
    let (outbox, mut rx) = attached();
    assert_eq!(outbox.emit_update(chunk("Hel")), Some(1), "a run starts");
    assert_eq!(outbox.emit_update(chunk("lo")), None, "and is joined");
    assert_eq!(sent(&mut rx), [], "held, not sent");
    outbox.emit(&event("question"));
    assert_eq!(
        sent(&mut rx),
        [(1, "Hello".to_owned()), (2, "question".to_owned())]
    );
}

#[test]
fn an_update_that_is_not_plain_text_sends_the_text_first_and_then_itself() {
    let (outbox, mut rx) = attached();
    outbox.emit_update(chunk("Reading"));
    let tool = serde_json::json!({"sessionId": "acp-1", "update": {"sessionUpdate": "tool_call",
        "toolCallId": "t1", "title": "Read"}});
    assert_eq!(outbox.emit_update(tool), None);
    assert_eq!(
        sent(&mut rx),
        [(1, "Reading".to_owned()), (2, "tool_call".to_owned())]
    );
}

#[test]
fn a_run_goes_out_when_its_timer_fires_and_a_stale_timer_leaves_a_later_run_alone() {
    let (outbox, mut rx) = attached();
    assert_eq!(outbox.emit_update(chunk("one")), Some(1));
    outbox.flush_run(1);
    assert_eq!(sent(&mut rx), [(1, "one".to_owned())]);
    assert_eq!(outbox.emit_update(chunk("two")), Some(2));
    outbox.flush_run(1);
    assert_eq!(
        sent(&mut rx),
        [],
        "run 1's timer is late; run 2 keeps its time"
    );
    outbox.flush_run(2);
    assert_eq!(sent(&mut rx), [(2, "two".to_owned())]);
}

#[test]
fn a_full_run_goes_out_at_once() {
    let (outbox, mut rx) = attached();
    let max = crate::streamed_text::MAX_BYTES;
    let half = "x".repeat(max / 2);
    assert_eq!(outbox.emit_update(chunk(&half)), Some(1));
    assert_eq!(outbox.emit_update(chunk(&half)), None);
    assert_eq!(sent(&mut rx), [(1, "x".repeat(max))]);
    // A chunk too big to join starts a run of its own; one of MAX_BYTES alone is full.
    assert_eq!(outbox.emit_update(chunk("y")), Some(2));
    assert_eq!(outbox.emit_update(chunk(&"z".repeat(max))), None);
    assert_eq!(sent(&mut rx), [(2, "y".to_owned()), (3, "z".repeat(max))]);
}

#[test]
fn a_stream_that_attaches_gets_the_text_held_before_its_first_frame_is_followed() {
    let outbox = Outbox::new("s", 10);
    outbox.emit_update(chunk("while detached"));
    let (sink, mut rx) = sink(1);
    assert_eq!(outbox.attach(sink, Some("RESPONSE".to_owned()), None), 1);
    let got = frames(&mut rx);
    assert_eq!(got[0], Outgoing::Frame("RESPONSE".to_owned()));
    assert_eq!(seq_and_content(&got[1]), (1, "while detached".to_owned()));
}
