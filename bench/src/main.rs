//! `kandev-bench`: the figures of docs/architecture.md §8, each beside a baseline measured in
//! the same run and its target.
//!
//! - `kandev-bench run [--quick]` reads the mapping benches' criterion estimates, runs
//!   the round-trip and load benches through the real binaries of `target/debug`, and
//!   writes `target/bench/report.json` and `target/bench/report.md` (+ SVGs). Exit 1
//!   when the bench breaks or a response is lost, doubled or crossed; latency and
//!   memory targets are reported, not asserted. `just bench` builds and runs it all.
//! - `kandev-bench agent` is the ACP agent the stack benches configure (see [`agent`]).

mod agent;
mod collector;
mod load;
mod mapping;
mod operator;
mod report;
mod roundtrip;
mod stack;
mod stats;

use std::process::ExitCode;

use load::Shape;
use report::{Report, RoundTrip};

const USAGE: &str =
    "usage: kandev-bench run [--quick] [--only mapping|round-trip|load] | kandev-bench agent";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("kandev-bench: tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match args.first().map(String::as_str) {
        Some("agent") => runtime.block_on(agent::run()),
        None | Some("run") | Some("--quick") | Some("--only") => {
            let mut quick = false;
            let mut only = None;
            let mut rest = args.iter().skip_while(|a| *a == "run");
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--quick" => quick = true,
                    "--only" => match rest.next().map(String::as_str) {
                        Some(part @ ("mapping" | "round-trip" | "load")) => only = Some(part),
                        _ => {
                            eprintln!(
                                "kandev-bench: --only takes mapping, round-trip or load\n{USAGE}"
                            );
                            return ExitCode::from(2);
                        }
                    },
                    bad => {
                        eprintln!("kandev-bench: unknown argument {bad}\n{USAGE}");
                        return ExitCode::from(2);
                    }
                }
            }
            runtime.block_on(run(quick, only))
        }
        Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("kandev-bench: unknown command {other}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The result of a part `--only` left out (not a failure).
fn skipped<T>(part: &str) -> Result<T, String> {
    Err(format!("{part}: skipped (--only)"))
}

async fn run(quick: bool, only: Option<&str>) -> ExitCode {
    let wanted = |part: &str| only.is_none_or(|o| o == part);
    let (n, warmup, shape) = if quick {
        (
            200,
            20,
            Shape {
                sessions: 10,
                per_session: 10,
                operators: 10,
            },
        )
    } else {
        (
            1000,
            50,
            Shape {
                sessions: 100,
                per_session: 10,
                operators: 10,
            },
        )
    };
    let target = kandev_e2e::bins::target_dir();
    let out = target.join("bench");
    eprintln!("kandev-bench: mapping figures from target/criterion");
    let mapping = if wanted("mapping") {
        mapping::read(&target.join("criterion"))
    } else {
        skipped("mapping")
    };
    let round_trip = if wanted("round-trip") {
        eprintln!("kandev-bench: round trip, baseline ({n} + {warmup} warm-up)");
        let baseline = roundtrip::baseline(n, warmup).await;
        eprintln!("kandev-bench: round trip, full stack ({n} + {warmup} warm-up)");
        let full = roundtrip::full_stack(n, warmup).await;
        match (full, baseline) {
            (Ok(full), Ok(baseline)) => Ok(RoundTrip {
                n,
                warmup,
                full,
                baseline,
            }),
            (Err(err), _) | (_, Err(err)) => Err(err),
        }
    } else {
        skipped("round trip")
    };
    let load = if wanted("load") {
        eprintln!(
            "kandev-bench: load, {} sessions × {} elicitations, {} operators",
            shape.sessions, shape.per_session, shape.operators
        );
        load::run(shape).await
    } else {
        skipped("load")
    };
    let report = Report {
        mode: if quick { "quick" } else { "full" },
        mapping,
        round_trip,
        shape,
        load,
    };
    if let Err(err) = std::fs::create_dir_all(&out) {
        eprintln!("kandev-bench: {}: {err}", out.display());
        return ExitCode::FAILURE;
    }
    let json = report.to_json();
    let markdown = match report.to_markdown(&out) {
        Ok(md) => md,
        Err(err) => {
            eprintln!("kandev-bench: writing SVGs: {err}");
            return ExitCode::FAILURE;
        }
    };
    let written = std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .and_then(|()| std::fs::write(out.join("report.md"), &markdown));
    if let Err(err) = written {
        eprintln!("kandev-bench: writing the report: {err}");
        return ExitCode::FAILURE;
    }
    println!("{markdown}");
    println!(
        "(written to {} and report.md)",
        out.join("report.json").display()
    );
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
