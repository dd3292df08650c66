//! The round trip at full stack: an agent's `elicitation/create` becomes an operator
//! clarification, the operator's answer reaches the agent inside the same turn.
//! AC-08, AC-09, AC-10, AC-11, AC-11a, AC-12, AC-12a, AC-12b, AC-12c, AC-12h, AC-12i,
//! AC-12j, AC-13, AC-14, AC-55, AC-56, F9, F10.

use kandev_testkit::{Asked, DEADLINE, Kandev, KandevOptions, TURN_DEADLINE, is_uuid_v7};
use serde_json::{Value, json};

async fn kandev_on() -> Kandev {
    Kandev::start(KandevOptions::new().flag_env(true)).await
}

/// Answers `pending_id`, expects 200 `answered`, and returns what the agent received.
async fn answer_and_see(
    kandev: &Kandev,
    pending_id: &str,
    answers: &[(&str, &[&str], &str)],
) -> Value {
    let r = kandev.answer(pending_id, answers).await;
    assert_eq!(r.status, 200, "respond: {r}");
    assert_eq!(r.body, json!({"status": "answered"}), "respond: {r}");
    kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await
}

/// A kandev with the flag on and a mock-agent session asked by `prompt`, answered with
/// `answers`: asserts the agent received `accept` with `content`; returns both (the
/// record as first listed is `Asked::record`).
async fn answered(
    prompt: &str,
    answers: &[(&str, &[&str], &str)],
    content: Value,
) -> (Kandev, Asked) {
    let kandev = kandev_on().await;
    let asked = kandev.ask("mock", prompt).await;
    let got = answer_and_see(&kandev, &asked.pending_id, answers).await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": content}),
        "{prompt} answered {answers:?}"
    );
    (kandev, asked)
}

