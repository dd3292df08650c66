//! What one run measured, and why a run counts as broken. The targets, the JSON and the
//! Markdown are read from a [`Report`] by the modules beside this one.

use crate::breakdown::Breakdown;
use crate::crowd::Crowd;
use crate::engine::Engine;
use crate::load::{LoadResult, Shape};
use crate::mapping::MappingFigure;
use crate::roundtrip::FullStack;
use crate::soak::Soak;
use crate::storage::Storage;
use crate::streaming::Streaming;
use crate::sweep::Sweep;

/// The error text of a part `--only` left out.
pub const SKIPPED: &str = "skipped (--only)";

/// The result of a part `--only` left out (not a failure).
pub fn skipped<T>(part: &str) -> Result<T, String> {
    Err(format!("{part}: {SKIPPED}"))
}

/// Whether `err` is a left-out part rather than a broken one.
pub fn is_skipped(err: &str) -> bool {
    err.ends_with(SKIPPED)
}

/// Bytes as MiB, as the report shows every memory and file size.
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Where and on what the run happened.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// The directory under `target/` the stack binaries come from (`release`, `debug`).
    pub profile: String,
    /// `git rev-parse HEAD`, `+dirty` with uncommitted changes.
    pub commit: String,
    /// When the run started, UTC, RFC 3339.
    pub date: String,
    /// CPUs.
    pub cpus: usize,
}

/// The figures of one engine.
#[derive(Debug)]
pub struct EngineFigures {
    /// The engine.
    pub engine: Engine,
    /// The measured round trips (timing events off).
    pub round_trip: Result<FullStack, String>,
    /// Round trips of the 64-question form.
    pub large_form: Result<FullStack, String>,
    /// Round trips through the `ask_user_question_kandev` MCP tool.
    pub tool_call: Result<FullStack, String>,
    /// The per-hop breakdown (a separate pass with the timing events on).
    pub breakdown: Result<Breakdown, String>,
    /// The load: the arrival-rate sweep.
    pub load: Result<Sweep, String>,
    /// The commit settings kandev reported for its database, from whichever pass ran.
    pub durability: Option<String>,
}

impl EngineFigures {
    /// The commit settings kandev reported.
    pub fn durability(&self) -> Option<&str> {
        self.durability.as_deref()
    }
}

/// One point of the scale curve.
#[derive(Debug)]
pub struct ScalePoint {
    /// Sessions.
    pub sessions: usize,
    /// Rounds of that shape run (each on fresh processes) and absorbed into `result`, so
    /// a small point's p99 is read over as many answers as a large one's.
    pub rounds: usize,
    /// What it measured.
    pub result: Result<LoadResult, String>,
}

/// One run of the load through several replicas.
#[derive(Debug)]
pub struct ReplicaPoint {
    /// Replicas on the shared PostgreSQL database.
    pub replicas: usize,
    /// The sweep through them.
    pub result: Result<Sweep, String>,
}

/// Everything one run measured (a part is `Err` when it broke or was left out).
#[derive(Debug)]
pub struct Report {
    /// Where and on what.
    pub meta: Meta,
    /// The mapping figures.
    pub mapping: Result<Vec<MappingFigure>, String>,
    /// Measured round trips per path, and the warm-up discarded before them.
    pub rt_n: usize,
    /// Warm-up round trips, discarded at the start of each turn.
    pub rt_warmup: usize,
    /// Turns the paths took (direct, each engine, again), so noise falls on all alike.
    pub rt_rounds: usize,
    /// Round trips in each breakdown pass.
    pub breakdown_n: usize,
    /// The direct path (agentctl answered over the agent stream), ms.
    pub baseline: Result<Vec<f64>, String>,
    /// Per engine, in column order.
    pub engines: Vec<EngineFigures>,
    /// The databases' directory and its sync latency.
    pub storage: Result<Storage, String>,
    /// Many operators watching.
    pub crowd: Result<Crowd, String>,
    /// Agents that stream.
    pub streaming: Result<Streaming, String>,
    /// The soak (`--soak` runs only it).
    pub soak: Result<Soak, String>,
    /// The scale runs' operators (`sessions` and `per_session` are the scale points').
    pub shape: Shape,
    /// Elicitations per session in the scale runs.
    pub scale_per_session: usize,
    /// The scale curve (SQLite, one remote agentctl).
    pub scale: Vec<ScalePoint>,
    /// Why the scale part did not run, if it did not.
    pub scale_skipped: Option<String>,
    /// The load through 1, 2 and 3 replicas (PostgreSQL, full runs).
    pub replicas: Vec<ReplicaPoint>,
    /// Why the replicas part did not run, if it did not.
    pub replicas_skipped: Option<String>,
}

