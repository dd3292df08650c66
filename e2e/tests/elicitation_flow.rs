//! The elicitation lifecycle through the operator API, with the real `kandev`,
//! `agentctl` and `mock-agent` processes (docs/architecture.md §3).

use kandev_testkit::{DEADLINE, FrameLog, Kandev, KandevOptions, bins, is_uuid_v4, poll_until};
use serde_json::{Value, json};

fn red() -> Value {
    json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"], "custom_text": ""}],
           "rejected": false, "reject_reason": ""})
}

/// The checked-in capability fixtures of agentctl, one per agent family (AC-02).
fn capability_fixture(name: &str) -> String {
    let path = bins::repo_root()
        .join("crates/agentctl/tests/fixtures/capabilities")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim_end()
        .to_owned()
}

/// Switches the flag on through the Settings override.
async fn flag_on(kandev: &Kandev) {
    kandev
        .set_flag_override(json!(true))
        .await
        .expect_status(200, "flag on");
}

/// A new task titled `title`; its id.
async fn task(kandev: &Kandev, title: &str) -> String {
    kandev.create_task(title).await["id"]
        .as_str()
        .expect("task id")
        .to_owned()
}

/// Waits for the agent's `n`-th elicitation response; returns all it received.
async fn responses(frames: &FrameLog, n: usize) -> Vec<Value> {
    frames.wait_for_elicitation_responses(n, DEADLINE).await
}

/// A kandev with the flag switched on through the API, a task and a demo session
/// whose first prompt raises the "Pick a colour" form.
async fn demo_waiting(kandev: &Kandev) -> (String, String, Value) {
    flag_on(kandev).await;
    let task = task(kandev, "Paint the shed").await;
    let session = kandev
        .start_session(&task, "mock", Some("Pick for me"))
        .await;
    let id = session["id"].as_str().expect("id").to_owned();
    let pending = kandev.wait_pending(&id, 1).await.remove(0);
    (task, id, pending)
}

#[tokio::test]
async fn ac01_flag_on_the_session_reports_elicitation_form_as_sent_in_initialize() {
    let kandev = Kandev::start_default().await;
    flag_on(&kandev).await;
    let task = task(&kandev, "Caps").await;
    let session = kandev.start_session(&task, "mock", None).await;
    assert_eq!(session["state"], "IDLE", "{session}");
    let caps = &session["client_capabilities"];
    assert_eq!(caps["elicitation"], json!({"form": {}}));
    assert!(caps["elicitation"].get("url").is_none(), "never url");
    let init: Vec<Value> = kandev
        .frames()
        .frames()
        .into_iter()
        .filter(|f| f.dir == "recv" && f.method() == Some("initialize"))
        .map(|f| f.frame)
        .collect();
    assert_eq!(init.len(), 1);
    assert_eq!(
        &init[0]["params"]["clientCapabilities"], caps,
        "the exact JSON sent in initialize"
    );
    assert_eq!(session["flags"], json!({"features.acpElicitation": true}));
}

#[tokio::test]
async fn ac02_flag_off_capabilities_equal_each_agents_pinned_fixture() {
    let mock = bins::mock_agent().display().to_string();
    let kandev = Kandev::start(KandevOptions::new().toml(&format!(
        "[agents.cursor-acp]\ncommand = [{mock:?}]\n[agents.claude-acp]\ncommand = [{mock:?}]\n"
    )))
    .await;
    let task = task(&kandev, "Caps off").await;
    for (agent, fixture) in [
        ("cursor-acp", "cursor-acp.json"),
        ("claude-acp", "default.json"),
    ] {
        let session = kandev.start_session(&task, agent, None).await;
        let caps = &session["client_capabilities"];
        assert_eq!(
            caps.to_string(),
            capability_fixture(fixture),
            "{agent}: byte for byte"
        );
        assert!(caps.get("elicitation").is_none());
        // And it survives the round trip through the store.
        let again = kandev.session(session["id"].as_str().expect("id")).await;
        assert_eq!(
            again["client_capabilities"].to_string(),
            capability_fixture(fixture)
        );
    }
}

