//! The soak (`just bench --soak`): a steady open-loop rate on pre-started sessions
//! (SQLite) for a long run, cut into windows; after each window, kandev's resident set
//! and the database's file sizes. Flat means the last windows are no worse than the first:
//! RSS and answer-to-agent p99 of the last sixth ÷ the first sixth ≤ [`FLAT`].

use std::path::Path;
use std::time::Duration;

use crate::cpu::{CpuUse, Watched};
use crate::load::{LoadResult, Received};
use crate::stack::{open_files_under, rss_bytes, threads};
use crate::stats::{mean, percentiles};
use crate::sweep::{self, Serving, SweepPlan};

/// Last sixth ÷ first sixth, at most.
pub const FLAT: f64 = 1.2;

/// What the soak runs.
#[derive(Debug, Clone, Copy)]
pub struct SoakPlan {
    /// Windows.
    pub windows: usize,
    /// Each window's length.
    pub window: Duration,
    /// Elicitations per second, over all sessions.
    pub rate: f64,
    /// Pre-started sessions.
    pub sessions: usize,
    /// Operator clients.
    pub operators: usize,
}

/// One window.
#[derive(Debug, Clone)]
pub struct Window {
    /// Its answer-to-agent samples, ms.
    pub samples: Vec<f64>,
    /// Its time-to-visible samples (the agent sends → an operator's WebSocket reads it), ms.
    pub visible: Vec<f64>,
    /// kandev's resident set after it, bytes.
    pub rss: u64,
    /// kandev's threads after it (`None` where `/proc` cannot be read).
    pub threads: Option<u64>,
    /// kandev's open files in its database's directory after it: the database, its WAL
    /// and shared memory, once per connection open (`None` where `/proc` cannot be read).
    pub database_files: Option<usize>,
    /// The database file, bytes.
    pub db_bytes: u64,
    /// Its write-ahead log, bytes.
    pub wal_bytes: u64,
    /// The CPU it used (`None` where `/proc` cannot be read).
    pub cpu: Option<CpuUse>,
}

/// What the soak measured.
#[derive(Debug, Clone)]
pub struct Soak {
    /// The plan it ran.
    pub plan: SoakPlan,
    /// Every window, in order.
    pub windows: Vec<Window>,
    /// Every window pooled (exactly once).
    pub total: LoadResult,
}

impl Soak {
    /// The windows of the first and the last sixth (at least one each).
    fn sixths(&self) -> (&[Window], &[Window]) {
        let n = self.windows.len();
        let k = (n / 6).max(1);
        (
            &self.windows[..k.min(n)],
            &self.windows[n.saturating_sub(k)..],
        )
    }

    /// Mean RSS of the first and last sixth, bytes.
    pub fn rss_ends(&self) -> (f64, f64) {
        let rss = |w: &[Window]| {
            let rss: Vec<f64> = w.iter().map(|w| w.rss as f64).collect();
            mean(&rss).unwrap_or(0.0)
        };
        let (first, last) = self.sixths();
        (rss(first), rss(last))
    }

    /// Answer-to-agent p99 of the first and last sixth, each pooled, ms.
    pub fn p99_ends(&self) -> (f64, f64) {
        let pooled = |w: &[Window]| {
            let all: Vec<f64> = w.iter().flat_map(|w| w.samples.iter().copied()).collect();
            percentiles(&all).p99
        };
        let (first, last) = self.sixths();
        (pooled(first), pooled(last))
    }

    /// kandev's mean cores over the first and last sixth, from the windows whose CPU was
    /// read; `None` when either sixth has none.
    pub fn cores_ends(&self) -> Option<(f64, f64)> {
        let cores = |w: &[Window]| {
            let read: Vec<f64> = w
                .iter()
                .filter_map(|w| w.cpu)
                .map(|c| c.kandev_cores)
                .collect();
            mean(&read)
        };
        let (first, last) = self.sixths();
        Some((cores(first)?, cores(last)?))
    }
}

/// The database file and its WAL in kandev's directory (`*.db`, `*.db-wal`), bytes.
fn database_sizes(dir: &Path) -> (u64, u64) {
    let (mut db, mut wal) = (0, 0);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if name.ends_with(".db") {
            db += size;
        } else if name.ends_with(".db-wal") {
            wal += size;
        }
    }
    (db, wal)
}

