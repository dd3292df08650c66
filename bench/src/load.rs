//! The load bench: S sessions, each with K concurrent elicitations, answered by C
//! concurrent operator clients (each with its own WebSocket and keep-alive connection;
//! client i answers the events whose pending id hashes to i). Every count comes from
//! the agents' side: a request is lost when its agent never got a response, doubled
//! when it got more than one, crossed when the answer was another request's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;

use crate::agent::wall_ns;
use crate::collector::Collector;
use crate::operator::{KeepAlive, clarifications_created};
use crate::stack::{AGENT_ID, STALL, peak_rss_bytes, start_kandev};
use crate::stats::{Percentiles, percentiles};

/// The load's shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Sessions (each its own agentctl and agent).
    pub sessions: usize,
    /// Concurrent elicitations per session.
    pub per_session: usize,
    /// Concurrent operator clients.
    pub operators: usize,
}

/// What the load bench measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Elicitations the agents sent.
    pub sent: usize,
    /// Requests answered exactly once.
    pub answered: usize,
    /// Requests whose agent never got a response.
    pub lost: usize,
    /// Responses beyond the first to one request.
    pub doubled: usize,
    /// Responses carrying another request's answer.
    pub crossed: usize,
    /// Respond calls that did not return 200 answered.
    pub respond_errors: usize,
    /// Answered elicitations per second, first request sent to last response received.
    pub throughput: f64,
    /// Operator POST start → agent receives, ms.
    pub answer_to_agent: Percentiles,
    /// Raw answer-to-agent samples, ms.
    pub samples: Vec<f64>,
    /// kandev's VmHWM, bytes.
    pub kandev_peak_rss: u64,
    /// The largest VmHWM of any one agentctl, bytes.
    pub agentctl_peak_rss: u64,
    /// Median VmHWM of the agentctls, bytes.
    pub agentctl_median_peak_rss: u64,
    /// agentctl processes seen.
    pub agentctls: usize,
}

fn slot(pending_id: &str, operators: usize) -> usize {
    pending_id.bytes().map(usize::from).sum::<usize>() % operators.max(1)
}

