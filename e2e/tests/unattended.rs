//! Answers without a human, on purpose (docs/architecture.md §4.4, §4.5): an orchestrator
//! agent answering over MCP at `/api/v1/mcp`, auto-answer rules, and what the answer
//! deadline does (`on_deadline`). The real `kandev`, `agentctl` and `mock-agent`.

use chrono::{DateTime, Utc};
use kandev_backend::auth::token_sha256;
use kandev_testkit::{ApiResponse, DEADLINE, Kandev, KandevOptions, poll_until, refused_start};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const ALICE: &str = "kdv_alice_orchestrator_token";

fn auth_toml() -> String {
    format!(
        "\n[auth]\nrequired = true\n\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
        token_sha256(ALICE)
    )
}

/// One API request with alice's token.
async fn authed(kandev: &Kandev, method: &str, path: &str, body: Option<Value>) -> ApiResponse {
    let auth = format!("Bearer {ALICE}");
    kandev
        .api()
        .send(method, path, body.as_ref(), &[("authorization", &auth)])
        .await
}

/// With auth on: the flag on, a task, a demo session waiting on "Pick a colour".
async fn waiting_with_auth(kandev: &Kandev) -> (String, String, String) {
    authed(
        kandev,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
    )
    .await
    .expect_status(200, "flag on");
    let task = authed(
        kandev,
        "POST",
        "/api/v1/tasks",
        Some(json!({"title": "Orchestrated"})),
    )
    .await
    .expect_status(201, "create task");
    let task = task["id"].as_str().expect("task").to_owned();
    let session = authed(
        kandev,
        "POST",
        &format!("/api/v1/tasks/{task}/sessions"),
        Some(json!({"agent": "mock", "prompt": "Pick for me"})),
    )
    .await
    .expect_status(201, "start session");
    let session = session["id"].as_str().expect("session").to_owned();
    let pending_id = poll_until("a pending question", DEADLINE, || async {
        let list = authed(
            kandev,
            "GET",
            &format!("/api/v1/clarifications?session_id={session}&status=pending"),
            None,
        )
        .await;
        list.body["clarifications"][0]["pending_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    (task, session, pending_id)
}

async fn record(kandev: &Kandev, pending_id: &str) -> Value {
    authed(
        kandev,
        "GET",
        &format!("/api/v1/clarifications/{pending_id}"),
        None,
    )
    .await
    .expect_status(200, "get clarification")
}

async fn mcp_client(
    kandev: &Kandev,
    token: Option<&str>,
) -> Result<RunningService<RoleClient, ()>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!(
        "http://{}/api/v1/mcp",
        kandev.addr()
    ));
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|err| err.to_string())
}

