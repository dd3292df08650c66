//! The round trip, one question at a time, and where its time goes hop by hop.

use std::fmt::Write as _;
use std::path::Path;

use super::table::{Pick, cell, header, row, status, write_svg};
use crate::breakdown::SEGMENTS;
use crate::plot::{self, COLOURS};
use crate::report::Report;
use crate::stats::{Percentiles, percentiles};

impl Report {
    pub(super) fn round_trip_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
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

    pub(super) fn breakdown_md(&self, md: &mut String) {
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
}
