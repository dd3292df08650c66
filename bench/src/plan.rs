//! How big a run is: the full run's sizes (10,000 samples behind every p99), or the quick
//! run's for CI.

use std::time::Duration;

use crate::args::Args;
use crate::engine::Engine;
use crate::load::Shape;
use crate::sweep::SweepPlan;
use crate::{crowd, soak, streaming};

/// The run's sizes.
pub(crate) struct Plan {
    pub(crate) n: usize,
    pub(crate) warmup: usize,
    /// Turns the round trips are run in (direct, each engine, again).
    pub(crate) rounds: usize,
    pub(crate) breakdown_n: usize,
    /// Round trips of the 64-question form, and through the MCP tool, per engine.
    pub(crate) large_n: usize,
    /// The load: an arrival-rate sweep on each engine (and the replicas').
    pub(crate) sweep: SweepPlan,
    /// Many operators watching.
    pub(crate) crowd: crowd::CrowdPlan,
    /// Agents that stream.
    pub(crate) stream: streaming::StreamPlan,
    /// The soak (`--soak` only).
    pub(crate) soak: soak::SoakPlan,
    /// The scale runs' operators.
    pub(crate) shape: Shape,
    pub(crate) scale_sessions: &'static [usize],
    /// A scale point runs rounds until it has at least this many answers.
    pub(crate) scale_min_answers: usize,
    pub(crate) engines: Vec<Engine>,
}

/// The questions each session of a scale point has open at once.
pub(crate) const SCALE_PER_SESSION: usize = 10;

/// Rounds of a scale point of `sessions` for at least `min_answers` answers (p99 of the
/// 10-session point's 100 answers alone would be its second-largest sample).
pub(crate) fn scale_rounds(sessions: usize, min_answers: usize) -> usize {
    min_answers.div_ceil(sessions * SCALE_PER_SESSION).max(1)
}

/// The sizes of the run `args` asks for.
pub(crate) fn plan(args: &Args) -> Plan {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_args;

    fn args(words: &[&str]) -> Result<Args, String> {
        parse_args(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
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
