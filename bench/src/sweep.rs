//! The load bench as users meet it: an arrival-rate sweep on pre-started sessions.
//!
//! S sessions are started first (not measured), each running the bench agent's `serve`
//! turn. Then, for each offered rate, every agent opens its share of elicitations on a
//! fixed schedule whether or not earlier ones were answered (open loop), and C operator
//! clients answer what they see on their own schedule: each answer after the think time,
//! on a free keep-alive connection of the operator's (a new one when all are busy), so no
//! answer waits behind another and queueing anywhere shows up in the latency.
//!
//! Every figure is taken from the agents' and operators' clocks:
//! - answer to agent (the headline): when the operator meant to answer (seen + think) →
//!   the agent reads the response;
//! - time to visible: the agent writes `elicitation/create` → the operator's WebSocket
//!   reads its `clarification.created`.
//!
//! The knee is the highest offered rate whose answer-to-agent p99 interval stays under
//! [`KNEE_P99_MS`] while the answers keep pace with the questions. The sweep stops at the
//! first rate past it. Lost, doubled and crossed answers are counted as in [`crate::load`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kandev_testkit::Kandev;
use serde_json::json;

use crate::collector::Collector;
use crate::cpu::{CpuUse, Watched};
use crate::engine::{Engine, durability_from_log};
use crate::load::{LoadResult, Received, ns, slot, tally, throughput};
use crate::operator::{Connections, Created, clarifications_created};
use crate::stack::{Replica, STALL, Stack, peak_rss_bytes, start_kandev, start_session};
use crate::stats::{interval, percentiles};

/// The answer-to-agent p99 the knee is found at, ms.
pub const KNEE_P99_MS: f64 = 25.0;

/// The longest one rate runs, seconds: low rates take fewer than `per_rate` questions
/// rather than minutes each (their sample counts are in the report).
pub const MAX_SECONDS: f64 = 25.0;

/// Questions at rate `offered` under a plan of `per_rate`.
fn questions_at(per_rate: usize, offered: f64) -> usize {
    per_rate.min((offered * MAX_SECONDS).ceil() as usize).max(1)
}

/// A rate keeps pace when at least this share of it is answered per second.
pub const PACE_SHARE: f64 = 0.9;

/// What a sweep runs.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// Pre-started sessions the rate is shared among.
    pub sessions: usize,
    /// Operator clients (each its own WebSocket and connections).
    pub operators: usize,
    /// Offered rates, elicitations per second over all sessions, in order.
    pub rates: Vec<f64>,
    /// Elicitations per rate (at least; rounded up to a whole number per session); the
    /// sweep runs as many as [`MAX_SECONDS`] of the rate holds when that is fewer.
    pub per_rate: usize,
    /// How long an operator thinks before answering.
    pub think: Duration,
}

/// One offered rate.
#[derive(Debug, Clone)]
pub struct RatePoint {
    /// Offered, elicitations per second.
    pub offered: f64,
    /// What it measured (`throughput` is what was answered per second).
    pub result: LoadResult,
    /// The CPU the rate used (`None` where `/proc` cannot be read).
    pub cpu: Option<CpuUse>,
}

impl RatePoint {
    /// Whether the point is under the knee's bar: the p99's whole interval under
    /// [`KNEE_P99_MS`], answers keeping pace, nothing lost.
    pub fn holds(&self) -> bool {
        let r = &self.result;
        let p99_hi = interval(&r.samples, 0.99).map_or(f64::INFINITY, |i| i.hi);
        p99_hi <= KNEE_P99_MS && r.throughput >= PACE_SHARE * self.offered && r.lost == 0
    }
}

/// A whole sweep.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The plan it ran.
    pub sessions: usize,
    /// Operator clients.
    pub operators: usize,
    /// Think time, ms.
    pub think_ms: f64,
    /// Each rate run, in order.
    pub points: Vec<RatePoint>,
    /// Every point pooled (exactly-once counts, peaks, durability).
    pub total: LoadResult,
    /// Each session's cold start, ms: `POST …/sessions` → its agent ready, one at a time.
    pub cold_starts: Vec<f64>,
}

impl Sweep {
    /// The highest rate that held, every rate before it holding too; `None` when the
    /// first did not.
    pub fn knee(&self) -> Option<&RatePoint> {
        self.points.iter().take_while(|p| p.holds()).last()
    }

    /// The first rate that did not hold, if the sweep reached one.
    pub fn past_knee(&self) -> Option<&RatePoint> {
        self.points.iter().find(|p| !p.holds())
    }
}

/// Runs the sweep on one kandev on `engine`.
pub async fn run(plan: &SweepPlan, engine: Engine) -> Result<Sweep, String> {
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let kandev = start_kandev(Stack::plain(collector.addr(), engine)).await?;
    measure(plan, &mut collector, &[kandev]).await
}

