//! The steady-rate parts: the arrival-rate sweep, the soak and the replicas.

use std::fmt::Write as _;
use std::path::Path;

use super::table::{OwnedCurve, header, row, status, write_svg};
use crate::plot::{self, COLOURS};
use crate::report::{Report, mb};
use crate::stats::{interval, percentiles};
use crate::sweep::{KNEE_P99_MS, PACE_SHARE, Sweep};

impl Report {
    pub(super) fn load_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        let _ = writeln!(
            md,
            "\n## Load: an arrival-rate sweep (one local agentctl per session)\n\nThe sessions are started first; then, at each offered rate, the agents open elicitations on a fixed schedule whether or not earlier ones were answered, and the operators answer each one they see after their think time, on a free connection of their own (open loop: queueing anywhere shows in the latency). Answer to agent (the headline): the operator means to answer → the agent reads the response. Time to visible: the agent sends → the operator's WebSocket reads `clarification.created`. Intervals: bootstrap 95%. The sweep stops at the first rate whose p99 interval is not under {KNEE_P99_MS} ms, or that the answers cannot keep pace with ({}% of it), or that loses one.\n",
            (PACE_SHARE * 100.0) as u32
        );
        let mut curves: Vec<OwnedCurve> = Vec::new();
        let mut knees: Vec<(String, plotters::style::RGBColor, &[f64])> = Vec::new();
        for (e, colour) in self.engines.iter().zip(COLOURS) {
            let name = e.engine.name();
            let sweep = match &e.load {
                Ok(sweep) => sweep,
                Err(err) => {
                    let _ = writeln!(md, "**{name}**: {} ({err})\n", status(err));
                    continue;
                }
            };
            let knee = sweep.knee().map_or_else(
                || "below the first rate".to_owned(),
                |p| format!("{:.0}/s", p.offered),
            );
            let cold = percentiles(&sweep.cold_starts);
            let _ = writeln!(
                md,
                "**{name}**: {} sessions, {} operators, think {} ms; knee **{knee}**. Session cold start (`POST …/sessions` → the agent ready, one at a time): p50 {:.1} ms, max {:.1} ms.\n",
                sweep.sessions, sweep.operators, sweep.think_ms, cold.p50, cold.max
            );
            sweep_table(md, sweep);
            let l = &sweep.total;
            let _ = writeln!(
                md,
                "\nOver the sweep: {} sent, {} answered once, {} lost, {} doubled, {} crossed; kandev peak RSS {:.1} MB; one agentctl's peak RSS {:.1} MB (median {:.1} MB of {}).\n",
                l.sent,
                l.answered,
                l.lost,
                l.doubled,
                l.crossed,
                mb(l.kandev_peak_rss),
                mb(l.agentctl_peak_rss),
                mb(l.agentctl_median_peak_rss),
                l.agentctls
            );
            curves.push((
                name.to_owned(),
                colour,
                sweep
                    .points
                    .iter()
                    .map(|p| (p.offered, p.result.answer_to_agent.p99))
                    .collect(),
            ));
            if let Some(p) = sweep.knee().or(sweep.points.first()) {
                knees.push((
                    format!("{name} at {:.0}/s", p.offered),
                    colour,
                    &p.result.samples,
                ));
            }
        }
        let borrowed: Vec<plot::Curve<'_>> = curves
            .iter()
            .map(|(name, colour, points)| (name.as_str(), *colour, points.as_slice()))
            .collect();
        plot::curves(
            &dir.join("sweep.svg"),
            "Load: answer-to-agent p99 by offered rate",
            ("offered elicitations/s", "p99 (ms)"),
            &borrowed,
            KNEE_P99_MS,
        )?;
        write_svg(
            dir,
            "load.svg",
            "Load: answer-to-agent latency at the knee",
            &knees,
        )?;
        md.push_str("![p99 by offered rate](sweep.svg)\n\n![Answer-to-agent latency at the knee](load.svg)\n");
        Ok(())
    }

    pub(super) fn soak_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        md.push_str("\n## Soak (SQLite; a steady rate for a long run, cut into windows)\n\n");
        let s = match &self.soak {
            Ok(s) => s,
            Err(err) => {
                let _ = writeln!(md, "{err}");
                return Ok(());
            }
        };
        header(
            md,
            "window",
            &[
                "answer to agent p50",
                "p99",
                "visible p50",
                "visible p99",
                "kandev RSS",
                "threads",
                "database files open",
                "database",
                "WAL",
                "CPU busy (kandev)",
            ],
        );
        for (i, w) in s.windows.iter().enumerate() {
            let (p, v) = (percentiles(&w.samples), percentiles(&w.visible));
            row(
                md,
                &(i + 1).to_string(),
                &[
                    format!("{:.2} ms", p.p50),
                    format!("{:.2} ms", p.p99),
                    format!("{:.2} ms", v.p50),
                    format!("{:.2} ms", v.p99),
                    format!("{:.1} MB", mb(w.rss)),
                    w.threads.map_or_else(String::new, |n| n.to_string()),
                    w.database_files.map_or_else(String::new, |n| n.to_string()),
                    format!("{:.1} MB", mb(w.db_bytes)),
                    format!("{:.1} MB", mb(w.wal_bytes)),
                    w.cpu.map_or_else(String::new, |c| {
                        format!("{:.0}% ({:.2} cores)", 100.0 * c.busy, c.kandev_cores)
                    }),
                ],
            );
        }
        let p99: Vec<(f64, f64)> = s
            .windows
            .iter()
            .enumerate()
            .map(|(i, w)| ((i + 1) as f64, percentiles(&w.samples).p99))
            .collect();
        plot::curves(
            &dir.join("soak.svg"),
            "Soak: answer-to-agent p99 by window",
            ("window", "p99 (ms)"),
            &[("SQLite", COLOURS[0], &p99)],
            KNEE_P99_MS,
        )?;
        md.push_str("\n![Soak p99 by window](soak.svg)\n");
        Ok(())
    }

    pub(super) fn replicas_md(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Replicas (PostgreSQL; the sweep through 1 and 2 kandev processes on this one machine: session s started on replica s mod R, operator i on replica i mod R, so most answers are forwarded and most events cross replicas)\n"
        );
        if let Some(why) = &self.replicas_skipped {
            let _ = writeln!(md, "{why}");
            return;
        }
        for p in &self.replicas {
            match &p.result {
                Ok(sweep) => {
                    let knee = sweep.knee().map_or_else(
                        || "below the first rate".to_owned(),
                        |k| format!("{:.0}/s", k.offered),
                    );
                    let _ = writeln!(md, "**{} replica(s)**: knee **{knee}**.\n", p.replicas);
                    sweep_table(md, sweep);
                    md.push('\n');
                }
                Err(err) => {
                    let _ = writeln!(
                        md,
                        "**{} replica(s)**: {} ({err})\n",
                        p.replicas,
                        status(err)
                    );
                }
            }
        }
    }
}

