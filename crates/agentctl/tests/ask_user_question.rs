//! The `ask_user_question_kandev` MCP server (docs/architecture.md §6 F3): reached over real
//! HTTP with the URL and bearer token agentctl gave the agent in `session/new`, its
//! input rules, the wait for `agent.questions.respond`, turn cancel, the deadline, and
//! the `agentctl mcp-stdio` bridge.

use std::process::Stdio;
use std::time::Duration;

use kandev_testkit::agentctl::{AgentCtl, Harness, TOKEN, message_texts};
use kandev_testkit::{DEADLINE, bins};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinHandle;

/// The `mcpServers` entry the agent received in `session/new`.
async fn mcp_server(h: &Harness) -> Value {
    let new = h.log.wait_for_received("session/new").await;
    let servers = new["params"]["mcpServers"].as_array().expect("mcpServers");
    assert_eq!(servers.len(), 1, "{servers:?}");
    servers[0].clone()
}

fn token_of(server: &Value) -> String {
    server["headers"][0]["value"]
        .as_str()
        .and_then(|v| v.strip_prefix("Bearer "))
        .expect("bearer header")
        .to_owned()
}

type Mcp = RunningService<RoleClient, ()>;

async fn client(url: &str, token: &str) -> Mcp {
    // rmcp's HTTP client is reqwest, built without a rustls provider of its own.
    kandev_tls::install_process_provider();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned()),
    );
    tokio::time::timeout(DEADLINE, ().serve(transport))
        .await
        .expect("MCP initialize in time")
        .expect("MCP initialize")
}

/// A `plain` session (flag off) on agentctl with `env`, and an MCP client of the server
/// its agent was given.
async fn with_mcp(env: &[(&str, &str)]) -> (Harness, Mcp) {
    let h = Harness::start_env("plain", false, env).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
    (h, mcp)
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("object expected, got {other}"),
    }
}

fn call(arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("ask_user_question_kandev").with_arguments(args(arguments))
}

fn text_of(result: &CallToolResult) -> Value {
    let block = serde_json::to_value(&result.content[0]).expect("content");
    serde_json::from_str(block["text"].as_str().expect("text content")).expect("JSON text")
}

fn one_question() -> Value {
    json!({"questions": [{"prompt": "Which database?", "title": "Datastore",
        "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite"}]}],
        "context": "Setting up storage"})
}

type Call = JoinHandle<Result<CallToolResult, ServiceError>>;

/// Calls the tool with [`one_question`] in the background and waits for its
/// `ask_user_question_requested`; returns the call in flight and the event's payload.
async fn ask(h: &mut Harness, mcp: &Mcp) -> (Call, Value) {
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call(one_question())).await });
    let requested = h.stream.event("ask_user_question_requested").await;
    (pending, requested)
}

/// The result of a call in flight, once it returns (within [`DEADLINE`]).
async fn returned(pending: Call) -> CallToolResult {
    tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("returned in time")
        .expect("task")
        .expect("tools/call")
}

/// The next `ask_user_question_settled`, which settles `request_id` with `outcome`.
async fn question_settled(h: &mut Harness, request_id: &Value, outcome: &str) -> Value {
    let settled = h.stream.event("ask_user_question_settled").await;
    assert_eq!(
        (&settled["request_id"], &settled["outcome"]),
        (request_id, &json!(outcome)),
        "{settled}"
    );
    settled
}

/// The call ends as a tool error with `status` = `outcome`, and its
/// `ask_user_question_settled` says the same, naming no operator.
async fn ends_as(h: &mut Harness, result: CallToolResult, request_id: &Value, outcome: &str) {
    assert_eq!(result.is_error, Some(true), "{outcome}");
    assert_eq!(text_of(&result)["status"], outcome);
    assert_eq!(
        question_settled(h, request_id, outcome).await,
        json!({"event": "ask_user_question_settled", "request_id": request_id, "outcome": outcome})
    );
}

/// A `tools/list` POST to the MCP endpoint with `authorization` (or none); returns the
/// status code.
async fn post_tools_list(url: &str, authorization: Option<&str>) -> u16 {
    let mut request = kandev_testkit::http::client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("an HTTP response");
    response.status().as_u16()
}

#[tokio::test]
async fn session_new_lists_the_http_server_and_it_needs_the_token() {
    let h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    assert_eq!(server["type"], "http");
    assert_eq!(server["name"], "kandev");
    let url = server["url"].as_str().expect("url");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // The agent-stream token is not this server's token.
    let stream_token = format!("Bearer {TOKEN}");
    for authorization in [None, Some("Bearer wrong"), Some(stream_token.as_str())] {
        let status = post_tools_list(url, authorization).await;
        assert_eq!(status, 401, "{authorization:?}");
    }

    let mcp = client(url, &token_of(&server)).await;
    let tools = mcp.list_tools(None).await.expect("tools/list");
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask_user_question_kandev"]);
}

