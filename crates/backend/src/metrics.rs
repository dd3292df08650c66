//! kandev's Prometheus metrics: what each event point records, in one place. The event
//! points call one function here each; `GET /metrics` (in `http`) refreshes the gauges
//! from the database and renders. Every label is a closed set of names (sources,
//! outcomes, states, reasons, route templates, methods, status codes), never question
//! or answer text, an id or a token.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `kandev_clarifications_pending` | gauge (database) | `source` |
//! | `kandev_clarifications_received_total` | counter | `source` |
//! | `kandev_elicitations_declined_total` | counter | `reason` (agentctl's door) |
//! | `kandev_clarifications_settled_total` | counter | `source`, `outcome` |
//! | `kandev_answer_latency_seconds` | histogram | `source` (created → settled by the operator) |
//! | `kandev_delivery_latency_seconds` | histogram | `source` (respond → agentctl's verdict) |
//! | `kandev_webhook_deliveries_total` | counter | `hook` (a configured name), `outcome` (`delivered`, `retried`, `failed`, `dropped`) |
//! | `kandev_sessions_live` | gauge (database) | `state` |
//! | `kandev_sessions_attached` | gauge | (sessions whose agent stream this process holds) |
//! | `kandev_agent_stream_reconnects_total`, `kandev_agent_streams_lost_total` | counter | |
//! | `kandev_http_requests_total` | counter | `route` (matched template), `method`, `status` |
//! | `kandev_db_pool_connections` | gauge | `state` (`idle`, `in_use`) |
//! | `kandev_db_pool_max_connections`, `kandev_database_up`, `kandev_draining` | gauge | |
//!
//! The database gauges count what the database holds, so every replica on one database
//! reports the same values; the rest are this process's own.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kandev_agent_stream::DoorDecline;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::model::{Clarification, Outcome, SessionState, Source};
use crate::store::{Gauges, PoolUse};

const ANSWER_LATENCY: &str = "kandev_answer_latency_seconds";
const DELIVERY_LATENCY: &str = "kandev_delivery_latency_seconds";
/// An operator answers in seconds to hours.
const ANSWER_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
];
/// agentctl answers in milliseconds; its request timeout is 30 s.
const DELIVERY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// How often histogram samples are folded in between scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// The process's recorder, installed on first use (once per process, whatever the
/// number of app states a test builds).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| match builder().map(PrometheusBuilder::install_recorder) {
        Ok(Ok(handle)) => {
            describe();
            handle
        }
        Ok(Err(err)) | Err(err) => {
            tracing::warn!(error = %err, "metrics recorder not installed; /metrics stays empty");
            PrometheusBuilder::new().build_recorder().handle()
        }
    })
}

/// Makes sure the recorder is there before something is recorded: a sample recorded
/// before it would be lost (cheap: one atomic load after the first call).
fn installed() {
    handle();
}

fn builder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(ANSWER_LATENCY.into()), ANSWER_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(DELIVERY_LATENCY.into()), DELIVERY_BUCKETS)
}

/// Folds histogram samples in every few seconds, so memory stays flat between scrapes.
pub fn spawn_upkeep() {
    let handle = handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    });
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "kandev_clarifications_pending",
        "Clarifications waiting for an operator."
    );
    describe_counter!(
        "kandev_clarifications_received_total",
        "Clarifications opened (elicitations and ask_user_question calls that reached the operator)."
    );
    describe_counter!(
        "kandev_elicitations_declined_total",
        "elicitation/create answered decline by agentctl at the door, by reason."
    );
    describe_counter!(
        "kandev_clarifications_settled_total",
        "Clarifications settled, by outcome."
    );
    describe_counter!(
        "kandev_webhook_deliveries_total",
        "Webhook delivery attempts, by hook and outcome."
    );
    describe_histogram!(
        ANSWER_LATENCY,
        metrics::Unit::Seconds,
        "From a question being asked to the operator answering, skipping or cancelling it."
    );
    describe_histogram!(
        DELIVERY_LATENCY,
        metrics::Unit::Seconds,
        "From an operator's respond reaching kandev to agentctl's verdict."
    );
    describe_counter!(
        "kandev_auto_answers_total",
        "Auto-answer rules that fired, by result: answered, preempted (settled first), invalid (the answer does not fit the question), refused (by agentctl or the backend)."
    );
    describe_gauge!("kandev_sessions_live", "Live sessions by state.");
    describe_gauge!(
        "kandev_sessions_attached",
        "Sessions whose agent stream this process holds."
    );
    describe_counter!(
        "kandev_agent_stream_reconnects_total",
        "Agent streams re-attached after a drop."
    );
    describe_counter!(
        "kandev_agent_streams_lost_total",
        "Agent streams given up on (agentctl unreachable or gone)."
    );
    describe_counter!(
        "kandev_lease_takeovers_total",
        "Sessions claimed from another replica (lease ran out or handed on)."
    );
    describe_counter!(
        "kandev_sessions_handed_over_total",
        "Sessions handed on to the other replicas by a drain."
    );
    describe_counter!(
        "kandev_http_requests_total",
        "HTTP requests by route template, method and status."
    );
    describe_gauge!(
        "kandev_db_pool_connections",
        "Database pool connections by state."
    );
    describe_gauge!(
        "kandev_db_pool_max_connections",
        "The most connections the pool opens."
    );
    describe_gauge!(
        "kandev_database_up",
        "1 when the database answered the last scrape's queries."
    );
    describe_gauge!("kandev_draining", "1 once shutting down.");
}