#[tokio::test]
async fn ac_08_f9_elicitation_becomes_an_agent_clarification_message_and_one_notification() {
    let kandev = kandev_on().await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let pid = asked.pending_id.as_str();
    // agentctl's pending id (AC-60, asserted in races.rs).
    assert!(is_uuid_v7(pid), "{pid}");
    assert_eq!(asked.record["source"], "elicitation");
    assert_eq!(asked.record["status"], "pending");
    assert_eq!(asked.record["session_id"], asked.session_id.as_str());
    assert_eq!(asked.record["task_id"], asked.task_id.as_str());
    assert_eq!(asked.record["tool_call_id"], "tool-42");
    assert_eq!(
        asked.record["message"],
        "Which database should the new service use?"
    );
    let q = &asked.record["questions"][0];
    assert_eq!(q["id"], "question_0");
    assert_eq!(q["kind"], "single_select");
    assert_eq!(q["custom_answer"]["key"], "question_0_custom");
    let ids: Vec<&Value> = q["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| &o["id"])
        .collect();
    assert_eq!(
        ids,
        [&json!("Postgres"), &json!("SQLite"), &json!("DynamoDB")]
    );

    // AC-08: an agent-authored clarification_request message that requests input.
    let messages = kandev.messages(&asked.session_id).await;
    let requests: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "clarification_request")
        .collect();
    assert_eq!(requests.len(), 1, "{messages:?}");
    let m = requests[0];
    assert_eq!(m["author_type"], "agent");
    assert_eq!(m["requests_input"], true);
    assert_eq!(m["metadata"]["pending_id"], pid);
    let session = kandev
        .wait_session_state(&asked.session_id, "WAITING_FOR_INPUT")
        .await;
    assert_eq!(session["pending_action"], "clarification");
    let task = kandev.task(&asked.task_id).await;
    assert_eq!(
        (&task["state"], &task["pending_action"]),
        (&json!("WAITING_FOR_INPUT"), &json!("clarification")),
        "{task}"
    );

    // The operator's surfaces heard about it.
    ws.wait_for_type("clarification.created", DEADLINE, |d| {
        d["pending_id"] == pid
    })
    .await;
    ws.wait_for_type("message.created", DEADLINE, |d| {
        d["type"] == "clarification_request" && d["metadata"]["pending_id"] == pid
    })
    .await;

    // F9: exactly one session.clarification_requested, naming the task, not the question.
    let answer = kandev
        .answer(pid, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(answer.status, 200, "{answer}");
    let session = kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(session["pending_action"], Value::Null);
    let notes = kandev.notifications().await;
    assert_eq!(
        notes.len(),
        1,
        "one notification per elicitation, and no other: {notes:?}"
    );
    assert_eq!(notes[0]["event"], "session.clarification_requested");
    let note = &notes[0];
    assert_eq!(note["session_id"], asked.session_id.as_str());
    assert_eq!(note["task_id"], asked.task_id.as_str());
    let text = format!("{} {}", note["title"], note["body"]);
    for secret in [
        "Which database",
        "Datastore",
        "Postgres",
        "SQLite",
        "DynamoDB",
    ] {
        assert!(
            !text.contains(secret),
            "notification leaks {secret:?}: {note}"
        );
    }
    assert!(
        note["body"]
            .as_str()
            .expect("body")
            .contains("e2e: /e2e:single"),
        "the body names the task: {note}"
    );
    ws.wait_for_type("notification", DEADLINE, |n| {
        n["event"] == "session.clarification_requested"
    })
    .await;
    assert_eq!(
        ws.of_type("notification").len(),
        1,
        "one notification event on the WebSocket"
    );
}

#[tokio::test]
async fn ac_09_task_list_shows_waiting_for_input_while_pending_then_idle_after_the_answer() {
    let kandev = kandev_on().await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    // The session announces the wait; from then on the task list shows it.
    ws.wait_for_type("session.updated", DEADLINE, |d| {
        d["id"] == asked.session_id.as_str() && d["state"] == "WAITING_FOR_INPUT"
    })
    .await;
    let listed = kandev.task_in_list(&asked.task_id).await;
    assert_eq!(listed["state"], "WAITING_FOR_INPUT", "{listed}");
    assert_eq!(listed["pending_action"], "clarification", "{listed}");
    assert_eq!(
        listed["sessions"][0]["state"], "WAITING_FOR_INPUT",
        "{listed}"
    );
    let session = kandev.session(&asked.session_id).await;
    assert_eq!(session["state"], "WAITING_FOR_INPUT");

    answer_and_see(
        &kandev,
        &asked.pending_id,
        &[("question_0", &["SQLite"], "")],
    )
    .await;
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    let listed = kandev.task_in_list(&asked.task_id).await;
    assert_eq!(listed["state"], "IDLE", "{listed}");
    assert_eq!(listed["pending_action"], Value::Null, "{listed}");
}

/// AC-09 as an invariant: the task list never shows a pending clarification on a task
/// that is not `WAITING_FOR_INPUT`. Watched as closely as the API allows while five
/// clarifications are raised.
#[tokio::test]
async fn ac_09_task_list_never_shows_a_pending_clarification_without_waiting_for_input() {
    let kandev = kandev_on().await;
    for round in 0..5 {
        let task = kandev.create_task(&format!("ac-09 round {round}")).await;
        let tid = task["id"].as_str().expect("id").to_owned();
        kandev
            .try_start_session(&tid, "mock", Some("/e2e:single"))
            .await
            .expect_status(201, "start session");
        // Back-to-back reads (no pause), so a transient state is not skipped over.
        let until = tokio::time::Instant::now() + DEADLINE;
        let listed = loop {
            let listed = kandev.task_in_list(&tid).await;
            if listed["pending_action"] == "clarification" {
                break listed;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "round {round}: no clarification: {listed}"
            );
        };
        assert_eq!(
            listed["state"], "WAITING_FOR_INPUT",
            "round {round}: the task list shows a pending clarification on a {} task: {listed}",
            listed["state"]
        );
    }
}

#[tokio::test]
async fn ac_10_ac_13_selected_label_reaches_the_agent_at_the_schema_key_and_the_original_prompt_ends_the_turn()
 {
    let kandev = kandev_on().await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let got = answer_and_see(
        &kandev,
        &asked.pending_id,
        &[("question_0", &["DynamoDB"], "")],
    )
    .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "DynamoDB"}})
    );

    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    // AC-13: one session/prompt for the whole exchange, and it is the one that returns
    // the stop reason, after the elicitation was answered.
    let frames = kandev.frames().frames();
    let prompts: Vec<&kandev_testkit::frames::Frame> = frames
        .iter()
        .filter(|f| f.dir == "recv" && f.method() == Some("session/prompt"))
        .collect();
    assert_eq!(prompts.len(), 1, "no additional session/prompt");
    let prompt_id = &prompts[0].frame["id"];
    let answered_at = frames
        .iter()
        .position(|f| {
            f.dir == "recv" && f.method().is_none() && f.frame["result"]["action"] == "accept"
        })
        .expect("the answer frame");
    let ended_at = frames
        .iter()
        .position(|f| {
            f.dir == "send" && &f.frame["id"] == prompt_id && f.frame.get("result").is_some()
        })
        .expect("the prompt's response");
    assert!(
        answered_at < ended_at,
        "the original prompt returns after the answer"
    );
    assert_eq!(frames[ended_at].frame["result"]["stopReason"], "end_turn");
    assert_eq!(
        kandev.frames().answers_to(prompt_id).len(),
        1,
        "the prompt is answered once"
    );

    let record = kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    assert!(record["settled_at"].is_string(), "{record}");
    assert_eq!(
        record["answer"]["answers"][0]["selected_options"],
        json!(["DynamoDB"])
    );
    ws.wait_for_type("clarification.settled", DEADLINE, |d| {
        d["pending_id"] == asked.pending_id.as_str() && d["status"] == "answered"
    })
    .await;
    ws.wait_for_type("session.updated", DEADLINE, |d| {
        d["id"] == asked.session_id.as_str() && d["state"] == "IDLE"
    })
    .await;
    let messages = kandev.messages(&asked.session_id).await;
    let ask = messages
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("the clarification message");
    assert_eq!(ask["metadata"]["status"], "answered", "{ask}");
    assert_eq!(
        kandev.session(&asked.session_id).await["pending_action"],
        Value::Null
    );
    let text = kandev
        .wait_agent_text(&asked.session_id, "elicitation e1 result")
        .await;
    assert!(text.contains("DynamoDB"), "{text}");
}

