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
mod args;
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
mod plan;
mod plot;
mod report;
mod roundtrip;
mod run;
mod soak;
mod stack;
mod stats;
mod storage;
mod streaming;
mod sweep;
mod targets;

use std::process::ExitCode;

use args::{USAGE, parse_args};

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
                Ok(args) => runtime.block_on(run::run(args)),
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
