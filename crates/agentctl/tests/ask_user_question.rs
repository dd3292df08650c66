//! The `ask_user_question_kandev` MCP server (docs/architecture.md §6 F3): reached over real
//! HTTP with the URL and bearer token agentctl gave the agent in `session/new`, its
//! input rules, the wait for `agent.questions.respond`, turn cancel, the deadline, and
//! the `agentctl mcp-stdio` bridge.

mod support;

use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use support::{DEADLINE, Harness, agentctl_bin};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The `mcpServers` entry the agent received in `session/new`.
async fn mcp_server(h: &Harness) -> Value {
    h.log
        .wait_until("session/new", |log| {
            !log.received_requests("session/new").is_empty()
        })
        .await;
    let new = h.log.received_requests("session/new")[0].clone();
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

async fn client(url: &str, token: &str) -> RunningService<RoleClient, ()> {
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

/// A `tools/list` POST to the MCP endpoint with `authorization` (or none); returns the
/// status code.
async fn post_tools_list(url: &str, authorization: Option<&str>) -> u16 {
    let mut request = support::http::client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    support::http::send(request).await.0
}

#[tokio::test]
async fn session_new_lists_the_http_server_and_it_needs_the_token() {
    let h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    assert_eq!(server["type"], "http");
    assert_eq!(server["name"], "kandev");
    let url = server["url"].as_str().expect("url");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(post_tools_list(url, None).await, 401);
    assert_eq!(post_tools_list(url, Some("Bearer wrong")).await, 401);
    // The agent-stream token is not this server's token.
    assert_eq!(
        post_tools_list(url, Some(&format!("Bearer {}", support::TOKEN))).await,
        401
    );

    let mcp = client(url, &token_of(&server)).await;
    let tools = mcp.list_tools(None).await.expect("tools/list");
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask_user_question_kandev"]);
}

#[tokio::test]
async fn each_input_violation_is_a_tool_error_with_a_clear_message() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
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
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call(one_question())).await });

    let requested = h.stream.event("ask_user_question_requested").await;
    let request_id = requested["request_id"]
        .as_str()
        .expect("request_id")
        .to_owned();
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
    assert_eq!(listed["pending"][0]["request_id"], request_id.as_str());
    assert!(
        !pending.is_finished(),
        "the call must wait for the operator"
    );

    let answer = json!({"request_id": request_id, "result": {"answers": [
        {"question_id": "q1", "selected_options": ["SQLite"], "custom_text": ""}], "rejected": false, "reject_reason": ""}});
    assert_eq!(
        h.stream.ok("agent.questions.respond", answer.clone()).await,
        json!({"success": true})
    );
    let result = tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("returned in time")
        .expect("task")
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        text_of(&result),
        json!({"status": "answered", "answers": [{"question_id": "q1", "prompt": "Which database?",
            "selected_option": "SQLite", "custom_text": null}]})
    );
    assert_eq!(
        h.stream.event("ask_user_question_settled").await,
        json!({"event": "ask_user_question_settled", "request_id": request_id, "outcome": "answered"})
    );
    // Exactly once: the second verdict finds nothing.
    let again = h.stream.err("agent.questions.respond", answer).await;
    assert_eq!(again["code"], "NOT_FOUND");
}

#[tokio::test]
async fn a_rejected_bundle_returns_rejected_and_custom_text_comes_back_verbatim() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
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
        let peer = mcp.peer().clone();
        let pending = tokio::spawn(async move { peer.call_tool(call(one_question())).await });
        let requested = h.stream.event("ask_user_question_requested").await;
        h.stream
            .ok(
                "agent.questions.respond",
                json!({"request_id": requested["request_id"], "result": result}),
            )
            .await;
        let got = tokio::time::timeout(DEADLINE, pending)
            .await
            .expect("in time")
            .expect("task")
            .expect("tools/call");
        let got = text_of(&got);
        for (key, value) in expected.as_object().expect("object") {
            assert_eq!(&got[key], value, "{got}");
        }
    }
}

#[tokio::test]
async fn turn_cancel_releases_a_blocked_tool_call() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call(one_question())).await });
    let requested = h.stream.event("ask_user_question_requested").await;
    assert_eq!(
        h.stream.ok("agent.cancel", json!({})).await,
        json!({"success": true})
    );
    let result = tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("released in time")
        .expect("task")
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text_of(&result)["status"], "turn_cancelled");
    assert_eq!(
        h.stream.event("ask_user_question_settled").await,
        json!({"event": "ask_user_question_settled", "request_id": requested["request_id"], "outcome": "turn_cancelled"})
    );
    assert_eq!(
        h.stream.ok("agent.questions.list", json!({})).await,
        json!({"pending": []})
    );
}

#[tokio::test]
async fn an_unanswered_call_times_out_at_its_own_deadline() {
    let mut h = Harness::start_env(
        "plain",
        false,
        &[("KANDEV_ASK_USER_QUESTION_TIMEOUT", "300ms")],
    )
    .await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
    let result = tokio::time::timeout(DEADLINE, mcp.call_tool(call(one_question())))
        .await
        .expect("returned in time")
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text_of(&result)["status"], "timed_out");
    let requested = h.stream.event("ask_user_question_requested").await;
    assert_eq!(
        h.stream.event("ask_user_question_settled").await,
        json!({"event": "ask_user_question_settled", "request_id": requested["request_id"], "outcome": "timed_out"})
    );
}