#[tokio::test]
async fn each_input_violation_is_a_tool_error_with_a_clear_message() {
    let (mut h, mcp) = with_mcp(&[]).await;
    let q = |prompt: &str, n: usize| json!({"prompt": prompt, "options": (0..n).map(|i| json!({"label": format!("o{i}")})).collect::<Vec<_>>()});
    let cases = [
        (json!({}), "`questions` is required"),
        (json!({"questions": []}), "1 to 4 questions"),
        (
            json!({"questions": [q("a", 2), q("b", 2), q("c", 2), q("d", 2), q("e", 2)]}),
            "got 5",
        ),
        (json!({"questions": [q("a", 1)]}), "2 to 6 options; got 1"),
        (json!({"questions": [q("a", 7)]}), "2 to 6 options; got 7"),
        (json!({"questions": [q("", 2)]}), "prompt is required"),
    ];
    for (arguments, expected) in cases {
        let result = mcp
            .call_tool(call(arguments.clone()))
            .await
            .expect("tools/call");
        assert_eq!(result.is_error, Some(true), "{arguments}");
        let error = text_of(&result)["error"]
            .as_str()
            .expect("error")
            .to_owned();
        assert!(
            error.contains(expected),
            "{arguments}: {error:?} should say {expected:?}"
        );
    }
    // Nothing was announced for a refused call.
    assert_eq!(
        h.stream.ok("agent.questions.list", json!({})).await,
        json!({"pending": []})
    );
    assert!(
        h.stream
            .drain_now()
            .iter()
            .all(|f| f["payload"]["event"] != "ask_user_question_requested")
    );
}

#[tokio::test]
async fn a_call_waits_for_agent_questions_respond_and_returns_the_answer_once() {
    let (mut h, mcp) = with_mcp(&[]).await;
    let (pending, requested) = ask(&mut h, &mcp).await;
    let request_id = &requested["request_id"];
    assert!(request_id.is_string(), "{requested}");
    assert_eq!(requested["acp_session_id"], h.started["acp_session_id"]);
    assert_eq!(requested["context"], "Setting up storage");
    assert_eq!(
        requested["questions"],
        json!([{"id": "q1", "kind": "single_select", "title": "Datastore", "prompt": "Which database?",
            "options": [{"id": "Postgres", "label": "Postgres", "description": "relational"},
                        {"id": "SQLite", "label": "SQLite", "description": null}],
            "custom_answer": null, "required": true, "default": null, "constraints": {"max_length": 2000}}])
    );
    let listed = h.stream.ok("agent.questions.list", json!({})).await;
    assert_eq!(&listed["pending"][0]["request_id"], request_id);
    assert!(
        !pending.is_finished(),
        "the call must wait for the operator"
    );

    let chosen = json!({"answers": [
        {"question_id": "q1", "selected_options": ["SQLite"], "custom_text": ""}], "rejected": false, "reject_reason": ""});
    let answer = json!({"request_ids": [request_id], "result": chosen, "answered_by": "alice"});
    assert_eq!(
        h.stream.ok("agent.questions.respond", answer.clone()).await,
        json!({"success": true})
    );
    let result = returned(pending).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        text_of(&result),
        json!({"status": "answered", "answers": [{"question_id": "q1", "prompt": "Which database?",
            "selected_option": "SQLite", "custom_text": null}]})
    );
    // The settlement echoes the answer and who gave it: the backend writes the record from it.
    let settled = question_settled(&mut h, request_id, "answered").await;
    assert_eq!(
        (&settled["answer"], &settled["answered_by"]),
        (&chosen, &json!("alice"))
    );
    // Exactly once: the second verdict finds nothing.
    let again = h.stream.err("agent.questions.respond", answer).await;
    assert_eq!(again["code"], "NOT_FOUND");
}

