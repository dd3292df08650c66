//! `target/bench/report.md` and its SVG histograms: the targets first, then each part
//! with one column per engine.

use std::fmt::Write as _;
use std::path::Path;

use crate::breakdown::SEGMENTS;
use crate::load::LoadResult;
use crate::mapping::TARGET_RATIO;
use crate::report::{EngineFigures, Report, is_skipped};
use crate::stats::{Percentiles, histogram_svg, percentiles};
use crate::targets::evaluate;

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn status(err: &str) -> &'static str {
    if is_skipped(err) { "skipped" } else { "BROKEN" }
}

fn met(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

/// A table row: a label and one cell per column.
fn row(md: &mut String, label: &str, cells: &[String]) {
    let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
}

fn header(md: &mut String, first: &str, columns: &[&str]) {
    row(
        md,
        first,
        &columns.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>(),
    );
    let _ = writeln!(md, "|---|{}", "---|".repeat(columns.len()));
}

fn cell<T>(part: &Result<T, String>, f: impl FnOnce(&T) -> String) -> String {
    match part {
        Ok(v) => f(v),
        Err(err) => status(err).to_owned(),
    }
}

/// One percentile of a sample.
type Pick = fn(&Percentiles) -> f64;

/// One figure of a load result, formatted.
type LoadCell = fn(&LoadResult) -> String;

const COLOURS: [&str; 3] = ["#c0392b", "#8e44ad", "#27ae60"];

impl Report {
    /// The human-readable report; SVGs are written next to it in `dir`.
    pub fn to_markdown(&self, dir: &Path) -> std::io::Result<String> {
        let mut md = String::new();
        let m = &self.meta;
        let _ = writeln!(md, "# kandev bench ({})\n", m.mode);
        let _ = writeln!(
            md,
            "{} · commit `{}` · stack binaries `target/{}` ({} profile) · mapping benches in the bench profile · {} CPUs. Reproduce: `just bench` (`just bench --quick` is CI's reduced run on dev binaries).\n",
            m.date,
            m.commit,
            m.profile,
            if m.profile == "debug" {
                "dev"
            } else {
                &m.profile
            },
            m.cpus
        );
        md.push_str("Commits measured (as kandev read them from its own connections): ");
        let durability: Vec<String> = self
            .engines
            .iter()
            .map(|e| {
                format!(
                    "{} `{}`",
                    e.engine.name(),
                    e.durability().unwrap_or("not reported")
                )
            })
            .collect();
        let _ = writeln!(
            md,
            "{}. An elicitation the operator sees is committed before it is pushed.\n",
            durability.join("; ")
        );
        let failures = self.failures();
        if failures.is_empty() {
            md.push_str("Result: **ok** (no lost, doubled or crossed response; targets are reported, not asserted).\n\n");
        } else {
            md.push_str("Result: **BROKEN**\n\n");
            for f in &failures {
                let _ = writeln!(md, "- {f}");
            }
            md.push('\n');
        }
        self.targets_md(&mut md);
        self.mapping_md(&mut md);
        self.round_trip_md(&mut md, dir)?;
        self.breakdown_md(&mut md);
        self.load_md(&mut md, dir)?;
        self.scale_md(&mut md, dir)?;
        self.replicas_md(&mut md);
        Ok(md)
    }

    fn targets_md(&self, md: &mut String) {
        md.push_str("## Targets\n\n");
        header(md, "target", &["measured", "bar", "", "reason (measured)"]);
        for t in evaluate(self) {
            row(
                md,
                &t.name,
                &[t.measured, t.bar, met(t.met).to_owned(), t.reason],
            );
        }
    }

    fn mapping_md(&self, md: &mut String) {
        md.push_str("\n## Mapping (criterion medians)\n\nBaseline: `serde_json::from_slice` of the same bytes (the request params for `map_request`, the operator's respond payload for `build_response`).\n\n");
        header(
            md,
            "form",
            &["operation", "median", "baseline", "ratio", "target"],
        );
        match &self.mapping {
            Ok(figures) => {
                for f in figures {
                    row(
                        md,
                        &f.group,
                        &[
                            format!("`{}`", f.operation),
                            format!("{:.2} µs", f.ns / 1e3),
                            format!("{:.2} µs", f.baseline_ns / 1e3),
                            format!("{:.2}×", f.ratio()),
                            format!("≤ {TARGET_RATIO}×"),
                        ],
                    );
                }
            }
            Err(err) => row(md, status(err), std::slice::from_ref(err)),
        }
    }

    fn round_trip_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        let _ = writeln!(
            md,
            "\n## Round trip (agent request → operator WebSocket event → respond → agent receives)\n\n{} sequential elicitations of the two-question bridge form per path, timed by the agent, timing events off, in {} turns: the direct path, then each engine's full stack, and again ({} warm-up discarded per turn), so a slow stretch of the machine falls on every path alike. Direct: the same agent under a standalone agentctl, answered straight over the agent stream.\n",
            self.rt_n, self.rt_rounds, self.rt_warmup
        );
        let mut columns = vec!["direct (agentctl only)"];
        columns.extend(self.engines.iter().map(|e| e.engine.name()));
        header(md, "", &columns);
        let base: Result<Percentiles, String> = self
            .baseline
            .as_ref()
            .map(|b| percentiles(b))
            .map_err(Clone::clone);
        let fulls: Vec<Result<Percentiles, &String>> = self
            .engines
            .iter()
            .map(|e| e.round_trip.as_ref().map(|r| percentiles(&r.samples)))
            .collect();
        let pick: [(&str, Pick); 4] = [
            ("p50", |p| p.p50),
            ("p95", |p| p.p95),
            ("p99", |p| p.p99),
            ("max", |p| p.max),
        ];
        for (label, f) in pick {
            let mut cells = vec![cell(&base, |b| format!("{:.3} ms", f(b)))];
            for full in &fulls {
                cells.push(match full {
                    Ok(p) => format!("{:.3} ms", f(p)),
                    Err(err) => status(err).to_owned(),
                });
            }
            row(md, label, &cells);
        }
        for (label, f) in [("p50 ÷ direct", pick[0].1), ("p99 ÷ direct", pick[2].1)] {
            let mut cells = vec!["1×".to_owned()];
            for full in &fulls {
                cells.push(match (full, &base) {
                    (Ok(p), Ok(b)) => format!("{:.1}×", f(p) / f(b)),
                    _ => "—".to_owned(),
                });
            }
            row(md, label, &cells);
        }
        let mut series: Vec<(String, &str, &[f64])> = Vec::new();
        if let Ok(b) = &self.baseline {
            series.push(("direct (agentctl only)".into(), "#2e6fd0", b));
        }
        for (e, colour) in self.engines.iter().zip(COLOURS) {
            if let Ok(r) = &e.round_trip {
                series.push((
                    format!("full stack, {}", e.engine.name()),
                    colour,
                    &r.samples,
                ));
            }
        }
        write_svg(dir, "round-trip.svg", "Round-trip latency", &series)?;
        md.push_str("\n![Round-trip latency histogram](round-trip.svg)\n");
        Ok(())
    }

    fn breakdown_md(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Where the time goes (one round trip, by hop)\n\nA separate pass of {} round trips with the timing events on (`RUST_LOG=…,kandev::timing=debug` in kandev and agentctl, read back from their logs; the bench's own instants for the agent and the operator client; one wall clock). Share: of the mean round trip; the hops on the agent's path add up to it. The last three follow the agent's answer (the operator's HTTP response).\n",
            self.breakdown_n
        );
        let mut columns = Vec::new();
        for e in &self.engines {
            columns.push(format!("{} p50", e.engine.name()));
            columns.push(format!("{} p99", e.engine.name()));
            columns.push(format!("{} share", e.engine.name()));
        }
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        header(md, "hop", &columns);
        for (i, segment) in SEGMENTS.iter().enumerate() {
            let mut cells = Vec::new();
            for e in &self.engines {
                match &e.breakdown {
                    Ok(b) => {
                        let f = &b.segments[i];
                        cells.push(format!("{:.3} ms", f.pct.p50));
                        cells.push(format!("{:.3} ms", f.pct.p99));
                        cells.push(if segment.on_agent_path {
                            format!("{:.0}%", 100.0 * b.share(f))
                        } else {
                            "(after)".to_owned()
                        });
                    }
                    Err(err) => {
                        cells.extend([status(err).to_owned(), String::new(), String::new()])
                    }
                }
            }
            row(md, segment.name, &cells);
        }
        let mut cells = Vec::new();
        for e in &self.engines {
            match &e.breakdown {
                Ok(b) => {
                    cells.push(format!("{:.3} ms", b.total.p50));
                    cells.push(format!("{:.3} ms", b.total.p99));
                    cells.push(format!("mean {:.3} ms, n {}", b.total_mean, b.total.n));
                }
                Err(_) => cells.extend([String::new(), String::new(), String::new()]),
            }
        }
        row(md, "**round trip (this pass)**", &cells);
    }

    fn load_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        let s = self.shape;
        let _ = writeln!(
            md,
            "\n## Load ({} sessions × {} concurrent elicitations, {} operator clients, one local agentctl per session)\n\nCounted on the agents' side. Answer-to-agent: the operator's POST starts → the agent reads the response (wall clock, one machine).\n",
            s.sessions, s.per_session, s.operators
        );
        let columns: Vec<&str> = self.engines.iter().map(|e| e.engine.name()).collect();
        header(md, "figure", &columns);
        let rows: [(&str, LoadCell); 9] = [
            ("sent / answered once", |l| {
                format!("{} / {}", l.sent, l.answered)
            }),
            ("lost / doubled / crossed", |l| {
                format!("{} / {} / {}", l.lost, l.doubled, l.crossed)
            }),
            ("throughput", |l| format!("{:.0} answered/s", l.throughput)),
            ("answer-to-agent p50", |l| {
                format!("{:.2} ms", l.answer_to_agent.p50)
            }),
            ("answer-to-agent p95", |l| {
                format!("{:.2} ms", l.answer_to_agent.p95)
            }),
            ("answer-to-agent p99", |l| {
                format!("{:.2} ms", l.answer_to_agent.p99)
            }),
            ("answer-to-agent max", |l| {
                format!("{:.2} ms", l.answer_to_agent.max)
            }),
            ("kandev peak RSS", |l| {
                format!("{:.1} MB", mb(l.kandev_peak_rss))
            }),
            ("one agentctl peak RSS (max / median)", |l| {
                format!(
                    "{:.1} / {:.1} MB of {}",
                    mb(l.agentctl_peak_rss),
                    mb(l.agentctl_median_peak_rss),
                    l.agentctls
                )
            }),
        ];
        for (label, f) in rows {
            let cells: Vec<String> = self.engines.iter().map(|e| cell(&e.load, f)).collect();
            row(md, label, &cells);
        }
        let series: Vec<(String, &str, &[f64])> = self
            .engines
            .iter()
            .zip(COLOURS)
            .filter_map(|(e, colour): (&EngineFigures, &str)| {
                e.load
                    .as_ref()
                    .ok()
                    .map(|l| (e.engine.name().to_owned(), colour, l.samples.as_slice()))
            })
            .collect();
        write_svg(dir, "load.svg", "Load: answer-to-agent latency", &series)?;
        md.push_str("\n![Load answer-to-agent latency histogram](load.svg)\n");
        Ok(())
    }

    fn scale_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        let _ = writeln!(
            md,
            "\n## Scale (SQLite; every session on one remote agentctl; {} elicitations per session, all open at once, then answered by 10 operator clients)\n",
            self.scale_per_session
        );
        md.push_str(
            "A small point runs several rounds, each on fresh processes, and its figures pool them, so every p99 is read over about as many answers (time to open all: the slowest round).\n\n",
        );
        if let Some(why) = &self.scale_skipped {
            let _ = writeln!(md, "{why}");
            return Ok(());
        }
        header(
            md,
            "sessions",
            &[
                "open at once",
                "rounds",
                "answered once",
                "time to open all",
                "answer-to-agent p50",
                "p99",
                "throughput",
                "kandev peak RSS",
                "agentctl peak RSS",
            ],
        );
        for p in &self.scale {
            let cells = match &p.result {
                Ok(l) => vec![
                    (p.sessions * self.scale_per_session).to_string(),
                    p.rounds.to_string(),
                    format!("{} of {}", l.answered, l.sent),
                    l.open_seconds
                        .map(|s| format!("{s:.1} s"))
                        .unwrap_or_default(),
                    format!("{:.2} ms", l.answer_to_agent.p50),
                    format!("{:.2} ms", l.answer_to_agent.p99),
                    format!("{:.0} answered/s", l.throughput),
                    format!("{:.1} MB", mb(l.kandev_peak_rss)),
                    format!("{:.1} MB", mb(l.agentctl_peak_rss)),
                ],
                Err(err) => vec![status(err).to_owned(), err.clone()],
            };
            row(md, &p.sessions.to_string(), &cells);
        }
        let series: Vec<(String, &str, &[f64])> = self
            .scale
            .iter()
            .zip(COLOURS)
            .filter_map(|(p, colour)| {
                p.result.as_ref().ok().map(|l| {
                    (
                        format!("{} sessions", p.sessions),
                        colour,
                        l.samples.as_slice(),
                    )
                })
            })
            .collect();
        write_svg(dir, "scale.svg", "Scale: answer-to-agent latency", &series)?;
        md.push_str("\n![Scale answer-to-agent latency histogram](scale.svg)\n");
        Ok(())
    }
}

