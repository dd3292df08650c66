//! `GET /metrics` of kandev and `agentctl serve --metrics` through a scripted session:
//! scrape, answer, scrape again; every value moves as the session did, and no label
//! carries question text, an id or a token.

use std::net::SocketAddr;

use kandev_testkit::{DEADLINE, HttpClient, Kandev, KandevOptions, RemoteAgentctl, poll_until};
use serde_json::json;

/// The value of the sample `name{labels…}` (the given labels must all match).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, inner) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let got: Vec<(&str, &str)> = inner
                .split(',')
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    Some((k, v.trim_matches('"')))
                })
                .collect();
            (metric == name && labels.iter().all(|want| got.contains(want)))
                .then(|| value.parse().ok())
                .flatten()
        })
}

/// [`sample`], 0 when the series does not exist yet (a counter never incremented).
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(text, name, labels).unwrap_or(0.0)
}

async fn get_text(addr: SocketAddr, path: &str) -> (u16, String) {
    HttpClient::new(addr).get_text(path).await
}

async fn scrape(addr: SocketAddr) -> String {
    let (status, text) = get_text(addr, "/metrics").await;
    assert_eq!(status, 200, "{text}");
    text
}

/// Scrapes `addr` until `check` holds on the text; returns it.
async fn scrape_until(what: &str, addr: SocketAddr, check: impl Fn(&str) -> bool) -> String {
    poll_until(what, DEADLINE, || async {
        let text = scrape(addr).await;
        check(&text).then_some(text)
    })
    .await
}

const EL: (&str, &str) = ("source", "elicitation");