/// Runs the sweep through `replicas` kandevs on one fresh PostgreSQL database: session s
/// starts on replica s mod R, operator i watches and answers on replica i mod R.
pub async fn run_replicated(plan: &SweepPlan, replicas: usize) -> Result<Sweep, String> {
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let database = Engine::Postgres
        .database()
        .await?
        .ok_or("replicas: no PostgreSQL database")?;
    let mut kandevs = Vec::new();
    for id in 0..replicas {
        kandevs.push(
            start_kandev(Stack {
                report: collector.addr(),
                engine: Engine::Postgres,
                timing: false,
                remote: None,
                replica: Some(Replica {
                    id,
                    database: &database,
                }),
            })
            .await?,
        );
    }
    measure(plan, &mut collector, &kandevs).await
}

/// When the operators saw and meant to answer each tag, wall-clock ns.
#[derive(Default)]
pub struct Seen {
    at: Mutex<HashMap<String, (u128, u128)>>,
    errors: Mutex<Vec<String>>,
}

/// One operator client: answers its share of what its WebSocket shows, each answer in a
/// task of its own after `think`.
async fn operator(
    seen: Arc<Seen>,
    index: usize,
    count: usize,
    think: Duration,
    mut created: tokio::sync::mpsc::UnboundedReceiver<Created>,
    connections: Arc<Connections>,
) {
    while let Some(event) = created.recv().await {
        let pending = event.data["pending_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if slot(&pending, count) != index {
            continue;
        }
        let tag = event.data["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (seen, connections) = (Arc::clone(&seen), Arc::clone(&connections));
        tokio::spawn(async move {
            if !think.is_zero() {
                tokio::time::sleep(think).await;
            }
            let intended = event.seen_ns + think.as_nanos();
            seen.at
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(tag.clone(), (event.seen_ns, intended));
            let body = json!({"answers": [{"question_id": "answer", "selected_options": [],
                "custom_text": tag}], "rejected": false, "reject_reason": ""});
            match connections
                .post(&format!("/api/v1/clarifications/{pending}/respond"), &body)
                .await
            {
                Ok((200, b)) if b["status"] == "answered" => {}
                other => seen
                    .errors
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("{tag}: {other:?}")),
            }
        });
    }
}

/// Starts the sessions (`serve s<i> <i/sessions>`) one at a time, each on an idle kandev:
/// its cold start, ms, from the operator's `POST …/sessions` to its agent reporting ready
/// (kandev started agentctl, agentctl the agent, ACP initialised, the prompt delivered).
/// Session `i` sends at phase `i/sessions` of each agent's interval, so the offered rate
/// arrives evenly spread rather than in bursts of one question per session.
pub async fn start_sessions(
    kandevs: &[Kandev],
    sessions: usize,
    collector: &mut Collector,
) -> Result<Vec<f64>, String> {
    let mut cold_starts = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let started = std::time::Instant::now();
        match start_session(
            &kandevs[s % kandevs.len()],
            &format!("serve s{s} {}", s as f64 / sessions as f64),
        )
        .await
        {
            Ok(session) if session["state"] != "FAILED" => {}
            Ok(session) => return Err(format!("sweep: session {s} failed to start: {session}")),
            Err(err) => return Err(format!("sweep: session {s}: {err}")),
        }
        loop {
            let report = collector
                .next(STALL)
                .await
                .ok_or_else(|| format!("sweep: agent s{s} not ready after {STALL:?}"))?;
            if report["kind"] == "ready" && report["tag"] == format!("s{s}") {
                break;
            }
        }
        cold_starts.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(cold_starts)
}

/// Runs one rate: `go` to every agent for at least `questions` in all, then reads
/// reports until every elicitation of the round is answered or the agents fall silent
/// for [`STALL`].
pub async fn one_rate(
    collector: &mut Collector,
    plan: &SweepPlan,
    round: usize,
    (offered, questions): (f64, usize),
    received: &mut Received,
    streamed: &mut Vec<serde_json::Value>,
) -> Result<HashMap<String, u128>, String> {
    let per_session = questions.max(1).div_ceil(plan.sessions.max(1));
    let total = per_session * plan.sessions;
    let command = json!({"go": {"rate": offered / plan.sessions as f64,
        "n": per_session, "round": round}});
    let told = collector.broadcast(&command);
    if told < plan.sessions {
        return Err(format!(
            "sweep: {told} of {} agents connected",
            plan.sessions
        ));
    }
    let prefix = format!("/{round}/");
    let mut sent: HashMap<String, u128> = HashMap::with_capacity(total);
    let mut answered = 0;
    while answered < total || sent.len() < total {
        let Some(report) = collector.next(STALL).await else {
            break;
        };
        let tag = report["tag"].as_str().unwrap_or_default().to_owned();
        match report["kind"].as_str() {
            Some("sent") if tag.contains(&prefix) => {
                sent.insert(tag, ns(&report, "sent_ns"));
            }
            Some("recv") => {
                let answer = report["answer"].as_str().unwrap_or_default().to_owned();
                let responses = received.entry(tag.clone()).or_default();
                if responses.is_empty() && tag.contains(&prefix) {
                    answered += 1;
                }
                responses.push((ns(&report, "recv_ns"), answer));
            }
            // A stream running beside the questions reports its end.
            Some("streamed") => streamed.push(report),
            _ => return Err(format!("sweep: unexpected agent report {report}")),
        }
    }
    Ok(sent)
}

