//! `target/bench/report.json` and `target/bench/report.md` (+ SVG histograms).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::load::{LoadResult, Shape};
use crate::mapping::{MappingFigure, TARGET_RATIO};
use crate::stats::{Percentiles, histogram_svg, percentiles};

/// Round-trip overhead targets, ms (docs/architecture.md §8).
pub const OVERHEAD_P50_MS: f64 = 5.0;
/// Round-trip overhead p99 target, ms.
pub const OVERHEAD_P99_MS: f64 = 25.0;
/// kandev peak RSS target, bytes.
pub const KANDEV_RSS_MAX: u64 = 200 * 1024 * 1024;
/// One agentctl's peak RSS target, bytes.
pub const AGENTCTL_RSS_MAX: u64 = 20 * 1024 * 1024;

/// The round-trip figures.
#[derive(Debug, Clone, Default)]
pub struct RoundTrip {
    /// Measured elicitations per path.
    pub n: usize,
    /// Discarded warm-up elicitations per path.
    pub warmup: usize,
    /// Full-stack samples, ms.
    pub full: Vec<f64>,
    /// Baseline samples, ms.
    pub baseline: Vec<f64>,
}

/// Everything one run measured (a part is `Err` when it broke).
#[derive(Debug)]
pub struct Report {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// The mapping figures.
    pub mapping: Result<Vec<MappingFigure>, String>,
    /// The round trip.
    pub round_trip: Result<RoundTrip, String>,
    /// The load shape.
    pub shape: Shape,
    /// The load figures.
    pub load: Result<LoadResult, String>,
}

fn pct_json(p: &Percentiles) -> Value {
    json!({"n": p.n, "p50_ms": p.p50, "p95_ms": p.p95, "p99_ms": p.p99, "max_ms": p.max})
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn broken_or_skipped(err: &str) -> &'static str {
    if err.ends_with("skipped (--only)") {
        "Skipped"
    } else {
        "Broken"
    }
}

