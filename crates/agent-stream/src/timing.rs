//! Per-hop timing of one elicitation's round trip, for `just bench`'s breakdown.
//!
//! Each process on the path (agentctl, kandev) logs one `debug` event on target
//! [`TARGET`] when an elicitation passes a [`hop`]: the hop's name as the message, the
//! `pending_id`, and `t_us`, the wall clock in microseconds since the epoch (one machine,
//! so comparable across its processes). Off — the default — a hop costs the filter's
//! cached level check and no clock read. `RUST_LOG=…,kandev::timing=debug` turns it on;
//! [`parse`] reads one such line back.
//!
//! The events carry ids and instants only, never question text or answers.

use std::time::{SystemTime, UNIX_EPOCH};

/// The `tracing` target of every hop event.
pub const TARGET: &str = "kandev::timing";

/// The hops, in the order one round trip passes them.
pub mod hop {
    /// agentctl's ACP client got the agent's `elicitation/create` (parsed by the SDK).
    pub const AGENTCTL_RECEIVED: &str = "agentctl.received";
    /// agentctl mapped it, parked it and handed `elicitation_requested` to the stream.
    pub const AGENTCTL_EMITTED: &str = "agentctl.emitted";
    /// kandev's link read and decoded the event.
    pub const BACKEND_RECEIVED: &str = "backend.received";
    /// kandev's session consumer took the event (after the session's earlier events).
    pub const BACKEND_APPLYING: &str = "backend.applying";
    /// kandev committed the record and its message.
    pub const BACKEND_STORED: &str = "backend.stored";
    /// kandev's feed broadcast `clarification.created` to the operator sockets.
    pub const BACKEND_PUSHED: &str = "backend.pushed";
    /// kandev's respond handler started (after the HTTP request was read and decoded).
    pub const BACKEND_RESPOND: &str = "backend.respond";
    /// kandev read the record and sends `agent.elicitations.respond` to agentctl.
    pub const BACKEND_FORWARD: &str = "backend.forward";
    /// agentctl got `agent.elicitations.respond`.
    pub const AGENTCTL_RESPOND: &str = "agentctl.respond";
    /// agentctl validated the answer and handed the ACP response to the agent's stdin.
    pub const AGENTCTL_REPLIED: &str = "agentctl.replied";
    /// kandev got agentctl's success reply.
    pub const BACKEND_FORWARDED: &str = "backend.forwarded";
    /// kandev committed the settlement; the HTTP response goes out next.
    pub const BACKEND_SETTLED: &str = "backend.settled";
}

/// Whether hop events are on in this process.
#[inline]
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// Microseconds since the epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

/// The current instant when hop events are on (for a hop whose pending id comes later).
#[inline]
pub fn stamp() -> Option<u64> {
    enabled().then(now_us)
}

/// Logs `pending_id` passing `name` now (when on).
#[inline]
pub fn hop(name: &'static str, pending_id: &str) {
    if enabled() {
        record(name, pending_id, now_us());
    }
}

/// Logs `pending_id` having passed `name` at `at`, a [`stamp`] (nothing when it is `None`).
#[inline]
pub fn hop_at(name: &'static str, pending_id: &str, at: Option<u64>) {
    if let Some(t_us) = at {
        record(name, pending_id, t_us);
    }
}

fn record(name: &'static str, pending_id: &str, t_us: u64) {
    tracing::debug!(target: TARGET, pending_id = %pending_id, t_us, "{name}");
}

/// One hop event read back from a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopEvent {
    /// The hop's name (one of [`hop`]).
    pub hop: String,
    /// The elicitation.
    pub pending_id: String,
    /// When, microseconds since the epoch.
    pub t_us: u64,
}

/// Reads a hop event from a `tracing_subscriber::fmt` line (also one another process
/// forwarded into its own log, and with colours). Any other line is `None`.
pub fn parse(line: &str) -> Option<HopEvent> {
    let marker = format!("{TARGET}: ");
    let plain;
    let line = if line.contains('\u{1b}') {
        plain = strip_ansi(line);
        plain.as_str()
    } else {
        line
    };
    let rest = &line[line.rfind(&marker)? + marker.len()..];
    let mut words = rest.split_whitespace();
    let hop = words.next()?.to_owned();
    let (mut pending_id, mut t_us) = (None, None);
    for word in words {
        if let Some(v) = word.strip_prefix("pending_id=") {
            pending_id = Some(v.to_owned());
        } else if let Some(v) = word.strip_prefix("t_us=") {
            t_us = v.parse().ok();
        }
    }
    Some(HopEvent {
        hop,
        pending_id: pending_id?,
        t_us: t_us?,
    })
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(filter: &str, ansi: bool, emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(ansi)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn a_hop_logged_by_the_fmt_subscriber_parses_back_also_inside_a_span_and_in_colour() {
        for ansi in [false, true] {
            let text = logged("warn,kandev::timing=debug", ansi, || {
                let span = tracing::info_span!("elicitation", pending_id = "p-1");
                let _entered = span.enter();
                hop_at(hop::AGENTCTL_RECEIVED, "p-1", Some(42));
                hop(hop::AGENTCTL_EMITTED, "p-1");
            });
            let events: Vec<HopEvent> = text.lines().filter_map(parse).collect();
            assert_eq!(events.len(), 2, "{text}");
            assert_eq!(
                events[0],
                HopEvent {
                    hop: hop::AGENTCTL_RECEIVED.into(),
                    pending_id: "p-1".into(),
                    t_us: 42
                }
            );
            assert_eq!(events[1].hop, hop::AGENTCTL_EMITTED);
            assert!(events[1].t_us > 1_600_000_000_000_000, "{text}");
        }
    }

    #[test]
    fn off_by_default_no_line_and_no_stamp() {
        let text = logged("info", false, || {
            assert!(!enabled());
            assert_eq!(stamp(), None);
            hop(hop::BACKEND_STORED, "p-2");
        });
        assert!(text.is_empty(), "{text}");
    }

    #[test]
    fn a_forwarded_line_parses_and_others_do_not() {
        let forwarded = "2026-01-01T00:00:00Z  INFO kandev::agentctl: 2026-01-01T00:00:00Z DEBUG request{action=x}: kandev::timing: agentctl.respond pending_id=abc t_us=7";
        assert_eq!(
            parse(forwarded),
            Some(HopEvent {
                hop: "agentctl.respond".into(),
                pending_id: "abc".into(),
                t_us: 7
            })
        );
        assert_eq!(parse("INFO kandev_backend: clarification requested"), None);
        assert_eq!(parse("DEBUG kandev::timing: x pending_id=a"), None);
    }
}
