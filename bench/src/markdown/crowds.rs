//! The parts with many at once: operators watching, agents streaming, sessions opening.

use std::fmt::Write as _;
use std::path::Path;

use super::table::{header, row, status, write_svg};
use crate::plot::{self, COLOURS};
use crate::report::{Report, mb};
use crate::stats::{interval, percentiles};

impl Report {
    pub(super) fn crowd_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
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

    pub(super) fn streaming_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
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

    pub(super) fn scale_md(&self, md: &mut String, dir: &Path) -> std::io::Result<()> {
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