fn yes(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

impl Report {
    /// Why the run counts as broken: a part failed, or a response was lost, doubled or crossed.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for err in [
            self.mapping.as_ref().err(),
            self.round_trip.as_ref().err(),
            self.load.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .filter(|err| !err.ends_with("skipped (--only)"))
        {
            failures.push(err.clone());
        }
        if let Ok(load) = &self.load {
            if load.lost + load.doubled + load.crossed > 0 {
                failures.push(format!(
                    "load: {} lost, {} doubled, {} crossed responses (must all be 0)",
                    load.lost, load.doubled, load.crossed
                ));
            }
            if load.respond_errors > 0 {
                failures.push(format!(
                    "load: {} respond calls failed",
                    load.respond_errors
                ));
            }
        }
        failures
    }

    /// The machine-readable report.
    pub fn to_json(&self) -> Value {
        let mapping = match &self.mapping {
            Ok(figures) => json!(
                figures
                    .iter()
                    .map(MappingFigure::to_json)
                    .collect::<Vec<_>>()
            ),
            Err(err) => json!({"error": err}),
        };
        let round_trip = match &self.round_trip {
            Ok(rt) => {
                let (full, base) = (percentiles(&rt.full), percentiles(&rt.baseline));
                let (o50, o99) = (full.p50 - base.p50, full.p99 - base.p99);
                json!({"n": rt.n, "warmup_discarded": rt.warmup,
                    "full_stack": pct_json(&full), "baseline_agentctl_direct": pct_json(&base),
                    "overhead": {"p50_ms": o50, "p95_ms": full.p95 - base.p95, "p99_ms": o99},
                    "target": {"overhead_p50_ms_max": OVERHEAD_P50_MS, "overhead_p99_ms_max": OVERHEAD_P99_MS},
                    "meets_target": o50 <= OVERHEAD_P50_MS && o99 <= OVERHEAD_P99_MS})
            }
            Err(err) => json!({"error": err}),
        };
        let load = match &self.load {
            Ok(l) => {
                json!({"sessions": self.shape.sessions, "elicitations_per_session": self.shape.per_session,
                "operator_clients": self.shape.operators, "sent": l.sent, "answered_once": l.answered,
                "lost": l.lost, "doubled": l.doubled, "crossed": l.crossed, "respond_errors": l.respond_errors,
                "throughput_per_s": l.throughput, "answer_to_agent": pct_json(&l.answer_to_agent),
                "kandev_peak_rss_bytes": l.kandev_peak_rss, "agentctl_peak_rss_bytes_max": l.agentctl_peak_rss,
                "agentctl_peak_rss_bytes_median": l.agentctl_median_peak_rss, "agentctl_processes": l.agentctls,
                "target": {"lost": 0, "doubled": 0, "kandev_peak_rss_bytes_max": KANDEV_RSS_MAX,
                           "agentctl_peak_rss_bytes_max": AGENTCTL_RSS_MAX},
                "meets_target": l.lost == 0 && l.doubled == 0 && l.crossed == 0
                    && l.kandev_peak_rss <= KANDEV_RSS_MAX && l.agentctl_peak_rss <= AGENTCTL_RSS_MAX})
            }
            Err(err) => json!({"error": err}),
        };
        json!({"mode": self.mode,
            "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
            "binaries": "target/debug (dev profile: workspace crates opt-level 1, dependencies opt-level 2); mapping benches in the bench (release) profile",
            "mapping": mapping, "round_trip": round_trip, "load": load, "failures": self.failures()})
    }

    /// The human-readable report; SVGs are written next to it in `dir`.
    pub fn to_markdown(&self, dir: &Path) -> std::io::Result<String> {
        let mut md = String::new();
        let _ = writeln!(md, "# Kandev bench report ({})\n", self.mode);
        let _ = writeln!(
            md,
            "Machine: {} CPUs. Stack binaries: `target/debug` (dev profile). Reproduce: `just bench` (or `just bench --quick`).\n",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0)
        );
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(
                md,
                "Result: **ok** (no lost or doubled response; latency and memory targets are reported, not asserted).\n"
            );
        } else {
            let _ = writeln!(md, "Result: **BROKEN**\n");
            for f in &failures {
                let _ = writeln!(md, "- {f}");
            }
            md.push('\n');
        }

        md.push_str("## Mapping (criterion medians)\n\nBaseline: `serde_json::from_slice` of the same bytes (the request params for `map_request`, the operator's respond payload for `build_response`).\n\n| form | operation | median | baseline | ratio | target | met |\n|---|---|---|---|---|---|---|\n");
        match &self.mapping {
            Ok(figures) => {
                for f in figures {
                    let _ = writeln!(
                        md,
                        "| {} | `{}` | {:.2} µs | {:.2} µs | {:.2}× | ≤ {TARGET_RATIO}× | {} |",
                        f.group,
                        f.operation,
                        f.ns / 1e3,
                        f.baseline_ns / 1e3,
                        f.ratio(),
                        yes(f.ratio() <= TARGET_RATIO)
                    );
                }
            }
            Err(err) => {
                let _ = writeln!(md, "| {} | {err} | | | | | |", broken_or_skipped(err));
            }
        }

        md.push_str("\n## Round trip (agent request → operator WebSocket event → respond → agent receives)\n\n");
        match &self.round_trip {
            Ok(rt) => {
                let (full, base) = (percentiles(&rt.full), percentiles(&rt.baseline));
                let _ = writeln!(
                    md,
                    "{} sequential elicitations of the two-question bridge form per path ({} warm-up discarded), timed by the agent. Baseline: the same agent under a standalone agentctl answered straight over the agent stream.\n",
                    rt.n, rt.warmup
                );
                md.push_str("| percentile | full stack | baseline | overhead | target (overhead) | met |\n|---|---|---|---|---|---|\n");
                for (name, f, b, target) in [
                    ("p50", full.p50, base.p50, Some(OVERHEAD_P50_MS)),
                    ("p95", full.p95, base.p95, None),
                    ("p99", full.p99, base.p99, Some(OVERHEAD_P99_MS)),
                ] {
                    let (t, met) = match target {
                        Some(t) => (format!("≤ {t} ms"), yes(f - b <= t)),
                        None => ("—".to_owned(), "—"),
                    };
                    let _ = writeln!(
                        md,
                        "| {name} | {f:.3} ms | {b:.3} ms | {:.3} ms | {t} | {met} |",
                        f - b
                    );
                }
                let svg = histogram_svg(
                    "Round-trip latency",
                    &[
                        ("full stack", "#c0392b", &rt.full),
                        ("baseline (agentctl direct)", "#2e6fd0", &rt.baseline),
                    ],
                );
                std::fs::write(dir.join("round-trip.svg"), svg)?;
                md.push_str("\n![Round-trip latency histogram](round-trip.svg)\n");
            }
            Err(err) => {
                let _ = writeln!(md, "{}: {err}", broken_or_skipped(err));
            }
        }

        let s = self.shape;
        let _ = writeln!(
            md,
            "\n## Load ({} sessions × {} concurrent elicitations, {} operator clients)\n",
            s.sessions, s.per_session, s.operators
        );
        match &self.load {
            Ok(l) => {
                md.push_str("Counted on the agents' side. Answer-to-agent: the operator's POST starts → the agent reads the response (wall clock, one machine).\n\n| figure | measured | target | met |\n|---|---|---|---|\n");
                let _ = writeln!(
                    md,
                    "| elicitations sent / answered once | {} / {} | all | {} |",
                    l.sent,
                    l.answered,
                    yes(l.sent == l.answered)
                );
                let _ = writeln!(md, "| lost | {} | 0 | {} |", l.lost, yes(l.lost == 0));
                let _ = writeln!(
                    md,
                    "| doubled | {} | 0 | {} |",
                    l.doubled,
                    yes(l.doubled == 0)
                );
                let _ = writeln!(
                    md,
                    "| crossed (another request's answer) | {} | 0 | {} |",
                    l.crossed,
                    yes(l.crossed == 0)
                );
                let _ = writeln!(
                    md,
                    "| throughput | {:.0} answered/s | — | — |",
                    l.throughput
                );
                let _ = writeln!(
                    md,
                    "| answer-to-agent p50 / p99 | {:.2} / {:.2} ms | — | — |",
                    l.answer_to_agent.p50, l.answer_to_agent.p99
                );
                let _ = writeln!(
                    md,
                    "| kandev peak RSS (VmHWM) | {:.1} MB | ≤ 200 MB | {} |",
                    mb(l.kandev_peak_rss),
                    yes(l.kandev_peak_rss <= KANDEV_RSS_MAX)
                );
                let _ = writeln!(
                    md,
                    "| one agentctl peak RSS, max of {} (median {:.1} MB) | {:.1} MB | ≤ 20 MB | {} |",
                    l.agentctls,
                    mb(l.agentctl_median_peak_rss),
                    mb(l.agentctl_peak_rss),
                    yes(l.agentctl_peak_rss <= AGENTCTL_RSS_MAX)
                );
                let svg = histogram_svg(
                    "Load: answer-to-agent latency",
                    &[("answer → agent", "#27ae60", &l.samples)],
                );
                std::fs::write(dir.join("load.svg"), svg)?;
                md.push_str("\n![Load answer-to-agent latency histogram](load.svg)\n");
            }
            Err(err) => {
                let _ = writeln!(md, "{}: {err}", broken_or_skipped(err));
            }
        }
        Ok(md)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(load: LoadResult) -> Report {
        Report {
            mode: "quick",
            mapping: Ok(vec![MappingFigure {
                group: "map_two_question".into(),
                operation: "map_request".into(),
                ns: 3000.0,
                baseline_ns: 1000.0,
            }]),
            round_trip: Ok(RoundTrip {
                n: 3,
                warmup: 1,
                full: vec![10.0, 11.0, 40.0],
                baseline: vec![4.0, 5.0, 6.0],
            }),
            shape: Shape {
                sessions: 1,
                per_session: 2,
                operators: 1,
            },
            load: Ok(load),
        }
    }

    #[test]
    fn figures_sit_beside_their_baseline_and_target_and_only_lost_or_doubled_break_the_run() {
        let dir = tempfile::tempdir().expect("dir");
        let ok = report(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            ..LoadResult::default()
        });
        assert!(ok.failures().is_empty(), "{:?}", ok.failures());
        let json = ok.to_json();
        assert_eq!(json["mapping"][0]["ratio"], 3.0);
        assert_eq!(json["mapping"][0]["meets_target"], false);
        assert_eq!(json["round_trip"]["overhead"]["p50_ms"], 6.0);
        assert_eq!(json["round_trip"]["overhead"]["p99_ms"], 34.0);
        assert_eq!(json["round_trip"]["meets_target"], false);
        let md = ok.to_markdown(dir.path()).expect("markdown");
        assert!(
            md.contains("| p50 | 11.000 ms | 5.000 ms | 6.000 ms | ≤ 5 ms | **no** |"),
            "{md}"
        );
        assert!(dir.path().join("round-trip.svg").is_file());
        assert!(dir.path().join("load.svg").is_file());

        let lossy = report(LoadResult {
            sent: 2,
            answered: 1,
            lost: 1,
            doubled: 1,
            ..LoadResult::default()
        });
        assert_eq!(lossy.failures().len(), 1, "{:?}", lossy.failures());
        let mut skipped = report(LoadResult::default());
        skipped.load = Err("load: skipped (--only)".into());
        assert!(skipped.failures().is_empty());
    }
}
