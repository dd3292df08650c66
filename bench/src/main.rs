//! `kandev-bench`: the figures of issue 17 and docs/architecture.md §8, each beside a baseline
//! measured in the same run and its target.
//!
//! - `kandev-bench run [--quick] [--only PART] [--engine sqlite|postgres] [--think MS]`
//!   reads the mapping benches' criterion estimates, runs the round trip (direct and each
//!   engine's full stack taking turns), the per-hop breakdown, the load (an arrival-rate
//!   sweep per engine, [`sweep`]), the scale curve and the replicas' sweeps through the
//!   real binaries of the profile it was itself built in (`target/release` for `just
//!   bench`, `target/debug` for `just bench --quick`), kandev configured as deployed
//!   (auth on, `info` logs), and writes `target/bench/report.{json,md}` (+ SVGs), copied to
//!   `target/bench/runs/<date>-<commit>/`. Exit 1 when the bench breaks or a response is
//!   lost, doubled or crossed; the budgets are reported (met only when a figure's whole
//!   95% interval is under its bar), not asserted.
//! - `kandev-bench agent` is the ACP agent the stack benches configure (see [`agent`]).

mod agent;
mod breakdown;
mod collector;
mod cpu;
mod crowd;
mod engine;
mod json;
mod load;
mod mapping;
mod markdown;
mod mcp;
mod operator;
mod plot;
mod report;
mod roundtrip;
mod soak;
mod stack;
mod stats;
mod storage;
mod streaming;
mod sweep;
mod targets;

use std::path::Path;
use std::process::ExitCode;

use std::time::Duration;

use engine::Engine;
use load::Shape;
use report::{EngineFigures, Meta, Report, ScalePoint, skipped};
use roundtrip::Form;
use sweep::SweepPlan;

const USAGE: &str = "usage: kandev-bench run [--quick] [--only mapping|round-trip|breakdown|load|operators|streaming|scale|replicas] [--engine sqlite|postgres] [--think MS] | kandev-bench run --soak [--quick] | kandev-bench agent";

const PARTS: &[&str] = &[
    "mapping",
    "round-trip",
    "breakdown",
    "load",
    "operators",
    "streaming",
    "scale",
    "replicas",
];

/// The parts that start PostgreSQL (when the run's engines include it).
const POSTGRES_PARTS: &[&str] = &["round-trip", "breakdown", "load", "replicas"];

/// The replica counts of the replicas part (the budget compares two with one).
const REPLICAS: [usize; 2] = [1, 2];