/// An auto-answer rule fired with `result` (`answered`, `preempted`, `invalid`, `refused`).
pub fn auto_answer(result: &'static str) {
    installed();
    metrics::counter!("kandev_auto_answers_total", "result" => result).increment(1);
}

/// A clarification reached the operator.
pub fn clarification_received(source: Source) {
    installed();
    metrics::counter!("kandev_clarifications_received_total", "source" => source.as_str())
        .increment(1);
}

/// agentctl declined an elicitation at the door.
pub fn elicitation_declined(reason: DoorDecline) {
    installed();
    metrics::counter!("kandev_elicitations_declined_total", "reason" => reason.as_str())
        .increment(1);
}

/// A record left `pending` (or agentctl corrected a provisional settlement, which is
/// then counted again under the outcome that stands).
pub fn clarification_settled(record: &Clarification) {
    installed();
    let Some(outcome) = record.outcome else {
        return;
    };
    let source = record.source.as_str();
    metrics::counter!("kandev_clarifications_settled_total", "source" => source, "outcome" => outcome.as_str())
        .increment(1);
    // Answer latency is the operator's: withdrawals, timeouts and agent cancels are not.
    let by_operator = matches!(
        outcome,
        Outcome::Answered | Outcome::Skipped | Outcome::Cancelled
    );
    if let (true, Some(settled)) = (by_operator, record.settled_at) {
        let waited = settled.instant() - record.created_at.instant();
        let seconds = waited.num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6;
        metrics::histogram!(ANSWER_LATENCY, "source" => source).record(seconds);
    }
}

/// agentctl gave its verdict on an operator's verb sent at `asked` (`verdict`: false
/// when no verdict came: the stream was down or the request timed out).
pub fn delivery(source: Source, asked: Instant, verdict: bool) {
    installed();
    if verdict {
        metrics::histogram!(DELIVERY_LATENCY, "source" => source.as_str())
            .record(asked.elapsed().as_secs_f64());
    }
}

/// One webhook delivery attempt (or a reminder dropped unsent).
pub fn webhook_delivery(hook: &str, outcome: &'static str) {
    installed();
    metrics::counter!("kandev_webhook_deliveries_total", "hook" => hook.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// A session claimed from another replica (its lease ran out or was handed on).
pub fn lease_taken_over() {
    installed();
    metrics::counter!("kandev_lease_takeovers_total").increment(1);
}

/// Sessions handed on to the other replicas by a drain.
pub fn sessions_handed_over(n: usize) {
    installed();
    metrics::counter!("kandev_sessions_handed_over_total").increment(n as u64);
}

/// An agent stream re-attached after a drop.
pub fn agent_stream_reconnected() {
    installed();
    metrics::counter!("kandev_agent_stream_reconnects_total").increment(1);
}

/// An agent stream was given up on.
pub fn agent_stream_lost() {
    installed();
    metrics::counter!("kandev_agent_streams_lost_total").increment(1);
}

/// One HTTP response. `route` is the matched path template (`/api/v1/sessions/{id}`) or
/// `fallback` (the web UI's files and unknown paths), never the raw path.
pub fn http_request(route: &str, method: &axum::http::Method, status: u16) {
    installed();
    const KNOWN: [&str; 7] = ["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS"];
    let method = KNOWN
        .into_iter()
        .find(|known| *known == method.as_str())
        .unwrap_or("OTHER");
    metrics::counter!(
        "kandev_http_requests_total",
        "route" => route.to_owned(),
        "method" => method,
        "status" => status.to_string()
    )
    .increment(1);
}

/// What a scrape read, as the gauges show it. `gauges` is `None` when the database did
/// not answer (its gauges keep their last values; `kandev_database_up` says 0).
pub fn set_gauges(gauges: Option<&Gauges>, pool: PoolUse, attached: usize, draining: bool) {
    installed();
    metrics::gauge!("kandev_database_up").set(if gauges.is_some() { 1.0 } else { 0.0 });
    if let Some(gauges) = gauges {
        for source in [Source::Elicitation, Source::AskUserQuestion] {
            let n = gauges
                .pending
                .iter()
                .find(|(s, _)| *s == source)
                .map_or(0, |(_, n)| *n);
            metrics::gauge!("kandev_clarifications_pending", "source" => source.as_str())
                .set(n as f64);
        }
        for state in SessionState::ALL.into_iter().filter(|s| !s.is_terminal()) {
            let n = gauges
                .sessions
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            metrics::gauge!("kandev_sessions_live", "state" => state.as_str()).set(n as f64);
        }
    }
    let in_use = pool.open.saturating_sub(pool.idle);
    metrics::gauge!("kandev_db_pool_connections", "state" => "idle").set(f64::from(pool.idle));
    metrics::gauge!("kandev_db_pool_connections", "state" => "in_use").set(f64::from(in_use));
    metrics::gauge!("kandev_db_pool_max_connections").set(f64::from(pool.max));
    metrics::gauge!("kandev_sessions_attached").set(attached as f64);
    metrics::gauge!("kandev_draining").set(if draining { 1.0 } else { 0.0 });
}
