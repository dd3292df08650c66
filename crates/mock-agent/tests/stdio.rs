//! The real `mock-agent` binary driven over its stdin/stdout with raw JSON-RPC
//! lines: no SDK on this side, so what is asserted is the wire itself.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long any single expected frame or exit may take.
const DEADLINE: Duration = Duration::from_secs(15);

/// The spec's §C single-question form, as the `single` scenario sends it.
fn spec_c_single(session_id: &str) -> Value {
    json!({
        "mode": "form",
        "sessionId": session_id,
        "toolCallId": "tool-42",
        "message": "Which database should the new service use?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "question_0": {
                    "type": "string",
                    "title": "Datastore",
                    "oneOf": [
                        { "const": "Postgres", "title": "Postgres", "description": "Relational, already operated by the team." },
                        { "const": "SQLite", "title": "SQLite", "description": "Embedded; no ops burden.",
                          "_meta": { "_claude/askUserQuestionOption": { "preview": "file:./app.db" } } },
                        { "const": "DynamoDB", "title": "DynamoDB" }
                    ]
                },
                "question_0_custom": {
                    "type": "string",
                    "title": "Other",
                    "description": "Type your own answer instead of choosing an option above (optional).",
                    "_meta": { "_askUserQuestionCustomAnswer": { "questionId": "question_0", "isCustomAnswer": true } }
                }
            }
        }
    })
}

/// A running `mock-agent` and everything that crossed its stdio.
struct MockAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
    /// Frames we wrote, in order.
    written: Vec<Value>,
    /// Frames we read, in order.
    read: Vec<Value>,
    /// Frames read while looking for another one, not yet consumed.
    backlog: Vec<Value>,
    next_id: i64,
}

impl MockAgent {
    fn spawn(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log_path = dir.path().join("frames.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mock-agent"))
            .args(args)
            .env("MOCK_AGENT_LOG", &log_path)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("mock-agent starts");
        let stdin = child.stdin.take().expect("stdin piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        Self {
            child,
            stdin: Some(stdin),
            stdout,
            log_path,
            _dir: dir,
            written: Vec::new(),
            read: Vec::new(),
            backlog: Vec::new(),
            next_id: 1,
        }
    }

    async fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to agent");
        stdin.flush().await.expect("flush to agent");
        self.written.push(frame);
    }

    /// Send a request and return its id; the response is read later.
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next frame from stdout, with a deadline.
    async fn read_frame(&mut self) -> Value {
        let line = tokio::time::timeout(DEADLINE, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no frame within {DEADLINE:?}; read so far: {:#?}",
                    self.read
                )
            })
            .expect("read agent stdout")
            .unwrap_or_else(|| panic!("agent closed stdout; read so far: {:#?}", self.read));
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("stdout line is not JSON ({error}): {line}"));
        self.read.push(frame.clone());
        frame
    }

    /// The first frame (backlog first, then stdout) that `wanted` accepts;
    /// frames passed over stay in the backlog.
    async fn expect(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(index);
        }
        let give_up = tokio::time::Instant::now() + DEADLINE;
        loop {
            assert!(
                tokio::time::Instant::now() < give_up,
                "no {what} within {DEADLINE:?}; read: {:#?}",
                self.read
            );
            let frame = self.read_frame().await;
            if wanted(&frame) {
                return frame;
            }
            self.backlog.push(frame);
        }
    }

    async fn response(&mut self, id: i64) -> Value {
        let frame = self
            .expect(&format!("response {id}"), |frame| {
                frame.get("method").is_none() && frame["id"] == id
            })
            .await;
        assert!(frame.get("error").is_none(), "request {id} failed: {frame}");
        frame["result"].clone()
    }

    async fn method(&mut self, method: &str) -> Value {
        self.expect(method, |frame| frame["method"] == method).await
    }

    async fn text(&mut self) -> String {
        let frame = self
            .expect("agent_message_chunk", |frame| {
                frame["method"] == "session/update"
                    && frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            })
            .await;
        frame["params"]["update"]["content"]["text"]
            .as_str()
            .expect("text chunk")
            .to_owned()
    }

    /// initialize with `capabilities`, then session/new; returns the session id.
    async fn start_session(&mut self, capabilities: Value) -> String {
        let id = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await;
        let init = self.response(id).await;
        assert_eq!(init["protocolVersion"], 1);
        assert_eq!(init["agentInfo"]["name"], "mock-agent");
        assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], true);
        let id = self
            .request("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
            .await;
        let session = self.response(id).await;
        session["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned()
    }

    async fn prompt(&mut self, session_id: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    async fn reply(&mut self, request: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": result}))
            .await;
    }

    /// Close stdin and wait for the agent to exit.
    async fn finish(&mut self) -> ExitStatus {
        drop(self.stdin.take());
        self.exit_status().await
    }

    async fn exit_status(&mut self) -> ExitStatus {
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("agent exits in time")
            .expect("wait for agent")
    }

    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log_path)
            .expect("MOCK_AGENT_LOG written")
            .lines()
            .map(|line| serde_json::from_str(line).expect("each log line is JSON"))
            .collect()
    }

    /// The frames of the log that went in direction `dir` (`send` or `recv`), in order.
    fn logged(&self, dir: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|entry| entry["dir"] == dir)
            .map(|mut entry| entry["frame"].take())
            .collect()
    }

    /// How many frames read from the agent call `method`.
    fn sent_count(&self, method: &str) -> usize {
        self.read
            .iter()
            .filter(|frame| frame["method"] == method)
            .count()
    }

    /// A `mock-agent` started with `args`, in a session whose client can show forms.
    async fn form_session(args: &[&str]) -> (Self, String) {
        let mut agent = Self::spawn(args);
        let session = agent.start_session(form_caps()).await;
        (agent, session)
    }

    /// Prompts `text`; returns the prompt's id and the `elicitation/create` it leads to.
    async fn elicited(&mut self, session: &str, text: &str) -> (i64, Value) {
        let prompt = self.prompt(session, text).await;
        let request = self.method("elicitation/create").await;
        (prompt, request)
    }

    /// The next agent message chunk reads `expected`.
    async fn says(&mut self, expected: &str) {
        assert_eq!(self.text().await, expected);
    }

    /// Prompt `prompt` ends with `stop_reason`, then the agent exits cleanly once its
    /// stdin closes.
    async fn ends(&mut self, prompt: i64, stop_reason: &str) {
        assert_eq!(
            self.response(prompt).await,
            json!({"stopReason": stop_reason})
        );
        assert!(self.finish().await.success());
    }
}

