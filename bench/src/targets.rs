//! The targets of issue 17, each as a ratio to a baseline measured in the same run
//! where the issue says so, evaluated from a [`Report`]: met, not met (with the
//! measured reason), or not measured this run.

use crate::breakdown::Breakdown;
use crate::load::LoadResult;
use crate::mapping::TARGET_RATIO;
use crate::report::Report;
use crate::stats::percentiles;

/// Full-stack round trip p50 ≤ this × the direct path's p50.
pub const RT_P50_RATIO: f64 = 3.0;
/// Full-stack round trip p99 ≤ this × the direct path's p99.
pub const RT_P99_RATIO: f64 = 5.0;
/// Load answer-to-agent p99, ms.
pub const LOAD_P99_MS: f64 = 25.0;
/// Load answer-to-agent p99 ≤ this × its own p50.
pub const LOAD_TAIL_RATIO: f64 = 5.0;
/// kandev peak RSS under the load, bytes (docs/architecture.md §8).
pub const KANDEV_RSS_MAX: u64 = 200 * 1024 * 1024;
/// One agentctl's peak RSS, bytes (docs/architecture.md §8).
pub const AGENTCTL_RSS_MAX: u64 = 20 * 1024 * 1024;
/// kandev peak RSS with every scale elicitation open, bytes.
pub const SCALE_RSS_MAX: u64 = 300 * 1024 * 1024;
/// "Flat": the largest scale point's p99 ≤ this × the smallest's.
pub const SCALE_GROWTH_RATIO: f64 = 2.0;

/// One target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is measured against what.
    pub name: String,
    /// The figure(s).
    pub measured: String,
    /// The bar.
    pub bar: String,
    /// Met or not; `None` when this run did not measure it.
    pub met: Option<bool>,
    /// When not met: the measured reason.
    pub reason: String,
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The agent-path segments that cost the most, as a reason.
fn heaviest(breakdown: &Breakdown) -> String {
    let parts: Vec<String> = breakdown
        .heaviest()
        .iter()
        .take(3)
        .map(|f| {
            format!(
                "{} {:.2} ms ({:.0}%)",
                f.segment.name,
                f.mean,
                100.0 * breakdown.share(f)
            )
        })
        .collect();
    format!("mean round trip by hop: {}", parts.join(", "))
}

/// The design change that would take the most off `segment` (docs/decisions/0013).
fn remedy(segment: &str) -> &'static str {
    match segment {
        "kandev record + message write" => {
            "already one statement and one commit; what is left is the commit itself, which stays on the path (an elicitation the operator sees is in the database): would meet it: commits grouped across sessions (PostgreSQL `commit_delay`, or one commit for a batch of opens)"
        }
        "kandev session queue (earlier events)" => {
            "the session's events are applied in order and the previous answer's settlement holds the writer (SQLite has one); would meet it: settle an answer in the same commit as the session's next write instead of in its own"
        }
        "HTTP respond in (request, auth, decode)" => {
            "would meet it: take answers over the operator's open WebSocket instead of a new HTTP request each"
        }
        "agent → agentctl (stdio, ACP parse)" => {
            "on the direct path too: the agent's own pipe, not kandev's"
        }
        _ => "see docs/decisions/0013-performance-floor.md",
    }
}

/// Why a full-stack round trip misses its ratio: the heaviest hops, what the path would
/// cost without the heaviest one, and the change aimed at it.
fn round_trip_reason(breakdown: &Breakdown, full_p50: f64, direct_p50: f64) -> String {
    let Some(top) = breakdown.heaviest().first().copied() else {
        return heaviest(breakdown);
    };
    let without = (full_p50 - top.pct.p50).max(0.0);
    format!(
        "{}; without the first entirely: {without:.2} ms = {:.1}× direct; {}; docs/decisions/0013-performance-floor.md",
        heaviest(breakdown),
        without / direct_p50,
        remedy(top.segment.name)
    )
}