#[tokio::test]
async fn one_respond_returns_every_call_it_names_and_a_racing_second_returns_none() {
    let (mut h, mcp) = with_mcp(&[]).await;
    let (first, one) = ask(&mut h, &mcp).await;
    let (second, two) = ask(&mut h, &mcp).await;
    let ids = json!([one["request_id"], two["request_id"], "never-asked"]);
    let result = json!({"answers": [
        {"question_id": "q1", "selected_options": ["Postgres"], "custom_text": ""}], "rejected": false, "reject_reason": ""});
    let by = |who: &str| json!({"request_ids": ids, "result": result, "answered_by": who});
    // Two operators at once: agentctl takes the named calls in one step, so one verb
    // returns both and the other finds none.
    let (a, b) = tokio::join!(
        h.stream.request("agent.questions.respond", by("alice")),
        h.stream.request("agent.questions.respond", by("bob"))
    );
    let (won, lost, winner) = if a["type"] == "response" {
        (&a, &b, "alice")
    } else {
        (&b, &a, "bob")
    };
    assert_eq!(won["payload"], json!({"success": true}), "{won}");
    assert_eq!(
        (&lost["type"], &lost["payload"]["code"]),
        (&json!("error"), &json!("NOT_FOUND")),
        "{lost}"
    );
    for (call, requested) in [(first, &one), (second, &two)] {
        let got = text_of(&returned(call).await);
        assert_eq!(got["answers"][0]["selected_option"], "Postgres");
        let settled = question_settled(&mut h, &requested["request_id"], "answered").await;
        assert_eq!(settled["answered_by"], winner);
        assert_eq!(
            settled["returned_together"],
            json!([one["request_id"], two["request_id"]]),
            "each settlement names every call the verb returned"
        );
    }
}

#[tokio::test]
async fn a_rejected_bundle_returns_rejected_and_custom_text_comes_back_verbatim() {
    let (mut h, mcp) = with_mcp(&[]).await;
    for (result, expected) in [
        (
            json!({"answers": [], "rejected": true, "reject_reason": "skipped"}),
            json!({"status": "rejected", "reason": "skipped"}),
        ),
        (
            json!({"answers": [{"question_id": "q1", "selected_options": [], "custom_text": "CockroachDB"}], "rejected": false, "reject_reason": ""}),
            json!({"status": "answered", "answers": [{"question_id": "q1", "prompt": "Which database?", "selected_option": null, "custom_text": "CockroachDB"}]}),
        ),
    ] {
        let (pending, requested) = ask(&mut h, &mcp).await;
        h.stream
            .ok(
                "agent.questions.respond",
                json!({"request_ids": [requested["request_id"]], "result": result}),
            )
            .await;
        let got = text_of(&returned(pending).await);
        for (key, value) in expected.as_object().expect("object") {
            assert_eq!(&got[key], value, "{got}");
        }
    }
}

#[tokio::test]
async fn turn_cancel_releases_a_blocked_tool_call() {
    let (mut h, mcp) = with_mcp(&[]).await;
    let (pending, requested) = ask(&mut h, &mcp).await;
    assert_eq!(
        h.stream.ok("agent.cancel", json!({})).await,
        json!({"success": true})
    );
    let result = returned(pending).await;
    ends_as(&mut h, result, &requested["request_id"], "turn_cancelled").await;
    assert_eq!(
        h.stream.ok("agent.questions.list", json!({})).await,
        json!({"pending": []})
    );
}

#[tokio::test]
async fn an_unanswered_call_times_out_at_its_own_deadline() {
    let env = [("KANDEV_ASK_USER_QUESTION_TIMEOUT", "300ms")];
    let (mut h, mcp) = with_mcp(&env).await;
    let result = tokio::time::timeout(DEADLINE, mcp.call_tool(call(one_question())))
        .await
        .expect("returned in time")
        .expect("tools/call");
    let requested = h.stream.event("ask_user_question_requested").await;
    ends_as(&mut h, result, &requested["request_id"], "timed_out").await;
}

type BridgeLines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// The next line from the bridge that carries JSON-RPC id `id`.
async fn bridge_answer(lines: &mut BridgeLines, id: &Value) -> Value {
    loop {
        let line = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("bridge answered in time")
            .expect("read")
            .expect("bridge stdout open");
        let frame: Value = serde_json::from_str(&line).expect("JSON line");
        if frame.get("id") == Some(id) {
            return frame;
        }
    }
}

/// Writes one JSON-RPC line to the bridge.
async fn bridge_send(stdin: &mut tokio::process::ChildStdin, message: &Value) {
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .await
        .expect("write");
}

