//! Where the machine's CPU went over a stretch of a run, read from `/proc`: how busy the
//! machine was, and how many cores kandev and the agentctls took. A rate past the knee
//! is then explained by what was measured there, not by an earlier investigation.

/// Clock ticks so far: the machine's (every CPU, busy and idle) and named processes'.
#[derive(Debug, Clone, Copy)]
pub struct CpuClock {
    /// All ticks of every CPU (`/proc/stat`'s first line).
    total: u64,
    /// Idle and I/O-wait ticks of every CPU.
    idle: u64,
    /// User and system ticks of kandev.
    kandev: u64,
    /// User and system ticks of the agentctls.
    agentctls: u64,
    /// CPUs counted in `/proc/stat`.
    cpus: usize,
}

/// The CPU a stretch used, from two [`CpuClock`] readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    /// Share of the machine busy (0 to 1).
    pub busy: f64,
    /// Cores kandev kept busy.
    pub kandev_cores: f64,
    /// Cores the agentctls kept busy, together.
    pub agentctl_cores: f64,
    /// Cores everything else kept busy (the bench's agents and operators, the kernel).
    pub other_cores: f64,
    /// CPUs on the machine.
    pub cpus: usize,
}

/// The processes whose CPU a stretch counts: kandev's and its local agentctls', found
/// once (finding the agentctls walks `/proc`).
#[derive(Debug, Clone)]
pub struct Watched {
    kandev: Vec<u32>,
    agentctls: Vec<u32>,
}

impl Watched {
    /// `kandevs` and the agentctls they run now.
    pub fn of(kandevs: &[kandev_testkit::Kandev]) -> Self {
        Self {
            kandev: kandevs.iter().map(kandev_testkit::Kandev::pid).collect(),
            agentctls: kandevs
                .iter()
                .flat_map(kandev_testkit::Kandev::agentctls)
                .map(|(pid, _)| pid)
                .collect(),
        }
    }

    /// The clocks now.
    pub fn clock(&self) -> Option<CpuClock> {
        CpuClock::read(&self.kandev, &self.agentctls)
    }

    /// What was used since `start` (a [`Watched::clock`] reading).
    pub fn used_since(&self, start: Option<CpuClock>) -> Option<CpuUse> {
        self.clock()?.since(&start?)
    }
}

impl CpuClock {
    /// Reads the clocks now, for kandev `kandev` and the agentctls `agentctls`; `None`
    /// when `/proc/stat` cannot be read (not Linux).
    fn read(kandev: &[u32], agentctls: &[u32]) -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let (total, idle) = machine_ticks(&stat)?;
        let cpus = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .count();
        let sum = |pids: &[u32]| pids.iter().filter_map(|&pid| process_ticks(pid)).sum();
        Some(Self {
            total,
            idle,
            kandev: sum(kandev),
            agentctls: sum(agentctls),
            cpus: cpus.max(1),
        })
    }

    /// What was used since `earlier`.
    pub fn since(&self, earlier: &CpuClock) -> Option<CpuUse> {
        let total = self.total.checked_sub(earlier.total).filter(|&t| t > 0)? as f64;
        let idle = self.idle.saturating_sub(earlier.idle) as f64;
        // Every CPU's ticks add up to `total`: a core's worth is `total / cpus`.
        let cores = |ticks: u64| ticks as f64 * self.cpus as f64 / total;
        let busy = (1.0 - idle / total).clamp(0.0, 1.0);
        let kandev_cores = cores(self.kandev.saturating_sub(earlier.kandev));
        let agentctl_cores = cores(self.agentctls.saturating_sub(earlier.agentctls));
        Some(CpuUse {
            busy,
            kandev_cores,
            agentctl_cores,
            other_cores: (busy * self.cpus as f64 - kandev_cores - agentctl_cores).max(0.0),
            cpus: self.cpus,
        })
    }
}

impl CpuUse {
    /// "92% of 2 CPUs busy (kandev 0.95 cores, agentctls 0.45, the rest 0.44)".
    pub fn text(&self) -> String {
        format!(
            "{:.0}% of {} CPUs busy (kandev {:.2} cores, the agentctls {:.2}, the rest {:.2})",
            100.0 * self.busy,
            self.cpus,
            self.kandev_cores,
            self.agentctl_cores,
            self.other_cores
        )
    }
}

/// `(all, idle)` ticks from `/proc/stat` text: its `cpu` line's fields, idle being
/// `idle + iowait`.
fn machine_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let all = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((all, idle))
}

/// User and system ticks of process `pid` (with its threads).
fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ticks_of(&stat)
}

/// `utime + stime` of `/proc/<pid>/stat` text: fields 14 and 15, counted after the
/// command name's closing parenthesis (the name may hold spaces).
fn ticks_of(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_line_counts_idle_and_iowait_as_idle() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\n";
        assert_eq!(machine_ticks(stat), Some((1000, 850)));
    }

    #[test]
    fn a_process_name_with_spaces_does_not_shift_its_fields() {
        let stat = "42 (tokio rt) S 1 42 42 0 -1 4194560 100 0 0 0 70 30 0 0 20 0 9 0 1 0 0";
        assert_eq!(ticks_of(stat), Some(100));
    }

    #[test]
    fn use_over_a_stretch_splits_the_busy_cores() {
        let before = CpuClock {
            total: 1000,
            idle: 500,
            kandev: 100,
            agentctls: 50,
            cpus: 2,
        };
        // 200 more ticks across 2 CPUs (one second at 100 Hz): half idle.
        let after = CpuClock {
            total: 1200,
            idle: 600,
            kandev: 150,
            agentctls: 70,
            cpus: 2,
        };
        let used = after.since(&before).expect("use");
        assert_eq!(used.busy, 0.5);
        assert_eq!(used.kandev_cores, 0.5);
        assert_eq!(used.agentctl_cores, 0.2);
        assert!((used.other_cores - 0.3).abs() < 1e-9);
        assert!(before.since(&after).is_none(), "time runs forward only");
    }
}
