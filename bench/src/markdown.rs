//! `target/bench/report.md` and its SVG histograms: the targets first, then each part
//! with one column per engine.

use std::fmt::Write as _;
use std::path::Path;

use crate::breakdown::SEGMENTS;
use crate::mapping::TARGET_RATIO;
use crate::plot::{self, COLOURS};
use crate::report::{Report, is_skipped};
use crate::stats::{Percentiles, interval, percentiles};
use crate::sweep::{KNEE_P99_MS, PACE_SHARE, Sweep};
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

/// A curve's name, colour and points, before [`plot::curves`] borrows them.
type OwnedCurve = (String, plotters::style::RGBColor, Vec<(f64, f64)>);

/// One percentile of a sample.
type Pick = fn(&Percentiles) -> f64;

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
        match &self.storage {
            Ok(st) => {
                let _ = writeln!(
                    md,
                    "Databases under `{}` ({}): a 4 KiB write + `fdatasync` takes p50 {:.3} ms, p99 {:.3} ms there. One SQLite statement (`SELECT 1`) through sqlx, which runs each connection on a thread of its own, takes p50 {:.3} ms back to back and {:.3} ms after a {} ms pause (threads woken from idle, as one question at a time wakes them at every hop). kandev runs as deployed: operator auth on (every request and WebSocket carries a token), `info` logs.\n",
                    st.dir.display(),
                    st.fs_type,
                    st.fsync.p50,
                    st.fsync.p99,
                    st.statement_busy.p50,
                    st.statement_woken.p50,
                    crate::storage::PAUSE.as_secs_f64() * 1e3
                );
            }
            Err(err) => {
                let _ = writeln!(md, "Storage not measured: {err}\n");
            }
        }
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
            md.push_str("Result: **ok** (no lost, doubled or crossed response; budgets are reported, not asserted).\n\n");
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
        self.crowd_md(&mut md, dir)?;
        self.streaming_md(&mut md, dir)?;
        self.soak_md(&mut md, dir)?;
        self.scale_md(&mut md, dir)?;
        self.replicas_md(&mut md);
        Ok(md)
    }

    fn targets_md(&self, md: &mut String) {
        md.push_str("## Budgets\n\nMet only when the figure's whole 95% interval is on the right side of the bar.\n\n");
        header(
            md,
            "budget",
            &[
                "measured",
                "bar",
                "",
                "reason (measured), and what would meet it",
            ],
        );
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
        for (label, f) in [("p50", pick[0].1), ("p99", pick[2].1)] {
            let mut cells = vec!["—".to_owned()];
            for e in &self.engines {
                cells.push(cell(&e.round_trip, |r| {
                    format!("{:.3} ms", f(&percentiles(&r.visible)))
                }));
            }
            row(md, &format!("time to visible {label}"), &cells);
        }
        for (label, f) in [("p50", pick[0].1), ("p99", pick[2].1)] {
            let mut cells = vec!["—".to_owned()];
            for e in &self.engines {
                cells.push(cell(&e.large_form, |r| {
                    format!("{:.3} ms", f(&percentiles(&r.samples)))
                }));
            }
            row(md, &format!("64-question form {label}"), &cells);
        }
        for (label, f) in [("p50", pick[0].1), ("p99", pick[2].1)] {
            let mut cells = vec!["—".to_owned()];
            for e in &self.engines {
                cells.push(cell(&e.tool_call, |r| {
                    format!("{:.3} ms", f(&percentiles(&r.samples)))
                }));
            }
            row(md, &format!("`ask_user_question_kandev` {label}"), &cells);
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
        let mut series: Vec<(String, plotters::style::RGBColor, &[f64])> = Vec::new();
        if let Ok(b) = &self.baseline {
            series.push(("direct (agentctl only)".into(), plot::DIRECT, b));
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

    fn crowd_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        md.push_str("\n## Many operators (SQLite; operator WebSockets watching while one more answers; a slow reader that reads nothing until the questions are answered)\n\n");
        let c = match &self.crowd {
            Ok(c) => c,
            Err(err) => {
                let _ = writeln!(md, "{} ({err})", status(err));
                return Ok(());
            }
        };
        let p = percentiles(&c.visible);
        let ci = interval(&c.visible, 0.99).map_or_else(String::new, |i| i.text());
        let _ = writeln!(
            md,
            "{} sockets, {} sessions, {} elicitations at {}/s: time to visible on every socket p50 {:.2} ms, p99 {:.2} ms {ci}, max {:.2} ms over {} samples; {} unseen; {} answered once, {} lost, {} doubled, {} crossed. The slow reader then read {} frames, {} of them `resync`.\n",
            c.plan.sockets,
            c.plan.sessions,
            c.plan.elicitations,
            c.plan.rate,
            p.p50,
            p.p99,
            p.max,
            p.n,
            c.unseen,
            c.result.answered,
            c.result.lost,
            c.result.doubled,
            c.result.crossed,
            c.slow.frames,
            c.slow.resyncs
        );
        write_svg(
            dir,
            "operators.svg",
            "Many operators: time to visible on every socket",
            &[("every socket".to_owned(), COLOURS[0], c.visible.as_slice())],
        )?;
        md.push_str("![Time to visible on every socket](operators.svg)\n");
        Ok(())
    }

    fn streaming_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
        md.push_str("\n## Agents that stream (SQLite; every session streams 40-character chunks while elicitations arrive; the same rate of elicitations first with no stream)\n\n");
        let s = match &self.streaming {
            Ok(s) => s,
            Err(err) => {
                let _ = writeln!(md, "{} ({err})", status(err));
                return Ok(());
            }
        };
        let (idle, during, last) = (
            percentiles(&s.idle),
            percentiles(&s.during),
            percentiles(&s.last_chunk_visible),
        );
        let (idle_seen, during_seen) =
            (percentiles(&s.idle_visible), percentiles(&s.during_visible));
        let _ = writeln!(
            md,
            "{} sessions × {} chunks/s for {} s, {} elicitations/s. Elicitation round trip (agent-observed): idle p50 {:.2} ms, p99 {:.2} ms (n {}); during the stream p50 {:.2} ms, p99 {:.2} ms (n {}). Its time to visible: idle p50 {:.2} ms, p99 {:.2} ms; during the stream p50 {:.2} ms, p99 {:.2} ms. Each stream's last chunk visible: p50 {:.1} ms, slowest {:.1} ms; {} unseen. {} answered once, {} lost, {} doubled, {} crossed.\n",
            s.plan.sessions,
            s.plan.chunks_per_s,
            s.plan.seconds,
            s.plan.rate,
            idle.p50,
            idle.p99,
            idle.n,
            during.p50,
            during.p99,
            during.n,
            idle_seen.p50,
            idle_seen.p99,
            during_seen.p50,
            during_seen.p99,
            last.p50,
            last.max,
            s.unseen,
            s.result.answered,
            s.result.lost,
            s.result.doubled,
            s.result.crossed
        );
        write_svg(
            dir,
            "streaming.svg",
            "Elicitation round trip, idle and while agents stream",
            &[
                ("idle".to_owned(), plot::DIRECT, s.idle.as_slice()),
                (
                    "during the stream".to_owned(),
                    COLOURS[0],
                    s.during.as_slice(),
                ),
            ],
        )?;
        md.push_str("![Round trip idle and during the stream](streaming.svg)\n");
        Ok(())
    }

    fn soak_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
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
                "visible p50",
                "visible p99",
                "answer-to-agent p50",
                "p99",
                "throughput",
                "kandev peak RSS",
                "agentctl peak RSS",
            ],
        );
        for p in &self.scale {
            let cells = match &p.result {
                Ok(l) => {
                    let visible = percentiles(&l.visible);
                    vec![
                        (p.sessions * self.scale_per_session).to_string(),
                        p.rounds.to_string(),
                        format!("{} of {}", l.answered, l.sent),
                        l.open_seconds
                            .map(|s| format!("{s:.1} s"))
                            .unwrap_or_default(),
                        format!("{:.2} ms", visible.p50),
                        format!("{:.2} ms", visible.p99),
                        format!("{:.2} ms", l.answer_to_agent.p50),
                        format!("{:.2} ms", l.answer_to_agent.p99),
                        format!("{:.0} answered/s", l.throughput),
                        format!("{:.1} MB", mb(l.kandev_peak_rss)),
                        format!("{:.1} MB", mb(l.agentctl_peak_rss)),
                    ]
                }
                Err(err) => vec![status(err).to_owned(), err.clone()],
            };
            row(md, &p.sessions.to_string(), &cells);
        }
        let series: Vec<(String, plotters::style::RGBColor, &[f64])> = self
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