fn form_caps() -> Value {
    json!({"_meta": {"terminal_output": true}, "elicitation": {"form": {}}})
}

/// What a scenario reports once its one elicitation `e1` is declined.
const E1_DECLINED: &str = r#"elicitation e1 result: {"action":"decline"}"#;

/// A scenario directory holding one scenario, `<name>.json`, of `steps`.
fn scenario_dir(name: &str, steps: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join(format!("{name}.json")),
        json!({"name": name, "steps": steps}).to_string(),
    )
    .expect("write scenario");
    dir
}

/// `mock-agent` run with `args` and no stdin, to its exit.
async fn run_to_exit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mock-agent"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("runs")
}

#[tokio::test]
async fn single_scenario_sends_the_spec_c_form_and_reports_the_answer_on_the_same_prompt() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, "/e2e:single please").await;
    assert_eq!(request["params"], spec_c_single(&session));
    let answer = json!({"action": "accept", "content": {"question_0": "Postgres"}});
    agent.reply(&request, answer).await;
    agent
        .says(r#"elicitation e1 result: {"action":"accept","content":{"question_0":"Postgres"}}"#)
        .await;
    agent.ends(prompt, "end_turn").await;
    assert_eq!(agent.sent_count("elicitation/create"), 1);
}

#[tokio::test]
async fn demo_with_elicitation_form_asks_pick_a_colour_as_a_form() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let ask = "use the AskUserQuestion tool right now to ask me to pick a colour";
    let (prompt, request) = agent.elicited(&session, ask).await;
    let params = &request["params"];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCallId"], "toolu-ask-colour");
    assert_eq!(params["message"], "Pick a colour");
    let properties = &params["requestedSchema"]["properties"];
    assert_eq!(
        properties["question_0"],
        json!({"type": "string", "title": "Colour", "oneOf": [
            {"const": "Red", "title": "Red"}, {"const": "Blue", "title": "Blue"}
        ]})
    );
    assert_eq!(
        properties["question_0_custom"]["_meta"]["_askUserQuestionCustomAnswer"],
        json!({"questionId": "question_0", "isCustomAnswer": true})
    );
    let answer = json!({"action": "accept", "content": {"question_0": "Red"}});
    agent.reply(&request, answer).await;
    agent.says("You picked Red.").await;
    agent.ends(prompt, "end_turn").await;
    // The AskUserQuestion round trip shows as a tool call that completes.
    let tool_updates: Vec<&Value> = agent
        .read
        .iter()
        .filter(|frame| frame["params"]["update"]["toolCallId"] == "toolu-ask-colour")
        .collect();
    assert_eq!(tool_updates.len(), 2, "{tool_updates:#?}");
    assert_eq!(tool_updates[1]["params"]["update"]["status"], "completed");
}