impl Report {
    /// Why the run counts as broken: a part failed, or a response was lost, doubled or
    /// crossed, or a respond call failed.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut part = |name: &str, err: Option<&String>| {
            if let Some(err) = err.filter(|e| !is_skipped(e)) {
                failures.push(format!("{name}: {err}"));
            }
        };
        part("mapping", self.mapping.as_ref().err());
        part("operators", self.crowd.as_ref().err());
        part("streaming", self.streaming.as_ref().err());
        if !self
            .soak
            .as_ref()
            .is_err_and(|e| e.starts_with("soak: not run"))
        {
            part("soak", self.soak.as_ref().err());
        }
        part("round trip (direct)", self.baseline.as_ref().err());
        for e in &self.engines {
            part(
                &format!("round trip ({})", e.engine.name()),
                e.round_trip.as_ref().err(),
            );
            part(
                &format!("64-question round trip ({})", e.engine.name()),
                e.large_form.as_ref().err(),
            );
            part(
                &format!("ask_user_question round trip ({})", e.engine.name()),
                e.tool_call.as_ref().err(),
            );
            part(
                &format!("breakdown ({})", e.engine.name()),
                e.breakdown.as_ref().err(),
            );
            part(
                &format!("load ({})", e.engine.name()),
                e.load.as_ref().err(),
            );
        }
        for point in &self.scale {
            part(
                &format!("scale ({} sessions)", point.sessions),
                point.result.as_ref().err(),
            );
        }
        for point in &self.replicas {
            part(
                &format!("replicas ({})", point.replicas),
                point.result.as_ref().err(),
            );
        }
        let sweeps = self
            .engines
            .iter()
            .map(|e| (format!("load ({})", e.engine.name()), &e.load))
            .chain(
                self.replicas
                    .iter()
                    .map(|p| (format!("replicas ({})", p.replicas), &p.result)),
            )
            .filter_map(|(name, sweep)| sweep.as_ref().ok().map(|s| (name, &s.total)));
        let scale = self.scale.iter().filter_map(|p| {
            p.result
                .as_ref()
                .ok()
                .map(|l| (format!("scale ({} sessions)", p.sessions), l))
        });
        let crowd = self
            .crowd
            .iter()
            .map(|c| ("operators".to_owned(), &c.result))
            .chain(
                self.streaming
                    .iter()
                    .map(|s| ("streaming".to_owned(), &s.result)),
            )
            .chain(self.soak.iter().map(|s| ("soak".to_owned(), &s.total)));
        for (name, l) in sweeps.chain(scale).chain(crowd) {
            if l.lost + l.doubled + l.crossed > 0 {
                failures.push(format!(
                    "{name}: {} lost, {} doubled, {} crossed responses (must all be 0)",
                    l.lost, l.doubled, l.crossed
                ));
            }
            if l.respond_errors > 0 {
                failures.push(format!("{name}: {} respond calls failed", l.respond_errors));
            }
        }
        failures
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sweep of one point at 100/s holding `load`, pooled as the total too.
    pub(crate) fn sweep_of(load: &LoadResult) -> Sweep {
        Sweep {
            sessions: 1,
            operators: 1,
            think_ms: 0.0,
            points: vec![crate::sweep::RatePoint {
                offered: 100.0,
                result: load.clone(),
                cpu: Some(crate::cpu::CpuUse {
                    busy: 0.92,
                    kandev_cores: 0.95,
                    agentctl_cores: 0.45,
                    other_cores: 0.44,
                    cpus: 2,
                }),
            }],
            total: load.clone(),
            cold_starts: vec![120.0, 80.0],
        }
    }

    /// A report with every part filled in, for this module's and the Markdown's tests.
    pub(crate) fn sample(load: LoadResult) -> Report {
        let engine = |engine, full: Vec<f64>| EngineFigures {
            engine,
            round_trip: Ok(FullStack {
                visible: full.iter().map(|v| v / 10.0).collect(),
                samples: full,
                breakdown: None,
                durability: Some(format!("engine={}", engine.key())),
            }),
            large_form: Ok(FullStack {
                visible: vec![2.0, 3.0],
                samples: vec![20.0, 30.0],
                breakdown: None,
                durability: None,
            }),
            tool_call: Ok(FullStack {
                visible: vec![1.5],
                samples: vec![7.0],
                breakdown: None,
                durability: None,
            }),
            breakdown: Err("breakdown: skipped (--only)".into()),
            load: Ok(sweep_of(&load)),
            durability: Some(format!("engine={}", engine.key())),
        };
        Report {
            meta: Meta {
                mode: "quick",
                profile: "debug".into(),
                commit: "abc".into(),
                date: "2026-01-01T00:00:00Z".into(),
                cpus: 2,
            },
            mapping: Ok(vec![MappingFigure {
                group: "map_two_question".into(),
                operation: "map_request".into(),
                ns: 3000.0,
                baseline_ns: 1000.0,
            }]),
            rt_n: 3,
            rt_warmup: 1,
            rt_rounds: 1,
            breakdown_n: 0,
            baseline: Ok(vec![4.0, 5.0, 6.0]),
            engines: vec![
                engine(Engine::Sqlite, vec![10.0, 11.0, 40.0]),
                engine(Engine::Postgres, vec![12.0, 13.0, 14.0]),
            ],
            crowd: Ok(Crowd {
                plan: crate::crowd::CrowdPlan {
                    sockets: 2,
                    sessions: 1,
                    rate: 10.0,
                    elicitations: 2,
                },
                result: load.clone(),
                visible: vec![3.0, 4.0, 5.0, 6.0],
                unseen: 0,
                slow: crate::crowd::SlowReader {
                    frames: 9,
                    resyncs: 1,
                },
            }),
            streaming: Ok(Streaming {
                plan: crate::streaming::StreamPlan {
                    sessions: 1,
                    chunks_per_s: 10.0,
                    seconds: 1.0,
                    rate: 10.0,
                    operators: 1,
                },
                idle: vec![2.0, 3.0],
                during: vec![3.0, 5.0],
                idle_visible: vec![1.0, 2.0],
                during_visible: vec![2.0, 4.0],
                last_chunk_visible: vec![40.0],
                unseen: 0,
                result: load.clone(),
                cpu: None,
            }),
            soak: Err("soak: not run (`just bench --soak`)".into()),
            storage: Ok(Storage {
                dir: "/tmp".into(),
                fs_type: "ext4".into(),
                fsync: crate::stats::percentiles(&[0.5, 1.0]),
                statement_busy: crate::stats::percentiles(&[0.02, 0.03]),
                statement_woken: crate::stats::percentiles(&[0.07, 0.09]),
            }),
            shape: Shape {
                sessions: 1,
                per_session: 2,
                operators: 1,
            },
            scale_per_session: 2,
            scale: vec![ScalePoint {
                sessions: 1,
                rounds: 1,
                result: Ok(load.clone()),
            }],
            scale_skipped: None,
            replicas: vec![
                ReplicaPoint {
                    replicas: 1,
                    result: Ok(sweep_of(&load)),
                },
                ReplicaPoint {
                    replicas: 2,
                    result: Ok(sweep_of(&load)),
                },
            ],
            replicas_skipped: None,
        }
    }

    #[test]
    fn only_a_broken_part_or_a_lost_doubled_or_crossed_response_breaks_the_run() {
        let ok = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            ..LoadResult::default()
        });
        assert!(ok.failures().is_empty(), "{:?}", ok.failures());

        let lossy = sample(LoadResult {
            sent: 2,
            answered: 1,
            lost: 1,
            doubled: 1,
            ..LoadResult::default()
        });
        // Two engines' loads, one scale point, two replicas runs, the crowd and the
        // streaming run, each lossy.
        assert_eq!(lossy.failures().len(), 7, "{:?}", lossy.failures());
        let mut broken = sample(LoadResult::default());
        broken.engines[1].breakdown = Err("no hops".into());
        assert_eq!(broken.failures(), vec!["breakdown (PostgreSQL): no hops"]);
    }
}
