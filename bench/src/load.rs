//! The scale bench: S sessions on one remote agentctl, each with K concurrent
//! elicitations, answered by C operator clients (each with its own WebSocket; client i
//! answers the events whose pending id hashes to i). The operators hold their answers
//! until all S × K elicitations are open at once, then answer them all, a few at a time
//! each, as a browser's few connections would. Time to visible is each elicitation's own:
//! its agent sent it → its operator's WebSocket read it, in the burst of the opening.
//!
//! Every count comes from the agents' side: a request is lost when its agent never got a
//! response, doubled when it got more than one, crossed when the answer was another
//! request's. The sweep counts the same way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kandev_testkit::{Kandev, RemoteAgentctl};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::agent::wall_ns;
use crate::collector::Collector;
use crate::engine::{Engine, durability_from_log};
use crate::operator::{Connections, Created, clarifications_created};
use crate::stack::{STALL, Stack, peak_rss_bytes, start_kandev, start_session};
use crate::stats::{Percentiles, percentiles};

/// Answers one scale operator has in flight at once.
const ANSWERS_IN_FLIGHT: usize = 4;

/// How many sessions are started at once.
const STARTS_IN_FLIGHT: usize = 8;

/// The load's shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Sessions (each its own agent; with local agentctls, its own agentctl too).
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
    /// Answered elicitations per second: first request sent (open-then-answer: first
    /// answer posted) to last response received.
    pub throughput: f64,
    /// The seconds [`Self::throughput`] is counted over.
    pub busy_seconds: f64,
    /// Open-then-answer: seconds from the first session start until every elicitation
    /// was open (seen by the operators).
    pub open_seconds: Option<f64>,
    /// Operator answers (POST starts; the sweep: seen + think) → agent receives, ms.
    pub answer_to_agent: Percentiles,
    /// Raw answer-to-agent samples, ms.
    pub samples: Vec<f64>,
    /// Time to visible (the sweep, the scale): agent sends → operator's WebSocket reads it, ms.
    pub visible: Vec<f64>,
    /// kandev's VmHWM, bytes.
    pub kandev_peak_rss: u64,
    /// The largest VmHWM of any one agentctl, bytes.
    pub agentctl_peak_rss: u64,
    /// Median VmHWM of the agentctls, bytes.
    pub agentctl_median_peak_rss: u64,
    /// agentctl processes seen.
    pub agentctls: usize,
    /// The commit settings kandev reported for its database.
    pub durability: Option<String>,
}

impl LoadResult {
    /// Adds another round of the same shape: counts summed, percentiles over every sample,
    /// throughput over both rounds' busy time, peaks and the slowest open kept.
    pub fn absorb(&mut self, other: LoadResult) {
        self.sent += other.sent;
        self.answered += other.answered;
        self.lost += other.lost;
        self.doubled += other.doubled;
        self.crossed += other.crossed;
        self.respond_errors += other.respond_errors;
        self.busy_seconds += other.busy_seconds;
        self.throughput = throughput(self.answered, self.busy_seconds);
        self.open_seconds = match (self.open_seconds, other.open_seconds) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.samples.extend(other.samples);
        self.visible.extend(other.visible);
        self.answer_to_agent = percentiles(&self.samples);
        self.kandev_peak_rss = self.kandev_peak_rss.max(other.kandev_peak_rss);
        self.agentctl_peak_rss = self.agentctl_peak_rss.max(other.agentctl_peak_rss);
        self.agentctl_median_peak_rss = self
            .agentctl_median_peak_rss
            .max(other.agentctl_median_peak_rss);
        self.agentctls = self.agentctls.max(other.agentctls);
        self.durability = self.durability.take().or(other.durability);
    }
}

pub fn throughput(answered: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        answered as f64 / seconds
    } else {
        0.0
    }
}

/// Responses by tag, each `(received at, the answer it carried)`, in arrival order.
pub type Received = HashMap<String, Vec<(u128, String)>>;

/// Counts `sent` against `received` into `result` (sent, answered once, lost, doubled,
/// crossed); returns each answered tag with when it was sent and first answered.
pub fn tally<'a>(
    sent: &'a HashMap<String, u128>,
    received: &Received,
    result: &mut LoadResult,
) -> Vec<(&'a str, u128, u128)> {
    let mut answered = Vec::with_capacity(sent.len());
    result.sent += sent.len();
    for (tag, &sent_ns) in sent {
        let Some(responses) = received.get(tag) else {
            result.lost += 1;
            continue;
        };
        result.answered += 1;
        result.doubled += responses.len() - 1;
        result.crossed += responses.iter().filter(|(_, a)| a != tag).count();
        answered.push((tag.as_str(), sent_ns, responses[0].0));
    }
    answered
}

