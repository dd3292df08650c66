//! Why a budget is not met, as measured, and the change that would meet it
//! (docs/decisions/0013-performance-floor.md).

use crate::breakdown::Breakdown;
use crate::engine::Engine;
use crate::report::Report;
use crate::sweep::Sweep;

/// The agent-path segments that cost the most, as a reason.
fn heaviest(breakdown: &Breakdown) -> String {
    let parts: Vec<String> = breakdown
        .heaviest()
        .iter()
        .take(3)
        .map(|f| {
            format!(
                "{} {:.2} ms ({:.0}%)",
                f.segment.name,
                f.mean,
                100.0 * breakdown.share(f)
            )
        })
        .collect();
    format!("mean round trip by hop: {}", parts.join(", "))
}

/// The design change that would take the most off `segment` on `engine`
/// (docs/decisions/0013).
pub(super) fn remedy(segment: &str, engine: Engine) -> &'static str {
    match (segment, engine) {
        ("kandev record + message write", Engine::Sqlite) => {
            "already one statement and one commit, which stays on the path (an elicitation the operator sees is in the database); one question at a time has no other write to share its commit with (writes that queue together share one), and the write crosses to sqlx's connection thread and back, each side woken from idle (the statement probe at the top): would meet it: SQLite run on the calling thread (sqlx gives every SQLite connection a thread of its own), or fewer processes on the answer's path (the agent stream and the operator socket each cost a process's wake-up on a shared core)"
        }
        ("kandev record + message write", Engine::Postgres) => {
            "already one statement and one commit, which stays on the path (an elicitation the operator sees is in the database), and the commit waits for a WAL flush (the fdatasync probe at the top) on two cores shared with the server: would meet it: a WAL device with a cheaper flush, commits grouped under load (`commit_delay`), or fewer processes on the answer's path (the agent stream and the operator socket each cost a process's wake-up on a shared core)"
        }
        ("kandev session queue (earlier events)", _) => {
            "the session's events are applied in order and the previous answer's settlement holds the writer (SQLite has one); would meet it: settle an answer in the same commit as the session's next write instead of in its own"
        }
        ("HTTP respond in (request, auth, decode)", _) => {
            "would meet it: take answers over the operator's open WebSocket instead of a new HTTP request each"
        }
        ("agent → agentctl (stdio, ACP parse)", _) => {
            "on the direct path too: the agent's own pipe, not kandev's"
        }
        _ => "see docs/decisions/0013-performance-floor.md",
    }
}

/// Why kandev's added latency misses its bar on `engine`: the heaviest hops and the change
/// aimed at the first.
pub(super) fn added_reason(breakdown: Option<&Breakdown>, engine: Engine) -> String {
    let Some(breakdown) = breakdown else {
        return "no breakdown this run".into();
    };
    let Some(top) = breakdown.heaviest().first().copied() else {
        return heaviest(breakdown);
    };
    format!(
        "{}; {}; docs/decisions/0013-performance-floor.md",
        heaviest(breakdown),
        remedy(top.segment.name, engine)
    )
}

/// Why the knee is below its bar: the first rate past it, the CPU it used there, and
/// where questions wait (read with the hop timing on, decision 0013).
pub(super) fn knee_reason(sweep: &Sweep, engine: Engine) -> String {
    let past = match sweep.past_knee() {
        Some(p) => format!(
            "at {:.0}/s offered: p99 {:.2} ms, {:.0} answered/s, {}",
            p.offered,
            p.result.answer_to_agent.p99,
            p.result.throughput,
            p.cpu
                .map_or_else(|| "CPU not read".to_owned(), |c| c.text())
        ),
        None => "the sweep's last rate still held".into(),
    };
    let wait = match engine {
        Engine::Sqlite => {
            "the writes that queue on the one writer already share a commit; what is left is CPU: every answer wakes the agent, its agentctl, kandev and the operator several times (about 2 ms of the machine's CPU an answer), so the two cores fill before the writer does, kandev taking about one of them; with every session on one agentctl the knee stayed 1,000/s (measured), so fewer agentctls alone do not meet it; the session's view built from what was written instead of read back (decision 0021) took about a tenth off kandev's CPU at a given rate (measured alternating) and not more; a question's operator events already reach each socket in two writes, its open's and its settlement's (counted: decision 0013); would meet it: less of kandev's CPU an answer still (answers over the operator's open WebSocket instead of an HTTP request each), or more cores"
        }
        Engine::Postgres => {
            "questions past the rate queue in the feed between their commit and their broadcast, behind its reads (one query a session change: on PostgreSQL a question's open and settlement return no session, decision 0021, and the feed's board builds the task's view), on two cores shared with the server; would meet it: those writes returning their session too (its count is a trigger's, which the statement that fires it cannot see: a second statement each, or the count kept by the statements themselves)"
        }
    };
    format!("{past}; {wait} (docs/decisions/0013-performance-floor.md)")
}

/// kandev's CPU over the soak's first and last sixth, as a clause (empty when not read).
pub(super) fn cpu_drift(s: &crate::soak::Soak) -> String {
    s.cores_ends().map_or_else(String::new, |(first, last)| {
        format!(
            "; kandev used {first:.2} cores at the start and {last:.2} at the end, at the same rate"
        )
    })
}

/// The CPU at the first rate past the knee of the `n`-replica sweep, as a clause.
pub(super) fn past_cpu(r: &Report, n: usize) -> String {
    r.replicas
        .iter()
        .find(|p| p.replicas == n)
        .and_then(|p| p.result.as_ref().ok())
        .and_then(|s| s.past_knee())
        .and_then(|p| Some((p.offered, p.cpu?)))
        .map_or_else(String::new, |(offered, c)| {
            format!(" (at {offered:.0}/s offered: {})", c.text())
        })
}
