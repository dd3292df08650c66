//! agentctl ⇄ mock-agent over real processes: what agentctl refuses — forms declined
//! before any operator sees them, invalid answers, and all but one of concurrent ones —
//! asserted on the mock agent's own wire log.

use kandev_testkit::DEADLINE;
use kandev_testkit::agentctl::{Harness, choose};
use serde_json::{Value, json};

/// Plays `scenario`, waits for the turn to end; asserts the agent got `decline` and that
/// nothing that could reach an operator went on the stream: only `elicitation_declined`
/// with the reason's name, for the backend's metrics.
async fn declined_without_surface(scenario: &str, elicitation: bool, reason: &str) {
    let mut h = Harness::start(scenario, elicitation).await;
    h.prompt("go").await;
    let events = h.stream.events_until("turn_completed").await;
    let (_, result) = h.log.elicitation_answer(1).await;
    assert_eq!(result, json!({"action": "decline"}), "{scenario}");
    let (declined, surfaced): (Vec<&Value>, Vec<&Value>) = events
        .iter()
        .filter(|f| {
            f["payload"]["event"]
                .as_str()
                .is_some_and(|e| e.starts_with("elicitation"))
        })
        .partition(|f| f["payload"]["event"] == "elicitation_declined");
    assert!(
        surfaced.is_empty(),
        "{scenario} reached the operator: {surfaced:?}"
    );
    let payloads: Vec<&Value> = declined.iter().map(|f| &f["payload"]).collect();
    assert_eq!(
        payloads,
        [&json!({"event": "elicitation_declined", "reason": reason})],
        "{scenario}: the reason's name and nothing else"
    );
    let listed = h.stream.ok("agent.elicitations.list", json!({})).await;
    assert_eq!(listed, json!({"pending": []}));
}

/// One `#[tokio::test]` per row: `name: scenario, flag, reason;` runs
/// [`declined_without_surface`].
macro_rules! declined_without_surface {
    ($($name:ident: $scenario:literal, $flag:literal, $reason:literal;)*) => {$(
        #[tokio::test]
        async fn $name() {
            declined_without_surface($scenario, $flag, $reason).await;
        }
    )*};
}

declined_without_surface! {
    ac16_url_mode_is_declined_without_surface: "url-mode", true, "not_form_mode";
    ac17_request_scope_is_declined_without_surface: "request-scope", true, "request_scope";
    ac18_empty_properties_are_declined_without_surface: "no-questions", true, "no_questions";
    ac18_malformed_body_is_declined_not_a_jsonrpc_error: "malformed", true, "malformed";
    ac20_flag_off_declines_a_well_formed_elicitation_without_surface: "single", false, "flag_off";
}

#[tokio::test]
async fn f10_each_invalid_answer_is_refused_and_the_pending_stays_answerable() {
    let mut h = Harness::start("single", true).await;
    let id = h.elicit().await;
    let invalid = [
        (
            json!([{"question_id": "nope", "selected_options": ["Postgres"]}]),
            false,
            "unknown question id",
        ),
        (
            json!([{"question_id": "question_0", "selected_options": ["Postgres", "SQLite"]}]),
            false,
            "two choices",
        ),
        (choose("Oracle"), false, "undeclared option"),
        (choose("Postgres"), true, "answers with rejected"),
    ];
    for (answers, rejected, what) in invalid {
        let reply = h.respond(&id, answers, rejected).await;
        assert_eq!(reply["type"], "error", "{what}");
        assert_eq!(
            reply["payload"]["code"], "INVALID_ANSWER",
            "{what}: {reply}"
        );
        let message = reply["payload"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{what}: {reply}");
    }
    let create = h.log.wait_for_elicitation_request(1, DEADLINE).await;
    assert!(
        h.log.responses_to(&create["id"]).is_empty(),
        "nothing was sent to the agent"
    );
    let listed = h.stream.ok("agent.elicitations.list", json!({})).await;
    assert_eq!(listed["pending"][0]["pending_id"], id.as_str());
    let reply = h.respond(&id, choose("SQLite"), false).await;
    assert_eq!(reply["type"], "response");
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
}

#[tokio::test]
async fn f10_typed_answers_are_converted_and_unparseable_ones_refused() {
    let mut h = Harness::start("extended", true).await;
    let id = h.elicit().await;
    let bad = h
        .respond(
            &id,
            json!([{"question_id": "replicas", "custom_text": "three"}]),
            false,
        )
        .await;
    assert_eq!(bad["payload"]["code"], "INVALID_ANSWER", "{bad}");
    let good = h
        .respond(
            &id,
            json!([{"question_id": "confirm", "custom_text": "true"}, {"question_id": "replicas", "custom_text": "3"}]),
            false,
        )
        .await;
    assert_eq!(good["type"], "response", "{good}");
    let (_, result) = h.log.elicitation_answer(1).await;
    assert_eq!(
        result,
        json!({"action": "accept", "content": {"confirm": true, "replicas": 3}})
    );
}

#[tokio::test]
async fn fifty_concurrent_submissions_have_exactly_one_success() {
    let mut h = Harness::start("single", true).await;
    let id = h.elicit().await;
    let submissions = (0..50).map(|i| {
        let option = ["Postgres", "SQLite", "DynamoDB"][i % 3];
        h.respond(&id, choose(option), false)
    });
    let replies = futures::future::join_all(submissions).await;
    let successes = replies.iter().filter(|r| r["type"] == "response").count();
    let not_found = replies
        .iter()
        .filter(|r| r["type"] == "error" && r["payload"]["code"] == "NOT_FOUND")
        .count();
    assert_eq!((successes, not_found), (1, 49), "{replies:#?}");
    h.stream.event("turn_completed").await;
    let create = &h.log.sent_requests("elicitation/create")[0];
    assert_eq!(
        h.log.responses_to(&create["id"]).len(),
        1,
        "the agent got exactly one response"
    );
    let settled: Vec<_> = h
        .stream
        .seen
        .iter()
        .filter(|f| f["payload"]["event"] == "elicitation_settled")
        .collect();
    assert!(settled.len() <= 1);
}
