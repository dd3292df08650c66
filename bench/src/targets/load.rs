//! The steady-rate budgets: each engine's sweep (knee, memory, exactly once), the soak, the
//! replicas and the scale points.

use super::bars::{
    AGENTCTL_RSS_MAX, KANDEV_RSS_MAX, REPLICA_KNEE_RATIO, SCALE_GROWTH_RATIO, SCALE_RSS_MAX,
    WAL_BOUND, knee_bar,
};
use super::reasons::{cpu_drift, knee_reason, past_cpu};
use super::verdict::{Target, exactly_once, peak_rss, target, unmeasured};
use crate::engine::Engine;
use crate::load::LoadResult;
use crate::report::{Report, mb};
use crate::stats::{interval, percentiles};
use crate::sweep::{KNEE_P99_MS, Sweep};

/// The knee, the sweep's time to visible, exactly once and memory, for one engine.
pub(super) fn sweep_targets(sweep: &Sweep, engine: Engine, out: &mut Vec<Target>) {
    let name = engine.name();
    let bar = knee_bar(engine);
    let knee = sweep.knee().map_or(0.0, |p| p.offered);
    let measured = match sweep.knee() {
        // The knee is the answer's: what the questions' wait to be seen did there is
        // said beside it, since past a rate kandev keeps pace with they queue first.
        Some(p) => format!(
            "{knee:.0}/s (p99 {:.2} ms {}, {} samples; there {:.0} answered/s, time to visible p99 {:.2} ms)",
            p.result.answer_to_agent.p99,
            interval(&p.result.samples, 0.99).map_or_else(String::new, |i| i.text()),
            p.result.samples.len(),
            p.result.throughput,
            percentiles(&p.result.visible).p99,
        ),
        None => "below the sweep's first rate".into(),
    };
    out.push(target(
        format!("knee: answers/s while answer-to-agent p99 ≤ {KNEE_P99_MS} ms ({name})"),
        measured,
        format!("≥ {bar}/s"),
        knee >= bar,
        knee_reason(sweep, engine),
    ));
    let l = &sweep.total;
    let shape = format!(
        "sweep over {} sessions, {} operators",
        sweep.sessions, sweep.operators
    );
    out.push(exactly_once(format!("{shape}: exactly once ({name})"), l));
    out.push(peak_rss(
        format!("{shape}: kandev peak RSS ({name})"),
        l.kandev_peak_rss,
        KANDEV_RSS_MAX,
        "the peak of the whole sweep, which ends at the first rate past the knee: there the questions kandev cannot keep pace with queue (seconds of them, see the sweep's time to visible) with their events; would meet it: a bound on what kandev queues for a session (agentctl keeps the rest), or a higher knee".into(),
    ));
    out.push(peak_rss(
        format!(
            "{shape}: one agentctl's peak RSS, max of {} ({name})",
            l.agentctls
        ),
        l.agentctl_peak_rss,
        AGENTCTL_RSS_MAX,
        String::new(),
    ));
}

/// The soak: RSS and p99 flat.
pub(super) fn soak_targets(r: &Report, out: &mut Vec<Target>) {
    let s = match &r.soak {
        Ok(s) => s,
        Err(err) => {
            out.push(unmeasured(
                "soak (30 min): RSS and answer-to-agent p99, last sixth ÷ first sixth".into(),
                err.clone(),
            ));
            return;
        }
    };
    let name = format!(
        "soak, {} windows of {:?} at {}/s",
        s.windows.len(),
        s.plan.window,
        s.plan.rate
    );
    // What the database's files did over the run: a WAL past its bound (kandev empties it
    // past 64 MiB) says the checkpoint fell behind; one within it points elsewhere.
    let most = s.windows.iter().map(|w| w.wal_bytes).max().unwrap_or(0);
    let wal = |w: Option<&crate::soak::Window>| w.map_or(0.0, |w| mb(w.wal_bytes));
    let db = |w: Option<&crate::soak::Window>| w.map_or(0.0, |w| mb(w.db_bytes));
    let files = format!(
        "the WAL measured {:.0} → {:.0} MB after the windows (at most {:.0} MB), the database {:.0} → {:.0} MB",
        wal(s.windows.first()),
        wal(s.windows.last()),
        mb(most),
        db(s.windows.first()),
        db(s.windows.last()),
    );
    // Past its bound the WAL explains both; within it, each figure has a cause of its own.
    let because = |own: &str| {
        if most > 2 * WAL_BOUND {
            format!(
                "{files}: the checkpoint task did not keep the WAL near its 64 MiB bound (a reader on it outlasted each TRUNCATE's busy timeout); would meet it: readers that end their snapshots sooner"
            )
        } else {
            format!(
                "{files}: the WAL stayed bounded, so the growth is not the log's{}; {own}",
                cpu_drift(s)
            )
        }
    };
    let (first, last) = s.rss_ends();
    out.push(target(
        format!("{name}: kandev RSS, last sixth ÷ first sixth"),
        format!(
            "{:.1} ÷ {:.1} MB = {:.2}×",
            last / 1048576.0,
            first / 1048576.0,
            last / first
        ),
        format!("≤ {}×", crate::soak::FLAT),
        last <= crate::soak::FLAT * first,
        format!(
            "kandev's resident set grew over the run; {}",
            because(&format!(
                "{}; would meet it: a heap profile of the last windows against the first",
                held_open(s)
            ))
        ),
    ));
    let (first, last) = s.p99_ends();
    out.push(target(
        format!("{name}: answer-to-agent p99, last sixth ÷ first sixth"),
        format!("{last:.2} ÷ {first:.2} ms = {:.2}×", last / first),
        format!("≤ {}×", crate::soak::FLAT),
        last <= crate::soak::FLAT * first,
        format!(
            "answers slowed over the run; {}",
            because(
                "while record ids were random, every soak on ext4 drifted this way and the same soak on tmpfs did not: each new row went into a random page of its key's index, and each checkpoint wrote back pages from all over the growing indexes (3.2 KB a question at 2 MB, 17.5 KB at 252 MB, in a scratch measurement); with time-ordered ids (decision 0023) the soak stayed flat (p99 1.52 → 1.27 ms, 0.83×, the database growing to 730 MB), so a drift now has another cause; would meet it: the hop timing on through a soak, to find the hop that grows"
            )
        ),
    ));
    out.push(exactly_once(format!("{name}: exactly once"), &s.total));
}