#[tokio::test]
async fn ac08_ac10_ac13_f9_answer_the_demo_form_and_the_same_turn_continues() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let (task, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"]
        .as_str()
        .expect("pending id")
        .to_owned();
    assert!(is_uuid_v4(&pending_id), "{pending_id}");
    assert_eq!(pending["source"], "elicitation");
    assert_eq!(pending["task_id"], task.as_str());
    assert_eq!(pending["tool_call_id"], "toolu-ask-colour");
    assert_eq!(pending["questions"][0]["id"], "question_0");
    assert_eq!(pending["questions"][0]["kind"], "single_select");
    assert_eq!(
        pending["questions"][0]["custom_answer"]["key"],
        "question_0_custom"
    );

    // AC-08: the agent-authored clarification_request message, and pending_action.
    let s = kandev
        .wait_session_state(&session, "WAITING_FOR_INPUT")
        .await;
    assert_eq!(s["pending_action"], "clarification");
    let messages = kandev.messages(&session).await;
    let ask: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "clarification_request")
        .collect();
    assert_eq!(ask.len(), 1);
    assert_eq!(ask[0]["author_type"], "agent");
    assert_eq!(ask[0]["requests_input"], true);
    assert_eq!(ask[0]["metadata"]["pending_id"], pending_id.as_str());
    let t = kandev.task(&task).await;
    assert_eq!(
        (t["state"].clone(), t["pending_action"].clone()),
        (json!("WAITING_FOR_INPUT"), json!("clarification"))
    );

    // F9: one notification, naming the task, never the question.
    let notes = poll_until("the notification", DEADLINE, || async {
        let n = kandev.notifications().await;
        (!n.is_empty()).then_some(n)
    })
    .await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["event"], "session.clarification_requested");
    let body = notes[0]["body"].as_str().expect("body");
    assert!(body.contains("Paint the shed"), "{body}");
    assert!(
        !body.contains("Pick a colour") && !body.contains("Colour"),
        "{body}"
    );
    ws.wait_for_type("notification", DEADLINE, |n| {
        n["event"] == "session.clarification_requested"
    })
    .await;
    ws.wait_for_type("clarification.created", DEADLINE, |c| {
        c["pending_id"] == pending_id.as_str()
    })
    .await;

    // AC-10: the answer reaches the agent as the schema's own key.
    let r = kandev.respond(&pending_id, &red()).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "answered"})));
    let log = kandev.frames();
    let results = responses(log, 1).await;
    assert_eq!(
        results,
        [json!({"action": "accept", "content": {"question_0": "Red"}})]
    );
    kandev.wait_agent_text(&session, "You picked Red.").await;
    kandev.wait_session_state(&session, "IDLE").await;

    // AC-13: one session/prompt for the whole exchange, and it is the one that returned.
    let prompts = log.prompt_requests();
    assert_eq!(prompts.len(), 1);
    let answers = log.answers_to(&prompts[0]["id"]);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["result"]["stopReason"], "end_turn");

    let rec = kandev.clarification(&pending_id).await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "answered");
    ws.wait_for_type("clarification.settled", DEADLINE, |c| {
        c["pending_id"] == pending_id.as_str()
    })
    .await;
    ws.wait_for_type("session.updated", DEADLINE, |s| {
        s["id"] == session.as_str() && s["state"] == "IDLE"
    })
    .await;
    ws.wait_for_type("message.created", DEADLINE, |m| m["type"] == "tool_call")
        .await;
    // Still exactly one notification (F9) once everything settled.
    assert_eq!(kandev.notifications().await.len(), 1);
    assert_eq!(ws.of_type("notification").len(), 1);
    assert!(kandev.session(&session).await["pending_action"].is_null());
}

#[tokio::test]
async fn ac12f_ac60_identical_questions_make_two_records_and_answering_one_leaves_the_other() {
    let kandev = Kandev::start_default().await;
    flag_on(&kandev).await;
    let task = task(&kandev, "Pick a datastore").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:two-identical"))
        .await;
    let id = session["id"].as_str().expect("id");
    let pending = kandev.wait_pending(id, 2).await;
    let (a, b) = (
        pending[0]["pending_id"].as_str().expect("a").to_owned(),
        pending[1]["pending_id"].as_str().expect("b").to_owned(),
    );
    assert_ne!(a, b);
    assert!(is_uuid_v4(&a) && is_uuid_v4(&b));
    assert_eq!(
        pending[0]["message"], pending[1]["message"],
        "identical text, not collapsed"
    );
    // Two notifications, one per elicitation (F9: once each).
    poll_until("two notifications", DEADLINE, || async {
        (kandev.notifications().await.len() == 2).then_some(())
    })
    .await;

    let answer =
        json!({"answers": [{"question_id": "question_0", "selected_options": ["Postgres"]}]});
    // AC-60: agentctl accepts the backend's id, so it is agentctl's own, verbatim.
    let r = kandev.respond(&a, &answer).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "answered"})));
    assert_eq!(kandev.clarification(&a).await["status"], "answered");
    assert_eq!(
        kandev.clarification(&b).await["status"],
        "pending",
        "D4: the twin is untouched"
    );
    let s = kandev.session(id).await;
    assert_eq!(
        (s["state"].clone(), s["pending_action"].clone()),
        (json!("WAITING_FOR_INPUT"), json!("clarification"))
    );
    let log = kandev.frames();
    assert_eq!(responses(log, 1).await.len(), 1);

    assert_eq!(kandev.respond(&b, &answer).await.status, 200);
    let results = responses(log, 2).await;
    assert_eq!(results.len(), 2);
    kandev.wait_session_state(id, "IDLE").await;
}