#[tokio::test]
async fn demo_without_elicitation_form_asks_in_prose_and_never_elicits() {
    let mut agent = MockAgent::spawn(&[]);
    let session = agent
        .start_session(json!({"_meta": {"terminal_output": true}}))
        .await;
    let prompt = agent.prompt(&session, "pick a colour").await;
    agent
        .says(
            "I don't have the AskUserQuestion tool available in this session, so I can't use it. \
             Instead, plainly: Pick a colour — Red or Blue?",
        )
        .await;
    agent.ends(prompt, "end_turn").await;
    assert_eq!(
        agent.sent_count("elicitation/create"),
        0,
        "{:#?}",
        agent.read
    );
}

#[tokio::test]
async fn agent_cancel_sends_cancel_request_naming_the_elicitation() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, "/e2e:agent-cancel").await;
    let cancel = agent.method("$/cancel_request").await;
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    assert!(cancel.get("id").is_none(), "a notification: {cancel}");

    agent.reply(&request, json!({"action": "cancel"})).await;
    agent
        .says(r#"elicitation e1 result: {"action":"cancel"}"#)
        .await;
    agent.ends(prompt, "end_turn").await;
    assert!(
        agent
            .logged("send")
            .iter()
            .any(|frame| frame["method"] == "$/cancel_request"
                && frame["params"]["requestId"] == request["id"])
    );
}

#[tokio::test]
async fn session_cancel_returns_cancelled_and_leaves_the_elicitation_outstanding() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, "/e2e:single").await;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    agent.send(cancel).await;
    assert_eq!(
        agent.response(prompt).await,
        json!({"stopReason": "cancelled"})
    );

    // The client still owes the elicitation its one answer; the agent takes it and
    // keeps serving: a later turn runs normally.
    agent.reply(&request, json!({"action": "cancel"})).await;
    let next = agent.prompt(&session, "/e2e:plain").await;
    agent.ends(next, "end_turn").await;
    assert_eq!(
        agent.sent_count("$/cancel_request"),
        0,
        "no $/cancel_request on session/cancel: {:#?}",
        agent.read
    );
}

#[tokio::test]
async fn two_identical_elicitations_are_in_flight_at_once_and_answered_independently() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, first) = agent.elicited(&session, "/e2e:two-identical").await;
    let second = agent.method("elicitation/create").await;
    assert_ne!(first["id"], second["id"]);
    assert_eq!(first["params"], second["params"]);

    // Answer the second first: the scenario awaits e1 before e2.
    agent.reply(&second, json!({"action": "decline"})).await;
    let answer = json!({"action": "accept", "content": {"question_0": "SQLite"}});
    agent.reply(&first, answer).await;
    agent
        .says(r#"elicitation e1 result: {"action":"accept","content":{"question_0":"SQLite"}}"#)
        .await;
    agent
        .says(r#"elicitation e2 result: {"action":"decline"}"#)
        .await;
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn malformed_sends_a_bare_string_as_params_and_the_log_is_exactly_the_wire() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, "/e2e:malformed").await;
    assert_eq!(request["params"], json!("this is not an elicitation"));
    agent.reply(&request, json!({"action": "decline"})).await;
    agent.says(E1_DECLINED).await;
    agent.ends(prompt, "end_turn").await;

    assert_eq!(
        agent.logged("recv"),
        agent.written,
        "recv frames are what we wrote"
    );
    assert_eq!(
        agent.logged("send"),
        agent.read,
        "send frames are what we read"
    );
    assert_eq!(agent.log().len(), agent.written.len() + agent.read.len());
}

