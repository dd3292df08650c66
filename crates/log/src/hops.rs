//! Per-hop timing of one elicitation's round trip, for `just bench`'s breakdown.
//!
//! The domain code marks each hop with an ordinary `debug` span on target [`TARGET`],
//! named after the hop (one of [`hop`]) and carrying a `pending_id` field (recorded
//! later when the id is not known yet). It knows nothing of timing: [`HopLayer`], which
//! [`crate::init`] installs, notes the instant a hop span opens and, when it closes,
//! logs one `debug` event on [`TARGET`]: the hop's name as the message, `pending_id`,
//! `t_us` (the opening instant, microseconds since the epoch: one machine, so
//! comparable across its processes) and `close_us`. [`parse`] reads such a line back.
//!
//! Off — the default — the filter never creates the spans, so a hop costs the
//! callsite's cached level check. `RUST_LOG=…,kandev::timing=debug` turns them on.
//! Spans and lines carry ids and instants only, never question text or answers.

use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, debug};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The `tracing` target of every hop span and of the lines [`HopLayer`] logs.
pub const TARGET: &str = "kandev::timing";

/// The hop span names, in the order one round trip passes them.
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
    /// kandev's respond verb started (after the HTTP request was read and decoded).
    pub const BACKEND_RESPOND: &str = "backend.respond";
    /// kandev read the record and sends `agent.elicitations.respond` to agentctl.
    pub const BACKEND_FORWARD: &str = "backend.forward";
    /// agentctl got `agent.elicitations.respond`.
    pub const AGENTCTL_RESPOND: &str = "agentctl.respond";
    /// agentctl validated the answer and handed the ACP response to the agent's stdin.
    pub const AGENTCTL_REPLIED: &str = "agentctl.replied";
    /// kandev got agentctl's success reply.
    pub const BACKEND_FORWARDED: &str = "backend.forwarded";
    /// kandev's session consumer committed the settlement from `elicitation_settled`;
    /// the waiting HTTP response goes out next.
    pub const BACKEND_SETTLED: &str = "backend.settled";
}

/// Microseconds since the epoch.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

/// Logs every hop span (target [`TARGET`]) when it closes; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct HopLayer;

/// What [`HopLayer`] keeps in a hop span's extensions.
struct Opened {
    t_us: u64,
    pending_id: Option<String>,
}

/// Picks the `pending_id` field out of a span's values.
struct PendingId<'a>(&'a mut Option<String>);

impl Visit for PendingId<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "pending_id" {
            *self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `pending_id = %id` arrives as Display through this method.
        if field.name() == "pending_id" {
            *self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for HopLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != TARGET {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut opened = Opened {
            t_us: now_us(),
            pending_id: None,
        };
        attrs.record(&mut PendingId(&mut opened.pending_id));
        span.extensions_mut().insert(opened);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(opened) = extensions.get_mut::<Opened>() {
            values.record(&mut PendingId(&mut opened.pending_id));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(opened) = span.extensions_mut().remove::<Opened>() else {
            return;
        };
        // A hop that never learnt its elicitation (a request declined at the door) is
        // no sample.
        let Some(pending_id) = opened.pending_id else {
            return;
        };
        let name = span.name();
        debug!(target: TARGET, pending_id = %pending_id, t_us = opened.t_us, close_us = now_us(), "{name}");
    }
}

/// One hop read back from a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopEvent {
    /// The hop's name (one of [`hop`]).
    pub hop: String,
    /// The elicitation.
    pub pending_id: String,
    /// When the hop span opened, microseconds since the epoch.
    pub t_us: u64,
}

/// Reads a hop from a `tracing_subscriber::fmt` line (also one another process
/// forwarded into its own log, and with colours). Any other line is `None`.
pub fn parse(line: &str) -> Option<HopEvent> {
    let marker = format!("{TARGET}: ");
    let plain;
    let line = if line.contains('\u{1b}') {
        plain = crate::ansi::strip_ansi(line);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Buffer;
    use tracing_subscriber::layer::SubscriberExt;

    fn logged(filter: &str, ansi: bool, emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(filter))
            .with(HopLayer)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn a_hop_span_is_logged_when_it_closes_and_parses_back_also_in_colour() {
        for ansi in [false, true] {
            let text = logged("warn,kandev::timing=debug", ansi, || {
                let outer = tracing::info_span!("elicitation", pending_id = "p-1");
                let _entered = outer.enter();
                let received = tracing::debug_span!(
                    target: "kandev::timing",
                    "agentctl.received",
                    pending_id = tracing::field::Empty
                );
                received.record("pending_id", "p-1");
                drop(received);
                let id = String::from("p-1");
                let _emitted =
                    tracing::debug_span!(target: "kandev::timing", "agentctl.emitted", pending_id = %id)
                        .entered();
            });
            let events: Vec<HopEvent> = text.lines().filter_map(parse).collect();
            assert_eq!(events.len(), 2, "{text}");
            assert_eq!(events[0].hop, hop::AGENTCTL_RECEIVED);
            assert_eq!(events[0].pending_id, "p-1");
            assert_eq!(events[1].hop, hop::AGENTCTL_EMITTED);
            assert_eq!(events[1].pending_id, "p-1");
            assert!(events[0].t_us > 1_600_000_000_000_000, "{text}");
            assert!(events[0].t_us <= events[1].t_us, "{text}");
        }
    }

    #[test]
    fn off_by_default_and_a_hop_without_an_id_logs_nothing() {
        let text = logged("info", false, || {
            let _hop =
                tracing::debug_span!(target: "kandev::timing", "backend.stored", pending_id = "p-2")
                    .entered();
        });
        assert!(text.is_empty(), "{text}");
        let text = logged("warn,kandev::timing=debug", false, || {
            let _hop = tracing::debug_span!(
                target: "kandev::timing",
                "agentctl.received",
                pending_id = tracing::field::Empty
            );
        });
        assert!(text.is_empty(), "{text}");
    }

    #[test]
    fn a_forwarded_line_parses_and_others_do_not() {
        let forwarded = "2026-01-01T00:00:00Z  INFO kandev::agentctl: 2026-01-01T00:00:00Z DEBUG request{action=x}: kandev::timing: agentctl.respond pending_id=abc t_us=7 close_us=9";
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