/// The operator client (of `operators`) that answers `pending_id`.
pub fn slot(pending_id: &str, operators: usize) -> usize {
    pending_id.bytes().map(usize::from).sum::<usize>() % operators.max(1)
}

/// What the operator clients share.
struct Operators {
    posted: Mutex<HashMap<String, u128>>,
    /// When each elicitation's operator read its `clarification.created`, by tag.
    shown: Mutex<HashMap<String, u128>>,
    errors: Mutex<Vec<String>>,
    /// Open-then-answer: elicitations seen so far, and the release once all are.
    seen: AtomicUsize,
    total: usize,
    release: watch::Sender<Option<u128>>,
}

impl Operators {
    /// Operators that release their answers once `total` elicitations are open.
    fn new(total: usize) -> Self {
        Self {
            posted: Mutex::default(),
            shown: Mutex::default(),
            errors: Mutex::default(),
            seen: AtomicUsize::new(0),
            total,
            release: watch::channel(None).0,
        }
    }

    async fn answer(&self, http: &Connections, event: &Created) {
        let pending = event.data["pending_id"].as_str().unwrap_or_default();
        let tag = event.data["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let body = json!({"answers": [{"question_id": "answer", "selected_options": [], "custom_text": tag}],
            "rejected": false, "reject_reason": ""});
        self.posted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tag.clone(), wall_ns());
        match http
            .post(&format!("/api/v1/clarifications/{pending}/respond"), &body)
            .await
        {
            Ok((200, b)) if b["status"] == "answered" => {}
            other => self
                .errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!("{tag}: {other:?}")),
        }
    }

    /// Notes when `event` was read, by its tag.
    fn shown(&self, event: &Created) {
        let tag = event.data["message"].as_str().unwrap_or_default();
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tag.to_owned(), event.seen_ns);
    }

    /// Counts one more open elicitation; the last one releases every operator.
    fn opened(&self) {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.total {
            self.release.send_replace(Some(wall_ns()));
        }
    }
}

async fn operator(
    shared: Arc<Operators>,
    index: usize,
    count: usize,
    mut created: tokio::sync::mpsc::UnboundedReceiver<Created>,
    http: Arc<Connections>,
) {
    let mine = |event: &Created| {
        slot(event.data["pending_id"].as_str().unwrap_or_default(), count) == index
    };
    let mut release = shared.release.subscribe();
    let mut held = Vec::new();
    loop {
        tokio::select! {
            event = created.recv() => match event {
                Some(event) if mine(&event) => {
                    shared.shown(&event);
                    held.push(event);
                    shared.opened();
                }
                Some(_) => {}
                None => return,
            },
            changed = release.wait_for(Option::is_some) => {
                if changed.is_err() {
                    return;
                }
                break;
            }
        }
    }
    // The held answers a few at a time, as a browser's few connections to a host would
    // carry them (ten thousand at once measured the bench's burst, not the open records).
    futures::stream::iter(held)
        .for_each_concurrent(ANSWERS_IN_FLIGHT, |event| {
            let (shared, http) = (Arc::clone(&shared), Arc::clone(&http));
            async move { shared.answer(&http, &event).await }
        })
        .await;
}

/// When the operators acted on each request, wall-clock ns by tag.
struct Instants<'a> {
    /// Its answer was posted.
    posted: &'a HashMap<String, u128>,
    /// Its `clarification.created` was read.
    shown: &'a HashMap<String, u128>,
}

/// Counts every request `sent_at` into `result` as [`tally`] does, and a response to a
/// request never sent as doubled; each request's answer to agent (posted → first
/// response) and time to visible (sent → shown), ms. The last first response's instant.
fn count(
    sent_at: &HashMap<String, u128>,
    received: &Received,
    at: Instants<'_>,
    result: &mut LoadResult,
) -> u128 {
    let ms = |from: u128, to: u128| to.saturating_sub(from) as f64 / 1e6;
    for (tag, &sent_ns) in sent_at {
        if let Some(&shown_ns) = at.shown.get(tag) {
            result.visible.push(ms(sent_ns, shown_ns));
        }
    }
    let mut last_recv = 0u128;
    for (tag, _, recv_ns) in tally(sent_at, received, result) {
        last_recv = last_recv.max(recv_ns);
        if let Some(&post_ns) = at.posted.get(tag) {
            result.samples.push(ms(post_ns, recv_ns));
        }
    }
    result.doubled += received
        .keys()
        .filter(|t| !sent_at.contains_key(*t))
        .count();
    last_recv
}