#[tokio::test]
async fn ac_11_free_text_goes_to_the_declared_companion_key_answer_freeform() {
    let (_, asked) = answered(
        "/e2e:e2e-freeform",
        &[("answer", &[], "Split the module")],
        json!({"answer_freeform": "Split the module"}),
    )
    .await;
    let q = &asked.record["questions"][0];
    assert_eq!(q["id"], "answer");
    assert_eq!(q["custom_answer"]["key"], "answer_freeform");
    assert_eq!(asked.record["questions"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn ac_11a_ac_56_rule_4_question_has_zero_options_and_its_free_text_goes_to_its_own_key() {
    let (_, asked) = answered(
        "/e2e:mcp-apikey",
        &[("apiKey", &[], "sk-live-123")],
        json!({"apiKey": "sk-live-123"}),
    )
    .await;
    let questions = asked.record["questions"].as_array().expect("questions");
    assert_eq!(questions.len(), 1);
    assert_eq!(questions[0]["id"], "apiKey");
    assert_eq!(questions[0]["kind"], "text");
    assert_eq!(questions[0]["options"], json!([]));
    assert_eq!(questions[0]["custom_answer"], Value::Null);
}

#[tokio::test]
async fn ac_12_ac_55_multi_select_carries_both_labels_in_declaration_order_not_click_order() {
    let (kandev, asked) = answered(
        "/e2e:multi",
        &[("question_1", &["prod", "dev"], "")],
        json!({"question_1": ["dev", "prod"]}),
    )
    .await;
    let envs = asked.record["questions"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["id"] == "question_1"))
        .expect("question_1");
    assert_eq!(envs["kind"], "multi_select");
    let record = kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    let selected = &record["answer"]["answers"][0]["selected_options"];
    let mut held: Vec<&str> = selected
        .as_array()
        .expect("selected")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    held.sort_unstable();
    assert_eq!(held, ["dev", "prod"], "the record holds both: {record}");
}

#[tokio::test]
async fn ac_12a_ac_12i_custom_text_with_a_selection_sends_only_the_trimmed_companion() {
    answered(
        "/e2e:single",
        &[("question_0", &["Postgres"], "  CockroachDB  ")],
        json!({"question_0_custom": "CockroachDB"}),
    )
    .await;
}

#[tokio::test]
async fn ac_12j_whitespace_only_free_text_with_no_selection_contributes_no_key() {
    answered("/e2e:single", &[("question_0", &[], "   ")], json!({})).await;
}

#[tokio::test]
async fn ac_12b_submitting_nothing_is_accept_with_empty_content_not_decline() {
    let (kandev, asked) = answered("/e2e:single", &[], json!({})).await;
    kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
}

#[tokio::test]
async fn ac_12c_refusal_fallback_is_one_two_option_question_and_retry_fallback_is_accepted() {
    let (_, asked) = answered(
        "/e2e:refusal",
        &[("choice", &["retry_fallback"], "")],
        json!({"choice": "retry_fallback"}),
    )
    .await;
    let questions = asked.record["questions"].as_array().expect("questions");
    assert_eq!(questions.len(), 1);
    let q = &questions[0];
    assert_eq!(q["id"], "choice");
    assert_eq!(q["options"].as_array().map(Vec::len), Some(2));
    assert_eq!(q["options"][0]["id"], "retry_fallback");
    assert_eq!(q["options"][1]["id"], "cancelled");
    assert_eq!(q["custom_answer"], Value::Null);
    assert_eq!(
        q["prompt"], asked.record["message"],
        "prompt is the request's message"
    );
    assert!(q["title"].is_null(), "{q}");
}

#[tokio::test]
async fn ac_12h_only_the_answered_question_of_three_contributes_a_key() {
    let (_, asked) = answered(
        "/e2e:e2e-three",
        &[("question_1", &["Kafka"], "")],
        json!({"question_1": "Kafka"}),
    )
    .await;
    let ids: Vec<&Value> = asked.record["questions"]
        .as_array()
        .expect("questions")
        .iter()
        .map(|q| &q["id"])
        .collect();
    assert_eq!(
        ids,
        [
            &json!("question_0"),
            &json!("question_1"),
            &json!("question_2")
        ]
    );
}

#[tokio::test]
async fn ac_14_rejecting_the_bundle_is_decline_and_the_record_is_declined() {
    let kandev = kandev_on().await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let r = kandev.reject(&asked.pending_id).await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "declined"}));
    let got = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(got, json!({"action": "decline"}));
    let record = kandev
        .wait_clarification_status(&asked.pending_id, "declined")
        .await;
    assert_eq!(
        record["answer"]["reject_reason"], "skipped",
        "the reason is kept: {record}"
    );
    ws.wait_for_type("clarification.settled", DEADLINE, |d| {
        d["pending_id"] == asked.pending_id.as_str() && d["status"] == "declined"
    })
    .await;
    let session = kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(session["pending_action"], Value::Null);
}

