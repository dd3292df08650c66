//! Webhooks end to end inside one process: a fake agentctl link asks, a local HTTP
//! receiver on 127.0.0.1 gets what the outbox sends, and checks its signature as a real
//! receiver would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use kandev_agent_stream::{AgentEvent, ElicitationRequested, SettleOutcome};
use kandev_elicitation::{Constraints, Question, QuestionKind, QuestionOption};
use serde_json::{Value, json};

use crate::agent_link::LinkEvent;
use crate::config::{Config, HookEvent, HookFormat, WebhookConfig};
use crate::model::{DeliveryStatus, Task, Timestamp};
use crate::reach::signature;
use crate::state::AppState;
use crate::testing::{FakeLink, app_with, within};

const SECRET: &str = "receiver-shared-secret";

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub headers: HeaderMap,
    pub body: String,
    pub at: Timestamp,
}

/// A local receiver: answers `fail_first` requests 500, then 200.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    pub got: Arc<Mutex<Vec<Received>>>,
    fail_first: Arc<Mutex<usize>>,
}

impl Receiver {
    /// Serves on 127.0.0.1:0; the hook URL.
    pub async fn start(fail_first: usize) -> (Self, String) {
        let receiver = Self {
            got: Arc::default(),
            fail_first: Arc::new(Mutex::new(fail_first)),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, format!("http://{addr}/hook"))
    }

    pub fn all(&self) -> Vec<Received> {
        self.got.lock().expect("lock").clone()
    }

    /// The requests for `event`.
    pub fn of(&self, event: &str) -> Vec<Received> {
        self.all()
            .into_iter()
            .filter(|r| r.headers.get("kandev-event").and_then(|v| v.to_str().ok()) == Some(event))
            .collect()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    r.got.lock().expect("lock").push(Received {
        headers,
        body,
        at: Timestamp::now(),
    });
    let mut fail = r.fail_first.lock().expect("lock");
    if *fail > 0 {
        *fail -= 1;
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    StatusCode::OK
}

/// Checks a request's `Kandev-Signature` as a receiver does.
pub(crate) fn verify(received: &Received) {
    let header = received
        .headers
        .get(signature::HEADER)
        .and_then(|v| v.to_str().ok())
        .expect("a Kandev-Signature header");
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        signature::verify(
            SECRET.as_bytes(),
            header,
            received.body.as_bytes(),
            now,
            300
        ),
        Ok(()),
        "{header}"
    );
}

pub(crate) fn hook(url: &str, events: &[HookEvent]) -> WebhookConfig {
    WebhookConfig {
        name: "team".into(),
        url: url.into(),
        secret: SECRET.into(),
        events: events.to_vec(),
        format: HookFormat::Json,
        include_question: false,
        answer_links: false,
        recipient: None,
    }
}

fn question() -> Question {
    Question {
        id: "q1".into(),
        kind: QuestionKind::SingleSelect,
        title: None,
        prompt: "Which secret database?".into(),
        options: ["Postgres", "SQLite"]
            .into_iter()
            .map(|l| QuestionOption {
                id: l.into(),
                label: l.into(),
                description: None,
                preview: None,
            })
            .collect(),
        custom_answer: None,
        required: true,
        default: None,
        constraints: Constraints::default(),
    }
}

pub(crate) fn elicited(pending_id: &str, expires_at: Timestamp) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::ElicitationRequested(ElicitationRequested {
        pending_id: pending_id.into(),
        acp_session_id: "acp-1".into(),
        tool_call_id: None,
        message: "Which secret database?".into(),
        questions: vec![question()],
        expires_at: Some(expires_at.to_rfc3339()),
        on_deadline: None,
    }))
}

/// An app with `config` and a started session on a fake link.
pub(crate) async fn live(config: Config) -> (AppState, String, Arc<FakeLink>) {
    let (state, connector) = app_with(BTreeMap::new(), config).await;
    let task = Task::new("Fix the login page", "");
    state.stores.tasks.create_task(&task).await.expect("task");
    let session = state
        .sessions
        .start(&task, "mock", None)
        .await
        .expect("session");
    let link = connector.link(&session.id);
    (state, session.id, link)
}

/// A local receiver and a config whose one hook gets `events`, reminding after `after`.
pub(crate) async fn reminding(after: Duration, events: &[HookEvent]) -> (Receiver, Config) {
    let (receiver, url) = Receiver::start(0).await;
    let mut config = Config::default();
    config.notifications.remind_after = Some(after);
    config.notifications.webhooks = vec![hook(&url, events)];
    (receiver, config)
}

