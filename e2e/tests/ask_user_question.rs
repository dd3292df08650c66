//! The `ask_user_question_kandev` path beside elicitation (docs/architecture.md §6 F3, spec
//! AC-57, D4), through the operator API with the real `kandev`, `agentctl` and
//! `mock-agent` processes: the mock calls the MCP tool agentctl serves, the backend keeps
//! the record under its own id, and the answer goes back as the tool result.

use kandev_testkit::{ApiResponse, DEADLINE, Kandev, is_uuid_v7, poll_until};
use serde_json::{Value, json};

fn pick(question: &str, option: &str) -> Value {
    json!({"question_id": question, "selected_options": [option], "custom_text": ""})
}

fn typed(question: &str, text: &str) -> Value {
    json!({"question_id": question, "selected_options": [], "custom_text": text})
}

fn answers(list: Vec<Value>) -> Value {
    json!({"answers": list, "rejected": false, "reject_reason": ""})
}

/// `POST /api/v1/sessions/{session}/prompt` with `text`, asserting the 202.
async fn prompt(kandev: &Kandev, session: &str, text: &str) {
    kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{session}/prompt"),
            &json!({"text": text}),
        )
        .await
        .expect_status(202, "prompt");
}

/// Prompts `text` on `session` and waits for one more pending record of this path.
async fn ask(kandev: &Kandev, session: &str, text: &str) -> Value {
    prompt(kandev, session, text).await;
    let mut list = kandev.wait_pending(session, 1).await;
    list.remove(0)
}

/// `(status, body)` of a response, to compare with an expected pair.
fn pair(r: ApiResponse) -> (u16, Value) {
    (r.status, r.body)
}

/// The JSON the mock reported for its tool call `id` (`ask_user_question ID result: …`),
/// the `n`-th time it did (1-based).
async fn tool_result(kandev: &Kandev, session: &str, id: &str, n: usize) -> Value {
    let prefix = format!("ask_user_question {id} result: ");
    let prefix = prefix.as_str();
    poll_until(&format!("{n}× {prefix:?}"), DEADLINE, || async move {
        let messages = kandev.messages(session).await;
        let mut reported: Vec<Value> = Vec::new();
        for content in messages
            .iter()
            .filter(|m| m["author_type"] == "agent")
            .filter_map(|m| m["content"].as_str())
        {
            for (at, _) in content.match_indices(prefix) {
                let rest = &content[at + prefix.len()..];
                let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                if let Some(Ok(value)) = stream.next() {
                    reported.push(value);
                }
            }
        }
        reported.get(n - 1).cloned()
    })
    .await
}

async fn idle_session(kandev: &Kandev, title: &str) -> String {
    let task = kandev.create_task(title).await;
    let task = task["id"].as_str().expect("task id");
    let session = kandev.start_session(task, "mock", None).await;
    let id = session["id"].as_str().expect("id").to_owned();
    kandev.wait_session_state(&id, "IDLE").await;
    id
}

#[tokio::test]
async fn a_tool_call_raises_the_same_clarification_surface_and_the_answer_reaches_the_agent() {
    // The flag is off: this path does not depend on elicitation being advertised.
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let task = kandev.create_task("Storage").await;
    let task = task["id"].as_str().expect("task id");
    let session = kandev.start_session(task, "mock", Some("/e2e:ask")).await;
    let session = session["id"].as_str().expect("id").to_owned();
    let rec = kandev.wait_pending(&session, 1).await.remove(0);
    let id = rec["pending_id"].as_str().expect("id").to_owned();
    assert!(is_uuid_v7(&id), "a backend-minted UUID: {id}");
    assert_eq!(rec["source"], "ask_user_question");
    assert_eq!(rec["message"], "Choosing the storage for the new service");
    assert_eq!(
        rec["questions"],
        json!([{"id": "q1", "kind": "single_select", "title": "Datastore",
            "prompt": "Which database should the new service use?",
            "options": [
                {"id": "Postgres", "label": "Postgres", "description": "Relational, already operated by the team."},
                {"id": "SQLite", "label": "SQLite", "description": "Embedded; no ops burden."}],
            "custom_answer": null, "required": true, "default": null, "constraints": {"max_length": 2000}}])
    );

    // The same surface as an elicitation: message, pending_action, notification, WS events.
    let s = kandev
        .wait_session_state(&session, "WAITING_FOR_INPUT")
        .await;
    assert_eq!(s["pending_action"], "clarification");
    let messages = kandev.messages(&session).await;
    let asks: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "clarification_request")
        .collect();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0]["author_type"], "agent");
    assert_eq!(asks[0]["requests_input"], true);
    assert_eq!(asks[0]["metadata"]["pending_id"], id.as_str());
    assert_eq!(asks[0]["metadata"]["source"], "ask_user_question");
    ws.wait_for_type("clarification.created", DEADLINE, |d| {
        d["pending_id"] == id.as_str()
    })
    .await;
    let notes = poll_until("the notification", DEADLINE, || async {
        let n = kandev.notifications().await;
        (!n.is_empty()).then_some(n)
    })
    .await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["event"], "session.clarification_requested");
    assert!(!notes[0]["body"].as_str().unwrap_or("").contains("database"));

    let r = kandev
        .respond(&id, &answers(vec![pick("q1", "Postgres")]))
        .await;
    assert_eq!(pair(r), (200, json!({"status": "answered"})));
    let result = tool_result(&kandev, &session, "a1", 1).await;
    assert_eq!(
        result,
        json!({"status": "answered", "answers": [{"question_id": "q1",
            "prompt": "Which database should the new service use?",
            "selected_option": "Postgres", "custom_text": null}]})
    );
    let settled = ws
        .wait_for_type("clarification.settled", DEADLINE, |d| {
            d["pending_id"] == id.as_str()
        })
        .await;
    assert_eq!(settled["data"]["status"], "answered");
    kandev.wait_agent_text(&session, "Done.").await;
    let s = kandev.wait_session_state(&session, "IDLE").await;
    assert_eq!(s["pending_action"], Value::Null);

    // First response wins; the record takes no second one.
    let r = kandev
        .respond(&id, &answers(vec![pick("q1", "SQLite")]))
        .await;
    assert_eq!(r.status, 409, "{r}");
    assert_eq!(r.body["error"]["code"], "NOT_ACTIVE");
    assert_eq!(
        kandev.clarification(&id).await["answer"]["answers"][0]["selected_options"],
        json!(["Postgres"])
    );
}

