//! Where one round trip's time goes: the hop lines kandev and its agentctl log
//! (`kandev_log::hops`: the layer that turns their hop spans into lines, read back from
//! kandev's log, into which it forwards the local agentctl's lines), joined by pending id with the bench's own instants (the
//! agent's send and receive, the operator client's WebSocket read, POST and response),
//! all on the one machine's wall clock, in microseconds.
//!
//! Each [`SEGMENT`](SEGMENTS) is the time between two consecutive points; the segments on
//! the agent's path add up, per sample, to the agent's round trip exactly.

use std::collections::HashMap;

use kandev_log::hops::{self, hop};
use serde_json::{Value, json};

use crate::stats::{self, Percentiles, percentiles};

/// The agent wrote `elicitation/create`.
pub const AGENT_SENT: &str = "agent.sent";
/// The operator client read `clarification.created`.
pub const OPERATOR_SEEN: &str = "operator.seen";
/// The operator client starts its `POST …/respond`.
pub const OPERATOR_POSTED: &str = "operator.posted";
/// The agent read its response.
pub const AGENT_RECEIVED: &str = "agent.received";
/// The operator client read the HTTP response.
pub const OPERATOR_ANSWERED: &str = "operator.answered";

/// One segment: from one point to the next.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    /// What happens in it.
    pub name: &'static str,
    /// Its start point.
    pub from: &'static str,
    /// Its end point.
    pub to: &'static str,
    /// Whether the agent waits through it (else it follows the agent's answer).
    pub on_agent_path: bool,
}

const fn seg(name: &'static str, from: &'static str, to: &'static str, on: bool) -> Segment {
    Segment {
        name,
        from,
        to,
        on_agent_path: on,
    }
}

/// Every segment, in path order.
pub const SEGMENTS: &[Segment] = &[
    seg(
        "agent → agentctl (stdio, ACP parse)",
        AGENT_SENT,
        hop::AGENTCTL_RECEIVED,
        true,
    ),
    seg(
        "agentctl map, park, emit",
        hop::AGENTCTL_RECEIVED,
        hop::AGENTCTL_EMITTED,
        true,
    ),
    seg(
        "agent stream → kandev (WS, decode)",
        hop::AGENTCTL_EMITTED,
        hop::BACKEND_RECEIVED,
        true,
    ),
    seg(
        "kandev session queue (earlier events)",
        hop::BACKEND_RECEIVED,
        hop::BACKEND_APPLYING,
        true,
    ),
    seg(
        "kandev record + message write",
        hop::BACKEND_APPLYING,
        hop::BACKEND_STORED,
        true,
    ),
    seg(
        "kandev feed → broadcast",
        hop::BACKEND_STORED,
        hop::BACKEND_PUSHED,
        true,
    ),
    seg(
        "operator WebSocket push",
        hop::BACKEND_PUSHED,
        OPERATOR_SEEN,
        true,
    ),
    seg(
        "operator client (read → POST)",
        OPERATOR_SEEN,
        OPERATOR_POSTED,
        true,
    ),
    seg(
        "HTTP respond in (request, auth, decode)",
        OPERATOR_POSTED,
        hop::BACKEND_RESPOND,
        true,
    ),
    seg(
        "kandev record read",
        hop::BACKEND_RESPOND,
        hop::BACKEND_FORWARD,
        true,
    ),
    seg(
        "forward to agentctl (WS)",
        hop::BACKEND_FORWARD,
        hop::AGENTCTL_RESPOND,
        true,
    ),
    seg(
        "agentctl validate + ACP reply",
        hop::AGENTCTL_RESPOND,
        hop::AGENTCTL_REPLIED,
        true,
    ),
    seg(
        "ACP reply → agent (stdio)",
        hop::AGENTCTL_REPLIED,
        AGENT_RECEIVED,
        true,
    ),
    seg(
        "agentctl success → kandev",
        hop::AGENTCTL_REPLIED,
        hop::BACKEND_FORWARDED,
        false,
    ),
    seg(
        "elicitation_settled → kandev settlement write",
        hop::BACKEND_FORWARDED,
        hop::BACKEND_SETTLED,
        false,
    ),
    seg(
        "HTTP response → operator",
        hop::BACKEND_SETTLED,
        OPERATOR_ANSWERED,
        false,
    ),
];