/// One row per offered rate.
fn sweep_table(md: &mut String, sweep: &Sweep) {
    header(
        md,
        "offered",
        &[
            "answered",
            "n",
            "answer to agent p50",
            "p99 [95% interval]",
            "visible p50",
            "visible p99",
            "lost / doubled / crossed",
            "CPU busy (kandev)",
            "",
        ],
    );
    for p in &sweep.points {
        let r = &p.result;
        let (answer, visible) = (percentiles(&r.samples), percentiles(&r.visible));
        let ci = interval(&r.samples, 0.99).map_or_else(String::new, |i| i.text());
        row(
            md,
            &format!("{:.0}/s", p.offered),
            &[
                format!("{:.0}/s", r.throughput),
                r.samples.len().to_string(),
                format!("{:.2} ms", answer.p50),
                format!("{:.2} ms {ci}", answer.p99),
                format!("{:.2} ms", visible.p50),
                format!("{:.2} ms", visible.p99),
                format!("{} / {} / {}", r.lost, r.doubled, r.crossed),
                p.cpu.map_or_else(String::new, |c| {
                    format!("{:.0}% ({:.2} cores)", 100.0 * c.busy, c.kandev_cores)
                }),
                if p.holds() {
                    "holds"
                } else {
                    "**past the knee**"
                }
                .to_owned(),
            ],
        );
    }
}
