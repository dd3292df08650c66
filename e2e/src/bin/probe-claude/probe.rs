//! The §K wire probe, re-runnable against any published bridge version (`just
//! probe-claude VERSION`): the same prompt twice, once with kandev's flag-off
//! `clientCapabilities` and once with flag on — the only difference being
//! `elicitation: {form: {}}` — each to a fresh bridge process over raw ACP stdio, with the
//! fake model asked to use AskUserQuestion. The form is answered with each question's
//! first option. [`verdict`] prints what differed and whether it is what kandev relies on.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kandev_flags::FlagSnapshot;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use kandev_testkit::claude::bridge::{AgentHome, Bridge, agent_env};
use kandev_testkit::claude::fake_api::FakeAnthropic;
use kandev_testkit::claude::model::{Offer, Script};

/// The prompt of both runs (the spec's §K wording).
pub const PROMPT: &str = "use the AskUserQuestion tool right now to ask me to pick a colour.";
/// The agent id whose capabilities are sent (what kandev sends a Claude agent).
pub const AGENT_ID: &str = "claude-acp";
/// More forms than this in one run is a loop (the answer never reached the model).
pub const MAX_ELICITATIONS: usize = 3;
/// How long one run may take.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// The script: a prompt about a colour makes the model call AskUserQuestion.
pub fn script() -> Script {
    Script::new().on(
        "pick a colour",
        "AskUserQuestion",
        json!({"questions": [{"question": "Pick a colour", "header": "Colour", "multiSelect": false,
            "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]}]}),
    )
}

/// What one run saw.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// The bridge's `agentInfo.version`.
    pub agent_version: String,
    /// The CLI's `User-Agent`.
    pub cli: String,
    /// How the first conversation request offered AskUserQuestion.
    pub offered: Option<Offer>,
    /// Every `elicitation/create` frame the bridge sent.
    pub elicitations: Vec<Value>,
    /// What the probe answered to each.
    pub answers: Vec<Value>,
    /// The tool calls the bridge reported (`session/update` `tool_call` titles).
    pub tool_calls: Vec<String>,
    /// The tool results the model got, `tool: text`.
    pub tool_results: Vec<String>,
    /// The agent's text, chunks joined.
    pub text: String,
    /// `session/prompt` requests sent (always 1: the probe never re-prompts).
    pub prompts: usize,
    /// `stopReason` of the prompt, or the error.
    pub stop_reason: String,
    /// Messages requests the model got (side requests such as the session title included).
    pub model_requests: usize,
    /// Requests to anything but `/v1/messages` (`HEAD /api/hello`, …).
    pub other_requests: Vec<String>,
}

/// Why a run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The bridge could not be started or talked to.
    #[error("bridge I/O: {0}")]
    Io(#[from] std::io::Error),
    /// It did not finish in time.
    #[error("no answer to session/prompt within {0:?}")]
    Timeout(Duration),
    /// It ended, answered with an error, or looped.
    #[error("{0}")]
    Protocol(String),
}

/// kandev's `clientCapabilities` for a Claude agent with the flag `on` or off.
pub fn capabilities(on: bool) -> Value {
    let mut flags = FlagSnapshot::default();
    flags.set(kandev_flags::ACP_ELICITATION, on);
    kandev_agentctl::capabilities::client_capabilities(AGENT_ID, &flags)
}

/// The answer the probe gives a form: each question's first option, free text left out.
pub fn first_options(params: &Value) -> Value {
    let mut content = serde_json::Map::new();
    if let Some(props) = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    {
        for (key, prop) in props {
            let first = prop["oneOf"][0]["const"]
                .as_str()
                .or_else(|| prop["enum"][0].as_str())
                .map(|v| json!(v))
                .or_else(|| {
                    prop["items"]["anyOf"][0]["const"]
                        .as_str()
                        .or_else(|| prop["items"]["enum"][0].as_str())
                        .map(|v| json!([v]))
                });
            if let Some(value) = first {
                content.insert(key.clone(), value);
            }
        }
    }
    json!({"action": "accept", "content": content})
}

/// Runs the prompt once against `bridge` with `node`.
pub async fn run(bridge: &Bridge, node: &Path, flag: bool) -> Result<Run, ProbeError> {
    let api = FakeAnthropic::start(script()).await;
    let home = AgentHome::new();
    let mut child = tokio::process::Command::new(node)
        .arg(bridge.entry())
        .env_clear()
        .envs(agent_env(&api.base_url(), &home, node))
        .current_dir(home.work())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| ProbeError::Protocol("no stdin".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| ProbeError::Protocol("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let mut out = Run {
        ..Run::default()
    };
    let conversation = async {
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": capabilities(flag),
            "clientInfo": {"name": "kandev-probe-claude", "version": env!("CARGO_PKG_VERSION")}}}),
        )
        .await?;
        while let Some(line) = lines.next_line().await? {
            let Ok(frame) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let method = frame["method"].as_str();
            match (method, frame.get("id")) {
                (None, Some(id)) => {
                    if let Some(error) = frame.get("error") {
                        return Err(ProbeError::Protocol(format!(
                            "request {id} failed: {error}"
                        )));
                    }
                    let result = &frame["result"];
                    match id.as_i64() {
                        Some(1) => {
                            out.agent_version = result["agentInfo"]["version"]
                                .as_str()
                                .unwrap_or("?")
                                .to_owned();
                            send(
                                &mut stdin,
                                &json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                "params": {"cwd": home.work(), "mcpServers": []}}),
                            )
                            .await?;
                        }
                        Some(2) => {
                            let session = result["sessionId"].clone();
                            out.prompts += 1;
                            send(&mut stdin, &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                                "params": {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]}})).await?;
                        }
                        Some(3) => {
                            out.stop_reason =
                                result["stopReason"].as_str().unwrap_or("?").to_owned();
                            return Ok(());
                        }
                        _ => {}
                    }
                }
                (Some("elicitation/create"), Some(id)) => {
                    if out.elicitations.len() >= MAX_ELICITATIONS {
                        return Err(ProbeError::Protocol(format!(
                            "the bridge keeps asking ({MAX_ELICITATIONS} forms answered)"
                        )));
                    }
                    let answer = first_options(&frame["params"]);
                    out.elicitations.push(frame.clone());
                    out.answers.push(answer.clone());
                    send(
                        &mut stdin,
                        &json!({"jsonrpc": "2.0", "id": id, "result": answer}),
                    )
                    .await?;
                }
                (Some("session/request_permission"), Some(id)) => {
                    let option = frame["params"]["options"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|o| o["kind"] == "allow_once")
                        .map(|o| o["optionId"].clone());
                    let outcome = match option {
                        Some(option) => json!({"outcome": "selected", "optionId": option}),
                        None => json!({"outcome": "cancelled"}),
                    };
                    send(
                        &mut stdin,
                        &json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}}),
                    )
                    .await?;
                }
                (Some(other), Some(id)) => {
                    send(
                        &mut stdin,
                        &json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601, "message": format!("{other} is not offered")}}),
                    )
                    .await?;
                }
                (Some("session/update"), None) => {
                    let update = &frame["params"]["update"];
                    match update["sessionUpdate"].as_str() {
                        Some("agent_message_chunk") => {
                            out.text
                                .push_str(update["content"]["text"].as_str().unwrap_or(""));
                        }
                        Some("tool_call") => {
                            let name = update
                                .pointer("/_meta/claudeCode/toolName")
                                .or_else(|| update.get("title"))
                                .and_then(Value::as_str)
                                .unwrap_or("?");
                            out.tool_calls.push(name.to_owned());
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Err(ProbeError::Protocol(
            "the bridge exited before answering session/prompt".into(),
        ))
    };
    // A run that goes wrong still reports what it saw; the verdict then fails.
    let ended = match tokio::time::timeout(RUN_DEADLINE, conversation).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout(RUN_DEADLINE)),
    };
    if let Err(err) = ended {
        out.stop_reason = format!("none ({err})");
    }
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    for received in api.received() {
        match &received.messages {
            Some((request, _)) => {
                out.model_requests += 1;
                if out.cli.is_empty() {
                    out.cli = received.user_agent.clone().unwrap_or_default();
                }
                if out.offered.is_none() && !request.is_side_request() {
                    out.offered = Some(request.offer("AskUserQuestion"));
                }
                out.tool_results.extend(
                    request
                        .tool_results()
                        .iter()
                        .map(|r| format!("{}: {}", r.tool, r.text)),
                );
            }
            None => out
                .other_requests
                .push(format!("{} {}", received.method, received.path)),
        }
    }
    Ok(out)
}

