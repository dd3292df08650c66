//! Outbound webhooks through the real binaries (docs/architecture.md §15): a local HTTP
//! receiver on 127.0.0.1 verifies every delivery's `Kandev-Signature` as docs/configuration.md says a
//! receiver should. kandev killed between a question and its delivery still delivers it,
//! once, after a restart; two replicas on one PostgreSQL deliver each question once; a
//! click on the Slack message's button, signed as Slack signs it, reaches the agent.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use kandev_testkit::{
    DEADLINE, Kandev, KandevOptions, RemoteAgentctl, TURN_DEADLINE, poll_until, signature, slack,
};
use serde_json::{Value, json};

const SECRET: &str = "e2e-webhook-secret";

/// What the receiver got: `(Kandev-Delivery, body, status it answered)`.
type Got = Arc<Mutex<Vec<(String, Value, u16)>>>;

#[derive(Clone)]
struct Receiver {
    got: Got,
    fail_first: Arc<Mutex<usize>>,
    /// Whether every request must carry a valid `Kandev-Signature` (a webhook; not Slack's
    /// `response_url`).
    signed: bool,
}

/// A webhook receiver answering the first `fail_first` requests 500; its URL.
async fn receiver(fail_first: usize) -> (Got, String) {
    serve(fail_first, true).await
}