/// What to run.
#[derive(Debug, Default, PartialEq)]
struct Args {
    quick: bool,
    only: Option<String>,
    engine: Option<Engine>,
    /// The sweep's operator think time, ms.
    think_ms: u64,
    /// Only the soak, its report in `target/bench/soak/`.
    soak: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut rest = args.iter().skip_while(|a| *a == "run");
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--quick" => parsed.quick = true,
            "--only" => match rest.next() {
                Some(part) if PARTS.contains(&part.as_str()) => parsed.only = Some(part.clone()),
                _ => return Err(format!("--only takes one of {}", PARTS.join(", "))),
            },
            "--engine" => match rest.next().and_then(|e| Engine::parse(e)) {
                Some(engine) => parsed.engine = Some(engine),
                None => return Err("--engine takes sqlite or postgres".into()),
            },
            "--soak" => parsed.soak = true,
            "--think" => match rest.next().and_then(|ms| ms.parse().ok()) {
                Some(ms) => parsed.think_ms = ms,
                None => return Err("--think takes whole milliseconds".into()),
            },
            bad => return Err(format!("unknown argument {bad}")),
        }
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let agent = args.first().map(String::as_str) == Some("agent");
    // An agent is one of up to a thousand processes: one thread each.
    let runtime = if agent {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("kandev-bench: tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let help = !agent && args.iter().any(|a| a == "-h" || a == "--help");
    match args.first().map(String::as_str) {
        Some("agent") => runtime.block_on(agent::run()),
        // `kandev-bench run --help` as well as `kandev-bench --help`.
        _ if help => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        None | Some("run" | "--quick" | "--only" | "--engine" | "--think" | "--soak") => {
            match parse_args(&args) {
                Ok(args) => runtime.block_on(run(args)),
                Err(err) => {
                    eprintln!("kandev-bench: {err}\n{USAGE}");
                    ExitCode::from(2)
                }
            }
        }
        Some(other) => {
            eprintln!("kandev-bench: unknown command {other}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

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

/// The run's sizes.
struct Plan {
    n: usize,
    warmup: usize,
    /// Turns the round trips are run in (direct, each engine, again).
    rounds: usize,
    breakdown_n: usize,
    /// Round trips of the 64-question form, and through the MCP tool, per engine.
    large_n: usize,
    /// The load: an arrival-rate sweep on each engine (and the replicas').
    sweep: SweepPlan,
    /// Many operators watching.
    crowd: crowd::CrowdPlan,
    /// Agents that stream.
    stream: streaming::StreamPlan,
    /// The soak (`--soak` only).
    soak: soak::SoakPlan,
    /// The scale runs' operators.
    shape: Shape,
    scale_sessions: &'static [usize],
    /// A scale point runs rounds until it has at least this many answers.
    scale_min_answers: usize,
    engines: Vec<Engine>,
}

const SCALE_PER_SESSION: usize = 10;

/// Rounds of a scale point of `sessions` for at least `min_answers` answers (p99 of the
/// 10-session point's 100 answers alone would be its second-largest sample).
fn scale_rounds(sessions: usize, min_answers: usize) -> usize {
    min_answers.div_ceil(sessions * SCALE_PER_SESSION).max(1)
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

fn plan(args: &Args) -> Plan {
    let engines = match args.engine {
        Some(engine) => vec![engine],
        None if args.quick => vec![Engine::Sqlite],
        None => Engine::ALL.to_vec(),
    };
    let operators = 10;
    let think = Duration::from_millis(args.think_ms);
    if args.quick {
        Plan {
            n: 200,
            warmup: 20,
            rounds: 2,
            breakdown_n: 50,
            large_n: 20,
            sweep: SweepPlan {
                sessions: 4,
                operators: 4,
                rates: vec![50.0, 100.0],
                per_rate: 200,
                think,
            },
            crowd: crowd::CrowdPlan {
                sockets: 50,
                sessions: 2,
                rate: 20.0,
                elicitations: 40,
            },
            soak: soak::SoakPlan {
                windows: 6,
                window: Duration::from_secs(2),
                rate: 50.0,
                sessions: 4,
                operators: 4,
            },
            stream: streaming::StreamPlan {
                sessions: 4,
                chunks_per_s: 10.0,
                seconds: 2.0,
                rate: 10.0,
                operators: 2,
            },
            shape: Shape {
                sessions: 10,
                per_session: 10,
                operators,
            },
            scale_sessions: &[10],
            scale_min_answers: 1,
            engines,
        }
    } else {
        // 10,000 samples behind every p99 (the sweep's points, the round trips).
        Plan {
            n: 10_000,
            warmup: 50,
            rounds: 5,
            breakdown_n: 200,
            large_n: 1000,
            sweep: SweepPlan {
                sessions: 20,
                operators,
                rates: vec![
                    100.0, 200.0, 300.0, 400.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0, 1600.0,
                    2000.0,
                ],
                per_rate: 10_000,
                think,
            },
            // 1,600 elicitations × 1,000 sockets: 1.6 million times to visible, and
            // events enough to outgrow kandev's buffer for the slow reader.
            crowd: crowd::CrowdPlan {
                sockets: 1000,
                sessions: 4,
                rate: 20.0,
                elicitations: 1600,
            },
            // 100 sessions × 50 chunks/s: 5,000 chunks a second, 150,000 in all.
            // 30 windows of a minute at a steady 200/s: 360,000 answers.
            soak: soak::SoakPlan {
                windows: 30,
                window: Duration::from_secs(60),
                rate: 200.0,
                sessions: 20,
                operators,
            },
            stream: streaming::StreamPlan {
                sessions: 100,
                chunks_per_s: 50.0,
                seconds: 30.0,
                rate: 40.0,
                operators,
            },
            shape: Shape {
                sessions: 100,
                per_session: 10,
                operators,
            },
            scale_sessions: &[10, 100, 1000],
            scale_min_answers: 1000,
            engines,
        }
    }
}

/// Why PostgreSQL cannot run here, when this run has a part that would run it: a run with
/// none (the soak, `--only streaming`) is not refused for where its cluster would go.
fn postgres_refusal(refusal: Option<String>, wanted: &dyn Fn(&str) -> bool) -> Option<String> {
    refusal.filter(|_| POSTGRES_PARTS.iter().any(|part| wanted(part)))
}

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

async fn run(args: Args) -> ExitCode {
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

    fn args(words: &[&str]) -> Result<Args, String> {
        parse_args(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
    }

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

    #[test]
    fn arguments_choose_parts_and_engines_and_quick_runs_sqlite_only() {
        assert_eq!(args(&["run"]), Ok(Args::default()));
        let a = args(&["run", "--quick", "--only", "scale", "--engine", "postgres"]).expect("ok");
        assert_eq!(
            a,
            Args {
                quick: true,
                only: Some("scale".into()),
                engine: Some(Engine::Postgres),
                think_ms: 0,
                soak: false,
            }
        );
        assert!(args(&["--soak"]).is_ok_and(|a| a.soak));
        assert_eq!(args(&["--think", "250"]).map(|a| a.think_ms), Ok(250));
        assert!(args(&["--think", "soon"]).is_err());
        assert!(args(&["--only", "everything"]).is_err());
        assert!(args(&["--engine", "mysql"]).is_err());
        assert!(args(&["--fast"]).is_err());
        assert_eq!(
            plan(&args(&["--quick"]).expect("ok")).engines,
            [Engine::Sqlite]
        );
        assert_eq!(plan(&Args::default()).engines, Engine::ALL);
        assert_eq!(plan(&Args::default()).scale_sessions, [10, 100, 1000]);
        let full = plan(&Args::default());
        let rounds: Vec<_> = full
            .scale_sessions
            .iter()
            .map(|&s| scale_rounds(s, full.scale_min_answers))
            .collect();
        assert_eq!(rounds, [10, 1, 1]);
        let quick = plan(&args(&["run", "--quick"]).expect("ok"));
        assert_eq!(
            scale_rounds(quick.scale_sessions[0], quick.scale_min_answers),
            1
        );
    }
}