/// What one rate's tags measured.
pub fn rate_result(sent: &HashMap<String, u128>, received: &Received, seen: &Seen) -> LoadResult {
    let at = seen.at.lock().unwrap_or_else(PoisonError::into_inner);
    let mut result = LoadResult::default();
    let mut last_recv = 0u128;
    for (tag, sent_ns, recv_ns) in tally(sent, received, &mut result) {
        last_recv = last_recv.max(recv_ns);
        if let Some(&(seen_ns, intended_ns)) = at.get(tag) {
            result
                .samples
                .push(recv_ns.saturating_sub(intended_ns) as f64 / 1e6);
            result
                .visible
                .push(seen_ns.saturating_sub(sent_ns) as f64 / 1e6);
        }
    }
    let first = sent.values().copied().min().unwrap_or_default();
    result.busy_seconds = last_recv.saturating_sub(first) as f64 / 1e9;
    result.throughput = throughput(result.answered, result.busy_seconds);
    result.answer_to_agent = percentiles(&result.samples);
    result
}

/// Spawns `count` answering operator clients, client i on `addrs[i mod len]`, each
/// answering its share after `think`, into `seen`.
pub async fn answering(
    seen: &Arc<Seen>,
    addrs: &[std::net::SocketAddr],
    count: usize,
    think: Duration,
) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
    let mut operators = Vec::with_capacity(count);
    for index in 0..count {
        let addr = addrs[index % addrs.len()];
        operators.push(tokio::spawn(operator(
            Arc::clone(seen),
            index,
            count,
            think,
            clarifications_created(addr).await?,
            Arc::new(Connections::new(addr)),
        )));
    }
    Ok(operators)
}

/// One SQLite kandev with `serve` sessions started and operators answering at once: what
/// the many-operators, streaming and soak runs start from.
pub struct Serving {
    /// The agents' reports, and their commands.
    pub collector: Collector,
    /// The kandev.
    pub kandev: Kandev,
    /// What the operators saw and when they meant to answer.
    pub seen: Arc<Seen>,
    operators: Vec<tokio::task::JoinHandle<()>>,
}

impl Serving {
    /// Starts kandev, `operators` answering operators and `sessions` sessions.
    pub async fn start(sessions: usize, operators: usize) -> Result<Self, String> {
        let mut collector = Collector::start()
            .await
            .map_err(|err| format!("collector: {err}"))?;
        let kandev = start_kandev(Stack::plain(collector.addr(), Engine::Sqlite)).await?;
        let seen = Arc::new(Seen::default());
        let operators = answering(&seen, &[kandev.addr()], operators, Duration::ZERO).await?;
        start_sessions(std::slice::from_ref(&kandev), sessions, &mut collector).await?;
        Ok(Self {
            collector,
            kandev,
            seen,
            operators,
        })
    }

    /// Ends the agents' turns and the operators.
    pub fn stop(&self) {
        self.collector.broadcast(&json!({"stop": true}));
        for operator in &self.operators {
            operator.abort();
        }
    }
}