/// Waits until `pending_id`'s `event` delivery has `status` in the outbox.
pub(crate) async fn delivery_reaches(
    state: &AppState,
    pending_id: &str,
    event: &str,
    status: DeliveryStatus,
) {
    within(
        &format!("{pending_id}'s {event} delivery {}", status.as_str()),
        Duration::from_secs(10),
        || async {
            let rows = state.stores.outbox.deliveries_for(pending_id).await.ok()?;
            rows.iter()
                .any(|d| d.event == event && d.status == status)
                .then_some(())
        },
    )
    .await;
}

async fn status_of(state: &AppState, hook: &str) -> Option<crate::model::LastDelivery> {
    state
        .stores
        .outbox
        .last_deliveries()
        .await
        .expect("deliveries")
        .into_iter()
        .find(|d| d.hook == hook)
}

#[tokio::test]
async fn a_question_fires_its_webhook_once_with_a_valid_signature_and_no_question_text() {
    let (receiver, url) = Receiver::start(0).await;
    let mut config = Config::default();
    config.notifications.public_url = Some("https://kandev.example.com".into());
    config.notifications.webhooks = vec![hook(&url, &[HookEvent::ClarificationRequested])];
    let (state, session, link) = live(config).await;
    let deadline = Timestamp::now().plus(Duration::from_secs(3300));
    link.push(elicited("p-1", deadline));

    let delivered = within("the delivery recorded", Duration::from_secs(10), || async {
        status_of(&state, "team")
            .await
            .filter(|d| d.status == DeliveryStatus::Delivered)
    })
    .await;
    assert_eq!(delivered.attempts, 1);
    assert_eq!(delivered.last_status, Some(200));
    // Recorded delivered, so never claimed again: the receiver got it once.
    let got = receiver.all();
    assert_eq!(got.len(), 1, "{got:?}");
    verify(&got[0]);
    assert!(!got[0].body.contains("secret database"), "{}", got[0].body);
    assert!(!got[0].body.contains("Postgres"), "{}", got[0].body);
    let body: Value = serde_json::from_str(&got[0].body).expect("json");
    assert_eq!(body["event"], "clarification_requested");
    assert_eq!(body["task"]["title"], "Fix the login page");
    assert_eq!(body["pending_id"], "p-1");
    assert_eq!(body["expires_at"], json!(deadline));
    assert_eq!(
        body["url"],
        format!("https://kandev.example.com/#/sessions/{session}")
    );
    // The record carries the deadline agentctl sent.
    let record = state
        .stores
        .clarifications
        .clarification("p-1")
        .await
        .expect("read")
        .expect("record");
    assert_eq!(record.expires_at, Some(deadline));
    // The same event replayed (a re-attach) writes no second delivery.
    link.push(elicited("p-1", deadline));
    assert_eq!(
        crate::reach::Webhooks::from_config(state.stores.clone(), &state.config)
            .catch_up()
            .await
            .expect("catch up"),
        0,
        "nothing missing"
    );
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_it_on_the_third_try() {
    let (receiver, url) = Receiver::start(2).await;
    let mut config = Config::default();
    config.notifications.retry_delay = Duration::from_millis(50);
    config.notifications.max_attempts = 5;
    config.notifications.webhooks = vec![hook(&url, &[HookEvent::ClarificationRequested])];
    let (state, _session, link) = live(config).await;
    link.push(elicited(
        "p-2",
        Timestamp::now().plus(Duration::from_secs(3300)),
    ));

    let delivered = within(
        "the third attempt delivered",
        Duration::from_secs(10),
        || async {
            status_of(&state, "team")
                .await
                .filter(|d| d.status == DeliveryStatus::Delivered)
        },
    )
    .await;
    assert_eq!(delivered.attempts, 3);
    let got = receiver.all();
    assert_eq!(got.len(), 3);
    for attempt in &got {
        verify(attempt);
    }
    let ids: Vec<_> = got
        .iter()
        .map(|r| r.headers["kandev-delivery"].clone())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "one delivery id across retries"
    );
    // Backed off: each retry waited at least the (growing) base delay.
    let gap = |i: usize| (got[i + 1].at.instant() - got[i].at.instant()).num_milliseconds();
    assert!(gap(0) >= 50 && gap(1) >= 100, "{} {}", gap(0), gap(1));
    let metrics = crate::metrics::handle().render();
    assert!(
        metrics.contains("kandev_webhook_deliveries_total{hook=\"team\",outcome=\"retried\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_receiver_that_never_answers_2xx_is_given_up_after_max_attempts() {
    let (receiver, url) = Receiver::start(usize::MAX).await;
    let mut config = Config::default();
    config.notifications.retry_delay = Duration::from_millis(20);
    config.notifications.max_attempts = 3;
    config.notifications.webhooks = vec![hook(&url, &[HookEvent::ClarificationRequested])];
    let (state, _session, link) = live(config).await;
    link.push(elicited(
        "p-3",
        Timestamp::now().plus(Duration::from_secs(3300)),
    ));
    let failed = within("the delivery given up", Duration::from_secs(10), || async {
        status_of(&state, "team")
            .await
            .filter(|d| d.status == DeliveryStatus::Failed)
    })
    .await;
    assert_eq!(failed.attempts, 3);
    assert_eq!(failed.last_status, Some(500));
    assert_eq!(receiver.all().len(), 3);
}

#[tokio::test]
async fn a_reminder_fires_after_remind_after_and_none_after_the_answer() {
    let (receiver, config) = reminding(
        Duration::from_millis(600),
        &[HookEvent::Reminder, HookEvent::ClarificationSettled],
    )
    .await;
    let (state, _session, link) = live(config).await;
    let deadline = Timestamp::now().plus(Duration::from_secs(3300));
    link.push(elicited("waits", deadline));
    link.push(elicited("answered", deadline));
    within("both records", Duration::from_secs(5), || async {
        let a = state
            .stores
            .clarifications
            .clarification("answered")
            .await
            .ok()??;
        state
            .stores
            .clarifications
            .clarification("waits")
            .await
            .ok()??;
        Some(a)
    })
    .await;
    // Answered well before its reminder is due.
    link.push(LinkEvent::Agent(AgentEvent::ElicitationSettled {
        pending_id: "answered".into(),
        outcome: SettleOutcome::Answered,
        response: json!({"action": "accept", "content": {"q1": "Postgres"}}),
        answer: None,
        answered_by: None,
    }));
    let reminders = within("the reminder", Duration::from_secs(10), || async {
        let r = receiver.of("reminder");
        (!r.is_empty()).then_some(r)
    })
    .await;
    let waits = state
        .stores
        .clarifications
        .clarification("waits")
        .await
        .expect("read")
        .expect("record");
    let body: Value = serde_json::from_str(&reminders[0].body).expect("json");
    assert_eq!(body["pending_id"], "waits");
    verify(&reminders[0]);
    assert!(
        reminders[0].at >= waits.created_at.plus(Duration::from_millis(600)),
        "not before remind_after"
    );
    // The answered record's reminder was due at the same time: dropped, never sent.
    delivery_reaches(&state, "answered", "reminder", DeliveryStatus::Dropped).await;
    assert_eq!(
        receiver.of("reminder").len(),
        1,
        "no reminder for the answered question"
    );
    let settled = receiver.of("clarification_settled");
    assert_eq!(settled.len(), 1);
    let body: Value = serde_json::from_str(&settled[0].body).expect("json");
    assert_eq!(body["pending_id"], "answered");
    assert_eq!(body["outcome"], "answered");
}

#[tokio::test]
async fn a_question_stored_without_its_deliveries_gets_them_once_at_the_next_start() {
    // The kandev that stored the question stopped before writing its rows: here, it had
    // no hook yet, which leaves the database in the same state.
    let (state, _session, link) = live(Config::default()).await;
    link.push(elicited(
        "p-1",
        Timestamp::now().plus(Duration::from_secs(3300)),
    ));
    within("the record stored", Duration::from_secs(10), || async {
        state
            .stores
            .clarifications
            .clarification("p-1")
            .await
            .expect("read")
    })
    .await;
    assert!(
        state
            .stores
            .outbox
            .deliveries_for("p-1")
            .await
            .expect("rows")
            .is_empty(),
        "no delivery written"
    );
    let mut config = Config::default();
    config.notifications.webhooks = vec![hook(
        "http://127.0.0.1:9/hook",
        &[HookEvent::ClarificationRequested],
    )];
    let next_start = crate::reach::Webhooks::from_config(state.stores.clone(), &config);
    assert_eq!(next_start.catch_up().await.expect("catch up"), 1);
    assert_eq!(
        next_start.catch_up().await.expect("again"),
        0,
        "written once"
    );
    let rows = state
        .stores
        .outbox
        .deliveries_for("p-1")
        .await
        .expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].event, "clarification_requested");
    assert_eq!(rows[0].status, DeliveryStatus::Pending);
}
