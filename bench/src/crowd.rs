//! Many operators watching: N operator WebSockets on one kandev (SQLite) while
//! elicitations arrive at a steady rate on pre-started sessions and one more operator
//! answers them. Time to visible is taken on every socket (the agent sends → that
//! socket reads `clarification.created`), so its p99 is the slowest operators' view.
//!
//! One more socket reads nothing until the run is over: a slow reader, whose kernel
//! receive buffer is a few kilobytes so it holds kandev's writes back at once. kandev
//! must not let it delay the others (their figures show it), and when it falls further
//! behind than kandev's event buffer it is told to `resync` once it reads again (counted;
//! it only happens when the run's events outgrow the buffer: [`resync_expected`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::load::{LoadResult, Received, tally};
use crate::operator::{connect_ws_with, watch};
use crate::sweep::{self, Serving, SweepPlan};

/// What the crowd runs.
#[derive(Debug, Clone, Copy)]
pub struct CrowdPlan {
    /// Watching operator sockets.
    pub sockets: usize,
    /// Pre-started sessions.
    pub sessions: usize,
    /// Elicitations per second, over all sessions.
    pub rate: f64,
    /// Elicitations in all (the run takes `elicitations / rate` seconds).
    pub elicitations: usize,
}

/// The slow reader's kernel receive buffer, bytes (Linux doubles it, and keeps a floor).
const SLOW_RECV_BUFFER: u32 = 4096;

/// How many operator events kandev keeps for a socket that is behind
/// (`crates/backend/src/events/hub.rs`).
pub const KANDEV_EVENT_BUFFER: usize = 4096;

/// The fewest operator events one answered question makes: the record created and
/// settled, and its message created and updated (more when the session and task views
/// and a notification follow).
const MIN_EVENTS_PER_QUESTION: usize = 4;

/// Whether the events of `questions` sent outgrow kandev's buffer, so the slow reader
/// must be told to resync (with a quarter to spare for what the kernel buffers hold).
pub fn resync_expected(questions: usize) -> bool {
    questions * MIN_EVENTS_PER_QUESTION > KANDEV_EVENT_BUFFER * 5 / 4
}

/// What the slow reader got once it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlowReader {
    /// Frames it read after the run.
    pub frames: usize,
    /// `resync` frames among them.
    pub resyncs: usize,
}

/// What the crowd measured.
#[derive(Debug, Clone)]
pub struct Crowd {
    /// The plan it ran.
    pub plan: CrowdPlan,
    /// Answered, lost, doubled, crossed; `samples` is answer to agent.
    pub result: LoadResult,
    /// Time to visible on every watching socket, ms (sockets × elicitations samples).
    pub visible: Vec<f64>,
    /// How many (socket, elicitation) pairs were never seen.
    pub unseen: usize,
    /// The slow reader.
    pub slow: SlowReader,
}

/// Reads what the slow reader's socket holds until it has been quiet for a second.
async fn drain_slow(
    mut socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> SlowReader {
    let mut slow = SlowReader::default();
    while let Ok(Some(Ok(message))) =
        tokio::time::timeout(Duration::from_secs(1), socket.next()).await
    {
        if let Message::Text(text) = message {
            slow.frames += 1;
            if serde_json::from_str::<Value>(text.as_str()).is_ok_and(|e| e["type"] == "resync") {
                slow.resyncs += 1;
            }
        }
    }
    slow
}

/// Runs the crowd.
pub async fn run(plan: CrowdPlan) -> Result<Crowd, String> {
    // One operator answers each question as soon as it sees it.
    let mut serving = Serving::start(plan.sessions, 1).await?;
    let addr = serving.kandev.addr();
    let seen = Arc::new(Mutex::new(Vec::with_capacity(
        plan.sockets * plan.elicitations,
    )));
    for _ in 0..plan.sockets {
        watch(addr, Arc::clone(&seen)).await?;
    }
    let slow = connect_ws_with(addr, Some(SLOW_RECV_BUFFER)).await?;
    let sweep_plan = SweepPlan {
        sessions: plan.sessions,
        operators: 1,
        rates: vec![plan.rate],
        per_rate: plan.elicitations,
        think: Duration::ZERO,
    };
    let mut received = Received::new();
    let sent = sweep::one_rate(
        &mut serving.collector,
        &sweep_plan,
        0,
        (plan.rate, plan.elicitations),
        &mut received,
        &mut Vec::new(),
    )
    .await?;
    // Read while kandev is still up: its write to this socket has waited all along.
    let slow = drain_slow(slow).await;
    serving.stop();
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(measured(plan, &sent, &received, &seen, slow))
}

/// The crowd's figures from what the agents sent and received and the sockets saw.
fn measured(
    plan: CrowdPlan,
    sent: &HashMap<String, u128>,
    received: &Received,
    seen: &[(String, u128)],
    slow: SlowReader,
) -> Crowd {
    let mut result = LoadResult::default();
    tally(sent, received, &mut result);
    let visible: Vec<f64> = seen
        .iter()
        .filter_map(|(tag, seen_ns)| {
            sent.get(tag)
                .map(|sent_ns| seen_ns.saturating_sub(*sent_ns) as f64 / 1e6)
        })
        .collect();
    Crowd {
        plan,
        result,
        unseen: (plan.sockets * sent.len()).saturating_sub(visible.len()),
        visible,
        slow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_socket_times_every_elicitation_and_the_unseen_are_counted() {
        let plan = CrowdPlan {
            sockets: 2,
            sessions: 1,
            rate: 1.0,
            elicitations: 2,
        };
        let sent = HashMap::from([("a".to_owned(), 1_000_000u128), ("b".to_owned(), 2_000_000)]);
        let received = Received::from([("a".to_owned(), vec![(5, "a".to_owned())])]);
        let seen = vec![
            ("a".to_owned(), 3_000_000),
            ("a".to_owned(), 4_000_000),
            ("b".to_owned(), 7_000_000),
            ("other".to_owned(), 9_000_000),
        ];
        let c = measured(plan, &sent, &received, &seen, SlowReader::default());
        assert_eq!((c.result.sent, c.result.answered, c.result.lost), (2, 1, 1));
        let mut visible = c.visible.clone();
        visible.sort_by(f64::total_cmp);
        assert_eq!(visible, [2.0, 3.0, 5.0]);
        assert_eq!(c.unseen, 1, "one socket never saw b");
    }
}