/// The instants of one elicitation, by point name, µs.
pub type Points = HashMap<&'static str, u64>;

/// The points of every elicitation, by pending id.
#[derive(Debug, Default)]
pub struct Timeline {
    by_pending: HashMap<String, Points>,
}

fn point_name(hop: &str) -> Option<&'static str> {
    SEGMENTS
        .iter()
        .flat_map(|s| [s.from, s.to])
        .find(|name| *name == hop)
}

impl Timeline {
    /// The hop events of a log (kandev's, with its agentctl's lines forwarded).
    pub fn from_log(log: &str) -> Self {
        let mut timeline = Self::default();
        for event in log.lines().filter_map(hops::parse) {
            if let Some(name) = point_name(&event.hop) {
                timeline.add(&event.pending_id, name, event.t_us);
            }
        }
        timeline
    }

    /// Adds one point (the first stays when a hop is passed twice).
    pub fn add(&mut self, pending_id: &str, point: &'static str, t_us: u64) {
        self.by_pending
            .entry(pending_id.to_owned())
            .or_default()
            .entry(point)
            .or_insert(t_us);
    }

    /// The figures of the elicitations in `pending_ids` (the measured ones).
    pub fn breakdown<'a>(&self, pending_ids: impl IntoIterator<Item = &'a str>) -> Breakdown {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); SEGMENTS.len()];
        let mut totals = Vec::new();
        let mut incomplete = 0;
        for id in pending_ids {
            let Some(points) = self.by_pending.get(id) else {
                incomplete += 1;
                continue;
            };
            let spans: Option<Vec<f64>> = SEGMENTS
                .iter()
                .map(|s| {
                    let (from, to) = (points.get(s.from)?, points.get(s.to)?);
                    Some(to.saturating_sub(*from) as f64 / 1000.0)
                })
                .collect();
            let (Some(spans), Some(sent), Some(received)) =
                (spans, points.get(AGENT_SENT), points.get(AGENT_RECEIVED))
            else {
                incomplete += 1;
                continue;
            };
            for (i, ms) in spans.into_iter().enumerate() {
                samples[i].push(ms);
            }
            totals.push(received.saturating_sub(*sent) as f64 / 1000.0);
        }
        Breakdown {
            total: percentiles(&totals),
            total_mean: mean(&totals),
            incomplete,
            segments: SEGMENTS
                .iter()
                .zip(samples)
                .map(|(segment, s)| SegmentFigure {
                    segment: *segment,
                    pct: percentiles(&s),
                    mean: mean(&s),
                })
                .collect(),
        }
    }
}

/// [`stats::mean`], NaN when there are no samples.
fn mean(samples: &[f64]) -> f64 {
    stats::mean(samples).unwrap_or(f64::NAN)
}

/// One segment's figures.
#[derive(Debug, Clone)]
pub struct SegmentFigure {
    /// The segment.
    pub segment: Segment,
    /// Its percentiles, ms.
    pub pct: Percentiles,
    /// Its mean, ms.
    pub mean: f64,
}

/// The breakdown of one pass.
#[derive(Debug, Clone)]
pub struct Breakdown {
    /// The agent's round trip in this pass (timing events on), ms.
    pub total: Percentiles,
    /// Its mean, ms.
    pub total_mean: f64,
    /// Elicitations some point of which is missing (left out).
    pub incomplete: usize,
    /// Per segment.
    pub segments: Vec<SegmentFigure>,
}

impl Breakdown {
    /// A segment's share of the mean round trip (agent-path segments add up to 1).
    pub fn share(&self, figure: &SegmentFigure) -> f64 {
        figure.mean / self.total_mean
    }