#[tokio::test]
async fn the_stdio_bridge_relays_to_the_http_server() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mut bridge = tokio::process::Command::new(bins::agentctl())
        .arg("mcp-stdio")
        .env("KANDEV_MCP_URL", server["url"].as_str().expect("url"))
        .env("KANDEV_MCP_TOKEN", token_of(&server))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("agentctl mcp-stdio");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut lines = BufReader::new(bridge.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    bridge_send(&mut stdin, &init).await;
    let init = bridge_answer(&mut lines, &json!(1)).await;
    assert!(init.get("result").is_some(), "{init}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    bridge_send(&mut stdin, &initialized).await;
    bridge_send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let tools = bridge_answer(&mut lines, &json!(2)).await;
    assert_eq!(
        tools["result"]["tools"][0]["name"], "ask_user_question_kandev",
        "{tools}"
    );
    // A call through the bridge reaches agentctl and returns the operator's answer.
    let call_line = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "ask_user_question_kandev", "arguments": one_question()}});
    bridge_send(&mut stdin, &call_line).await;
    let requested = h.stream.event("ask_user_question_requested").await;
    h.stream
        .ok(
            "agent.questions.respond",
            json!({"request_ids": [requested["request_id"]], "result": {"answers": [
                {"question_id": "q1", "selected_options": ["Postgres"], "custom_text": ""}]}}),
        )
        .await;
    let answer = bridge_answer(&mut lines, &json!(3)).await;
    let text: Value = serde_json::from_str(
        answer["result"]["content"][0]["text"]
            .as_str()
            .expect("text"),
    )
    .expect("JSON text");
    assert_eq!(text["answers"][0]["selected_option"], "Postgres");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), bridge.wait())
        .await
        .expect("bridge exits when stdin closes")
        .expect("status");
    assert!(status.success(), "{status}");
}

/// agentctl + mock-agent playing `plain` (flag on), with extra agent environment.
async fn mock_session(agent_env: &[(&str, &str)]) -> Harness {
    Harness::start_on(AgentCtl::start(&[]), "plain", true, |payload| {
        for (key, value) in agent_env {
            payload["agent"]["env"][*key] = json!(value);
        }
    })
    .await
}

/// The mock agent's `/e2e:ask` calls the tool; answers it with custom text; returns the
/// tool result the agent reported.
async fn mock_agent_asks_and_gets_the_answer(h: &mut Harness) -> Value {
    h.prompt("/e2e:ask").await;
    let requested = h.stream.event("ask_user_question_requested").await;
    assert_eq!(
        requested["context"],
        "Choosing the storage for the new service"
    );
    assert_eq!(requested["questions"][0]["id"], "q1");
    h.stream
        .ok(
            "agent.questions.respond",
            json!({"request_ids": [requested["request_id"]], "result": {"answers": [
                {"question_id": "q1", "selected_options": [], "custom_text": "CockroachDB"}]}}),
        )
        .await;
    let events = h.stream.events_until("turn_completed").await;
    // agentctl sends a burst of text as one chunk: the report may run on into the next
    // line of text, so the result is the first JSON value after its prefix.
    let texts = message_texts(&events).concat();
    let reported = texts
        .split_once("ask_user_question a1 result: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no tool result reported: {texts:?}"));
    let result: Value = serde_json::Deserializer::from_str(reported)
        .into_iter()
        .next()
        .expect("a value")
        .expect("JSON");
    assert_eq!(result["status"], "answered");
    assert_eq!(result["answers"][0]["custom_text"], "CockroachDB");
    result
}

#[tokio::test]
async fn mock_agent_calls_the_tool_over_http() {
    let mut h = mock_session(&[]).await;
    mock_agent_asks_and_gets_the_answer(&mut h).await;
}

#[tokio::test]
async fn an_agent_without_http_mcp_gets_the_stdio_bridge_and_the_same_answer() {
    let mut h = mock_session(&[("MOCK_AGENT_NO_HTTP_MCP", "1")]).await;
    let new = h.log.wait_for_received("session/new").await;
    let server = &new["params"]["mcpServers"][0];
    assert!(server.get("type").is_none(), "{server}");
    assert_eq!(server["args"], json!(["mcp-stdio"]));
    assert_eq!(
        server["command"].as_str().map(std::path::PathBuf::from),
        Some(bins::agentctl().canonicalize().expect("agentctl path"))
    );
    mock_agent_asks_and_gets_the_answer(&mut h).await;
}

#[tokio::test]
async fn an_operator_cancel_returns_the_call_as_cancelled_once() {
    let (mut h, mcp) = with_mcp(&[]).await;
    let (pending, requested) = ask(&mut h, &mcp).await;
    let cancel = json!({"request_ids": [requested["request_id"]], "cancelled_by": "bob"});
    assert_eq!(
        h.stream.ok("agent.questions.cancel", cancel.clone()).await,
        json!({"success": true})
    );
    let result = returned(pending).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text_of(&result)["status"], "operator_cancelled");
    let settled = question_settled(&mut h, &requested["request_id"], "operator_cancelled").await;
    assert_eq!(settled["answered_by"], "bob", "who cancelled is echoed");
    let again = h.stream.err("agent.questions.cancel", cancel).await;
    assert_eq!(again["code"], "NOT_FOUND");
}