/// One JSON-RPC line to the bridge, and the next line back with that id.
async fn bridge_rpc(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    message: Value,
) -> Option<Value> {
    let id = message.get("id").cloned();
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .await
        .expect("write");
    let id = id?;
    loop {
        let line = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("bridge answered in time")
            .expect("read")
            .expect("bridge stdout open");
        let frame: Value = serde_json::from_str(&line).expect("JSON line");
        if frame.get("id") == Some(&id) {
            return Some(frame);
        }
    }
}

#[tokio::test]
async fn the_stdio_bridge_relays_to_the_http_server() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mut bridge = tokio::process::Command::new(agentctl_bin())
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
    let init = bridge_rpc(&mut stdin, &mut lines, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        .await
        .expect("answer");
    assert!(init.get("result").is_some(), "{init}");
    bridge_rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let tools = bridge_rpc(
        &mut stdin,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await
    .expect("answer");
    assert_eq!(
        tools["result"]["tools"][0]["name"], "ask_user_question_kandev",
        "{tools}"
    );
    // A call through the bridge reaches agentctl and returns the operator's answer.
    let call_line = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "ask_user_question_kandev", "arguments": one_question()}});
    stdin
        .write_all(format!("{call_line}\n").as_bytes())
        .await
        .expect("write");
    let requested = h.stream.event("ask_user_question_requested").await;
    h.stream
        .ok(
            "agent.questions.respond",
            json!({"request_id": requested["request_id"], "result": {"answers": [
                {"question_id": "q1", "selected_options": ["Postgres"], "custom_text": ""}]}}),
        )
        .await;
    let answer = loop {
        let line = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("in time")
            .expect("read")
            .expect("open");
        let frame: Value = serde_json::from_str(&line).expect("JSON");
        if frame["id"] == 3 {
            break frame;
        }
    };
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

/// agentctl + mock-agent playing `scenario`, with extra agent environment.
async fn mock_session(
    agent_env: &[(&str, &str)],
) -> (support::AgentCtl, support::Stream, support::MockLog) {
    let agentctl = support::AgentCtl::start(&[]);
    let stream = agentctl.connect().await;
    let log = support::MockLog::new();
    let mut payload = support::start_payload("s-1", "plain", true, &log);
    for (key, value) in agent_env {
        payload["agent"]["env"][*key] = json!(value);
    }
    stream.ok("agent.session.start", payload).await;
    (agentctl, stream, log)
}

async fn mock_agent_asks_and_gets_the_answer(agent_env: &[(&str, &str)]) -> Value {
    let (_agentctl, mut stream, log) = mock_session(agent_env).await;
    stream.ok("agent.prompt", json!({"text": "/e2e:ask"})).await;
    let requested = stream.event("ask_user_question_requested").await;
    assert_eq!(
        requested["context"],
        "Choosing the storage for the new service"
    );
    assert_eq!(requested["questions"][0]["id"], "q1");
    stream
        .ok(
            "agent.questions.respond",
            json!({"request_id": requested["request_id"], "result": {"answers": [
                {"question_id": "q1", "selected_options": [], "custom_text": "CockroachDB"}]}}),
        )
        .await;
    let events = stream.events_until("turn_completed").await;
    let texts = support::message_texts(&events);
    let reported = texts
        .iter()
        .find_map(|t| t.strip_prefix("ask_user_question a1 result: "))
        .unwrap_or_else(|| panic!("no tool result reported: {texts:?}"));
    let _ = log;
    serde_json::from_str(reported).expect("JSON")
}

#[tokio::test]
async fn mock_agent_calls_the_tool_over_http() {
    let result = mock_agent_asks_and_gets_the_answer(&[]).await;
    assert_eq!(result["status"], "answered");
    assert_eq!(result["answers"][0]["custom_text"], "CockroachDB");
}

#[tokio::test]
async fn an_agent_without_http_mcp_gets_the_stdio_bridge_and_the_same_answer() {
    let (_agentctl, _stream, log) = mock_session(&[("MOCK_AGENT_NO_HTTP_MCP", "1")]).await;
    log.wait_until("session/new", |log| {
        !log.received_requests("session/new").is_empty()
    })
    .await;
    let server = log.received_requests("session/new")[0]["params"]["mcpServers"][0].clone();
    assert!(server.get("type").is_none(), "{server}");
    assert_eq!(server["args"], json!(["mcp-stdio"]));
    assert_eq!(
        server["command"].as_str().map(std::path::PathBuf::from),
        Some(agentctl_bin().canonicalize().expect("agentctl path"))
    );
    let result = mock_agent_asks_and_gets_the_answer(&[("MOCK_AGENT_NO_HTTP_MCP", "1")]).await;
    assert_eq!(result["status"], "answered");
    assert_eq!(result["answers"][0]["custom_text"], "CockroachDB");
}

#[tokio::test]
async fn an_operator_cancel_returns_the_call_as_cancelled_once() {
    let mut h = Harness::start("plain", false).await;
    let server = mcp_server(&h).await;
    let mcp = client(server["url"].as_str().expect("url"), &token_of(&server)).await;
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call(one_question())).await });
    let requested = h.stream.event("ask_user_question_requested").await;
    let request_id = requested["request_id"]
        .as_str()
        .expect("request_id")
        .to_owned();
    assert_eq!(
        h.stream
            .ok("agent.questions.cancel", json!({"request_id": request_id}))
            .await,
        json!({"success": true})
    );
    let result = tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("returned in time")
        .expect("task")
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text_of(&result)["status"], "operator_cancelled");
    assert_eq!(
        h.stream.event("ask_user_question_settled").await,
        json!({"event": "ask_user_question_settled", "request_id": request_id, "outcome": "operator_cancelled"})
    );
    let again = h
        .stream
        .err("agent.questions.cancel", json!({"request_id": request_id}))
        .await;
    assert_eq!(again["code"], "NOT_FOUND");
}