impl Report {
    fn replicas_md(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Replicas (PostgreSQL; the load's shape through 1, 2 and 3 kandev processes on this one machine: session s started on replica s mod R, operator i on replica i mod R, so most answers are forwarded and most events cross replicas — a ratio to one replica, not a scaling claim)\n"
        );
        if let Some(why) = &self.replicas_skipped {
            let _ = writeln!(md, "{why}");
            return;
        }
        let one = self
            .replicas
            .iter()
            .find(|p| p.replicas == 1)
            .and_then(|p| p.result.as_ref().ok());
        header(
            md,
            "replicas",
            &[
                "answered once",
                "lost",
                "doubled",
                "answer-to-agent p50",
                "p99",
                "p99 ÷ 1 replica",
                "throughput",
                "÷ 1 replica",
            ],
        );
        for p in &self.replicas {
            let cells = match &p.result {
                Ok(l) => {
                    let ratio = |f: fn(&LoadResult) -> f64| match one {
                        Some(one) if f(one) > 0.0 => format!("{:.2}×", f(l) / f(one)),
                        _ => "—".to_owned(),
                    };
                    vec![
                        l.answered.to_string(),
                        l.lost.to_string(),
                        (l.doubled + l.crossed).to_string(),
                        format!("{:.2} ms", l.answer_to_agent.p50),
                        format!("{:.2} ms", l.answer_to_agent.p99),
                        ratio(|l| l.answer_to_agent.p99),
                        format!("{:.0} answered/s", l.throughput),
                        ratio(|l| l.throughput),
                    ]
                }
                Err(err) => vec![status(err).to_owned(), err.clone()],
            };
            row(md, &p.replicas.to_string(), &cells);
        }
    }
}