fn target(name: String, measured: String, bar: String, met: bool, reason: String) -> Target {
    Target {
        name,
        measured,
        bar,
        met: Some(met),
        reason: if met { String::new() } else { reason },
    }
}

fn exactly_once(name: String, l: &LoadResult) -> Target {
    target(
        name,
        format!(
            "{} sent, {} answered once, {} lost, {} doubled, {} crossed",
            l.sent, l.answered, l.lost, l.doubled, l.crossed
        ),
        "all once, 0 lost / doubled / crossed".into(),
        l.sent == l.answered && l.lost + l.doubled + l.crossed == 0,
        "responses went missing or came twice (the run is BROKEN)".into(),
    )
}

/// Every target the report's parts measured (and the scale ones, marked unmeasured
/// when the scale part did not run).
pub fn evaluate(r: &Report) -> Vec<Target> {
    let mut out = Vec::new();
    let base = r.baseline.as_ref().ok().map(|b| percentiles(b));
    for e in &r.engines {
        let name = e.engine.name();
        if let (Ok(rt), Some(base)) = (&e.round_trip, base) {
            let full = percentiles(&rt.samples);
            let reason = match &e.breakdown {
                Ok(b) => round_trip_reason(b, full.p50, base.p50),
                Err(_) => "no breakdown this run".to_owned(),
            };
            for (label, f, b, bar) in [
                ("p50", full.p50, base.p50, RT_P50_RATIO),
                ("p99", full.p99, base.p99, RT_P99_RATIO),
            ] {
                out.push(target(
                    format!("round trip {label}, full stack ÷ direct ({name})"),
                    format!("{f:.2} ms ÷ {b:.2} ms = {:.1}×", f / b),
                    format!("≤ {bar}×"),
                    f <= bar * b,
                    reason.clone(),
                ));
            }
        }
        if let Ok(l) = &e.load {
            let s = r.shape;
            let shape = format!(
                "load {} × {}, {} operators",
                s.sessions, s.per_session, s.operators
            );
            let a = &l.answer_to_agent;
            let figures = format!(
                "p50 {:.2} ms, p99 {:.2} ms at {:.0} answered/s; the record and settlement writes lead the breakdown on this engine; would meet it: fewer, grouped commits per answer (docs/decisions/0013-performance-floor.md)",
                a.p50, a.p99, l.throughput
            );
            out.push(target(
                format!("{shape}: answer-to-agent p99 ({name})"),
                format!("{:.2} ms", a.p99),
                format!("≤ {LOAD_P99_MS} ms"),
                a.p99 <= LOAD_P99_MS,
                figures.clone(),
            ));
            out.push(target(
                format!("{shape}: answer-to-agent p99 ÷ p50 ({name})"),
                format!("{:.2} ÷ {:.2} ms = {:.1}×", a.p99, a.p50, a.p99 / a.p50),
                format!("≤ {LOAD_TAIL_RATIO}×"),
                a.p99 <= LOAD_TAIL_RATIO * a.p50,
                figures,
            ));
            out.push(exactly_once(format!("{shape}: exactly once ({name})"), l));
            out.push(target(
                format!("{shape}: kandev peak RSS ({name})"),
                format!("{:.1} MB", mb(l.kandev_peak_rss)),
                format!("≤ {} MB", mb(KANDEV_RSS_MAX)),
                l.kandev_peak_rss <= KANDEV_RSS_MAX,
                String::new(),
            ));
            out.push(target(
                format!(
                    "{shape}: one agentctl's peak RSS, max of {} ({name})",
                    l.agentctls
                ),
                format!("{:.1} MB", mb(l.agentctl_peak_rss)),
                format!("≤ {} MB", mb(AGENTCTL_RSS_MAX)),
                l.agentctl_peak_rss <= AGENTCTL_RSS_MAX,
                String::new(),
            ));
        }
    }
    scale_targets(r, &mut out);
    if let Ok(figures) = &r.mapping {
        for f in figures {
            out.push(target(
                format!("mapping `{}` of {} ÷ `from_slice`", f.operation, f.group),
                format!("{:.2}×", f.ratio()),
                format!("≤ {TARGET_RATIO}×"),
                f.ratio() <= TARGET_RATIO,
                format!("{:.2} µs against {:.2} µs", f.ns / 1e3, f.baseline_ns / 1e3),
            ));
        }
    }
    out
}