/// Runs the soak.
pub async fn run(plan: SoakPlan) -> Result<Soak, String> {
    let mut serving = Serving::start(plan.sessions, plan.operators).await?;
    let per_window = (plan.rate * plan.window.as_secs_f64()) as usize;
    let sweep_plan = SweepPlan {
        sessions: plan.sessions,
        operators: plan.operators,
        rates: vec![plan.rate],
        per_rate: per_window,
        think: Duration::ZERO,
    };
    let mut received = Received::new();
    let mut windows = Vec::with_capacity(plan.windows);
    let mut total = LoadResult::default();
    let watched = Watched::of(std::slice::from_ref(&serving.kandev));
    for round in 0..plan.windows {
        eprintln!(
            "kandev-bench: soak, window {} of {}",
            round + 1,
            plan.windows
        );
        let started = watched.clock();
        let sent = sweep::one_rate(
            &mut serving.collector,
            &sweep_plan,
            round,
            (plan.rate, per_window),
            &mut received,
            &mut Vec::new(),
        )
        .await?;
        let cpu = watched.used_since(started);
        let result = sweep::rate_result(&sent, &received, &serving.seen);
        let (db_bytes, wal_bytes) = database_sizes(serving.kandev.dir());
        windows.push(Window {
            samples: result.samples.clone(),
            visible: result.visible.clone(),
            rss: rss_bytes(serving.kandev.pid()).unwrap_or_default(),
            threads: threads(serving.kandev.pid()),
            database_files: open_files_under(serving.kandev.pid(), serving.kandev.dir()),
            db_bytes,
            wal_bytes,
            cpu,
        });
        total.absorb(result);
    }
    serving.stop();
    Ok(Soak {
        plan,
        windows,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(p99: f64, rss: u64) -> Window {
        // 2 of 100 at `p99`: the nearest-rank 99th percentile.
        let mut samples = vec![1.0; 98];
        samples.extend([p99, p99]);
        Window {
            visible: samples.clone(),
            samples,
            rss,
            threads: None,
            database_files: None,
            db_bytes: 0,
            wal_bytes: 0,
            cpu: None,
        }
    }

    /// A plan of 12 one-second windows (a sixth is two windows).
    fn twelve_windows() -> SoakPlan {
        SoakPlan {
            windows: 12,
            window: Duration::from_secs(1),
            rate: 1.0,
            sessions: 1,
            operators: 1,
        }
    }

    #[test]
    fn flatness_compares_the_first_and_last_sixth() {
        let plan = twelve_windows();
        let mut windows: Vec<Window> = (0..12).map(|_| window(5.0, 100)).collect();
        windows[10] = window(9.0, 300);
        windows[11] = window(9.0, 300);
        let soak = Soak {
            plan,
            windows,
            total: LoadResult::default(),
        };
        assert_eq!(soak.rss_ends(), (100.0, 300.0));
        let (first, last) = soak.p99_ends();
        assert!(first < 5.1 && last > 8.9, "{first} {last}");
    }

    #[test]
    fn kandevs_cores_are_compared_over_the_sixths_whose_cpu_was_read() {
        let plan = twelve_windows();
        let cores = |kandev_cores| CpuUse {
            busy: 0.5,
            kandev_cores,
            agentctl_cores: 0.0,
            other_cores: 0.0,
            cpus: 2,
        };
        let mut windows: Vec<Window> = (0..12).map(|_| window(5.0, 100)).collect();
        windows[0].cpu = Some(cores(0.3));
        windows[1].cpu = Some(cores(0.5));
        windows[11].cpu = Some(cores(0.6));
        let mut soak = Soak {
            plan,
            windows,
            total: LoadResult::default(),
        };
        assert_eq!(
            soak.cores_ends(),
            Some((0.4, 0.6)),
            "unread windows left out"
        );
        soak.windows[11].cpu = None;
        assert_eq!(soak.cores_ends(), None, "the last sixth has no reading");
    }

    #[test]
    fn the_database_and_its_wal_are_sized_from_kandevs_directory() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("k.db"), [0u8; 10]).expect("db");
        std::fs::write(dir.path().join("k.db-wal"), [0u8; 4]).expect("wal");
        std::fs::write(dir.path().join("kandev.toml"), [0u8; 99]).expect("toml");
        assert_eq!(database_sizes(dir.path()), (10, 4));
    }
}