#[tokio::test]
async fn a_scripted_session_moves_kandev_s_and_agentctl_s_metrics() {
    let agentctl = RemoteAgentctl::start_with_args(&["--metrics", "127.0.0.1:0"], &[]).await;
    let agentctl_metrics = agentctl.metrics_addr().expect("AGENTCTL_METRICS_LISTENING");
    let url = format!("ws://{}", agentctl.addr());
    let kandev = Kandev::start(
        KandevOptions::new()
            .remote(&url, agentctl.token())
            .toml("[metrics]\nlisten = \"127.0.0.1:0\"")
            .flag_env(true),
    )
    .await;
    let separate = kandev.metrics_addr().expect("KANDEV_METRICS_LISTENING");
    let mut scraped = Vec::new();

    let before = scrape(kandev.addr()).await;
    assert_eq!(
        sample(&before, "kandev_clarifications_pending", &[EL]),
        Some(0.0)
    );
    assert_eq!(sample(&before, "kandev_database_up", &[]), Some(1.0));
    assert_eq!(sample(&before, "kandev_draining", &[]), Some(0.0));
    assert!(value(&before, "kandev_db_pool_max_connections", &[]) >= 1.0);
    assert_eq!(
        value(&before, "kandev_clarifications_received_total", &[EL]),
        0.0
    );

    let (task, session) = kandev.task_with_session("mock", "Pick").await;
    let task = task["id"].as_str().expect("task id").to_owned();
    let session = session["id"].as_str().expect("id").to_owned();
    let pending_id = kandev.wait_pending(&session, 1).await[0]["pending_id"]
        .as_str()
        .expect("id")
        .to_owned();

    // The separate listener serves the same registry, without auth.
    let asked = scrape(separate).await;
    assert_eq!(
        sample(&asked, "kandev_clarifications_pending", &[EL]),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &asked,
            "kandev_clarifications_pending",
            &[("source", "ask_user_question")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&asked, "kandev_clarifications_received_total", &[EL]),
        1.0
    );
    assert_eq!(
        sample(
            &asked,
            "kandev_sessions_live",
            &[("state", "WAITING_FOR_INPUT")]
        ),
        Some(1.0)
    );
    assert_eq!(sample(&asked, "kandev_sessions_attached", &[]), Some(1.0));
    let started = [
        ("route", "/api/v1/tasks/{id}/sessions"),
        ("method", "POST"),
        ("status", "201"),
    ];
    assert_eq!(value(&asked, "kandev_http_requests_total", &started), 1.0);
    let agentctl_asked = scrape(agentctl_metrics).await;
    assert_eq!(
        sample(&agentctl_asked, "agentctl_elicitations_open", &[]),
        Some(1.0)
    );
    assert_eq!(sample(&agentctl_asked, "agentctl_sessions", &[]), Some(1.0));
    let create = [("method", "elicitation/create")];
    assert_eq!(
        value(&agentctl_asked, "agentctl_acp_requests_total", &create),
        1.0
    );
    scraped.extend([asked, agentctl_asked]);

    let answer = json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]});
    assert_eq!(kandev.respond(&pending_id, &answer).await.status, 200);
    kandev.wait_agent_text(&session, "You picked Red.").await;

    let answered = scrape(kandev.addr()).await;
    assert_eq!(
        sample(&answered, "kandev_clarifications_pending", &[EL]),
        Some(0.0)
    );
    let settled = [EL, ("outcome", "answered")];
    assert_eq!(
        value(&answered, "kandev_clarifications_settled_total", &settled),
        1.0
    );
    assert_eq!(
        value(&answered, "kandev_answer_latency_seconds_count", &[EL]),
        1.0
    );
    assert_eq!(
        value(&answered, "kandev_delivery_latency_seconds_count", &[EL]),
        1.0
    );
    assert!(value(&answered, "kandev_delivery_latency_seconds_sum", &[EL]) > 0.0);
    let responded = [
        ("route", "/api/v1/clarifications/{pending_id}/respond"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(
        value(&answered, "kandev_http_requests_total", &responded),
        1.0
    );
    assert_eq!(
        sample(
            &answered,
            "kandev_sessions_live",
            &[("state", "WAITING_FOR_INPUT")]
        ),
        Some(0.0)
    );
    let agentctl_answered = scrape(agentctl_metrics).await;
    assert_eq!(
        sample(&agentctl_answered, "agentctl_elicitations_open", &[]),
        Some(0.0)
    );
    scraped.extend([answered, agentctl_answered]);

    // A url-mode elicitation is declined at agentctl's door; both count it by reason.
    // (The answered turn ends after its text arrives: the next prompt waits for that.)
    kandev.wait_session_state(&session, "IDLE").await;
    let url_mode = [("reason", "not_form_mode")];
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{session}/prompt"),
            &json!({"text": "/e2e:url-mode"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let declined = scrape_until("a door decline counted by kandev", kandev.addr(), |t| {
        value(t, "kandev_elicitations_declined_total", &url_mode) == 1.0
    })
    .await;
    assert_eq!(
        value(&declined, "kandev_clarifications_received_total", &[EL]),
        1.0,
        "a decline is no clarification"
    );
    let agentctl_declined = scrape(agentctl_metrics).await;
    assert_eq!(
        value(
            &agentctl_declined,
            "agentctl_elicitations_declined_total",
            &url_mode
        ),
        1.0
    );
    assert_eq!(
        value(&agentctl_declined, "agentctl_acp_requests_total", &create),
        2.0
    );
    scraped.extend([declined, agentctl_declined]);

    // Stopping the session ends its agent.
    kandev.wait_session_state(&session, "IDLE").await;
    let stop = format!("/api/v1/sessions/{session}/stop");
    let r = kandev.api().request("POST", &stop, None).await;
    assert_eq!(r.status, 202, "{r}");
    let stopped = scrape_until("agentctl counts the agent's exit", agentctl_metrics, |t| {
        t.lines()
            .any(|l| l.starts_with("agentctl_agent_exits_total{") && !l.ends_with(" 0"))
    })
    .await;
    assert_eq!(sample(&stopped, "agentctl_sessions", &[]), Some(0.0));
    let ended = scrape(kandev.addr()).await;
    assert_eq!(sample(&ended, "kandev_sessions_attached", &[]), Some(0.0));
    for state in [
        "IDLE",
        "RUNNING",
        "WAITING_FOR_INPUT",
        "STARTING",
        "CREATED",
    ] {
        assert_eq!(
            sample(&ended, "kandev_sessions_live", &[("state", state)]),
            Some(0.0),
            "{state}"
        );
    }
    scraped.extend([stopped, ended]);

    for text in &scraped {
        for secret in [
            "Pick a colour",
            "Red",
            agentctl.token(),
            session.as_str(),
            pending_id.as_str(),
            task.as_str(),
        ] {
            assert!(!text.contains(secret), "`{secret}` in a scrape:\n{text}");
        }
    }
}

#[tokio::test]
async fn the_separate_listener_serves_only_metrics() {
    let kandev =
        Kandev::start(KandevOptions::new().toml("[metrics]\nlisten = \"127.0.0.1:0\"")).await;
    let separate = kandev.metrics_addr().expect("KANDEV_METRICS_LISTENING");
    assert_eq!(get_text(separate, "/metrics").await.0, 200);
    assert_eq!(get_text(separate, "/api/v1/tasks").await.0, 404);
    let (status, body) = get_text(kandev.addr(), "/metrics").await;
    assert_eq!(
        status, 200,
        "the main listener serves it too (auth is off on loopback): {body}"
    );
}