#[tokio::test]
async fn ac12g_ac61_a_second_submission_is_forwarded_and_agentctl_says_not_found() {
    let kandev = Kandev::start_default().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    assert_eq!(kandev.respond(pending_id, &red()).await.status, 200);
    let blue = json!({"answers": [{"question_id": "question_0", "selected_options": ["Blue"]}]});
    let r = kandev.respond(pending_id, &blue).await;
    assert_eq!(r.status, 404, "{r}");
    assert_eq!(r.body["error"]["code"], "NOT_FOUND");
    assert_eq!(
        r.body["error"]["origin"], "agentctl",
        "adjudicated by agentctl, not locally"
    );
    kandev.wait_agent_text(&session, "You picked Red.").await;
    kandev.wait_session_state(&session, "IDLE").await;
    // The agent observed exactly one response.
    let results = kandev.frames().elicitation_responses();
    assert_eq!(
        results,
        [json!({"action": "accept", "content": {"question_0": "Red"}})]
    );
    assert_eq!(kandev.clarification(pending_id).await["status"], "answered");
}

#[tokio::test]
async fn ac14_skipping_declines() {
    let kandev = Kandev::start_default().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let r = kandev
        .respond(
            pending_id,
            &json!({"answers": [], "rejected": true, "reject_reason": "not now"}),
        )
        .await;
    assert_eq!((r.status, r.body), (200, json!({"status": "declined"})));
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "decline"})]);
    kandev.wait_session_state(&session, "IDLE").await;
    let rec = kandev.clarification(pending_id).await;
    assert_eq!(rec["status"], "declined");
    assert_eq!(rec["answer"]["reject_reason"], "not now");
}

#[tokio::test]
async fn an_operator_cancel_reaches_the_agent_as_cancel_and_a_second_is_agentctls_404() {
    let kandev = Kandev::start_default().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let path = format!("/api/v1/clarifications/{pending_id}/cancel");
    let r = kandev.api().request("POST", &path, None).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "cancelled"})));
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "cancel"})]);
    let rec = kandev
        .wait_clarification_status(pending_id, "cancelled")
        .await;
    assert_eq!(
        (rec["outcome"].as_str(), rec["answered_by"].as_str()),
        (Some("cancelled"), Some("local"))
    );
    let s = kandev.session(&session).await;
    assert_eq!(s["pending_action"], Value::Null);
    // Forward first: agentctl adjudicates the second cancel, and an answer after it.
    for r in [
        kandev.api().request("POST", &path, None).await,
        kandev.respond(pending_id, &red()).await,
    ] {
        assert_eq!(
            (r.status, r.body["error"]["origin"].as_str()),
            (404, Some("agentctl")),
            "{r}"
        );
    }
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "one response, ever"
    );
    assert_eq!(
        kandev.clarification(pending_id).await["outcome"],
        "cancelled"
    );
}

#[tokio::test]
async fn invalid_answer_is_400_and_the_pending_stays_open() {
    let kandev = Kandev::start_default().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let green = json!({"answers": [{"question_id": "question_0", "selected_options": ["Green"]}]});
    let r = kandev.respond(pending_id, &green).await;
    assert_eq!(r.status, 400, "{r}");
    assert_eq!(r.body["error"]["code"], "INVALID_ANSWER");
    assert_eq!(kandev.clarification(pending_id).await["status"], "pending");
    assert_eq!(kandev.session(&session).await["state"], "WAITING_FOR_INPUT");
    assert!(
        kandev.frames().elicitation_responses().is_empty(),
        "nothing sent to the agent"
    );
    // The operator can still answer it.
    assert_eq!(kandev.respond(pending_id, &red()).await.status, 200);
    kandev.wait_agent_text(&session, "You picked Red.").await;
}