/// Runs the load.
pub async fn run(shape: Shape) -> Result<LoadResult, String> {
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let kandev = start_kandev(collector.addr()).await?;
    let total = shape.sessions * shape.per_session;
    let posted: Arc<Mutex<HashMap<String, u128>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut operators = Vec::new();
    for index in 0..shape.operators {
        let mut created = clarifications_created(kandev.addr()).await?;
        let mut http = KeepAlive::connect(kandev.addr())
            .await
            .map_err(|err| format!("connect: {err}"))?;
        let posted = Arc::clone(&posted);
        let errors = Arc::clone(&errors);
        let operators_n = shape.operators;
        operators.push(tokio::spawn(async move {
            while let Some(event) = created.recv().await {
                let pending = event["pending_id"].as_str().unwrap_or_default().to_owned();
                if slot(&pending, operators_n) != index {
                    continue;
                }
                let tag = event["message"].as_str().unwrap_or_default().to_owned();
                let body = json!({"answers": [{"question_id": "answer", "selected_options": [], "custom_text": tag}],
                    "rejected": false, "reject_reason": ""});
                posted
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(tag.clone(), wall_ns());
                match http
                    .post(&format!("/api/v1/clarifications/{pending}/respond"), &body)
                    .await
                {
                    Ok((200, b)) if b["status"] == "answered" => {}
                    other => errors
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("{tag}: {other:?}")),
                }
            }
        }));
    }
    let mut failed = Vec::new();
    for s in 0..shape.sessions {
        let (_, session) = kandev
            .task_with_session(AGENT_ID, &format!("load {} s{s}", shape.per_session))
            .await;
        if session["state"] == "FAILED" {
            failed.push(session.to_string());
        }
    }
    if !failed.is_empty() {
        return Err(format!(
            "load: {} of {} sessions failed to start, first: {}",
            failed.len(),
            shape.sessions,
            failed[0]
        ));
    }

    let mut sent_at: HashMap<String, u128> = HashMap::new();
    let mut received: HashMap<String, Vec<(u128, String)>> = HashMap::new();
    let mut first_responses = 0;
    let mut reports = 0usize;
    // Wait until every request is answered once, then a short grace for doubles; stop
    // waiting when the agents fall silent for STALL (what is missing then is lost).
    while first_responses < total || sent_at.len() < total {
        let Some(report) = collector.next(STALL).await else {
            break;
        };
        reports += 1;
        let tag = report["tag"].as_str().unwrap_or_default().to_owned();
        match report["kind"].as_str() {
            Some("sent") => {
                sent_at.insert(tag, wall_ns());
            }
            Some("recv") => {
                let ns = report["recv_ns"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_default();
                let answer = report["answer"].as_str().unwrap_or_default().to_owned();
                let entry = received.entry(tag).or_default();
                if entry.is_empty() {
                    first_responses += 1;
                }
                entry.push((ns, answer));
            }
            _ => return Err(format!("load: unexpected agent report {report}")),
        }
    }
    // Peak memory while everything is still alive.
    let kandev_peak_rss = peak_rss_bytes(kandev.pid()).unwrap_or_default();
    let mut agentctl_peaks: Vec<u64> = kandev
        .agentctls()
        .iter()
        .filter_map(|(pid, _)| peak_rss_bytes(*pid))
        .collect();
    agentctl_peaks.sort_unstable();
    // Doubles arrive after the first answer, if ever: give them a moment.
    while let Some(report) = collector.next(Duration::from_millis(500)).await {
        if report["kind"] == "recv" {
            let tag = report["tag"].as_str().unwrap_or_default().to_owned();
            let answer = report["answer"].as_str().unwrap_or_default().to_owned();
            received.entry(tag).or_default().push((0, answer));
        }
    }
    for operator in operators {
        operator.abort();
    }
    let posted = posted
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut result = LoadResult {
        sent: sent_at.len(),
        respond_errors: errors.lock().unwrap_or_else(PoisonError::into_inner).len(),
        kandev_peak_rss,
        agentctl_peak_rss: agentctl_peaks.last().copied().unwrap_or_default(),
        agentctl_median_peak_rss: agentctl_peaks
            .get(agentctl_peaks.len() / 2)
            .copied()
            .unwrap_or_default(),
        agentctls: agentctl_peaks.len(),
        ..LoadResult::default()
    };
    let mut last_recv = 0u128;
    for tag in sent_at.keys() {
        match received.get(tag) {
            None => result.lost += 1,
            Some(responses) => {
                result.answered += 1;
                result.doubled += responses.len() - 1;
                result.crossed += responses.iter().filter(|(_, a)| a != tag).count();
                let (recv_ns, _) = responses[0];
                last_recv = last_recv.max(recv_ns);
                if let Some(post_ns) = posted.get(tag) {
                    result
                        .samples
                        .push(recv_ns.saturating_sub(*post_ns) as f64 / 1e6);
                }
            }
        }
    }
    result.doubled += received
        .keys()
        .filter(|t| !sent_at.contains_key(*t))
        .count();
    let first_sent = sent_at.values().copied().min().unwrap_or_default();
    let span = last_recv.saturating_sub(first_sent) as f64 / 1e9;
    result.throughput = if span > 0.0 {
        result.answered as f64 / span
    } else {
        0.0
    };
    result.answer_to_agent = percentiles(&result.samples);
    if result.sent < total {
        return Err(format!(
            "load: the agents sent {} of {total} elicitations ({reports} reports)",
            result.sent
        ));
    }
    drop(kandev);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pending_id_has_exactly_one_operator() {
        for id in ["a", "6f1c-…", "00000000-0000-4000-8000-000000000000"] {
            assert!(slot(id, 10) < 10);
        }
        assert_eq!(slot("anything", 1), 0);
        assert_eq!(slot("anything", 0), 0);
    }
}
