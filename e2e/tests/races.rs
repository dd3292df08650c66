//! Idempotency and races at full stack: AC-12f, AC-60, AC-12g, AC-61, and 20 operators
//! answering one pending at once — exactly one answer is delivered, the agent sees one
//! response, and every other submission is refused by agentctl (D5).

use kandev_testkit::{
    DEADLINE, Kandev, KandevOptions, TURN_DEADLINE, answer_at_once, is_uuid_v7, poll_until,
};
use serde_json::json;

async fn kandev_on() -> Kandev {
    Kandev::start(KandevOptions::new().flag_env(true)).await
}

#[tokio::test]
async fn ac_12f_ac_60_f9_two_identical_elicitations_are_two_records_and_answering_one_leaves_the_other_pending()
 {
    let kandev = kandev_on().await;
    let (_, session) = kandev.task_with_session("mock", "/e2e:two-identical").await;
    let sid = session["id"].as_str().expect("id").to_owned();
    let pending = kandev.wait_pending(&sid, 2).await;
    assert_eq!(pending.len(), 2);
    let (a, b) = (&pending[0], &pending[1]);
    assert_ne!(a["pending_id"], b["pending_id"], "not collapsed (D4)");
    assert_eq!(a["questions"], b["questions"], "identical question text");
    assert_eq!(a["message"], b["message"], "identical message");
    let requests = kandev.frames().elicitation_requests();
    assert_eq!(requests.len(), 2);

    let first = a["pending_id"].as_str().expect("id");
    let second = b["pending_id"].as_str().expect("id");
    // AC-60: agentctl's ids (UUID v4), verbatim: agentctl's own log names them, and it
    // accepts the answer to the first under it.
    assert!(is_uuid_v7(first) && is_uuid_v7(second), "{first} {second}");
    for pid in [first, second] {
        poll_until(
            "agentctl's log to name the pending id",
            DEADLINE,
            || async {
                kandev
                    .log()
                    .lines()
                    .any(|l| l.contains("kandev::agentctl") && l.contains(pid))
                    .then_some(())
            },
        )
        .await;
    }
    let r = kandev
        .answer(first, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "answered"}), "{r}");
    kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    kandev.wait_clarification_status(first, "answered").await;
    let other = kandev.clarification(second).await;
    assert_eq!(
        other["status"], "pending",
        "answering the first leaves the second open"
    );
    assert_eq!(kandev.frames().elicitation_responses().len(), 1);
    let s = kandev.session(&sid).await;
    assert_eq!(
        (&s["state"], &s["pending_action"]),
        (&json!("WAITING_FOR_INPUT"), &json!("clarification")),
        "still waiting on the twin: {s}"
    );

    // F9: one session.clarification_requested per elicitation, not per question text.
    poll_until("two notifications", DEADLINE, || async {
        (requested_notifications(&kandev).await == 2).then_some(())
    })
    .await;

    let r = kandev
        .answer(second, &[("question_0", &["SQLite"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = kandev
        .frames()
        .wait_for_elicitation_response(2, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
    kandev.wait_session_state(&sid, "IDLE").await;
    assert_eq!(
        requested_notifications(&kandev).await,
        2,
        "still exactly two"
    );
}

async fn requested_notifications(kandev: &Kandev) -> usize {
    kandev
        .notifications()
        .await
        .iter()
        .filter(|n| n["event"] == "session.clarification_requested")
        .count()
}

#[tokio::test]
async fn ac_12g_ac_61_a_second_answer_is_forwarded_and_refused_by_agentctl_404_and_the_agent_sees_one_response()
 {
    let kandev = kandev_on().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let r = kandev
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;

    let again = kandev
        .answer(&asked.pending_id, &[("question_0", &["SQLite"], "")])
        .await;
    assert_eq!(again.status, 404, "{again}");
    assert_eq!(again.body["error"]["code"], "NOT_FOUND", "{again}");
    assert_eq!(
        again.body["error"]["origin"], "agentctl",
        "AC-61: the duplicate was forwarded and adjudicated by agentctl, not short-circuited: {again}"
    );
    // The turn continues on the first answer.
    let text = kandev
        .wait_agent_text(&asked.session_id, "elicitation e1 result")
        .await;
    assert!(text.contains("Postgres"), "{text}");
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    let responses = kandev.frames().elicitation_responses();
    assert_eq!(
        responses,
        vec![json!({"action": "accept", "content": {"question_0": "Postgres"}})],
        "exactly one response on the wire"
    );
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(
        record["answer"]["answers"][0]["selected_options"],
        json!(["Postgres"]),
        "the first answer stays recorded"
    );
}

#[tokio::test]
async fn twenty_concurrent_operator_submissions_deliver_exactly_one_answer_and_the_agent_sees_one_response()
 {
    let kandev = kandev_on().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let raced = answer_at_once(
        &[kandev.api()],
        &asked.pending_id,
        20,
        &["Postgres", "SQLite", "DynamoDB"],
    )
    .await;
    for r in &raced.refused {
        assert_eq!(r.body["error"]["code"], "NOT_FOUND", "{r}");
        assert_eq!(r.body["error"]["origin"], "agentctl", "{r}");
    }
    let delivered = raced.delivered;
    assert_eq!(delivered.len(), 1, "exactly one delivered: {delivered:?}");
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    let responses = kandev.frames().elicitation_responses();
    assert_eq!(
        responses,
        vec![json!({"action": "accept", "content": {"question_0": delivered[0]}})],
        "the agent saw one response, the winner's"
    );
}