fn write_svg(
    dir: &Path,
    file: &str,
    title: &str,
    series: &[(String, &str, &[f64])],
) -> std::io::Result<()> {
    let borrowed: Vec<(&str, &str, &[f64])> = series
        .iter()
        .map(|(name, colour, samples)| (name.as_str(), *colour, *samples))
        .collect();
    std::fs::write(dir.join(file), histogram_svg(title, &borrowed))
}

#[cfg(test)]
mod tests {
    use crate::load::LoadResult;
    use crate::report::tests::sample;

    #[test]
    fn targets_lead_and_each_part_has_a_column_per_engine() {
        let dir = tempfile::tempdir().expect("dir");
        let report = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            ..LoadResult::default()
        });
        let md = report.to_markdown(dir.path()).expect("markdown");
        assert!(md.find("## Targets") < md.find("## Round trip"), "{md}");
        assert!(
            md.contains("| p50 | 5.000 ms | 11.000 ms | 13.000 ms |"),
            "{md}"
        );
        assert!(md.contains("| p50 ÷ direct | 1× | 2.2× | 2.6× |"), "{md}");
        assert!(
            md.contains("SQLite `engine=sqlite`; PostgreSQL `engine=postgres`"),
            "{md}"
        );
        assert!(
            md.contains("| sent / answered once | 2 / 2 | 2 / 2 |"),
            "{md}"
        );
        assert!(
            md.contains("| agent → agentctl (stdio, ACP parse) | skipped |"),
            "{md}"
        );
        for svg in ["round-trip.svg", "load.svg", "scale.svg"] {
            assert!(dir.path().join(svg).is_file(), "{svg}");
        }
    }
}