fn write_svg(
    dir: &Path,
    file: &str,
    title: &str,
    series: &[(String, plotters::style::RGBColor, &[f64])],
) -> std::io::Result<()> {
    let borrowed: Vec<plot::Series<'_>> = series
        .iter()
        .map(|(name, colour, samples)| (name.as_str(), *colour, *samples))
        .collect();
    plot::histogram(&dir.join(file), title, &borrowed)
}

#[cfg(test)]
mod tests {
    use crate::load::LoadResult;
    use crate::report::tests::sample;

    #[test]
    fn each_soak_window_shows_its_answer_to_agent_and_its_time_to_visible() {
        let dir = tempfile::tempdir().expect("dir");
        let mut report = sample(LoadResult::default());
        let window = crate::soak::Window {
            samples: vec![1.0, 2.0],
            visible: vec![3.0, 4.0],
            rss: 1 << 20,
            db_bytes: 2 << 20,
            wal_bytes: 0,
            cpu: None,
        };
        report.soak = Ok(crate::soak::Soak {
            plan: crate::soak::SoakPlan {
                windows: 1,
                window: std::time::Duration::from_secs(60),
                rate: 1.0,
                sessions: 1,
                operators: 1,
            },
            windows: vec![window],
            total: LoadResult::default(),
        });
        let md = report.to_markdown(dir.path()).expect("markdown");
        assert!(
            md.contains("| window | answer to agent p50 | p99 | visible p50 | visible p99 |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 | 1.00 ms | 2.00 ms | 3.00 ms | 4.00 ms | 1.0 MB | 2.0 MB |"),
            "{md}"
        );
    }

