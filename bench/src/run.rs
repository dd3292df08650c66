//! One run of the bench: each part it asks for, in order, then the report written to
//! `target/bench/` (the soak's to `target/bench/soak/`) and a copy under `runs/`.

use std::path::Path;
use std::process::ExitCode;

use crate::args::Args;
use crate::engine::Engine;
use crate::load::{self, Shape};
use crate::plan::{Plan, SCALE_PER_SESSION, plan, scale_rounds};
use crate::report::{self, EngineFigures, Meta, Report, ScalePoint, skipped};
use crate::roundtrip::{self, Form};
use crate::{crowd, mapping, soak, storage, streaming, sweep};

/// The parts that start PostgreSQL (when the run's engines include it).
const POSTGRES_PARTS: &[&str] = &["round-trip", "breakdown", "load", "replicas"];

/// The replica counts of the replicas part (the budget compares two with one).
const REPLICAS: [usize; 2] = [1, 2];

/// The profile this executable was built in: the directory it sits in under `target/`.
fn own_profile() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.parent()
                .and_then(Path::file_name)
                .map(|d| d.to_string_lossy().into_owned())
        })
        .filter(|dir| dir != "deps")
        .unwrap_or_else(|| "debug".to_owned())
}

/// `git rev-parse HEAD` of the repository, `+dirty` when tracked files changed.
fn commit() -> String {
    let root = kandev_testkit::bins::repo_root();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return "unknown (not a git checkout)".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head}+dirty"),
        _ => head,
    }
}

/// `rounds` rounds of the scale `shape`, each on fresh processes, pooled; a failed round
/// ends the point with its error.
async fn scale_point(shape: Shape, rounds: usize) -> Result<load::LoadResult, String> {
    let mut all = load::run(shape, Engine::Sqlite).await?;
    for _ in 1..rounds {
        all.absorb(load::run(shape, Engine::Sqlite).await?);
    }
    Ok(all)
}

/// Why PostgreSQL cannot run here, when this run has a part that would run it: a run with
/// none (the soak, `--only streaming`) is not refused for where its cluster would go.
fn postgres_refusal(refusal: Option<String>, wanted: &dyn Fn(&str) -> bool) -> Option<String> {
    refusal.filter(|_| POSTGRES_PARTS.iter().any(|part| wanted(part)))
}

/// Everything measured on one engine after its round trips: the hops, the large form, the
/// MCP tool and the sweep.
async fn engine_figures(
    plan: &Plan,
    engine: Engine,
    wanted: &dyn Fn(&str) -> bool,
    round_trip: Result<roundtrip::FullStack, String>,
    refused: Option<&str>,
) -> EngineFigures {
    let name = engine.name();
    let mut durability = round_trip.as_ref().ok().and_then(|r| r.durability.clone());
    let breakdown = if wanted("breakdown") {
        eprintln!(
            "kandev-bench: breakdown on {name} ({} with timing events on)",
            plan.breakdown_n
        );
        roundtrip::full_stack(plan.breakdown_n, plan.warmup, engine, true, Form::Bridge)
            .await
            .and_then(|pass| {
                durability = durability.take().or(pass.durability);
                pass.breakdown
                    .filter(|b| b.total.n > 0)
                    .ok_or_else(|| "no hop events in the logs".to_owned())
            })
    } else {
        skipped("breakdown")
    };
    let large_form = if let Some(refused) = refused {
        Err(refused.to_owned())
    } else if wanted("round-trip") {
        eprintln!(
            "kandev-bench: round trip of the 64-question form on {name}, {}",
            plan.large_n
        );
        roundtrip::full_stack(plan.large_n, plan.warmup, engine, false, Form::SixtyFour).await
    } else {
        skipped("round trip")
    };
    let tool_call = if let Some(refused) = refused {
        Err(refused.to_owned())
    } else if wanted("round-trip") {
        eprintln!(
            "kandev-bench: round trip through ask_user_question_kandev on {name}, {}",
            plan.large_n
        );
        roundtrip::full_stack(plan.large_n, plan.warmup, engine, false, Form::ToolCall).await
    } else {
        skipped("round trip")
    };
    let load = if let Some(refused) = refused {
        Err(refused.to_owned())
    } else if wanted("load") {
        let s = &plan.sweep;
        eprintln!(
            "kandev-bench: load on {name}, an arrival-rate sweep over {} pre-started sessions, {} operators",
            s.sessions, s.operators
        );
        sweep::run(s, engine).await
    } else {
        skipped("load")
    };
    if let Ok(l) = &load {
        durability = durability.or_else(|| l.total.durability.clone());
    }
    EngineFigures {
        engine,
        round_trip,
        large_form,
        tool_call,
        breakdown,
        load,
        durability,
    }
}

