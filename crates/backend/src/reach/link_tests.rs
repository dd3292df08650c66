//! Answer links and Slack clicks through the router: the link answers its one question
//! once, as the hook's recipient, and every misuse is refused without changing anything; a
//! Slack click signed by Slack is the operator's answer, a forged or stale one gets 401.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kandev_agent_stream::request::ElicitationsRespond;
use kandev_testkit::slack;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::config::{Config, HookEvent, HookFormat, OperatorConfig, SlackConfig, WebhookConfig};
use crate::model::{ClarificationStatus, Timestamp};
use crate::reach::answer_links;
use crate::reach::tests::{Receiver, elicited, hook, live};
use crate::testing::within;

async fn call(
    router: &Router,
    uri: &str,
    headers: &[(&str, &str)],
    body: String,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method("POST").uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::from(body)).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn json_call(router: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    call(
        router,
        uri,
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await
}

fn authed(mut config: Config) -> Config {
    config.auth.required = Some(true);
    config.auth.operators = vec![OperatorConfig {
        name: "alice".into(),
        token_sha256: crate::auth::token::token_sha256("kdv_alice"),
    }];
    config
}

fn linking(url: &str) -> WebhookConfig {
    WebhookConfig {
        answer_links: true,
        recipient: Some("bob (phone)".into()),
        ..hook(url, &[HookEvent::ClarificationRequested])
    }
}

#[tokio::test]
async fn an_answer_link_answers_its_question_once_and_every_misuse_is_refused() {
    // Everything logged meanwhile, at every level: no link may appear in it.
    let logs = kandev_log::LogCapture::start();
    let (receiver, url) = Receiver::start(0).await;
    let mut config = authed(Config::default());
    config.notifications.public_url = Some("https://kandev.example.com".into());
    config.notifications.webhooks = vec![linking(&url)];
    let (state, _session, link) = live(config).await;
    let router = crate::http::router(state.clone());
    let deadline = Timestamp::now().plus(Duration::from_secs(3300));
    link.push(elicited("p-1", deadline));
    link.push(elicited("p-2", deadline));
    let bodies = within("both deliveries", Duration::from_secs(10), || async {
        let got = receiver.all();
        (got.len() == 2).then(|| {
            got.iter()
                .map(|r| serde_json::from_str::<Value>(&r.body).expect("json"))
                .collect::<Vec<_>>()
        })
    })
    .await;
    let token_of = |id: &str| -> String {
        let body = bodies.iter().find(|b| b["pending_id"] == id).expect("body");
        let link = body["answer_url"].as_str().expect("answer_url");
        let (page, token) = link.split_once('#').expect("token after #");
        assert_eq!(page, "https://kandev.example.com/answer.html");
        token.to_owned()
    };
    let (one, two) = (token_of("p-1"), token_of("p-2"));

    // The operator API still wants credentials; the link opens its own question only.
    let (status, _) = call(
        &router,
        "/api/v1/clarifications/p-1/respond",
        &[("content-type", "application/json")],
        json!({"answers": []}).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, opened) =
        json_call(&router, "/api/v1/answer-links/open", json!({"token": one})).await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert_eq!(opened["clarification"]["pending_id"], "p-1");
    assert_eq!(opened["answered_by"], "bob (phone)");

    let answer = json!({"answers": [{"question_id": "q1", "selected_options": ["Postgres"]}]});
    let parts: Vec<&str> = one.split('.').collect();
    // The signature's last hex digit changed (to one it is not: a fixed `0` left one
    // link in sixteen untouched, and that one answered).
    let last = if parts[4].ends_with('0') { '1' } else { '0' };
    let tampered = format!(
        "{}.{}.{}.{}.{}{last}",
        parts[0],
        parts[1],
        parts[2],
        parts[3],
        &parts[4][..63]
    );
    let cross = {
        let mut p: Vec<&str> = two.split('.').collect();
        p[0] = "p-1";
        p.join(".")
    };
    let hook = state.config.notifications.webhooks[0].clone();
    let expired = answer_links::issue(
        &hook,
        None,
        "p-1",
        Timestamp::now().instant().timestamp() - 1,
    );
    let foreign = answer_links::issue(
        &WebhookConfig {
            secret: "not ours".into(),
            ..hook.clone()
        },
        None,
        "p-1",
        i64::MAX,
    );
    for (token, status, code) in [
        (tampered.as_str(), 403, "ANSWER_LINK_INVALID"),
        (cross.as_str(), 403, "ANSWER_LINK_INVALID"),
        (foreign.as_str(), 403, "ANSWER_LINK_INVALID"),
        (expired.as_str(), 403, "ANSWER_LINK_EXPIRED"),
        ("p-1.garbage", 400, "BAD_REQUEST"),
    ] {
        let got = json_call(
            &router,
            "/api/v1/answer-links/respond",
            json!({"token": token, "answer": answer}),
        )
        .await;
        assert_eq!(
            (got.0.as_u16(), got.1["error"]["code"].as_str()),
            (status, Some(code)),
            "{token}: {}",
            got.1
        );
    }
    assert!(
        link.calls_of::<ElicitationsRespond>().is_empty(),
        "no misuse reached the agent"
    );

    let (status, done) = json_call(
        &router,
        "/api/v1/answer-links/respond",
        json!({"token": one, "answer": answer}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "answered");
    let record = state
        .stores
        .clarifications
        .clarification("p-1")
        .await
        .expect("read")
        .expect("record");
    assert_eq!(record.status, ClarificationStatus::Answered);
    assert_eq!(record.answered_by.as_deref(), Some("bob (phone)"));
    let calls = link.calls_of::<ElicitationsRespond>();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["pending_id"], "p-1");

    let replay = json_call(
        &router,
        "/api/v1/answer-links/respond",
        json!({"token": one, "answer": answer}),
    )
    .await;
    assert_eq!(
        (replay.0.as_u16(), replay.1["error"]["code"].as_str()),
        (409, Some("ANSWER_LINK_USED"))
    );
    assert_eq!(
        link.calls_of::<ElicitationsRespond>().len(),
        1,
        "the replay changed nothing"
    );
    let other = state
        .stores
        .clarifications
        .clarification("p-2")
        .await
        .expect("read")
        .expect("record");
    assert_eq!(
        other.status,
        ClarificationStatus::Pending,
        "the other question is untouched"
    );

    // Delivered, opened, refused, answered and replayed: the links were never logged, in
    // whole or by their signature, though the records they answer were.
    let logged = logs.text();
    assert!(logged.contains("p-1"), "the capture saw the flow: {logged}");
    for token in [&one, &two] {
        let signature = token.rsplit('.').next().expect("signature");
        assert!(
            !logged.contains(token.as_str()) && !logged.contains(signature),
            "an answer link reached the log"
        );
    }
}

#[tokio::test]
async fn a_slack_click_is_the_operators_answer_and_a_forged_or_stale_click_is_refused() {
    let (receiver, url) = Receiver::start(0).await;
    let (updates, response_url) = Receiver::start(0).await;
    let mut config = Config::default();
    config.notifications.webhooks = vec![WebhookConfig {
        format: HookFormat::Slack,
        include_question: true,
        ..hook(&url, &[HookEvent::ClarificationRequested])
    }];
    config.integrations.slack = Some(SlackConfig {
        signing_secret: "slack-signing-secret".into(),
        response_url_prefix: "http://127.0.0.1:".into(),
    });
    let (state, _session, link) = live(config).await;
    let router = crate::http::router(state.clone());
    link.push(elicited(
        "p-s",
        Timestamp::now().plus(Duration::from_secs(3300)),
    ));
    let message = within("the Slack message", Duration::from_secs(10), || async {
        receiver
            .all()
            .first()
            .map(|r| serde_json::from_str::<Value>(&r.body).expect("json"))
    })
    .await;
    let actions = message["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .find(|b| b["type"] == "actions")
        .expect("buttons")
        .clone();
    assert_eq!(actions["block_id"], "p-s");
    let button = actions["elements"][0].clone();
    assert_eq!(button["text"]["text"], "Postgres");

    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U123", "username": "alice", "name": "alice"},
        "actions": [{"action_id": button["action_id"], "block_id": "p-s", "value": button["value"], "type": "button"}],
        "response_url": response_url,
    });
    let body = slack::click_body(&payload);
    let now = Timestamp::now().instant().timestamp();
    let post = |ts: i64, signature: String| {
        let router = router.clone();
        let body = body.clone();
        async move {
            let ts = ts.to_string();
            call(
                &router,
                "/api/v1/integrations/slack/actions",
                &[
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("x-slack-request-timestamp", ts.as_str()),
                    ("x-slack-signature", signature.as_str()),
                ],
                body,
            )
            .await
        }
    };
    let forged = post(now, slack::signature("not-the-secret", now, &body)).await;
    assert_eq!(forged.0, StatusCode::UNAUTHORIZED, "{}", forged.1);
    let stale = post(
        now - 400,
        slack::signature("slack-signing-secret", now - 400, &body),
    )
    .await;
    assert_eq!(stale.0, StatusCode::UNAUTHORIZED, "{}", stale.1);
    assert!(
        link.calls_of::<ElicitationsRespond>().is_empty(),
        "refused clicks change nothing"
    );

    let ok = post(now, slack::signature("slack-signing-secret", now, &body)).await;
    assert_eq!(ok.0, StatusCode::OK, "{}", ok.1);
    let calls = link.calls_of::<ElicitationsRespond>();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["pending_id"], "p-s");
    assert_eq!(
        calls[0]["answers"],
        json!([{"question_id": "q1", "selected_options": ["Postgres"], "custom_text": ""}])
    );
    let record = state
        .stores
        .clarifications
        .clarification("p-s")
        .await
        .expect("read")
        .expect("record");
    assert_eq!(record.answered_by.as_deref(), Some("slack:alice"));
    let update = within("the message updated", Duration::from_secs(10), || async {
        updates
            .all()
            .first()
            .map(|r| serde_json::from_str::<Value>(&r.body).expect("json"))
    })
    .await;
    assert_eq!(update["replace_original"], true);
    assert_eq!(update["text"], "Answered “Postgres” by @alice.");
}
