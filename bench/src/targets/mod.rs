//! The budgets (issue 29): absolute figures on this machine, each evaluated from a
//! [`Report`] as met (its whole bootstrap 95% interval on the right side of the bar), not
//! met (with the measured reason and the change that would meet it), or not measured this
//! run (with why). The memory, exactly-once, scale and mapping targets of issue 17 stay.
//! The round trip's ratio to the direct path is shown beside it, informative only.
//!
//! [`bars`] holds the figures, [`verdict`] how one is judged, [`reasons`] why one is not
//! met; [`load`] and [`crowds`] evaluate the parts, [`evaluate`] all of them in report order.

mod bars;
mod crowds;
mod load;
mod reasons;
mod verdict;

use bars::{added_bars, visible_bar};
use crowds::{crowd_targets, streaming_targets};
use load::{replica_targets, scale_targets, soak_targets, sweep_targets};
use reasons::added_reason;
pub use verdict::Target;
use verdict::{target, under, unmeasured};

use crate::mapping::TARGET_RATIO;
use crate::report::Report;
use crate::stats::{difference_interval, interval};

/// Every budget and target, in report order.
pub fn evaluate(r: &Report) -> Vec<Target> {
    let mut out = Vec::new();
    for e in &r.engines {
        let name = e.engine.name();
        let (p50_bar, p99_bar) = added_bars(e.engine);
        match (&e.round_trip, &r.baseline) {
            (Ok(rt), Ok(base)) => {
                let reason = added_reason(e.breakdown.as_ref().ok(), e.engine);
                for (label, q, bar) in [("p50", 0.5, p50_bar), ("p99", 0.99, p99_bar)] {
                    let added = crate::stats::percentiles(&rt.samples);
                    let direct = crate::stats::percentiles(base);
                    let value = if q == 0.5 {
                        added.p50 - direct.p50
                    } else {
                        added.p99 - direct.p99
                    };
                    out.push(under(
                        format!("kandev's added latency over the direct path, {label} ({name})"),
                        value,
                        difference_interval(&rt.samples, base, q),
                        bar,
                        reason.clone(),
                    ));
                }
                let visible = crate::stats::percentiles(&rt.visible);
                out.push(under(
                    format!("time to visible p50, one question at a time ({name})"),
                    visible.p50,
                    interval(&rt.visible, 0.5),
                    visible_bar(e.engine),
                    added_reason(e.breakdown.as_ref().ok(), e.engine),
                ));
            }
            (Err(err), _) | (_, Err(err)) => out.push(unmeasured(
                format!("kandev's added latency and time to visible ({name})"),
                err.clone(),
            )),
        }
        match &e.load {
            Ok(sweep) => sweep_targets(sweep, e.engine, &mut out),
            Err(err) => out.push(unmeasured(format!("knee ({name})"), err.clone())),
        }
    }
    replica_targets(r, &mut out);
    crowd_targets(r, &mut out);
    streaming_targets(r, &mut out);
    soak_targets(r, &mut out);
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

#[cfg(test)]
mod tests {
    use super::reasons::remedy;
    use super::*;
    use crate::engine::Engine;
    use crate::load::LoadResult;
    use crate::report::tests::sample;
    use crate::stats::Interval;
    use crate::stats::percentiles;

    fn find<'a>(targets: &'a [Target], prefix: &str) -> &'a Target {
        targets
            .iter()
            .find(|t| t.name.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {targets:#?}"))
    }

    #[test]
    fn budgets_are_absolute_and_met_only_when_the_whole_interval_is_under_the_bar() {
        let report = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            answer_to_agent: percentiles(&[1.0, 2.0]),
            throughput: 100.0,
            kandev_peak_rss: 10,
            ..LoadResult::default()
        });
        let targets = evaluate(&report);
        // SQLite adds 11 − 5 = 6 ms at p50 over the direct path: over 0.8 ms.
        let p50 = find(
            &targets,
            "kandev's added latency over the direct path, p50 (SQLite)",
        );
        assert_eq!(p50.met, Some(false));
        assert!(p50.measured.starts_with("6.00 ms ["), "{}", p50.measured);
        assert_eq!(p50.reason, "no breakdown this run");
        // Visible is a tenth of the round trip in the sample: 1.1 ms over SQLite's 1 ms.
        let visible = find(
            &targets,
            "time to visible p50, one question at a time (SQLite)",
        );
        assert_eq!((visible.met, visible.bar.as_str()), (Some(false), "≤ 1 ms"));
        // The sweep's one point held (p99 2 ms, kept pace) at 100/s: far under 1,500/s.
        let knee = find(
            &targets,
            "knee: answers/s while answer-to-agent p99 ≤ 25 ms (SQLite)",
        );
        assert_eq!(knee.met, Some(false));
        assert!(
            knee.measured.starts_with("100/s (p99 2.00 ms"),
            "{}",
            knee.measured
        );
        // Beside it, the questions' wait to be seen at that rate.
        assert!(
            knee.measured.contains("answered/s, time to visible p99 "),
            "{}",
            knee.measured
        );
        assert!(knee.reason.contains("the sweep's last rate still held"));
        // Each engine's reason names where the hop timing found questions waiting.
        assert!(
            knee.reason.contains("what is left is CPU"),
            "{}",
            knee.reason
        );
        let pg_knee = find(
            &targets,
            "knee: answers/s while answer-to-agent p99 ≤ 25 ms (PostgreSQL)",
        );
        assert!(pg_knee.reason.contains("in the feed"), "{}", pg_knee.reason);
        let replicas = find(&targets, "two replicas' knee ÷ one replica's");
        assert_eq!(
            (replicas.met, replicas.measured.as_str()),
            (Some(true), "100 ÷ 100/s = 1.00×")
        );
        assert_eq!(
            find(
                &targets,
                "sweep over 1 sessions, 1 operators: exactly once (PostgreSQL)"
            )
            .met,
            Some(true)
        );
        let crowd = find(&targets, "2 operator WebSockets: time to visible p99");
        assert_eq!((crowd.met, crowd.bar.as_str()), (Some(true), "≤ 30 ms"));
        assert_eq!(
            find(&targets, "2 operator WebSockets: every socket saw").met,
            Some(true)
        );
        let stream = find(
            &targets,
            "1 sessions streaming 10 chunks/s: elicitation round trip",
        );
        assert_eq!(stream.met, Some(true), "{stream:?}");
        let last = find(
            &targets,
            "1 sessions streaming 10 chunks/s: each stream's last chunk",
        );
        assert_eq!((last.met, last.bar.as_str()), (Some(true), "≤ 200 ms"));
        assert_eq!(find(&targets, "soak").met, None);
        assert_eq!(find(&targets, "mapping `map_request`").met, Some(false));
        assert_eq!(
            find(&targets, "scale 1 × 2: kandev peak RSS").met,
            Some(true)
        );

        let mut unmeasured = report;
        unmeasured.scale.clear();
        unmeasured.scale_skipped = Some("scale: skipped (--only)".into());
        unmeasured.engines[1].load = Err("load: skipped (--only)".into());
        let targets = evaluate(&unmeasured);
        assert_eq!(find(&targets, "scale").met, None);
        let knee = find(&targets, "knee (PostgreSQL)");
        assert_eq!(
            (knee.met, knee.measured.as_str()),
            (None, "not measured: load: skipped (--only)")
        );
    }

    #[test]
    fn a_budget_under_its_bar_by_its_estimate_but_not_its_interval_is_not_met() {
        // p50 0.9 ms, interval reaching past 1 ms: not met; tightly under: met.
        let wide = under(
            "w".into(),
            0.9,
            Some(Interval { lo: 0.7, hi: 1.1 }),
            1.0,
            "r".into(),
        );
        assert_eq!((wide.met, wide.reason.as_str()), (Some(false), "r"));
        assert_eq!(wide.measured, "0.90 ms [0.70, 1.10]");
        let tight = under(
            "t".into(),
            0.9,
            Some(Interval { lo: 0.85, hi: 0.95 }),
            1.0,
            "r".into(),
        );
        assert_eq!((tight.met, tight.reason.as_str()), (Some(true), ""));
    }

    #[test]
    fn an_interval_over_its_bar_by_less_than_a_hundredth_shows_three_decimals() {
        let close = under(
            "c".into(),
            0.999,
            Some(Interval {
                lo: 0.994,
                hi: 1.004,
            }),
            1.0,
            "r".into(),
        );
        assert_eq!(close.met, Some(false));
        assert_eq!(close.measured, "0.999 ms [0.994, 1.004]");
        let on = under(
            "o".into(),
            0.999,
            Some(Interval { lo: 0.994, hi: 1.0 }),
            1.0,
            "r".into(),
        );
        assert_eq!(
            (on.met, on.measured.as_str()),
            (Some(true), "1.00 ms [0.99, 1.00]")
        );
    }

    #[test]
    fn the_write_s_remedy_is_the_engine_s_own() {
        let write = "kandev record + message write";
        let sqlite = remedy(write, Engine::Sqlite);
        let postgres = remedy(write, Engine::Postgres);
        assert!(sqlite.contains("sqlx's connection thread"), "{sqlite}");
        assert!(!sqlite.contains("WAL flush"), "{sqlite}");
        assert!(postgres.contains("WAL flush"), "{postgres}");
        assert!(!postgres.contains("SQLite"), "{postgres}");
    }
}