    /// The agent-path segments, largest mean first.
    pub fn heaviest(&self) -> Vec<&SegmentFigure> {
        let mut on: Vec<&SegmentFigure> = self
            .segments
            .iter()
            .filter(|f| f.segment.on_agent_path)
            .collect();
        on.sort_by(|a, b| b.mean.total_cmp(&a.mean));
        on
    }

    /// As JSON for `report.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "n": self.total.n, "incomplete": self.incomplete,
            "round_trip_ms": {"p50": self.total.p50, "p99": self.total.p99, "mean": self.total_mean},
            "segments": self.segments.iter().map(|f| json!({
                "name": f.segment.name, "from": f.segment.from, "to": f.segment.to,
                "on_agent_path": f.segment.on_agent_path,
                "p50_ms": f.pct.p50, "p99_ms": f.pct.p99, "mean_ms": f.mean,
                "share_of_mean": if f.segment.on_agent_path { json!(self.share(f)) } else { Value::Null },
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every point, in the order of first appearance on the path.
    fn all_points() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for name in SEGMENTS.iter().flat_map(|s| [s.from, s.to]) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    #[test]
    fn agent_path_segments_add_up_to_the_round_trip_and_a_gap_leaves_the_sample_out() {
        // p1 passes every point, p2 all but backend.stored; the hops come from a log.
        let mut log = String::new();
        let mut bench_points = Vec::new();
        for (pending, base) in [("p1", 1_000u64), ("p2", 50_000)] {
            let mut t = base;
            for (i, name) in all_points().into_iter().enumerate() {
                t += 10 * (i as u64 + 1);
                if pending == "p2" && name == hop::BACKEND_STORED {
                    continue;
                }
                if name.starts_with("agentctl.") || name.starts_with("backend.") {
                    log.push_str(&format!(
                        "x DEBUG kandev::timing: {name} pending_id={pending} t_us={t}\n"
                    ));
                } else {
                    bench_points.push((pending, name, t));
                }
            }
        }
        log.push_str("x INFO kandev_backend: unrelated pending_id=p1 t_us=1\n");
        let mut timeline = Timeline::from_log(&log);
        for (pending, name, t) in bench_points {
            timeline.add(pending, name, t);
        }
        let b = timeline.breakdown(["p1", "p2", "p3"]);
        assert_eq!((b.total.n, b.incomplete), (1, 2));
        // agentctl.received → agentctl.emitted is the second step: 30 µs.
        assert!(
            (b.segments[1].mean - 0.03).abs() < 1e-9,
            "{:?}",
            b.segments[1]
        );
        let on_path: f64 = b.heaviest().iter().map(|f| f.mean).sum();
        assert!((on_path - b.total_mean).abs() < 1e-9);
        let shares: f64 = b.heaviest().iter().map(|f| b.share(f)).sum();
        assert!((shares - 1.0).abs() < 1e-9);
        assert!(b.heaviest()[0].mean >= b.heaviest()[1].mean);
        let json = b.to_json();
        assert_eq!(
            json["segments"].as_array().map(Vec::len),
            Some(SEGMENTS.len())
        );
        assert!(json["segments"][SEGMENTS.len() - 1]["share_of_mean"].is_null());
    }

    #[test]
    fn the_hop_layer_turns_a_hop_span_into_a_line_the_timeline_reads() {
        use std::io::Write;
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::layer::SubscriberExt;

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
        let buffer = Buffer::default();
        let writer = buffer.clone();
        // As kandev and agentctl log under the bench (stack.rs's RUST_LOG).
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(
                "warn,kandev::timing=debug",
            ))
            .with(hops::HopLayer)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            let id = String::from("p-9");
            let _hop =
                tracing::debug_span!(target: "kandev::timing", "backend.stored", pending_id = %id)
                    .entered();
        });
        let log = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        let line = log.lines().find_map(hops::parse).expect(&log);
        assert_eq!(
            (line.hop.as_str(), line.pending_id.as_str()),
            (hop::BACKEND_STORED, "p-9")
        );
        let timeline = Timeline::from_log(&log);
        assert!(format!("{timeline:?}").contains("p-9"), "{timeline:?}");
    }
}