async fn send(stdin: &mut tokio::process::ChildStdin, frame: &Value) -> Result<(), ProbeError> {
    stdin.write_all(format!("{frame}\n").as_bytes()).await?;
    stdin.flush().await?;
    Ok(())
}

fn offered(offer: Option<Offer>) -> &'static str {
    match offer {
        Some(Offer::Direct) => "yes (in tools)",
        Some(Offer::Deferred) => "yes (deferred, via ToolSearch)",
        Some(Offer::Absent) => "no",
        None => "? (no conversation request)",
    }
}

fn elicitation_summary(run: &Run) -> String {
    match run.elicitations.as_slice() {
        [] => "none".to_owned(),
        [one] => format!(
            "1 (id {}, toolCallId {})",
            one["id"],
            one["params"]["toolCallId"].as_str().unwrap_or("none")
        ),
        many => format!("{} (expected at most 1)", many.len()),
    }
}

fn clip(text: &str, max: usize) -> String {
    let text = text.replace('\n', " ");
    if text.chars().count() <= max {
        text
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// The one-screen verdict of an A/B and whether it passed: flag off, AskUserQuestion is
/// not offered and the model asks in prose; flag on, it is offered, exactly one
/// `elicitation/create` with a `toolCallId` arrives, the answer reaches the model as the
/// tool result, and both runs end `end_turn` on their single `session/prompt`.
pub fn verdict(off: &Run, on: &Run) -> (String, bool) {
    let mut failures = Vec::new();
    if off.offered != Some(Offer::Absent) {
        failures.push("flag off: AskUserQuestion is offered anyway");
    }
    if !off.elicitations.is_empty() {
        failures.push("flag off: the bridge sent elicitation/create");
    }
    if off.text.trim().is_empty() {
        failures.push("flag off: no prose from the agent");
    }
    if !matches!(on.offered, Some(Offer::Direct | Offer::Deferred)) {
        failures.push("flag on: AskUserQuestion is not offered");
    }
    if on.elicitations.len() != 1
        || on.elicitations[0]["params"]["toolCallId"]
            .as_str()
            .is_none()
    {
        failures.push("flag on: not exactly one elicitation/create with a toolCallId");
    }
    let picked = on
        .answers
        .first()
        .and_then(|a| a["content"]["question_0"].as_str())
        .unwrap_or("");
    if picked.is_empty()
        || !on
            .tool_results
            .iter()
            .any(|r| r.starts_with("AskUserQuestion") && r.contains(picked))
    {
        failures.push("flag on: the answer did not reach the model as the AskUserQuestion result");
    }
    for run in [off, on] {
        if run.stop_reason != "end_turn" || run.prompts != 1 {
            failures.push("a run did not end end_turn on its one session/prompt");
            break;
        }
    }
    let row = |label: &str, a: String, b: String| format!("  {label:<28} {a:<34} {b}\n");
    let mut text = format!(
        "claude-agent-acp {} with {} — §K A/B (clientCapabilities differ only in elicitation.form)\n\n",
        on.agent_version,
        if on.cli.is_empty() { "?" } else { &on.cli }
    );
    text.push_str(&row(
        "",
        "flag off (control)".into(),
        "flag on (elicitation.form)".into(),
    ));
    text.push_str(&row(
        "AskUserQuestion offered",
        offered(off.offered).into(),
        offered(on.offered).into(),
    ));
    text.push_str(&row(
        "elicitation/create",
        elicitation_summary(off),
        elicitation_summary(on),
    ));
    let calls = |r: &Run| {
        if r.tool_calls.is_empty() {
            "none".to_owned()
        } else {
            r.tool_calls.join(", ")
        }
    };
    text.push_str(&row("tool calls", calls(off), calls(on)));
    let asked = |r: &Run| {
        if r.elicitations.is_empty() {
            "prose".to_owned()
        } else {
            "structured form".to_owned()
        }
    };
    text.push_str(&row("how the question was asked", asked(off), asked(on)));
    text.push_str(&row(
        "session/prompt requests sent",
        off.prompts.to_string(),
        on.prompts.to_string(),
    ));
    text.push_str(&row(
        "stopReason",
        off.stop_reason.clone(),
        on.stop_reason.clone(),
    ));
    text.push_str(&row(
        "model requests",
        off.model_requests.to_string(),
        on.model_requests.to_string(),
    ));
    let others = |r: &Run| {
        if r.other_requests.is_empty() {
            "none".to_owned()
        } else {
            r.other_requests.join(", ")
        }
    };
    text.push_str(&row("other HTTP requests", others(off), others(on)));
    if let Some(frame) = on.elicitations.first() {
        text.push_str(&format!(
            "\ncaptured elicitation/create (flag on):\n  {}\n",
            clip(&frame["params"].to_string(), 600)
        ));
        text.push_str(&format!("answered: {}\n", on.answers[0]));
    }
    text.push_str(&format!(
        "tool result the model got (flag on): {}\n",
        on.tool_results
            .first()
            .map(|r| clip(r, 200))
            .unwrap_or_else(|| "none".into())
    ));
    text.push_str(&format!(
        "agent text (flag off): {}\n",
        clip(&off.text, 200)
    ));
    text.push_str(&format!("agent text (flag on):  {}\n", clip(&on.text, 200)));
    if failures.is_empty() {
        text.push_str("\nVERDICT: PASS — AskUserQuestion only with elicitation.form; one form per question; the answer continues the same session/prompt.\n");
    } else {
        text.push_str("\nVERDICT: FAIL\n");
        for failure in &failures {
            text.push_str(&format!("  - {failure}\n"));
        }
    }
    (text, failures.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_is_answered_with_first_options_only() {
        let params = json!({"requestedSchema": {"properties": {
            "question_0": {"type": "string", "oneOf": [{"const": "Red"}, {"const": "Blue"}]},
            "question_0_custom": {"type": "string", "title": "Other"},
            "question_1": {"type": "array", "items": {"anyOf": [{"const": "dev"}, {"const": "prod"}]}},
            "target": {"type": "string", "enum": ["staging", "prod"]}}}});
        assert_eq!(
            first_options(&params),
            json!({"action": "accept", "content": {"question_0": "Red", "question_1": ["dev"], "target": "staging"}})
        );
    }

    #[test]
    fn capabilities_differ_only_in_elicitation_form() {
        let mut on = capabilities(true);
        assert_eq!(on["elicitation"], json!({"form": {}}));
        on.as_object_mut().map(|o| o.remove("elicitation"));
        assert_eq!(on, capabilities(false));
    }

    fn passing() -> (Run, Run) {
        let off = Run {
            offered: Some(Offer::Absent),
            text: "I don't have the AskUserQuestion tool".into(),
            prompts: 1,
            stop_reason: "end_turn".into(),
            ..Run::default()
        };
        let on = Run {
            offered: Some(Offer::Direct),
            elicitations: vec![json!({"id": 0, "params": {"toolCallId": "toolu_1"}})],
            answers: vec![json!({"action": "accept", "content": {"question_0": "Red"}})],
            tool_results: vec!["AskUserQuestion: \"Pick a colour\"=\"Red\"".into()],
            prompts: 1,
            stop_reason: "end_turn".into(),
            ..Run::default()
        };
        (off, on)
    }

    #[test]
    fn the_verdict_passes_the_spec_shape_and_names_each_deviation() {
        let (off, on) = passing();
        let (text, ok) = verdict(&off, &on);
        assert!(ok, "{text}");
        assert!(text.contains("VERDICT: PASS"), "{text}");
        assert!(text.lines().count() <= 24, "one screen:\n{text}");

        let (mut off, mut on) = passing();
        off.offered = Some(Offer::Deferred);
        on.tool_results.clear();
        on.stop_reason = "cancelled".into();
        let (text, ok) = verdict(&off, &on);
        assert!(!ok);
        for needle in ["offered anyway", "did not reach the model", "end_turn"] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }
}
