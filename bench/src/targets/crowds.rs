//! The budgets with many at once: operators watching, agents streaming.

use super::bars::{CROWD_VISIBLE_P99_MS, LAST_CHUNK_MS, STREAM_RT_RATIO};
use super::verdict::{Target, exactly_once, target, under, unmeasured};
use crate::report::Report;
use crate::stats::interval;

/// Many operators: every socket sees every question in time, exactly once answered.
pub(super) fn crowd_targets(r: &Report, out: &mut Vec<Target>) {
    let c = match &r.crowd {
        Ok(c) => c,
        Err(err) => {
            out.push(unmeasured("many operator WebSockets".into(), err.clone()));
            return;
        }
    };
    let name = format!("{} operator WebSockets", c.plan.sockets);
    let p = crate::stats::percentiles(&c.visible);
    out.push(under(
        format!("{name}: time to visible p99"),
        p.p99,
        interval(&c.visible, 0.99),
        CROWD_VISIBLE_P99_MS,
        format!(
            "p50 {:.2} ms; an answered question costs every socket two writes, one for its open's events (the record, its message, the session, the task, the notification) and one for its settlement's (counted with perf: 2.02 `sendto` calls a socket a question, decision 0013), so each is a fan-out of one write to every socket, {:.0} socket writes a second here, each a wake-up and a loopback send that also runs the reader's side, with the bench's own {} readers on the same two cores; the p99 is the last sockets of a fan-out; would meet it: cores for the sockets (a write each cannot be fewer: the open and the settlement are apart in time)",
            p.p50,
            2.0 * c.plan.rate * c.plan.sockets as f64,
            c.plan.sockets
        ),
    ));
    out.push(target(
        format!("{name}: every socket saw every question"),
        format!("{} of {} unseen", c.unseen, c.plan.sockets * c.result.sent),
        "0 unseen".into(),
        c.unseen == 0,
        "a socket fell behind kandev's event buffer (it would have been told to resync)".into(),
    ));
    if crate::crowd::resync_expected(c.result.sent) {
        out.push(target(
            format!("{name}: a reader that stopped reading is told to resync"),
            format!(
                "{} `resync` among the {} frames it read afterwards",
                c.slow.resyncs, c.slow.frames
            ),
            "≥ 1".into(),
            c.slow.resyncs >= 1,
            format!(
                "its writes never outgrew kandev's buffer of {} events",
                crate::crowd::KANDEV_EVENT_BUFFER
            ),
        ));
    }
    out.push(exactly_once(format!("{name}: exactly once"), &c.result));
}

/// Agents that stream: questions keep their pace, the text its freshness.
pub(super) fn streaming_targets(r: &Report, out: &mut Vec<Target>) {
    let s = match &r.streaming {
        Ok(s) => s,
        Err(err) => {
            out.push(unmeasured("streaming agents".into(), err.clone()));
            return;
        }
    };
    let name = format!(
        "{} sessions streaming {} chunks/s",
        s.plan.sessions, s.plan.chunks_per_s
    );
    let idle = crate::stats::percentiles(&s.idle).p99;
    let during = crate::stats::percentiles(&s.during).p99;
    let ci = interval(&s.during, 0.99);
    let hi = ci.map_or(during, |i| i.hi);
    out.push(target(
        format!("{name}: elicitation round trip p99 during the stream ÷ idle"),
        format!(
            "{during:.2} ms {} ÷ {idle:.2} ms = {:.2}×",
            ci.map_or_else(String::new, |i| i.text()),
            during / idle
        ),
        format!("≤ {STREAM_RT_RATIO}× (the interval's top)"),
        hi <= STREAM_RT_RATIO * idle,
        format!(
            "the question waits on its way in, in kandev (its time to visible is most of the round trip, see the scenario): timed by hop (decision 0013), behind its session's earlier text in the session's queue and then for SQLite's one writer, which 100 sessions' streamed text keeps busy with an append a burst each, while agentctl and the agent stream add under a millisecond; streamed text already shares the writer's commits and carries the session's stream position in its own write (each cut the wait, measured alternating), the WAL starts over at each checkpoint, which holds the writer only for its last copy, instead of a `TRUNCATE` holding writes 40–260 ms every 4 s, agentctl sends a burst as one event (50 ms / 4 KiB) and runs its sessions on one thread (which cut the stream's p99 in four pairs of four, alternating); what is left: every append writes its pages to the WAL (about 20 MB a second; the rows are small, each question closing its session's text message within about 6 KB, and keeping streamed text in rows of its own instead of rewriting the message moved nothing, four pairs alternating), and the writer's groups wait for cores that the agentctls, the agents and kandev keep busy; during it {}; would meet it: a session's queued text written in the same batch as the question behind it and fewer text writes a session (kandev holding text it has shown, as agentctl does), or more cores than two",
            s.cpu.map_or_else(|| "CPU not read".to_owned(), |c| c.text())
        ),
    ));
    let last = crate::stats::percentiles(&s.last_chunk_visible).max;
    out.push(target(
        format!("{name}: each stream's last chunk visible"),
        format!(
            "slowest {last:.1} ms of {}, {} unseen",
            s.last_chunk_visible.len(),
            s.unseen
        ),
        format!("≤ {LAST_CHUNK_MS} ms"),
        last <= LAST_CHUNK_MS && s.unseen == 0,
        "the machine is saturated by the stream (see the round trip above): agentctl holds text up to 50 ms and kandev merges what is queued and sends appends, so what is left is waiting for a core; would meet it: as above".into(),
    ));
    out.push(exactly_once(format!("{name}: exactly once"), &s.result));
}