fn scale_targets(r: &Report, out: &mut Vec<Target>) {
    let measured: Vec<(usize, &LoadResult)> = r
        .scale
        .iter()
        .filter_map(|p| p.result.as_ref().ok().map(|l| (p.sessions, l)))
        .collect();
    let (Some(&(small_n, small)), Some(&(large_n, large))) = (measured.first(), measured.last())
    else {
        out.push(Target {
            name: "scale: sessions × pending through a remote agentctl".into(),
            measured: r
                .scale_skipped
                .clone()
                .unwrap_or_else(|| "not measured".into()),
            bar: "exactly once, RSS ≤ 300 MB, flat p99".into(),
            met: None,
            reason: String::new(),
        });
        return;
    };
    let open = large_n * r.scale_per_session;
    for (n, l) in &measured {
        out.push(exactly_once(
            format!("scale {n} × {}: exactly once", r.scale_per_session),
            l,
        ));
    }
    out.push(target(
        format!(
            "scale {large_n} × {}: kandev peak RSS, {open} open",
            r.scale_per_session
        ),
        format!("{:.1} MB", mb(large.kandev_peak_rss)),
        format!("≤ {} MB", mb(SCALE_RSS_MAX)),
        large.kandev_peak_rss <= SCALE_RSS_MAX,
        String::new(),
    ));
    let (p_small, p_large) = (small.answer_to_agent.p99, large.answer_to_agent.p99);
    out.push(target(
        format!("scale: answer-to-agent p99, {large_n} ÷ {small_n} sessions (flat)"),
        format!("{p_large:.2} ÷ {p_small:.2} ms = {:.1}×", p_large / p_small),
        format!("≤ {SCALE_GROWTH_RATIO}×"),
        p_large <= SCALE_GROWTH_RATIO * p_small,
        format!(
            "p50 {:.2} → {:.2} ms, throughput {:.0} → {:.0} answered/s",
            small.answer_to_agent.p50,
            large.answer_to_agent.p50,
            small.throughput,
            large.throughput
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn ratios_are_taken_against_the_same_runs_baseline() {
        let report = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            answer_to_agent: percentiles(&[1.0, 2.0]),
            kandev_peak_rss: 10,
            ..LoadResult::default()
        });
        let targets = evaluate(&report);
        let find = |prefix: &str| {
            targets
                .iter()
                .find(|t| t.name.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix} in {targets:?}"))
        };
        // SQLite p50 11 ms against 5 ms direct: 2.2× ≤ 3×; p99 40 against 6: 6.7× > 5×.
        let p50 = find("round trip p50, full stack ÷ direct (SQLite)");
        assert_eq!(
            (p50.met, p50.measured.as_str()),
            (Some(true), "11.00 ms ÷ 5.00 ms = 2.2×")
        );
        let p99 = find("round trip p99, full stack ÷ direct (SQLite)");
        assert_eq!(p99.met, Some(false));
        assert_eq!(p99.reason, "no breakdown this run");
        assert_eq!(
            find("load 1 × 2, 1 operators: exactly once (PostgreSQL)").met,
            Some(true)
        );
        assert_eq!(find("mapping `map_request`").met, Some(false));
        assert_eq!(find("scale 1 × 2: kandev peak RSS").met, Some(true));
        assert!(
            find("scale: answer-to-agent p99, 1 ÷ 1 sessions")
                .met
                .is_some()
        );

        let mut unmeasured = report;
        unmeasured.scale.clear();
        unmeasured.scale_skipped = Some("scale: skipped (--only)".into());
        let targets = evaluate(&unmeasured);
        let scale = targets
            .iter()
            .find(|t| t.name.starts_with("scale"))
            .expect("scale row");
        assert_eq!(scale.met, None);
    }
}