#[tokio::test]
async fn permission_scenario_asks_and_reports_the_outcome() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let prompt = agent.prompt(&session, "/e2e:permission").await;
    let request = agent.method("session/request_permission").await;
    assert_eq!(request["params"]["sessionId"], session.as_str());
    assert_eq!(request["params"]["toolCall"]["toolCallId"], "t1");
    assert_eq!(request["params"]["options"][0]["optionId"], "allow");
    let outcome = json!({"outcome": {"outcome": "selected", "optionId": "allow"}});
    agent.reply(&request, outcome).await;
    agent
        .says(r#"permission t1 result: {"outcome":{"outcome":"selected","optionId":"allow"}}"#)
        .await;
    agent.says("Permission handled.").await;
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn unknown_scenario_is_reported_and_the_turn_ends() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let prompt = agent.prompt(&session, "/e2e:no-such-thing").await;
    agent.says("unknown scenario no-such-thing").await;
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn crash_exits_with_code_3_after_eliciting() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    agent.elicited(&session, "/e2e:crash").await;
    let status = agent.exit_status().await;
    assert_eq!(status.code(), Some(3));
}

#[tokio::test]
async fn scenario_dir_and_default_scenario_flags_are_honoured() {
    let dir = scenario_dir(
        "custom",
        json!([
            {"if_capability": "elicitation.form", "then": [{"text": "form in $SESSION_ID"}], "else": [{"text": "no form"}]},
            {"end_turn": "max_tokens"}
        ]),
    );
    let dir_arg = dir.path().to_str().expect("utf-8 path");
    let args = ["--scenario-dir", dir_arg, "--scenario", "custom"];
    let (mut agent, session) = MockAgent::form_session(&args).await;
    let prompt = agent.prompt(&session, "anything").await;
    agent.says(&format!("form in {session}")).await;
    agent.ends(prompt, "max_tokens").await;
}