#[tokio::test]
async fn ac15_cancelling_the_turn_answers_cancel_and_withdraws_the_surface() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let cancel = format!("/api/v1/sessions/{session}/cancel");
    assert_eq!(
        kandev.api().request("POST", &cancel, None).await.status,
        202
    );
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "cancel"})]);
    kandev
        .wait_clarification_status(pending_id, "cancelled")
        .await;
    let s = kandev.wait_session_state(&session, "IDLE").await;
    assert!(s["pending_action"].is_null());
    ws.wait_for_type("clarification.settled", DEADLINE, |c| {
        c["pending_id"] == pending_id && c["status"] == "cancelled"
    })
    .await;
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "cancelled");
}

#[tokio::test]
async fn ac20_flag_off_an_elicitation_anyway_is_declined_and_nothing_surfaces() {
    let kandev = Kandev::start_default().await;
    let task = task(&kandev, "Flag off").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:single"))
        .await;
    let id = session["id"].as_str().expect("id");
    assert!(session["client_capabilities"].get("elicitation").is_none());
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(results, [json!({"action": "decline"})]);
    kandev.wait_session_state(id, "IDLE").await;
    let all = kandev
        .api()
        .get("/api/v1/clarifications")
        .await
        .expect_status(200, "list clarifications");
    assert_eq!(all["clarifications"], json!([]), "{all}");
    assert!(
        kandev
            .messages(id)
            .await
            .iter()
            .all(|m| m["type"] != "clarification_request")
    );
    assert!(kandev.notifications().await.is_empty());
    assert!(kandev.session(id).await["pending_action"].is_null());
}

#[tokio::test]
async fn ac64_the_answer_deadline_declines_and_the_turn_continues() {
    let kandev = Kandev::start(
        KandevOptions::new()
            .answer_timeout("1s")
            .env("KANDEV_ACP_IDLE_TIMEOUT", "1h"),
    )
    .await;
    let (_, session, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let rec = kandev
        .wait_clarification_status(pending_id, "expired")
        .await;
    assert!(rec["settled_at"].is_string());
    let results = responses(kandev.frames(), 1).await;
    assert_eq!(
        results,
        [json!({"action": "decline"})],
        "decline, not cancel"
    );
    kandev
        .wait_agent_text(&session, "You skipped the question.")
        .await;
    kandev.wait_session_state(&session, "IDLE").await;
    let messages = kandev.messages(&session).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["status"], "expired");
}

#[tokio::test]
async fn f7_an_agent_cancelled_request_is_withdrawn() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    flag_on(&kandev).await;
    let task = task(&kandev, "Withdrawn").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:agent-cancel"))
        .await;
    let id = session["id"].as_str().expect("id");
    let settled = ws
        .wait_for_type("clarification.settled", DEADLINE, |c| {
            c["status"] == "cancelled"
        })
        .await;
    let pending_id = settled["data"]["pending_id"].as_str().expect("id");
    kandev.wait_session_state(id, "IDLE").await;
    let messages = kandev.messages(id).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("message");
    assert_eq!(ask["metadata"]["pending_id"], pending_id);
    assert_eq!(ask["metadata"]["status"], "cancelled");
    // Answering a withdrawn record: agentctl no longer holds it.
    let r = kandev.respond(pending_id, &red()).await;
    assert_eq!(
        (r.status, r.body["error"]["origin"].clone()),
        (404, json!("agentctl"))
    );
}

#[tokio::test]
async fn messages_hold_prompts_aggregated_text_and_tool_calls() {
    let kandev = Kandev::start_default().await;
    let task = task(&kandev, "Plain").await;
    let session = kandev
        .start_session(&task, "mock", Some("/e2e:plain"))
        .await;
    let id = session["id"].as_str().expect("id");
    kandev.wait_session_state(id, "IDLE").await;
    let messages = poll_until("the plain transcript", DEADLINE, || async {
        let m = kandev.messages(id).await;
        (m.len() >= 4).then_some(m)
    })
    .await;
    assert_eq!(messages[0]["author_type"], "user");
    assert_eq!(messages[0]["content"], "/e2e:plain");
    let tool = messages
        .iter()
        .find(|m| m["type"] == "tool_call")
        .expect("tool call");
    assert!(tool["metadata"]["tool_call_id"].is_string());
    assert_eq!(tool["metadata"]["status"], "completed", "updated in place");
    let texts: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "message" && m["author_type"] == "agent")
        .collect();
    assert_eq!(texts.len(), 2, "{messages:?}");
    // A second prompt on the same session.
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{id}/prompt"),
            &json!({"text": "/e2e:plain"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    poll_until("second turn", DEADLINE, || async {
        let m = kandev.messages(id).await;
        (m.iter().filter(|m| m["author_type"] == "user").count() == 2 && m.len() >= 8).then_some(())
    })
    .await;
    kandev.wait_session_state(id, "IDLE").await;
}