/// Runs what `args` asks for and writes the report; fails when the bench breaks or an answer
/// is lost, doubled or crossed.
pub(crate) async fn run(args: Args) -> ExitCode {
    let profile = own_profile();
    kandev_testkit::bins::use_profile(&profile);
    // `--soak` runs the soak alone.
    let wanted = |part: &str| !args.soak && args.only.as_deref().is_none_or(|o| o == part);
    let plan = plan(&args);
    let meta = Meta {
        mode: if args.quick { "quick" } else { "full" },
        profile,
        commit: commit(),
        date: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
    };
    let storage = storage::probe(&std::env::temp_dir());
    let refused = postgres_refusal(
        storage
            .as_ref()
            .ok()
            .and_then(storage::Storage::refuses_postgres),
        &wanted,
    );
    if let Some(why) = &refused {
        eprintln!("kandev-bench: {why}");
    }
    let refused_for = |engine: Engine| refused.as_deref().filter(|_| engine == Engine::Postgres);
    let target = kandev_testkit::bins::target_dir();
    let mapping = if wanted("mapping") {
        eprintln!("kandev-bench: mapping figures from target/criterion");
        mapping::read(&target.join("criterion"))
    } else {
        skipped("mapping")
    };
    let rt_ratios = wanted("round-trip") || wanted("breakdown");
    let rt_engines: Vec<Engine> = if wanted("round-trip") {
        plan.engines
            .iter()
            .copied()
            .filter(|e| refused_for(*e).is_none())
            .collect()
    } else {
        Vec::new()
    };
    let (baseline, round_trips) = if rt_ratios {
        if rt_engines.contains(&Engine::Postgres) {
            // Up before the first turn, so every direct turn runs beside an idle server.
            let _ = kandev_testkit::postgres::durable_cluster();
        }
        eprintln!(
            "kandev-bench: round trip, {} per path (direct, full stack on {}) in {} turns, {} warm-up per turn",
            plan.n,
            rt_engines
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(", "),
            plan.rounds,
            plan.warmup
        );
        let i = roundtrip::interleaved(plan.n, plan.warmup, plan.rounds, &rt_engines).await;
        (i.baseline, rt_engines.iter().copied().zip(i.full).collect())
    } else {
        (skipped("round trip"), Vec::new())
    };
    let mut round_trips: Vec<(Engine, Result<roundtrip::FullStack, String>)> = round_trips;
    let mut engines = Vec::new();
    for &engine in &plan.engines {
        let refused = refused_for(engine);
        let round_trip = match (refused, round_trips.iter().position(|(e, _)| *e == engine)) {
            (Some(why), _) => Err(why.to_owned()),
            (None, Some(at)) => round_trips.remove(at).1,
            (None, None) => skipped("round trip"),
        };
        engines.push(engine_figures(&plan, engine, &wanted, round_trip, refused).await);
    }
    let crowd = if wanted("operators") {
        let c = plan.crowd;
        eprintln!(
            "kandev-bench: {} operator WebSockets (and a slow reader) watching {} elicitations at {}/s",
            c.sockets, c.elicitations, c.rate
        );
        crowd::run(c).await
    } else {
        skipped("operators")
    };
    let streaming = if wanted("streaming") {
        let p = plan.stream;
        eprintln!(
            "kandev-bench: {} sessions streaming {} chunks/s each for {} s, {} elicitations/s",
            p.sessions, p.chunks_per_s, p.seconds, p.rate
        );
        streaming::run(p).await
    } else {
        skipped("streaming")
    };
    let soak = if args.soak {
        let p = plan.soak;
        eprintln!(
            "kandev-bench: soak, {} windows of {:?} at {}/s",
            p.windows, p.window, p.rate
        );
        soak::run(p).await
    } else {
        Err("soak: not run (`just bench --soak`)".to_owned())
    };
    let (scale, scale_skipped) = if wanted("scale") {
        let mut points = Vec::new();
        for &sessions in plan.scale_sessions {
            let rounds = scale_rounds(sessions, plan.scale_min_answers);
            eprintln!(
                "kandev-bench: scale, {sessions} sessions × {SCALE_PER_SESSION} open, one remote agentctl, {rounds} round(s)"
            );
            let shape = Shape {
                sessions,
                per_session: SCALE_PER_SESSION,
                operators: plan.shape.operators,
            };
            points.push(ScalePoint {
                sessions,
                rounds,
                result: scale_point(shape, rounds).await,
            });
        }
        (points, None)
    } else {
        (Vec::new(), Some(format!("scale: {}", report::SKIPPED)))
    };
    let (replicas, replicas_skipped) = if !wanted("replicas") {
        (Vec::new(), Some(format!("replicas: {}", report::SKIPPED)))
    } else if !plan.engines.contains(&Engine::Postgres) {
        (
            Vec::new(),
            Some("replicas: not run (replicas need PostgreSQL; this run is SQLite only)".into()),
        )
    } else if let Some(why) = &refused {
        (Vec::new(), Some(format!("replicas: not run ({why})")))
    } else {
        let mut points = Vec::new();
        for replicas in REPLICAS {
            eprintln!(
                "kandev-bench: replicas, the sweep through {replicas} kandev on one PostgreSQL"
            );
            let result = sweep::run_replicated(&plan.sweep, replicas).await;
            points.push(report::ReplicaPoint { replicas, result });
        }
        (points, None)
    };
    let report = Report {
        meta,
        mapping,
        rt_n: plan.n,
        rt_warmup: plan.warmup,
        rt_rounds: plan.rounds,
        breakdown_n: plan.breakdown_n,
        baseline,
        engines,
        storage,
        crowd,
        streaming,
        soak,
        shape: plan.shape,
        scale_per_session: SCALE_PER_SESSION,
        scale,
        scale_skipped,
        replicas,
        replicas_skipped,
    };
    // A soak's report is its own: it does not replace the last full run's.
    let out = if args.soak {
        target.join("bench").join("soak")
    } else {
        target.join("bench")
    };
    match write(&report, &out) {
        Ok(markdown) => {
            println!("{markdown}");
            println!("(written to {})", out.display());
        }
        Err(err) => {
            eprintln!("kandev-bench: writing the report: {err}");
            return ExitCode::FAILURE;
        }
    }
    let failures = report.failures();
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for f in failures {
            eprintln!("kandev-bench: BROKEN: {f}");
        }
        ExitCode::FAILURE
    }
}