async fn serve(fail_first: usize, signed: bool) -> (Got, String) {
    let r = Receiver {
        got: Got::default(),
        fail_first: Arc::new(Mutex::new(fail_first)),
        signed,
    };
    let got = Arc::clone(&r.got);
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(r);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (got, format!("http://{addr}/hook"))
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    if r.signed {
        verify(&headers, &body);
    }
    let delivery = headers
        .get("kandev-delivery")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let status = {
        let mut fail = r.fail_first.lock().expect("lock");
        if *fail > 0 {
            *fail -= 1;
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    };
    let json: Value = serde_json::from_str(&body).expect("a JSON body");
    r.got
        .lock()
        .expect("lock")
        .push((delivery, json, status.as_u16()));
    status
}

/// docs/configuration.md's recipe: HMAC-SHA256 over `"{t}.{body}"`, hex, compared with `v1`; `t`
/// within five minutes.
fn verify(headers: &HeaderMap, body: &str) {
    let header = headers
        .get("kandev-signature")
        .and_then(|v| v.to_str().ok())
        .expect("Kandev-Signature");
    let (t, v1) = header
        .split_once(",v1=")
        .and_then(|(t, v1)| Some((t.strip_prefix("t=")?, v1)))
        .expect("t=…,v1=…");
    let t: i64 = t.parse().expect("unix seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    assert!((now - t).abs() < 300, "fresh timestamp");
    let expected = signature::hmac_sha256_hex(SECRET, &format!("{t}.{body}"));
    assert_eq!(v1, expected, "signature of {body}");
}

fn hook_toml(url: &str, retry_delay: &str) -> String {
    format!(
        "[notifications]\nretry_delay = \"{retry_delay}\"\n\n\
         [[notifications.webhooks]]\nname = \"ops\"\nurl = \"{url}\"\nsecret = \"{SECRET}\"\n\
         events = [\"clarification_requested\"]\n"
    )
}

async fn webhook_status(kandev: &Kandev) -> Value {
    kandev
        .api()
        .get("/api/v1/notifications/webhooks")
        .await
        .expect_status(200, "webhook status")["webhooks"][0]["last_delivery"]
        .clone()
}

#[tokio::test]
async fn kandev_killed_between_the_question_and_the_delivery_still_delivers_it_once_after_restart()
{
    let (got, url) = receiver(1).await;
    let options = || {
        KandevOptions::new()
            .flag_env(true)
            .toml(&hook_toml(&url, "3s"))
    };
    let mut kandev = Kandev::start(options()).await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    // The first attempt failed (500) and is recorded; the retry is due seconds later.
    poll_until("the failed first attempt recorded", DEADLINE, || async {
        let last = webhook_status(&kandev).await;
        (last["attempts"] == 1 && last["status"] == "pending").then_some(())
    })
    .await;
    kandev.restart(options(), false).await;

    poll_until("the delivery after the restart", DEADLINE, || async {
        let last = webhook_status(&kandev).await;
        (last["status"] == "delivered").then_some(last)
    })
    .await;
    let got = got.lock().expect("lock").clone();
    assert_eq!(got.len(), 2, "one failed attempt, one delivery: {got:?}");
    assert_eq!(got[0].0, got[1].0, "the same delivery, retried");
    assert_eq!(
        got.iter().map(|g| g.2).collect::<Vec<_>>(),
        [500, 200],
        "answered 2xx once"
    );
    for (_, body, _) in &got {
        assert_eq!(body["event"], "clarification_requested");
        assert_eq!(body["pending_id"], asked.pending_id.as_str());
        assert_eq!(body["expires_at"], asked.record["expires_at"]);
        assert!(body.get("questions").is_none(), "no question text: {body}");
    }
}

#[tokio::test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
async fn two_replicas_deliver_each_question_once() {
    let db = kandev_testkit::postgres::database("webhooks_two_replicas").await;
    let (got, url) = receiver(0).await;
    let agentctl = RemoteAgentctl::start(&[]).await;
    let agentctl_url = format!("ws://{}", agentctl.addr());
    let replica = |name: &str| {
        KandevOptions::new()
            .flag_env(true)
            .database(&db)
            .remote(&agentctl_url, agentctl.token())
            .toml(&format!(
                "[cluster]\nreplica_id = \"{name}\"\nsecret = \"e2e-webhooks-cluster\"\nlease = \"2s\"\n\n{}",
                hook_toml(&url, "1s")
            ))
    };
    let a = Kandev::start(replica("replica-a")).await;
    let b = Kandev::start(replica("replica-b")).await;
    let mut asked = Vec::new();
    for i in 0..4 {
        let on = if i % 2 == 0 { &a } else { &b };
        asked.push(on.ask("mock", "/e2e:single").await.pending_id);
    }
    poll_until("a delivery per question", DEADLINE, || async {
        let n = got.lock().expect("lock").len();
        (n >= asked.len()).then_some(())
    })
    .await;
    // Each row is delivered: neither replica may claim it again.
    for kandev in [&a, &b] {
        poll_until("the last delivery recorded", DEADLINE, || async {
            (webhook_status(kandev).await["status"] == "delivered").then_some(())
        })
        .await;
    }
    let got = got.lock().expect("lock").clone();
    let mut ids: Vec<&str> = got
        .iter()
        .map(|(_, body, _)| body["pending_id"].as_str().unwrap_or_default())
        .collect();
    ids.sort_unstable();
    let mut expected: Vec<&str> = asked.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(
        ids, expected,
        "each question delivered once across both replicas"
    );
}

const SLACK_SECRET: &str = "e2e-slack-signing-secret";

#[tokio::test]
async fn a_slack_click_reaches_the_agent_as_accept_and_a_forged_or_stale_click_is_refused() {
    let (got, url) = receiver(0).await;
    let (updates, response_url) = serve(0, false).await;
    let toml = format!(
        "[[notifications.webhooks]]\nname = \"slack\"\nurl = \"{url}\"\nsecret = \"{SECRET}\"\n\
         events = [\"clarification_requested\"]\nformat = \"slack\"\ninclude_question = true\n\n\
         [integrations.slack]\nsigning_secret = \"{SLACK_SECRET}\"\nresponse_url_prefix = \"http://127.0.0.1:\"\n"
    );
    let kandev = Kandev::start(KandevOptions::new().flag_env(true).toml(&toml)).await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let message = poll_until("the Slack message", DEADLINE, || async {
        got.lock().expect("lock").first().map(|g| g.1.clone())
    })
    .await;
    let buttons = message["blocks"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "actions"))
        .cloned()
        .expect("a block of buttons");
    assert_eq!(buttons["block_id"], asked.pending_id.as_str());
    let labels: Vec<&str> = buttons["elements"]
        .as_array()
        .expect("buttons")
        .iter()
        .filter_map(|b| b["text"]["text"].as_str())
        .collect();
    assert_eq!(labels, ["Postgres", "SQLite", "DynamoDB", "Skip"]);
    let postgres = &buttons["elements"][0];
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U123", "username": "alice", "name": "alice"},
        "actions": [{"type": "button", "action_id": postgres["action_id"], "block_id": asked.pending_id, "value": postgres["value"]}],
        "response_url": response_url,
    });
    let body = slack::click_body(&payload);
    let client = reqwest::Client::new();
    let endpoint = format!("http://{}/api/v1/integrations/slack/actions", kandev.addr());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let post = |ts: i64, signature: String| {
        client
            .post(&endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-slack-request-timestamp", ts.to_string())
            .header("x-slack-signature", signature)
            .body(body.clone())
            .send()
    };
    let forged = post(now, slack::signature("not-the-secret", now, &body))
        .await
        .expect("sent");
    assert_eq!(forged.status(), 401);
    let stale = post(now - 400, slack::signature(SLACK_SECRET, now - 400, &body))
        .await
        .expect("sent");
    assert_eq!(stale.status(), 401);
    assert_eq!(
        kandev.clarification(&asked.pending_id).await["status"],
        "pending",
        "refused clicks change nothing"
    );

    let clicked = post(now, slack::signature(SLACK_SECRET, now, &body))
        .await
        .expect("sent");
    assert_eq!(clicked.status(), 200);
    let response = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(response["action"], "accept", "{response}");
    assert_eq!(response["content"]["question_0"], "Postgres", "{response}");
    let record = kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    assert_eq!(record["answered_by"], "slack:alice");
    let update = poll_until("the Slack message replaced", DEADLINE, || async {
        updates.lock().expect("lock").first().map(|g| g.1.clone())
    })
    .await;
    assert_eq!(
        update,
        json!({"replace_original": true, "text": "Answered “Postgres” by @alice."})
    );
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "one answer"
    );
}
