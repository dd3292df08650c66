//! The command line of `kandev-bench run`: which parts, which engines, how the operators think.

use crate::engine::Engine;

/// The usage line, for `--help` and for a bad argument.
pub(crate) const USAGE: &str = "usage: kandev-bench run [--quick] [--only mapping|round-trip|breakdown|load|operators|streaming|scale|replicas] [--engine sqlite|postgres] [--think MS] | kandev-bench run --soak [--quick] | kandev-bench agent";

/// Every part `--only` can name.
pub(crate) const PARTS: &[&str] = &[
    "mapping",
    "round-trip",
    "breakdown",
    "load",
    "operators",
    "streaming",
    "scale",
    "replicas",
];

/// What to run.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Args {
    /// CI's reduced run (`--quick`).
    pub(crate) quick: bool,
    /// The one part to run (`--only`), else every part.
    pub(crate) only: Option<String>,
    /// The one engine (`--engine`), else both (SQLite alone for `--quick`).
    pub(crate) engine: Option<Engine>,
    /// The sweep's operator think time, ms.
    pub(crate) think_ms: u64,
    /// Only the soak, its report in `target/bench/soak/`.
    pub(crate) soak: bool,
}

/// Reads `run`'s arguments (the word `run` itself may lead); an error says what is wrong.
pub(crate) fn parse_args(args: &[String]) -> Result<Args, String> {
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