/// Starts `shape.sessions` sessions, a few at a time, session s on replica s mod R; the
/// failures' first one.
async fn start_sessions(kandevs: &[Kandev], shape: Shape) -> Result<(), String> {
    let starts = futures::stream::iter(0..shape.sessions)
        .map(|s| async move {
            match start_session(
                &kandevs[s % kandevs.len()],
                &format!("load {} s{s}", shape.per_session),
            )
            .await
            {
                Ok(session) => (session["state"] == "FAILED").then(|| session.to_string()),
                Err(err) => Some(err),
            }
        })
        .buffer_unordered(STARTS_IN_FLIGHT);
    let failed: Vec<String> = starts.filter_map(|f| async move { f }).collect().await;
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "load: {} of {} sessions failed to start, first: {first}",
            failed.len(),
            shape.sessions
        )),
    }
}

pub fn ns(report: &Value, field: &str) -> u128 {
    report[field]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

/// Runs the scale load on `engine`, one kandev, every session on one remote agentctl.
pub async fn run(shape: Shape, engine: Engine) -> Result<LoadResult, String> {
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let remote = Some(RemoteAgentctl::start(&[("RUST_LOG", "warn")]).await);
    let kandev = start_kandev(Stack {
        report: collector.addr(),
        engine,
        timing: false,
        remote: remote.as_ref(),
        replica: None,
    })
    .await?;
    let result = measure(shape, &mut collector, &[kandev], remote.as_ref()).await;
    drop(remote);
    result
}

/// The load itself, against kandevs already started.
async fn measure(
    shape: Shape,
    collector: &mut Collector,
    kandevs: &[Kandev],
    remote: Option<&RemoteAgentctl>,
) -> Result<LoadResult, String> {
    let total = shape.sessions * shape.per_session;
    let shared = Arc::new(Operators::new(total));
    let mut operators = Vec::new();
    for index in 0..shape.operators {
        let addr = kandevs[index % kandevs.len()].addr();
        let created = clarifications_created(addr).await?;
        operators.push(tokio::spawn(operator(
            Arc::clone(&shared),
            index,
            shape.operators,
            created,
            Arc::new(Connections::new(addr)),
        )));
    }
    let started_ns = wall_ns();
    start_sessions(kandevs, shape).await?;

    let mut sent_at: HashMap<String, u128> = HashMap::new();
    let mut received = Received::new();
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
                sent_at.insert(tag, ns(&report, "sent_ns"));
            }
            Some("recv") => {
                let answer = report["answer"].as_str().unwrap_or_default().to_owned();
                let entry = received.entry(tag).or_default();
                if entry.is_empty() {
                    first_responses += 1;
                }
                entry.push((ns(&report, "recv_ns"), answer));
            }
            _ => return Err(format!("load: unexpected agent report {report}")),
        }
    }
    // Peak memory while everything is still alive.
    let kandev_peak_rss = kandevs
        .iter()
        .filter_map(|k| peak_rss_bytes(k.pid()))
        .max()
        .unwrap_or_default();
    let mut agentctl_peaks: Vec<u64> = match remote {
        Some(agentctl) => peak_rss_bytes(agentctl.pid()).into_iter().collect(),
        None => kandevs
            .iter()
            .flat_map(Kandev::agentctls)
            .filter_map(|(pid, _)| peak_rss_bytes(pid))
            .collect(),
    };
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
    let released_ns = *shared.release.borrow();
    let posted = shared
        .posted
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let shown = std::mem::take(&mut *shared.shown.lock().unwrap_or_else(PoisonError::into_inner));
    let mut result = LoadResult {
        respond_errors: shared
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len(),
        kandev_peak_rss,
        agentctl_peak_rss: agentctl_peaks.last().copied().unwrap_or_default(),
        agentctl_median_peak_rss: agentctl_peaks
            .get(agentctl_peaks.len() / 2)
            .copied()
            .unwrap_or_default(),
        agentctls: agentctl_peaks.len(),
        open_seconds: released_ns.map(|r| r.saturating_sub(started_ns) as f64 / 1e9),
        durability: durability_from_log(&kandevs[0].log()),
        ..LoadResult::default()
    };
    let last_recv = count(
        &sent_at,
        &received,
        Instants {
            posted: &posted,
            shown: &shown,
        },
        &mut result,
    );
    let first = posted.values().copied().min();
    let span = last_recv.saturating_sub(first.unwrap_or_default()) as f64 / 1e9;
    result.busy_seconds = span;
    result.throughput = throughput(result.answered, span);
    result.answer_to_agent = percentiles(&result.samples);
    if result.sent < total {
        return Err(format!(
            "load: the agents sent {} of {total} elicitations ({reports} reports)",
            result.sent
        ));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(samples: &[f64], busy_seconds: f64, rss: u64, open: f64) -> LoadResult {
        LoadResult {
            sent: samples.len(),
            answered: samples.len(),
            samples: samples.to_vec(),
            answer_to_agent: percentiles(samples),
            busy_seconds,
            throughput: throughput(samples.len(), busy_seconds),
            kandev_peak_rss: rss,
            open_seconds: Some(open),
            ..LoadResult::default()
        }
    }

    #[test]
    fn each_request_counts_once_with_its_answer_and_its_time_to_visible() {
        let ns = |pairs: &[(&str, u128)]| -> HashMap<String, u128> {
            pairs.iter().map(|&(t, n)| (t.to_owned(), n)).collect()
        };
        let sent = ns(&[("a", 1_000_000), ("b", 1_000_000), ("c", 1_000_000)]);
        let received = HashMap::from([
            (
                "a".to_owned(),
                vec![(9_000_000, "a".to_owned()), (0, "a".to_owned())],
            ),
            ("b".to_owned(), vec![(7_000_000, "c".to_owned())]),
            ("stray".to_owned(), vec![(8_000_000, "stray".to_owned())]),
        ]);
        let posted = ns(&[("a", 6_000_000), ("b", 6_000_000)]);
        let shown = ns(&[("a", 3_000_000), ("b", 4_000_000)]);
        let mut result = LoadResult::default();
        let at = Instants {
            posted: &posted,
            shown: &shown,
        };
        assert_eq!(count(&sent, &received, at, &mut result), 9_000_000);
        assert_eq!(
            (result.sent, result.answered, result.lost),
            (3, 2, 1),
            "c never answered"
        );
        assert_eq!(
            (result.doubled, result.crossed),
            (2, 1),
            "a twice, a stray; b got c's"
        );
        let mut samples = result.samples.clone();
        samples.sort_by(f64::total_cmp);
        assert_eq!(samples, [1.0, 3.0], "first response − posted");
        let mut visible = result.visible.clone();
        visible.sort_by(f64::total_cmp);
        assert_eq!(visible, [2.0, 3.0], "shown − sent; c never shown");
    }

    #[test]
    fn absorbed_rounds_count_every_sample_once() {
        let mut first = round(&[1.0, 2.0], 1.0, 10, 0.5);
        let mut second = round(&[3.0, 40.0], 3.0, 30, 0.2);
        second.lost = 1;
        first.absorb(second);
        assert_eq!((first.sent, first.answered, first.lost), (4, 4, 1));
        assert_eq!(first.answer_to_agent, percentiles(&[1.0, 2.0, 3.0, 40.0]));
        assert!(
            (first.answer_to_agent.max - 40.0).abs() < 0.05,
            "within the histogram's 0.1%"
        );
        assert_eq!(first.throughput, 1.0, "4 answered over 4 busy seconds");
        assert_eq!(first.kandev_peak_rss, 30);
        assert_eq!(first.open_seconds, Some(0.5), "the slowest round's open");
    }

    #[test]
    fn every_pending_id_has_exactly_one_operator() {
        for id in ["a", "6f1c-…", "00000000-0000-4000-8000-000000000000"] {
            assert!(slot(id, 10) < 10);
        }
        assert_eq!(slot("anything", 1), 0);
        assert_eq!(slot("anything", 0), 0);
    }

    #[test]
    fn the_last_open_elicitation_releases_the_operators_once() {
        let shared = Operators::new(3);
        let release = shared.release.subscribe();
        shared.opened();
        shared.opened();
        assert_eq!(*release.borrow(), None);
        shared.opened();
        assert!(release.borrow().is_some());
    }
}