#[tokio::test]
async fn an_unknown_default_scenario_is_refused_at_start() {
    let output = run_to_exit(&["--scenario", "nope"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "stdout is the protocol only");
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown scenario nope"));
}

#[tokio::test]
async fn list_scenarios_names_every_embedded_scenario() {
    let output = run_to_exit(&["--list-scenarios"]).await;
    assert!(output.status.success());
    let listing = String::from_utf8_lossy(&output.stdout);
    for name in [
        "demo",
        "plain",
        "single",
        "multi",
        "agent-cancel",
        "crash",
        "permission",
    ] {
        assert!(
            listing
                .lines()
                .any(|line| line.starts_with(&format!("{name} "))),
            "{name} missing from:\n{listing}"
        );
    }
}

/// The bridge forms the elicitation crate captured from claude-agent-acp 0.65.0,
/// with the session id the agent will use.
fn captured_form(name: &str, session_id: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../elicitation/tests/fixtures/bridge")
        .join(format!("v0.65.0-{name}.json"));
    let mut form: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("captured form parses");
    form["sessionId"] = json!(session_id);
    form
}

/// Runs `/e2e:<scenario>` in a fresh form session, hands `check` the params of its
/// elicitation and the session id, declines it and sees the turn end; `reports` is
/// what the agent must say about the decline, if anything.
async fn declined_scenario(scenario: &str, reports: Option<&str>, check: impl Fn(&Value, &str)) {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, &format!("/e2e:{scenario}")).await;
    check(&request["params"], &session);
    agent.reply(&request, json!({"action": "decline"})).await;
    if let Some(report) = reports {
        assert_eq!(agent.text().await, report, "scenario {scenario}");
    }
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn spec_c_scenarios_send_the_captured_bridge_forms_byte_for_byte() {
    for (scenario, captured) in [
        ("single", "single"),
        ("multi", "mixed"),
        ("mcp-apikey", "mcp"),
        ("refusal", "refusal"),
    ] {
        declined_scenario(scenario, None, |params, session| {
            // Serialized, so key order counts too (serde_json keeps it in this workspace).
            assert_eq!(
                params.to_string(),
                captured_form(captured, session).to_string(),
                "scenario {scenario}"
            );
        })
        .await;
    }
}

#[tokio::test]
async fn unsupported_shape_scenarios_send_what_their_names_say() {
    /// Checks the params of the scenario's elicitation, given the session id.
    type Check = fn(&Value, &str);
    let cases: [(&str, Check); 4] = [
        ("url-mode", |params, session| {
            assert_eq!(params["mode"], "url");
            assert_eq!(params["sessionId"], session);
            assert!(
                params["url"]
                    .as_str()
                    .is_some_and(|url| url.starts_with("https://"))
            );
        }),
        ("request-scope", |params, _| {
            assert_eq!(params["mode"], "form");
            assert!(params.get("sessionId").is_none());
            assert_eq!(params["requestId"], "req-1");
        }),
        ("no-questions", |params, session| {
            assert_eq!(params["sessionId"], session);
            assert_eq!(params["requestedSchema"]["properties"], json!({}));
        }),
        ("extended", |params, session| {
            assert_eq!(params["sessionId"], session);
            let schema = &params["requestedSchema"];
            assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
            assert_eq!(schema["properties"]["replicas"]["type"], "integer");
            assert_eq!(schema["properties"]["replicas"]["minimum"], 1);
            assert_eq!(schema["properties"]["replicas"]["maximum"], 10);
            assert_eq!(schema["properties"]["ratio"]["type"], "number");
            assert_eq!(schema["required"], json!(["replicas"]));
        }),
    ];
    for (scenario, check) in cases {
        declined_scenario(scenario, Some(E1_DECLINED), check).await;
    }
}

#[tokio::test]
async fn an_error_answer_is_reported_as_error_json() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let (prompt, request) = agent.elicited(&session, "/e2e:single").await;
    let error = json!({"code": -32601, "message": "Method not found"});
    agent
        .send(json!({"jsonrpc": "2.0", "id": request["id"].clone(), "error": error}))
        .await;
    agent
        .says(r#"elicitation e1 result: {"error":{"code":-32601,"message":"Method not found"}}"#)
        .await;
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn elicit_raw_sends_any_json_as_params_exactly() {
    let raws = [
        json!(["an", "array"]),
        json!(7),
        json!(null),
        json!(true),
        json!({}),
    ];
    let steps: Vec<Value> = raws
        .iter()
        .enumerate()
        .map(|(index, params)| json!({"elicit_raw": {"id": format!("r{index}"), "params": params}}))
        .collect();
    let dir = scenario_dir("raws", Value::Array(steps));
    let dir_arg = dir.path().to_str().expect("utf-8 path");
    let (mut agent, session) = MockAgent::form_session(&["--scenario-dir", dir_arg]).await;
    let prompt = agent.prompt(&session, "/e2e:raws").await;
    for raw in &raws {
        let request = agent.method("elicitation/create").await;
        let params = request
            .as_object()
            .and_then(|frame| frame.get("params"))
            .unwrap_or_else(|| panic!("params member present, even when null: {request}"));
        assert_eq!(params, raw);
    }
    agent.ends(prompt, "end_turn").await;
    let logged: Vec<Value> = agent
        .logged("send")
        .into_iter()
        .filter(|frame| frame["method"] == "elicitation/create")
        .map(|frame| frame["params"].clone())
        .collect();
    assert_eq!(logged, raws.to_vec());
}

#[tokio::test]
async fn ask_without_an_mcp_server_reports_the_problem_and_the_turn_ends() {
    let (mut agent, session) = MockAgent::form_session(&[]).await;
    let prompt = agent.prompt(&session, "/e2e:ask").await;
    agent.says("I need a decision before I go on.").await;
    agent
        .says(r#"ask_user_question a1 result: {"error":"no MCP server was given in session/new"}"#)
        .await;
    agent.says("Done.").await;
    agent.ends(prompt, "end_turn").await;
}

#[tokio::test]
async fn no_http_mcp_is_not_advertised_when_asked() {
    let mut agent = MockAgent::spawn(&["--no-http-mcp"]);
    let id = agent
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let init = agent.response(id).await;
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], false);
    assert!(agent.finish().await.success());
}