/// The sweep against kandevs already started.
async fn measure(
    plan: &SweepPlan,
    collector: &mut Collector,
    kandevs: &[Kandev],
) -> Result<Sweep, String> {
    let seen = Arc::new(Seen::default());
    let addrs: Vec<_> = kandevs.iter().map(Kandev::addr).collect();
    let operators = answering(&seen, &addrs, plan.operators, plan.think).await?;
    let cold_starts = start_sessions(kandevs, plan.sessions, collector).await?;
    let watched = Watched::of(kandevs);
    let mut received = Received::new();
    let mut points = Vec::new();
    let mut sent_all = HashMap::new();
    for (round, &offered) in plan.rates.iter().enumerate() {
        eprintln!("kandev-bench: sweep, {offered:.0} elicitations/s offered");
        let started = watched.clock();
        let sent = one_rate(
            collector,
            plan,
            round,
            (offered, questions_at(plan.per_rate, offered)),
            &mut received,
            &mut Vec::new(),
        )
        .await?;
        let point = RatePoint {
            offered,
            result: rate_result(&sent, &received, &seen),
            cpu: watched.used_since(started),
        };
        sent_all.extend(sent);
        let holds = point.holds();
        points.push(point);
        if !holds {
            break;
        }
    }
    collector.broadcast(&json!({"stop": true}));
    let kandev_peak_rss = kandevs
        .iter()
        .filter_map(|k| peak_rss_bytes(k.pid()))
        .max()
        .unwrap_or_default();
    let mut agentctl_peaks: Vec<u64> = kandevs
        .iter()
        .flat_map(Kandev::agentctls)
        .filter_map(|(pid, _)| peak_rss_bytes(pid))
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
    let mut total = rate_result(&sent_all, &received, &seen);
    total.doubled += received
        .keys()
        .filter(|t| !sent_all.contains_key(*t))
        .count();
    total.respond_errors = seen
        .errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len();
    total.kandev_peak_rss = kandev_peak_rss;
    total.agentctl_peak_rss = agentctl_peaks.last().copied().unwrap_or_default();
    total.agentctl_median_peak_rss = agentctl_peaks
        .get(agentctl_peaks.len() / 2)
        .copied()
        .unwrap_or_default();
    total.agentctls = agentctl_peaks.len();
    total.durability = durability_from_log(&kandevs[0].log());
    Ok(Sweep {
        sessions: plan.sessions,
        operators: plan.operators,
        think_ms: plan.think.as_secs_f64() * 1e3,
        points,
        total,
        cold_starts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(offered: f64, samples: Vec<f64>, throughput: f64) -> RatePoint {
        RatePoint {
            offered,
            result: LoadResult {
                sent: samples.len(),
                answered: samples.len(),
                answer_to_agent: percentiles(&samples),
                samples,
                throughput,
                ..LoadResult::default()
            },
            cpu: None,
        }
    }

    fn sweep(points: Vec<RatePoint>) -> Sweep {
        Sweep {
            sessions: 1,
            operators: 1,
            think_ms: 0.0,
            points,
            total: LoadResult::default(),
            cold_starts: Vec::new(),
        }
    }

    #[test]
    fn a_low_rate_runs_for_at_most_its_share_of_time() {
        assert_eq!(questions_at(10_000, 100.0), 2_500);
        assert_eq!(questions_at(10_000, 400.0), 10_000);
        assert_eq!(questions_at(200, 50.0), 200);
    }

    #[test]
    fn the_knee_is_the_last_rate_held_before_the_first_that_was_not() {
        let fast = || vec![2.0; 1000];
        let slow = vec![40.0; 1000];
        let s = sweep(vec![
            point(100.0, fast(), 100.0),
            point(200.0, fast(), 199.0),
            point(400.0, slow, 390.0),
            point(800.0, fast(), 800.0),
        ]);
        assert_eq!(s.knee().map(|p| p.offered), Some(200.0));
        assert_eq!(s.past_knee().map(|p| p.offered), Some(400.0));
        // Fast answers that fall behind the offered rate are past the knee too.
        let behind = sweep(vec![point(100.0, fast(), 50.0)]);
        assert!(behind.knee().is_none());
        assert_eq!(behind.past_knee().map(|p| p.offered), Some(100.0));
        let never = sweep(vec![point(100.0, fast(), 100.0)]);
        assert!(never.past_knee().is_none());
    }

    #[test]
    fn a_rate_counts_each_tag_once_and_times_it_from_the_operators_intent() {
        let sent = HashMap::from([
            ("s0/0/0".to_owned(), 1_000_000u128),
            ("s0/0/1".to_owned(), 2_000_000),
            ("s0/0/2".to_owned(), 3_000_000),
        ]);
        let received = Received::from([
            ("s0/0/0".to_owned(), vec![(9_000_000, "s0/0/0".to_owned())]),
            (
                "s0/0/1".to_owned(),
                vec![
                    (10_000_000, "s0/0/1".to_owned()),
                    (11_000_000, "s0/0/2".to_owned()),
                ],
            ),
        ]);
        let seen = Seen::default();
        seen.at.lock().expect("lock").extend([
            ("s0/0/0".to_owned(), (4_000_000, 5_000_000)),
            ("s0/0/1".to_owned(), (6_000_000, 6_000_000)),
        ]);
        let r = rate_result(&sent, &received, &seen);
        assert_eq!((r.sent, r.answered, r.lost), (3, 2, 1));
        assert_eq!((r.doubled, r.crossed), (1, 1));
        let mut samples = r.samples.clone();
        samples.sort_by(f64::total_cmp);
        assert_eq!(samples, [4.0, 4.0], "receive − intended answer");
        let mut visible = r.visible.clone();
        visible.sort_by(f64::total_cmp);
        assert_eq!(visible, [3.0, 4.0], "seen − sent");
        assert_eq!(r.busy_seconds, 0.009, "first sent to last received");
    }
}