#[tokio::test]
async fn f10_an_answer_naming_an_undeclared_option_is_400_invalid_answer_and_the_pending_stays_open()
 {
    let kandev = kandev_on().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    for bad in [
        json!({"answers": [{"question_id": "question_0", "selected_options": ["MySQL"], "custom_text": ""}]}),
        json!({"answers": [{"question_id": "question_0", "selected_options": ["Postgres", "SQLite"], "custom_text": ""}]}),
        json!({"answers": [{"question_id": "nope", "selected_options": [], "custom_text": "x"}]}),
        json!({"answers": [{"question_id": "question_0", "selected_options": ["Postgres"], "custom_text": ""}], "rejected": true}),
    ] {
        let r = kandev.respond(&asked.pending_id, &bad).await;
        assert_eq!(r.status, 400, "{bad} → {r}");
        assert_eq!(r.body["error"]["code"], "INVALID_ANSWER", "{r}");
    }
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "pending", "{record}");
    assert_eq!(
        kandev.session(&asked.session_id).await["state"],
        "WAITING_FOR_INPUT"
    );
    assert!(
        kandev.frames().elicitation_responses().is_empty(),
        "nothing reached the agent"
    );
    // The pending still works.
    let got = answer_and_see(
        &kandev,
        &asked.pending_id,
        &[("question_0", &["SQLite"], "")],
    )
    .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
    let text = kandev
        .wait_agent_text(&asked.session_id, "elicitation e1 result")
        .await;
    assert!(text.contains("SQLite"), "the turn goes on: {text}");
}
