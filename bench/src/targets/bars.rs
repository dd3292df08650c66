//! The bars: each budget's figure on this 2-core machine (issue 29), and the memory and scale
//! targets of issue 17.

use crate::engine::Engine;

/// kandev's added latency over the direct path, p50 and p99 bars, ms.
pub(super) fn added_bars(engine: Engine) -> (f64, f64) {
    match engine {
        Engine::Sqlite => (0.8, 3.0),
        Engine::Postgres => (1.5, 6.0),
    }
}

/// Time to visible p50, ms.
pub(super) fn visible_bar(engine: Engine) -> f64 {
    match engine {
        Engine::Sqlite => 1.0,
        Engine::Postgres => 2.0,
    }
}

/// The knee, answers per second at least.
pub(super) fn knee_bar(engine: Engine) -> f64 {
    match engine {
        Engine::Sqlite => 1500.0,
        Engine::Postgres => 800.0,
    }
}

/// Two replicas' knee ≥ this × one replica's.
pub(super) const REPLICA_KNEE_RATIO: f64 = 0.85;
/// The WAL size past which kandev's checkpoint task empties it (SQLite), bytes.
pub(super) const WAL_BOUND: u64 = 64 * 1024 * 1024;
/// kandev peak RSS under the load, bytes (docs/architecture.md §8).
pub(super) const KANDEV_RSS_MAX: u64 = 200 * 1024 * 1024;
/// One agentctl's peak RSS, bytes (docs/architecture.md §8).
pub(super) const AGENTCTL_RSS_MAX: u64 = 20 * 1024 * 1024;
/// kandev peak RSS with every scale elicitation open, bytes.
pub(super) const SCALE_RSS_MAX: u64 = 300 * 1024 * 1024;
/// "Flat": the largest scale point's p99 ≤ this × the smallest's.
pub(super) const SCALE_GROWTH_RATIO: f64 = 2.0;
/// Time to visible p99 across many watching operators, ms.
pub(super) const CROWD_VISIBLE_P99_MS: f64 = 30.0;
/// An elicitation's round trip p99 while agents stream ≤ this × the idle one.
pub(super) const STREAM_RT_RATIO: f64 = 2.0;
/// Each stream's last chunk visible within this, ms.
pub(super) const LAST_CHUNK_MS: f64 = 200.0;
