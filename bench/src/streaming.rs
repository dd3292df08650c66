//! Agents that stream: S sessions (SQLite) each streaming 40-character
//! `agent_message_chunk`s at a steady rate while elicitations arrive. Two phases on the
//! same pre-started sessions: the elicitations alone (idle), then the same rate of
//! elicitations while every session streams. Measured:
//! - the elicitation's round trip as the agent sees it (it writes `elicitation/create` →
//!   reads the response; operators answer at once), idle and during the stream;
//! - the elicitation's time to visible (the agent writes it → the operator's WebSocket
//!   reads `clarification.created`), idle and during the stream, so the report shows which
//!   half of the round trip the stream slows;
//! - the last chunk's time to visible: the agent writes it → an operator's WebSocket first
//!   reads its `END:` marker, whatever event carries it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cpu::{CpuUse, Watched};
use crate::load::{LoadResult, Received, ns, tally};
use crate::operator::watch_markers;
use crate::stack::STALL;
use crate::sweep::{self, Serving, SweepPlan};

/// What the streaming bench runs.
#[derive(Debug, Clone, Copy)]
pub struct StreamPlan {
    /// Sessions, each streaming.
    pub sessions: usize,
    /// Chunks per second, per session.
    pub chunks_per_s: f64,
    /// How long each session streams, seconds.
    pub seconds: f64,
    /// Elicitations per second over all sessions, in each phase.
    pub rate: f64,
    /// Operator clients answering.
    pub operators: usize,
}

impl StreamPlan {
    /// Elicitations per phase: they end before the stream does.
    fn elicitations(&self) -> usize {
        ((self.rate * self.seconds * 0.8) as usize).max(self.sessions)
    }

    /// Chunks per session.
    fn chunks(&self) -> usize {
        ((self.chunks_per_s * self.seconds) as usize).max(1)
    }
}

/// What it measured.
#[derive(Debug, Clone)]
pub struct Streaming {
    /// The plan it ran.
    pub plan: StreamPlan,
    /// Elicitation round trips with no stream, ms.
    pub idle: Vec<f64>,
    /// Elicitation round trips while every session streams, ms.
    pub during: Vec<f64>,
    /// Elicitations' time to visible with no stream, ms.
    pub idle_visible: Vec<f64>,
    /// Elicitations' time to visible while every session streams, ms.
    pub during_visible: Vec<f64>,
    /// Each session's last chunk: sent → first seen by an operator, ms.
    pub last_chunk_visible: Vec<f64>,
    /// Sessions whose last chunk no operator saw.
    pub unseen: usize,
    /// Both phases' elicitations: answered once, lost, doubled, crossed.
    pub result: LoadResult,
    /// The CPU the phase with the stream used (`None` where `/proc` cannot be read).
    pub cpu: Option<CpuUse>,
}

/// Agent-observed round trips of `sent`, ms, and the exactly-once counts into `result`.
fn round_trips(
    sent: &HashMap<String, u128>,
    received: &Received,
    result: &mut LoadResult,
) -> Vec<f64> {
    tally(sent, received, result)
        .into_iter()
        .map(|(_, sent_ns, recv_ns)| recv_ns.saturating_sub(sent_ns) as f64 / 1e6)
        .collect()
}

