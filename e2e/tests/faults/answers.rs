//! Many responders to one pending: a hundred operators at once, and the agent's own
//! `$/cancel_request` racing an answer.

use kandev_testkit::{Kandev, TURN_DEADLINE, answer_at_once};
use serde_json::json;

use super::{Scenarios, await_step, elicit, id_of, responses_to, single_form};

#[tokio::test]
async fn a_hundred_concurrent_submissions_for_one_pending_deliver_exactly_one_answer() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "one",
        vec![elicit("h1", single_form("h1")), await_step("h1")],
    );
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    let raced = answer_at_once(
        &[kandev.api()],
        &asked.pending_id,
        100,
        &["Postgres", "SQLite", "DynamoDB"],
    )
    .await;
    for r in &raced.refused {
        assert_eq!(r.body["error"]["code"], "NOT_FOUND", "{r}");
    }
    let delivered = raced.delivered;
    assert_eq!(delivered.len(), 1, "exactly one delivered: {delivered:?}");
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(
        responses_to(&scenarios.frames(), "h1"),
        vec![json!({"action": "accept", "content": {"question_0": delivered[0]}})],
        "the agent saw exactly one response, the winner's"
    );
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(
        record["answer"]["answers"][0]["selected_options"],
        json!([delivered[0]]),
        "the record holds the delivered answer: {record}"
    );
}

#[tokio::test]
async fn agent_cancel_racing_an_operator_answer_gets_exactly_one_response_either_way() {
    let scenarios = Scenarios::new();
    let delays = [0u64, 5, 15, 30, 60, 120];
    for d in delays {
        let id = format!("c{d}");
        scenarios.add(
            &format!("race-{d}"),
            vec![
                elicit(&id, single_form(&id)),
                json!({"cancel_elicitation": {"id": id, "after_ms": d}}),
                await_step(&id),
            ],
        );
    }
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    let mut outcomes = Vec::new();
    for d in delays {
        let (_, session) = kandev
            .task_with_session("fault", &format!("/e2e:race-{d}"))
            .await;
        let sid = id_of(&session);
        // Answer the moment the operator surface learns of it.
        let created = ws
            .wait_for_type("clarification.created", TURN_DEADLINE, |data| {
                data["session_id"] == sid.as_str()
            })
            .await;
        let pending = created["data"]["pending_id"]
            .as_str()
            .expect("pending_id")
            .to_owned();
        let r = kandev
            .answer(&pending, &[("question_0", &["Postgres"], "")])
            .await;
        kandev.wait_session_state(&sid, "IDLE").await;
        let got = responses_to(&scenarios.frames(), &format!("c{d}"));
        assert_eq!(got.len(), 1, "delay {d} ms: exactly one response: {got:?}");
        let record = kandev.clarification(&pending).await;
        match r.status {
            200 => {
                assert_eq!(r.body, json!({"status": "answered"}), "{r}");
                assert_eq!(
                    got[0],
                    json!({"action": "accept", "content": {"question_0": "Postgres"}})
                );
                assert_eq!(record["status"], "answered", "{record}");
                outcomes.push("answered");
            }
            404 => {
                assert_eq!(r.body["error"]["code"], "NOT_FOUND", "{r}");
                assert_eq!(got[0], json!({"action": "cancel"}), "delay {d} ms");
                let record = kandev
                    .wait_clarification_status(&pending, "cancelled")
                    .await;
                assert!(record["answer"].is_null(), "{record}");
                outcomes.push("cancelled");
            }
            _ => panic!("delay {d} ms: unexpected respond outcome {r}"),
        }
    }
    eprintln!("race outcomes by delay {delays:?}: {outcomes:?}");
}
