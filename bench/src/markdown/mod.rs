//! `target/bench/report.md` and its SVG histograms: the targets first, then each part
//! with one column per engine.
//!
//! One file per family of parts: [`latency`] (round trip, hops), [`load`] (sweep, soak,
//! replicas), [`crowds`] (operators, streams, scale); [`table`] holds the cells they share.

mod crowds;
mod latency;
mod load;
mod table;

use std::fmt::Write as _;
use std::path::Path;

use crate::mapping::TARGET_RATIO;
use crate::report::Report;
use crate::targets::evaluate;
use table::{header, met, row, status};

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
                    "Databases under `{}` ({}): a 4 KiB write + `fdatasync` takes p50 {:.3} ms, p99 {:.3} ms there. One SQLite statement (`SELECT 1`) through sqlx, which runs each connection on a thread of its own, takes p50 {:.3} ms back to back and {:.3} ms after a {} ms pause (threads woken from idle, as one question at a time wakes them at every hop). kandev runs as deployed: operator auth on (every request and WebSocket carries a token), `info` logs. Operator sockets follow the board, as the web UI's board does (they connect with `?watch=`, no session's transcript); the streaming scenario's one socket that times the last chunks follows every transcript.\n",
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
            threads: Some(9),
            database_files: Some(6),
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
            md.contains("| 1 | 1.00 ms | 2.00 ms | 3.00 ms | 4.00 ms | 1.0 MB | 9 | 6 | 2.0 MB |"),
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