    #[test]
    fn budgets_lead_and_each_part_has_a_column_per_engine() {
        let dir = tempfile::tempdir().expect("dir");
        let report = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            throughput: 100.0,
            ..LoadResult::default()
        });
        let md = report.to_markdown(dir.path()).expect("markdown");
        assert!(md.find("## Budgets") < md.find("## Round trip"), "{md}");
        assert!(md.contains("Databases under `/tmp` (ext4)"), "{md}");
        assert!(
            md.contains("| time to visible p50 | — | 1.100 ms | 1.300 ms |"),
            "{md}"
        );
        assert!(
            // Percentiles come from an HDR histogram: within 0.1%, never under.
            md.contains("| p50 | 5.003 ms | 11.007 ms | 13.007 ms |"),
            "{md}"
        );
        assert!(md.contains("| p50 ÷ direct | 1× | 2.2× | 2.6× |"), "{md}");
        assert!(
            md.contains("SQLite `engine=sqlite`; PostgreSQL `engine=postgres`"),
            "{md}"
        );
        assert!(
            md.contains("**SQLite**: 1 sessions, 1 operators, think 0 ms; knee **100/s**."),
            "{md}"
        );
        assert!(
            md.contains("| 100/s | 100/s | 2 | 1.00 ms | 2.00 ms ["),
            "{md}"
        );
        assert!(
            md.contains(" | 0 / 0 / 0 | 92% (0.95 cores) | holds |"),
            "{md}"
        );
        assert!(md.contains("**2 replica(s)**: knee **100/s**."), "{md}");
        assert!(
            md.contains("| agent → agentctl (stdio, ACP parse) | skipped |"),
            "{md}"
        );
        assert!(md.contains("2 sockets, 1 sessions, 2 elicitations at 10/s: time to visible on every socket p50 4.00 ms"), "{md}");
        assert!(
            md.contains("Its time to visible: idle p50 1.00 ms, p99 2.00 ms; during the stream p50 2.00 ms, p99 4.00 ms."),
            "{md}"
        );
        assert!(
            md.contains("| time to open all | visible p50 | visible p99 |"),
            "{md}"
        );
        for svg in [
            "round-trip.svg",
            "load.svg",
            "sweep.svg",
            "operators.svg",
            "scale.svg",
        ] {
            assert!(dir.path().join(svg).is_file(), "{svg}");
        }
    }
}
