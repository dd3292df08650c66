//! agentctl's Prometheus metrics, served by `agentctl serve --metrics ADDR` on a listener
//! of their own (`GET /metrics`, no token: bind it where only the scraper reaches).
//! Every label is a closed set of names (ACP methods, decline reasons, exit codes), never
//! request content or a token.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `agentctl_sessions` | gauge | |
//! | `agentctl_elicitations_open` | gauge | |
//! | `agentctl_acp_requests_total` | counter | `method` (from the agent) |
//! | `agentctl_elicitations_declined_total` | counter | `reason` |
//! | `agentctl_agent_exits_total` | counter | `code` (`signal` when killed) |

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use kandev_agent_stream::DoorDecline;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The ACP methods counted by name; any other is `other` (the label set stays closed).
const KNOWN_METHODS: &[&str] = &[
    "elicitation/create",
    "session/request_permission",
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
];

/// How often histogram samples are folded in between scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// The process's recorder, installed on first use.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new();
        match builder.install_recorder() {
            Ok(handle) => {
                describe();
                handle
            }
            Err(err) => {
                tracing::warn!(error = %err, "metrics recorder not installed; /metrics stays empty");
                PrometheusBuilder::new().build_recorder().handle()
            }
        }
    })
}

fn describe() {
    metrics::describe_gauge!("agentctl_sessions", "Sessions this agentctl holds.");
    metrics::describe_gauge!(
        "agentctl_elicitations_open",
        "Elicitations waiting for an operator's answer."
    );
    metrics::describe_counter!(
        "agentctl_acp_requests_total",
        "ACP requests received from agents, by method."
    );
    metrics::describe_counter!(
        "agentctl_elicitations_declined_total",
        "elicitation/create answered decline by agentctl itself, by reason."
    );
    metrics::describe_counter!(
        "agentctl_agent_exits_total",
        "Agent processes that ended, by exit code."
    );
}

/// An ACP request from an agent.
pub fn acp_request(method: &str) {
    handle();
    let method = KNOWN_METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other");
    metrics::counter!("agentctl_acp_requests_total", "method" => method).increment(1);
}

/// An `elicitation/create` declined at the door.
pub fn elicitation_declined(reason: DoorDecline) {
    handle();
    metrics::counter!("agentctl_elicitations_declined_total", "reason" => reason.as_str())
        .increment(1);
}

/// An agent process ended (`None`: by a signal).
pub fn agent_exited(code: Option<i32>) {
    handle();
    let code = code.map_or_else(|| "signal".to_owned(), |c| c.to_string());
    metrics::counter!("agentctl_agent_exits_total", "code" => code).increment(1);
}

/// What the gauges show: the sessions held and their open elicitations
/// (`AgentCtl::load`).
pub type Load = Arc<dyn Fn() -> (usize, usize) + Send + Sync>;

/// `GET /metrics`, the gauges read from `load` at each scrape.
pub fn router(load: Load) -> Router {
    let handle = handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    });
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(load)
}

async fn scrape(State(load): State<Load>) -> impl IntoResponse {
    let handle = handle();
    let (sessions, open) = load();
    metrics::gauge!("agentctl_sessions").set(sessions as f64);
    metrics::gauge!("agentctl_elicitations_open").set(open as f64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_closed_sets() {
        let handle = handle();
        acp_request(crate::agent::ELICITATION_CREATE);
        acp_request("x/secret-token-in-a-method-name");
        elicitation_declined(DoorDecline::NotFormMode);
        agent_exited(Some(3));
        agent_exited(None);
        let text = handle.render();
        assert!(
            text.contains(r#"agentctl_acp_requests_total{method="elicitation/create"} "#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentctl_acp_requests_total{method="other"} "#),
            "{text}"
        );
        assert!(!text.contains("secret-token"), "{text}");
        assert!(
            text.contains(r#"agentctl_elicitations_declined_total{reason="not_form_mode"} "#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentctl_agent_exits_total{code="3"} "#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentctl_agent_exits_total{code="signal"} "#),
            "{text}"
        );
    }
}