/// A tool call's first text block as JSON, and whether it is a tool error.
async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> (bool, Value) {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .expect("tools/call");
    let text = serde_json::to_value(result.content.first())
        .ok()
        .and_then(|b| b.get("text").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    (
        result.is_error == Some(true),
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn colour(option: &str) -> Value {
    json!([{"question_id": "question_0", "selected_options": [option], "custom_text": ""}])
}

#[tokio::test]
async fn an_orchestrator_lists_a_pending_question_over_mcp_and_answers_it_as_its_operator() {
    let kandev = Kandev::start(KandevOptions::new().toml(&auth_toml())).await;
    let (task, session, pending_id) = waiting_with_auth(&kandev).await;
    let client = mcp_client(&kandev, Some(ALICE))
        .await
        .expect("connects with the token");

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(
        names,
        [
            "list_pending_questions",
            "answer_question",
            "skip_question",
            "cancel_question"
        ]
    );

    let (error, listed) = call(
        &client,
        "list_pending_questions",
        json!({"session_id": session}),
    )
    .await;
    assert!(!error, "{listed}");
    let pending = listed["pending_questions"].as_array().expect("a list");
    assert_eq!(pending.len(), 1, "{listed}");
    assert_eq!(pending[0]["pending_id"], pending_id.as_str());
    assert_eq!(pending[0]["task_id"], task.as_str());
    assert_eq!(pending[0]["questions"][0]["id"], "question_0");
    assert_eq!(pending[0]["questions"][0]["options"][0]["id"], "Red");
    assert!(pending[0]["questions"][0].get("constraints").is_some());
    assert!(
        pending[0].get("expires_at").is_some(),
        "the field is there, null without a deadline"
    );
    let (_, other) = call(
        &client,
        "list_pending_questions",
        json!({"task_id": "no-such-task"}),
    )
    .await;
    assert_eq!(other["pending_questions"], json!([]));

    // The operator API's validation, as a tool error with the reason.
    let (error, refused) = call(
        &client,
        "answer_question",
        json!({"pending_id": pending_id, "answers": colour("Purple")}),
    )
    .await;
    assert!(error, "{refused}");
    assert_eq!(refused["http_status"], 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Purple")),
        "{refused}"
    );
    assert_eq!(record(&kandev, &pending_id).await["status"], "pending");

    let (error, answered) = call(
        &client,
        "answer_question",
        json!({"pending_id": pending_id, "answers": colour("Blue")}),
    )
    .await;
    assert!(!error, "{answered}");
    assert_eq!(answered, json!({"status": "answered"}));
    let results = kandev
        .frames()
        .wait_for_elicitation_responses(1, DEADLINE)
        .await;
    assert_eq!(
        results,
        [json!({"action": "accept", "content": {"question_0": "Blue"}})],
        "exactly that answer"
    );
    let rec = record(&kandev, &pending_id).await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(rec["answered_by"], "alice", "the token's operator");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn two_mcp_answers_race_and_exactly_one_reaches_the_agent() {
    let kandev = Kandev::start(KandevOptions::new().toml(&auth_toml())).await;
    let (_, session, pending_id) = waiting_with_auth(&kandev).await;
    let one = mcp_client(&kandev, Some(ALICE)).await.expect("connects");
    let two = mcp_client(&kandev, Some(ALICE)).await.expect("connects");
    let (a, b) = tokio::join!(
        call(
            &one,
            "answer_question",
            json!({"pending_id": pending_id, "answers": colour("Red")})
        ),
        call(
            &two,
            "answer_question",
            json!({"pending_id": pending_id, "answers": colour("Blue")})
        ),
    );
    let (winner, loser) = match (a.0, b.0) {
        (false, true) => (a.1, b.1),
        (true, false) => (b.1, a.1),
        _ => panic!("exactly one answer wins: {a:?} {b:?}"),
    };
    assert_eq!(winner, json!({"status": "answered"}));
    assert_eq!(loser["http_status"], 404, "{loser}");
    assert_eq!(
        loser["error"]["origin"], "agentctl",
        "agentctl's verdict: {loser}"
    );
    // The turn ends once the agent has its answer: every response it got is in by then.
    poll_until("the turn to end", DEADLINE, || async {
        let s = authed(&kandev, "GET", &format!("/api/v1/sessions/{session}"), None).await;
        (s.body["state"] == "IDLE").then_some(())
    })
    .await;
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "exactly one answer reached the agent"
    );
    let _ = one.cancel().await;
    let _ = two.cancel().await;
}

#[tokio::test]
async fn an_mcp_call_without_a_token_is_refused_when_auth_is_on() {
    let kandev = Kandev::start(KandevOptions::new().toml(&auth_toml())).await;
    let r = kandev
        .api()
        .post(
            "/api/v1/mcp",
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(r.status, 401, "{r}");
    assert_eq!(r.body["error"]["code"], "AUTH_REQUIRED");
    assert!(
        mcp_client(&kandev, None).await.is_err(),
        "no token, no session"
    );
    assert!(
        mcp_client(&kandev, Some("kdv_wrong")).await.is_err(),
        "a wrong token neither"
    );
    let client = mcp_client(&kandev, Some(ALICE))
        .await
        .expect("the operator's token opens it");
    let (error, listed) = call(&client, "list_pending_questions", json!({})).await;
    assert!(
        !error && listed["pending_questions"] == json!([]),
        "{listed}"
    );
    let _ = client.cancel().await;
}

/// A kandev without auth whose mock agent has `rules` (TOML under `[agents.mock]`).
async fn with_rules(rules: &str) -> Kandev {
    Kandev::start(KandevOptions::new().toml(rules)).await
}

/// Switches the flag on and starts a session of the mock agent on `prompt` in a new
/// task; returns the session.
async fn flagged_session(kandev: &Kandev, title: &str, prompt: &str) -> Value {
    kandev.flag_on().await;
    let task = kandev.create_task(title).await;
    let task = task["id"].as_str().expect("task id");
    kandev.start_session(task, "mock", Some(prompt)).await
}

/// The flag on, a task, a demo session waiting on "Pick a colour" (no auth).
async fn demo_waiting(kandev: &Kandev) -> (String, Value) {
    let session = flagged_session(kandev, "Unattended", "Pick for me").await;
    let id = session["id"].as_str().expect("id").to_owned();
    let pending = kandev.wait_pending(&id, 1).await.remove(0);
    (id, pending)
}

fn at(record: &Value, field: &str) -> DateTime<Utc> {
    record[field]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("{field} is a timestamp: {record}"))
        .with_timezone(&Utc)
}

#[tokio::test]
async fn a_rule_answers_a_matching_question_after_its_delay_and_not_before() {
    let kandev = with_rules(
        "[[agents.mock.auto_answers]]\nname = \"never\"\nmessage = \"no such question\"\nanswer = \"skip\"\n\
         [[agents.mock.auto_answers]]\nname = \"red\"\nquestion_id = \"question_0\"\nprompt = \"(?i)colour\"\noptions = [\"Red\"]\nafter = \"2s\"\n",
    )
    .await;
    let (_, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let rec = kandev
        .wait_clarification_status(pending_id, "answered")
        .await;
    assert_eq!(rec["answered_by"], "rule:red", "{rec}");
    let waited = at(&rec, "settled_at") - at(&rec, "created_at");
    assert!(
        waited >= chrono::Duration::seconds(2),
        "answered after {waited}, before `after`"
    );
    assert_eq!(
        kandev
            .frames()
            .wait_for_elicitation_responses(1, DEADLINE)
            .await,
        [json!({"action": "accept", "content": {"question_0": "Red"}})]
    );
    // Counted once the rule's respond returns, which is after the settlement the test
    // has just seen (the session's consumer writes it): wait for the count.
    let answered = "kandev_auto_answers_total{result=\"answered\"} 1";
    poll_until("the rule's answer counted", DEADLINE, || async {
        let (_, metrics) = kandev.api().get_text("/metrics").await;
        metrics.contains(answered).then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_operator_who_answers_first_wins_over_the_rule() {
    let kandev = with_rules(
        "[[agents.mock.auto_answers]]\nname = \"red\"\nquestion_id = \"question_0\"\noptions = [\"Red\"]\nafter = \"3s\"\n",
    )
    .await;
    let (_, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    let r = kandev
        .respond(pending_id, &json!({"answers": colour("Blue")}))
        .await;
    assert_eq!((r.status, r.body), (200, json!({"status": "answered"})));
    kandev.wait_log("the question was settled first", 1).await;
    let rec = kandev.clarification(pending_id).await;
    assert_eq!(rec["answered_by"], "local", "{rec}");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Blue"])
    );
    assert_eq!(
        kandev.frames().elicitation_responses(),
        [json!({"action": "accept", "content": {"question_0": "Blue"}})]
    );
}

#[tokio::test]
async fn a_rule_whose_answer_does_not_fit_never_answers_and_leaves_the_question_to_the_operator() {
    let kandev = with_rules(
        "[[agents.mock.auto_answers]]\nname = \"purple\"\nquestion_id = \"question_0\"\noptions = [\"Purple\"]\n",
    )
    .await;
    let (_, pending) = demo_waiting(&kandev).await;
    let pending_id = pending["pending_id"].as_str().expect("id");
    kandev
        .wait_log("auto-answer rule cannot answer this question", 1)
        .await;
    assert!(kandev.log().contains("Purple"), "the reason is logged");
    assert_eq!(kandev.clarification(pending_id).await["status"], "pending");
    assert!(kandev.frames().elicitation_responses().is_empty());
    let r = kandev
        .respond(pending_id, &json!({"answers": colour("Red")}))
        .await;
    assert_eq!(r.status, 200, "the operator still can: {r}");
}

#[tokio::test]
async fn a_rule_that_cannot_answer_is_a_one_line_configuration_error_at_start() {
    for (rule, key) in [
        (
            "name = \"r\"\nanswer = \"sometimes\"",
            "agents.mock.auto_answers[0].answer",
        ),
        (
            "name = \"r\"\nanswer = \"skip\"\nafter = \"2h\"",
            "agents.mock.auto_answers[0].after",
        ),
        (
            "name = \"r\"\nanswer = \"skip\"\nmessage = \"(\"",
            "agents.mock.auto_answers[0].message",
        ),
        ("name = \"r\"\nanswer = \"skip\"\nwhen = \"now\"", "when"),
    ] {
        let toml = format!(
            "[agents.mock]\ncommand = [\"mock-agent\"]\n[[agents.mock.auto_answers]]\n{rule}\n"
        );
        let (code, stderr) = refused_start(&toml, &[]).await;
        assert_eq!(code, Some(2), "{stderr}");
        let line = stderr.trim();
        assert_eq!(line.lines().count(), 1, "one line: {stderr}");
        assert!(line.contains(key), "{line}");
    }
}

/// The mock agent with `on_deadline` and a 1 s answer deadline (the `defaults-form`
/// scenario is one of the suite's, in `e2e/scenarios`).
async fn with_deadline(on_deadline: &str) -> Kandev {
    Kandev::start(
        KandevOptions::new()
            .answer_timeout("1s")
            .env("KANDEV_ACP_IDLE_TIMEOUT", "1h")
            .mock_agent_toml(&format!("on_deadline = \"{on_deadline}\"")),
    )
    .await
}

async fn expire(kandev: &Kandev, prompt: &str) -> Value {
    let session = flagged_session(kandev, "Deadline", prompt).await;
    let id = session["id"].as_str().expect("id");
    let pending = kandev.wait_pending(id, 1).await.remove(0);
    kandev
        .wait_clarification_status(pending["pending_id"].as_str().expect("id"), "expired")
        .await
}

#[tokio::test]
async fn on_deadline_defaults_sends_the_schema_defaults() {
    let kandev = with_deadline("defaults").await;
    let rec = expire(&kandev, "/e2e:defaults-form").await;
    assert_eq!(rec["outcome"], "timed_out");
    assert_eq!(
        rec["answered_by"], "deadline:defaults",
        "the history says which applied"
    );
    assert_eq!(
        kandev
            .frames()
            .wait_for_elicitation_responses(1, DEADLINE)
            .await,
        [json!({"action": "accept", "content": {"colour": "blue", "replicas": 2}})]
    );
}

#[tokio::test]
async fn on_deadline_defaults_declines_when_a_required_field_has_no_default() {
    let kandev = with_deadline("defaults").await;
    let rec = expire(&kandev, "/e2e:extended").await;
    assert!(rec["answered_by"].is_null(), "{rec}");
    assert_eq!(
        kandev
            .frames()
            .wait_for_elicitation_responses(1, DEADLINE)
            .await,
        [json!({"action": "decline"})]
    );
}

#[tokio::test]
async fn ac64_on_deadline_decline_still_declines() {
    let kandev = with_deadline("decline").await;
    let rec = expire(&kandev, "/e2e:defaults-form").await;
    assert!(rec["answered_by"].is_null(), "{rec}");
    assert_eq!(
        kandev
            .frames()
            .wait_for_elicitation_responses(1, DEADLINE)
            .await,
        [json!({"action": "decline"})]
    );
}

#[tokio::test]
async fn on_deadline_cancel_cancels() {
    let kandev = with_deadline("cancel").await;
    let rec = expire(&kandev, "/e2e:defaults-form").await;
    assert_eq!(rec["answered_by"], "deadline:cancel");
    assert_eq!(
        kandev
            .frames()
            .wait_for_elicitation_responses(1, DEADLINE)
            .await,
        [json!({"action": "cancel"})]
    );
}