#[tokio::test]
async fn ac57_every_combination_of_single_select_custom_text_and_skip_follows_this_paths_rules() {
    let kandev = Kandev::start_default().await;
    let session = idle_session(&kandev, "AC-57").await;
    let rec = ask(&kandev, &session, "/e2e:ask").await;
    let id = rec["pending_id"].as_str().expect("id").to_owned();

    // Refused, each with its reason, and the record stays open.
    let long = "x".repeat(2001);
    let refused = [
        (
            answers(vec![
                json!({"question_id": "q1", "selected_options": ["Postgres"], "custom_text": "CockroachDB"}),
            ]),
            "not both",
        ),
        (answers(vec![]), "missing: q1"),
        (answers(vec![typed("q1", "   ")]), "no answer"),
        (
            answers(vec![
                json!({"question_id": "q1", "selected_options": ["Postgres", "SQLite"], "custom_text": ""}),
            ]),
            "exactly one option",
        ),
        (answers(vec![pick("q1", "MySQL")]), "no option `MySQL`"),
        (
            answers(vec![pick("q1", "Postgres"), pick("q1", "SQLite")]),
            "more than once",
        ),
        (answers(vec![pick("q9", "Postgres")]), "unknown question"),
        (answers(vec![typed("q1", &long)]), "at most 2000"),
        (
            json!({"answers": [pick("q1", "Postgres")], "rejected": true, "reject_reason": ""}),
            "must come alone",
        ),
    ];
    for (body, expected) in refused {
        let ApiResponse {
            status,
            body: reply,
            ..
        } = kandev.respond(&id, &body).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["error"]["code"], "INVALID_ANSWER");
        let message = reply["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(expected),
            "{body}: {message:?} should say {expected:?}"
        );
    }
    assert_eq!(kandev.clarification(&id).await["status"], "pending");

    // A single selection.
    assert_eq!(
        pair(
            kandev
                .respond(&id, &answers(vec![pick("q1", "SQLite")]))
                .await
        ),
        (200, json!({"status": "answered"}))
    );
    let result = tool_result(&kandev, &session, "a1", 1).await;
    assert_eq!(result["answers"][0]["selected_option"], "SQLite");
    assert_eq!(result["answers"][0]["custom_text"], Value::Null);
    kandev.wait_session_state(&session, "IDLE").await;

    // Custom text alone (exactly 2,000 characters is still accepted).
    let rec = ask(&kandev, &session, "/e2e:ask").await;
    let id = rec["pending_id"].as_str().expect("id").to_owned();
    let text = format!("CockroachDB{}", "!".repeat(2000 - 11));
    assert_eq!(
        pair(
            kandev
                .respond(&id, &answers(vec![typed("q1", &text)]))
                .await
        ),
        (200, json!({"status": "answered"}))
    );
    let result = tool_result(&kandev, &session, "a1", 2).await;
    assert_eq!(result["answers"][0]["selected_option"], Value::Null);
    assert_eq!(result["answers"][0]["custom_text"], text.as_str());
    kandev.wait_session_state(&session, "IDLE").await;

    // Skip: `rejected: true` alone.
    let rec = ask(&kandev, &session, "/e2e:ask").await;
    let id = rec["pending_id"].as_str().expect("id").to_owned();
    assert_eq!(
        pair(kandev.reject(&id).await),
        (200, json!({"status": "declined"}))
    );
    let result = tool_result(&kandev, &session, "a1", 3).await;
    assert_eq!(result["status"], "rejected");
    assert_eq!(
        kandev.wait_clarification_status(&id, "declined").await["answer"]["rejected"],
        true
    );
}