/// Runs both phases.
pub async fn run(plan: StreamPlan) -> Result<Streaming, String> {
    let mut serving = Serving::start(plan.sessions, plan.operators).await?;
    let markers = Arc::new(Mutex::new(HashMap::new()));
    watch_markers(serving.kandev.addr(), Arc::clone(&markers)).await?;
    let collector = &mut serving.collector;
    let sweep_plan = SweepPlan {
        sessions: plan.sessions,
        operators: plan.operators,
        rates: vec![plan.rate],
        per_rate: plan.elicitations(),
        think: Duration::ZERO,
    };
    let mut received = Received::new();
    let mut streamed = Vec::new();
    let mut result = LoadResult::default();
    let idle_sent = sweep::one_rate(
        collector,
        &sweep_plan,
        0,
        (plan.rate, plan.elicitations()),
        &mut received,
        &mut streamed,
    )
    .await?;
    collector.broadcast(
        &json!({"stream": {"rate": plan.chunks_per_s, "n": plan.chunks(),
        "round": 1}}),
    );
    let streaming_since = std::time::Instant::now();
    let watched = Watched::of(std::slice::from_ref(&serving.kandev));
    let cpu_since = watched.clock();
    let during_sent = sweep::one_rate(
        collector,
        &sweep_plan,
        1,
        (plan.rate, plan.elicitations()),
        &mut received,
        &mut streamed,
    )
    .await?;
    let cpu = watched.used_since(cpu_since);
    // An overloaded machine runs the streams late: wait their length plus twice STALL.
    let deadline = streaming_since + Duration::from_secs_f64(plan.seconds) + 2 * STALL;
    while streamed.len() < plan.sessions {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let report = collector.next(left).await.ok_or_else(|| {
            format!(
                "streaming: {} of {} streams ended {:?} after they began",
                streamed.len(),
                plan.sessions,
                streaming_since.elapsed()
            )
        })?;
        if report["kind"] == "streamed" {
            streamed.push(report);
        }
    }
    // The last chunks are sent; give the operators' socket until STALL to show them.
    let deadline = tokio::time::Instant::now() + STALL;
    while markers.lock().unwrap_or_else(PoisonError::into_inner).len() < plan.sessions
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serving.stop();
    let idle = round_trips(&idle_sent, &received, &mut result);
    let during = round_trips(&during_sent, &received, &mut result);
    let visible = |sent| sweep::rate_result(sent, &received, &serving.seen).visible;
    let (idle_visible, during_visible) = (visible(&idle_sent), visible(&during_sent));
    let markers = markers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let (last_chunk_visible, unseen) = last_chunks(&streamed, &markers);
    Ok(Streaming {
        plan,
        idle,
        during,
        idle_visible,
        during_visible,
        last_chunk_visible,
        unseen,
        result,
        cpu,
    })
}

/// Each stream's last chunk: seen − sent, ms; and how many no operator saw.
fn last_chunks(streamed: &[Value], markers: &HashMap<String, u128>) -> (Vec<f64>, usize) {
    let mut visible = Vec::with_capacity(streamed.len());
    let mut unseen = 0;
    for report in streamed {
        let tag = report["tag"].as_str().unwrap_or_default();
        match markers.get(tag) {
            Some(seen_ns) => {
                visible.push(seen_ns.saturating_sub(ns(report, "sent_ns")) as f64 / 1e6);
            }
            None => unseen += 1,
        }
    }
    (visible, unseen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_chunk_is_timed_from_its_send_to_its_marker_and_a_missing_one_is_unseen() {
        let streamed = vec![
            json!({"kind": "streamed", "tag": "s0/1", "sent_ns": "1000000"}),
            json!({"kind": "streamed", "tag": "s1/1", "sent_ns": "1000000"}),
        ];
        let markers = HashMap::from([("s0/1".to_owned(), 4_000_000u128)]);
        assert_eq!(last_chunks(&streamed, &markers), (vec![3.0], 1));
    }

    #[test]
    fn round_trips_are_the_agents_and_count_each_question_once() {
        let sent = HashMap::from([("a".to_owned(), 1_000_000u128), ("b".to_owned(), 1_000_000)]);
        let received = Received::from([(
            "a".to_owned(),
            vec![(3_000_000, "a".to_owned()), (4_000_000, "a".to_owned())],
        )]);
        let mut result = LoadResult::default();
        assert_eq!(round_trips(&sent, &received, &mut result), vec![2.0]);
        assert_eq!(
            (result.sent, result.answered, result.lost, result.doubled),
            (2, 1, 1, 1)
        );
    }

    #[test]
    fn the_questions_end_before_the_stream_does() {
        let plan = StreamPlan {
            sessions: 100,
            chunks_per_s: 50.0,
            seconds: 10.0,
            rate: 20.0,
            operators: 4,
        };
        assert_eq!((plan.elicitations(), plan.chunks()), (160, 500));
    }
}