/// Writes the report into `out` and a copy into `out/runs/<date>-<commit>/`; returns the
/// Markdown.
fn write(report: &Report, out: &Path) -> std::io::Result<String> {
    let short: String = report.meta.commit.chars().take(12).collect();
    let run_dir = out
        .join("runs")
        .join(format!("{}-{short}-{}", report.meta.date, report.meta.mode));
    let json = serde_json::to_string_pretty(&report.to_json()).map_err(std::io::Error::other)?;
    let mut markdown = String::new();
    for dir in [out, run_dir.as_path()] {
        std::fs::create_dir_all(dir)?;
        markdown = report.to_markdown(dir)?;
        std::fs::write(dir.join("report.json"), &json)?;
        std::fs::write(dir.join("report.md"), &markdown)?;
    }
    Ok(markdown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_on_tmpfs_refuses_only_runs_that_would_start_it() {
        let tmpfs = || Some("PostgreSQL refused: on tmpfs".to_owned());
        let only = |part: &'static str| move |p: &str| p == part;
        assert_eq!(postgres_refusal(tmpfs(), &|_| false), None, "the soak");
        assert_eq!(postgres_refusal(tmpfs(), &only("streaming")), None);
        for part in ["round-trip", "breakdown", "load", "replicas"] {
            assert_eq!(postgres_refusal(tmpfs(), &only(part)), tmpfs(), "{part}");
        }
        assert_eq!(postgres_refusal(None, &|_| true), None, "a disk");
    }
}