#[tokio::test]
async fn d4_identical_tool_calls_share_one_record_and_identical_elicitations_do_not() {
    let kandev = Kandev::start_default().await;
    kandev.flag_on().await;
    let session = idle_session(&kandev, "D4").await;
    let rec = ask(&kandev, &session, "/e2e:ask-twice").await;
    let id = rec["pending_id"].as_str().expect("id").to_owned();
    // Both calls reached the backend; the second joined the first record.
    kandev.wait_log("the call joins that record (D4)", 1).await;
    assert_eq!(kandev.clarifications(&session, None).await.len(), 1);
    let asks = kandev
        .messages(&session)
        .await
        .into_iter()
        .filter(|m| m["type"] == "clarification_request")
        .count();
    assert_eq!(asks, 1);
    assert_eq!(
        pair(kandev.respond(&id, &answers(vec![pick("q1", "Yes")])).await),
        (200, json!({"status": "answered"}))
    );
    // One answer returns both calls.
    for call in ["a1", "a2"] {
        let result = tool_result(&kandev, &session, call, 1).await;
        assert_eq!(result["answers"][0]["selected_option"], "Yes", "{call}");
    }
    kandev.wait_session_state(&session, "IDLE").await;
    assert_eq!(kandev.notifications().await.len(), 1);

    // Elicitations with identical text are never collapsed (D4).
    prompt(&kandev, &session, "/e2e:two-identical").await;
    let two = kandev.wait_pending(&session, 2).await;
    assert!(two.iter().all(|r| r["source"] == "elicitation"));
    assert_ne!(two[0]["pending_id"], two[1]["pending_id"]);
}

#[tokio::test]
async fn both_paths_pending_on_one_session_are_answered_independently() {
    let kandev = Kandev::start_default().await;
    kandev.flag_on().await;
    let session = idle_session(&kandev, "Both").await;
    prompt(&kandev, &session, "/e2e:ask-and-elicit").await;
    let both = kandev.wait_pending(&session, 2).await;
    let by_source = |source: &str| {
        both.iter()
            .find(|r| r["source"] == source)
            .unwrap_or_else(|| panic!("no {source} record: {both:?}"))["pending_id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let elicitation = by_source("elicitation");
    let tool = by_source("ask_user_question");

    // The tool call first: the elicitation stays pending, the session still waits.
    assert_eq!(
        pair(
            kandev
                .respond(&tool, &answers(vec![pick("q1", "SQLite")]))
                .await
        ),
        (200, json!({"status": "answered"}))
    );
    assert_eq!(
        kandev.clarification(&elicitation).await["status"],
        "pending"
    );
    let s = kandev.session(&session).await;
    assert_eq!(
        (s["state"].as_str(), s["pending_action"].as_str()),
        (Some("WAITING_FOR_INPUT"), Some("clarification"))
    );
    // The elicitation's own rules still apply to it (selection and text coexist).
    let r = kandev
        .respond(
            &elicitation,
            &answers(vec![json!({"question_id": "question_0", "selected_options": ["Red"], "custom_text": "Teal"})]),
        )
        .await;
    assert_eq!(pair(r), (200, json!({"status": "answered"})));
    kandev
        .wait_agent_text(&session, "elicitation e1 result:")
        .await;
    let result = tool_result(&kandev, &session, "a1", 1).await;
    assert_eq!(result["answers"][0]["selected_option"], "SQLite");
    kandev.wait_session_state(&session, "IDLE").await;
}

#[tokio::test]
async fn turn_cancel_releases_the_blocked_tool_call_and_withdraws_the_surface() {
    let kandev = Kandev::start_default().await;
    let ws = kandev.ws().await;
    let session = idle_session(&kandev, "Cancel").await;
    let rec = ask(&kandev, &session, "/e2e:ask").await;
    let id = rec["pending_id"].as_str().expect("id").to_owned();
    let cancel = format!("/api/v1/sessions/{session}/cancel");
    assert_eq!(
        kandev.api().request("POST", &cancel, None).await.status,
        202
    );
    let rec = kandev.wait_clarification_status(&id, "cancelled").await;
    assert_eq!(rec["source"], "ask_user_question");
    ws.wait_for_type("clarification.settled", DEADLINE, |d| {
        d["pending_id"] == id.as_str() && d["status"] == "cancelled"
    })
    .await;
    let s = kandev.wait_session_state(&session, "IDLE").await;
    assert_eq!(s["pending_action"], Value::Null);
    let r = kandev
        .respond(&id, &answers(vec![pick("q1", "Postgres")]))
        .await;
    assert_eq!(r.status, 409, "{r}");
    assert_eq!(r.body["error"]["code"], "NOT_ACTIVE");
}