/// kandev's threads and open database files in the first window and the last: a new
/// thread or connection brings memory of its own with it.
fn held_open(s: &crate::soak::Soak) -> String {
    let ends = |f: fn(&crate::soak::Window) -> Option<u64>| {
        let first = s.windows.first().and_then(f)?;
        Some((first, s.windows.last().and_then(f)?))
    };
    let threads = ends(|w| w.threads);
    let files = ends(|w| w.database_files.map(|n| n as u64));
    match (threads, files) {
        (Some((t0, t1)), Some((f0, f1))) => format!(
            "kandev's threads {t0} → {t1} and its open database files {f0} → {f1} (the first window, the last)"
        ),
        _ => "kandev's threads and open files not read".to_owned(),
    }
}

/// Two replicas' knee against one replica's.
pub(super) fn replica_targets(r: &Report, out: &mut Vec<Target>) {
    let knee = |n: usize| {
        r.replicas
            .iter()
            .find(|p| p.replicas == n)
            .and_then(|p| p.result.as_ref().ok())
            .map(|s| s.knee().map_or(0.0, |p| p.offered))
    };
    let name = "two replicas' knee ÷ one replica's (PostgreSQL)".to_owned();
    match (knee(1), knee(2)) {
        (Some(one), Some(two)) if one > 0.0 => out.push(target(
            name,
            format!("{two:.0} ÷ {one:.0}/s = {:.2}×", two / one),
            format!("≥ {REPLICA_KNEE_RATIO}×"),
            two >= REPLICA_KNEE_RATIO * one,
            format!(
                "most answers are forwarded to the session's owner and every change is read back by the other replica from its note, on the same two cores as the first{}; would meet it: notes that carry the change instead of ids to read, or a machine per replica",
                past_cpu(r, 2)
            ),
        )),
        _ => out.push(unmeasured(
            name,
            r.replicas_skipped
                .clone()
                .unwrap_or_else(|| "a replicas sweep broke or found no knee".into()),
        )),
    }
}

/// Scale: exactly once at every point, kandev's memory and a flat p99 at the largest.
pub(super) fn scale_targets(r: &Report, out: &mut Vec<Target>) {
    let measured: Vec<(usize, &LoadResult)> = r
        .scale
        .iter()
        .filter_map(|p| p.result.as_ref().ok().map(|l| (p.sessions, l)))
        .collect();
    let (Some(&(small_n, small)), Some(&(large_n, large))) = (measured.first(), measured.last())
    else {
        out.push(Target {
            name: "scale: sessions × pending through a remote agentctl".into(),
            measured: r
                .scale_skipped
                .clone()
                .unwrap_or_else(|| "not measured".into()),
            bar: "exactly once, RSS ≤ 300 MB, flat p99".into(),
            met: None,
            reason: String::new(),
        });
        return;
    };
    let open = large_n * r.scale_per_session;
    for (n, l) in &measured {
        out.push(exactly_once(
            format!("scale {n} × {}: exactly once", r.scale_per_session),
            l,
        ));
    }
    out.push(peak_rss(
        format!(
            "scale {large_n} × {}: kandev peak RSS, {open} open",
            r.scale_per_session
        ),
        large.kandev_peak_rss,
        SCALE_RSS_MAX,
        String::new(),
    ));
    let (p_small, p_large) = (small.answer_to_agent.p99, large.answer_to_agent.p99);
    out.push(target(
        format!("scale: answer-to-agent p99, {large_n} ÷ {small_n} sessions (flat)"),
        format!("{p_large:.2} ÷ {p_small:.2} ms = {:.1}×", p_large / p_small),
        format!("≤ {SCALE_GROWTH_RATIO}×"),
        p_large <= SCALE_GROWTH_RATIO * p_small,
        format!(
            "p50 {:.2} → {:.2} ms, throughput {:.0} → {:.0} answered/s",
            small.answer_to_agent.p50,
            large.answer_to_agent.p50,
            small.throughput,
            large.throughput
        ),
    ));
}
