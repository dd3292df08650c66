//! The `agentctl` command line: refusing bad configurations, and the
//! `elicitation map` / `elicitation respond` debugging subcommands.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use kandev_testkit::agentctl::{AgentCtl, Stream, TOKEN};
use kandev_testkit::bins;
use serde_json::{Value, json};

fn agentctl(args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    let mut command = Command::new(bins::agentctl());
    command
        .args(args)
        .env_remove("AGENTCTL_TOKEN")
        .env_remove("AGENTCTL_TOKEN_FILE")
        .env_remove("KANDEV_ELICITATION_ANSWER_TIMEOUT")
        .env_remove("KANDEV_ACP_IDLE_TIMEOUT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn agentctl");
    // A process that exits before reading stdin (a refused configuration) closes the pipe.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    child.wait_with_output().expect("agentctl finishes")
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

const SINGLE: &str = r#"{
  "mode": "form", "sessionId": "sess-1", "toolCallId": "tool-42",
  "message": "Which database should the new service use?",
  "requestedSchema": {"type": "object", "properties": {
    "question_0": {"type": "string", "title": "Datastore", "oneOf": [
      {"const": "Postgres", "title": "Postgres", "description": "Relational, already operated by the team."},
      {"const": "SQLite", "title": "SQLite", "description": "Embedded; no ops burden."},
      {"const": "DynamoDB", "title": "DynamoDB"}]},
    "question_0_custom": {"type": "string", "title": "Other",
      "description": "Type your own answer instead of choosing an option above (optional).",
      "_meta": {"_askUserQuestionCustomAnswer": {"questionId": "question_0", "isCustomAnswer": true}}}}}
}"#;

#[test]
fn serve_refuses_to_start_without_a_token() {
    let output = agentctl(&["serve", "--listen", "127.0.0.1:0"], &[], "");
    assert_eq!(output.status.code(), Some(2));
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "one clear line: {lines:?}");
    assert!(
        lines[0].contains("AGENTCTL_TOKEN") && lines[0].contains("--insecure-no-token"),
        "{lines:?}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn serve_refuses_an_answer_timeout_not_below_the_idle_timeout() {
    for (answer, idle) in [("1h", "1h"), ("2s", "1s")] {
        let env = [
            ("AGENTCTL_TOKEN", "t"),
            ("KANDEV_ELICITATION_ANSWER_TIMEOUT", answer),
            ("KANDEV_ACP_IDLE_TIMEOUT", idle),
        ];
        let output = agentctl(&["serve", "--listen", "127.0.0.1:0"], &env, "");
        assert_eq!(output.status.code(), Some(2), "{answer} vs {idle}");
        let lines = stderr_lines(&output);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("KANDEV_ELICITATION_ANSWER_TIMEOUT")
                && lines[0].contains("KANDEV_ACP_IDLE_TIMEOUT")
        );
    }
    // The default answer timeout against a shorter idle timeout is refused too.
    let output = agentctl(
        &["serve"],
        &[("AGENTCTL_TOKEN", "t"), ("KANDEV_ACP_IDLE_TIMEOUT", "30m")],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn serve_refuses_an_unparseable_duration() {
    let env = [
        ("AGENTCTL_TOKEN", "t"),
        ("KANDEV_ACP_IDLE_TIMEOUT", "an hour"),
    ];
    let output = agentctl(&["serve", "--listen", "127.0.0.1:0"], &env, "");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_lines(&output)[0].contains("KANDEV_ACP_IDLE_TIMEOUT"));
}

#[tokio::test]
async fn insecure_no_token_serves_without_authentication() {
    let agentctl = AgentCtl::start_with(&[("AGENTCTL_TOKEN", "")], &["--insecure-no-token"]);
    let stream = Stream::connect(&agentctl.url(), None)
        .await
        .expect("no token needed");
    let refused = stream.err("agent.elicitations.list", json!({})).await;
    assert_eq!(refused["code"], "BAD_REQUEST", "unbound, but served");
}

/// One thread by default (the local executor starts an agentctl per session); a host
/// serving many sessions may give more; zero threads is refused.
#[tokio::test]
async fn threads_runs_the_sessions_on_more_threads_and_zero_is_refused() {
    let served = AgentCtl::start_with(&[], &["--threads", "2"]);
    let stream = Stream::connect(&served.url(), Some(TOKEN))
        .await
        .expect("served on two threads");
    let refused = stream.err("agent.elicitations.list", json!({})).await;
    assert_eq!(refused["code"], "BAD_REQUEST", "unbound, but served");

    let output = agentctl(&["serve", "--threads", "0"], &[("AGENTCTL_TOKEN", "t")], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_lines(&output)[0].contains("--threads"), "{output:?}");
}

/// The token from a file (a systemd credential), whitespace around it ignored; it wins
/// over `AGENTCTL_TOKEN`.
#[tokio::test]
async fn token_file_holds_the_stream_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("agentctl-token");
    std::fs::write(&file, "from-the-file\n").expect("write");
    let path = file.display().to_string();
    let served = AgentCtl::start_with(&[], &["--token-file", &path]);
    assert!(
        Stream::connect(&served.url(), Some("from-the-file"))
            .await
            .is_ok()
    );
    assert!(
        Stream::connect(&served.url(), Some(TOKEN)).await.is_err(),
        "the file wins over AGENTCTL_TOKEN"
    );
    drop(served);

    std::fs::write(&file, "  \n").expect("write");
    let output = agentctl(&["serve", "--token-file", &path], &[], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_lines(&output)[0].contains("is empty"), "{output:?}");
    let missing = dir.path().join("missing").display().to_string();
    let output = agentctl(&["serve"], &[("AGENTCTL_TOKEN_FILE", &missing)], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_lines(&output)[0].contains("cannot read"),
        "{output:?}"
    );
}

#[test]
fn elicitation_map_prints_the_questions() {
    let output = agentctl(&["elicitation", "map"], &[], SINGLE);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mapped = stdout_json(&output);
    assert_eq!(mapped["session_id"], "sess-1");
    assert_eq!(mapped["tool_call_id"], "tool-42");
    let questions = mapped["questions"].as_array().expect("questions");
    assert_eq!(questions.len(), 1, "the companion is no question");
    assert_eq!(questions[0]["id"], "question_0");
    assert_eq!(questions[0]["kind"], "single_select");
    assert_eq!(questions[0]["custom_answer"]["key"], "question_0_custom");
    let option_ids: Vec<&str> = questions[0]["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert_eq!(option_ids, ["Postgres", "SQLite", "DynamoDB"]);
}

#[test]
fn elicitation_map_prints_the_decline_reason() {
    for (params, reason) in [
        (
            r#"{"mode": "url", "sessionId": "s", "message": "m", "url": "https://x"}"#,
            "not_form_mode",
        ),
        (
            r#"{"mode": "form", "requestId": "r", "message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}"#,
            "request_scope",
        ),
        (
            r#"{"mode": "form", "sessionId": "s", "message": "m", "requestedSchema": {"type": "object", "properties": {}}}"#,
            "no_questions",
        ),
        ("not json at all", "malformed"),
    ] {
        let output = agentctl(&["elicitation", "map"], &[], params);
        assert!(output.status.success());
        let decline = stdout_json(&output);
        assert_eq!(decline["decline"]["reason"], reason, "{params}: {decline}");
        assert!(decline["decline"]["detail"].is_string());
    }
}

fn request_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(SINGLE.as_bytes()).expect("write");
    file
}

#[test]
fn elicitation_respond_prints_the_acp_response() {
    let file = request_file();
    let path = file.path().to_str().expect("utf-8 path");
    let answer = r#"{"answers": [{"question_id": "question_0", "selected_options": ["SQLite"], "custom_text": " CockroachDB "}], "rejected": false, "reject_reason": ""}"#;
    let output = agentctl(&["elicitation", "respond", "--request", path], &[], answer);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(
        stdout_json(&output),
        json!({"action": "accept", "content": {"question_0_custom": "CockroachDB"}})
    );

    let output = agentctl(
        &["elicitation", "respond", "--request", path],
        &[],
        r#"{"answers": [], "rejected": true}"#,
    );
    assert!(output.status.success());
    assert_eq!(stdout_json(&output), json!({"action": "decline"}));
}

#[test]
fn elicitation_respond_prints_the_validation_error_and_exits_1() {
    let file = request_file();
    let path = file.path().to_str().expect("utf-8 path");
    let answer = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Oracle"]}]}"#;
    let output = agentctl(&["elicitation", "respond", "--request", path], &[], answer);
    assert_eq!(output.status.code(), Some(1));
    let error = stdout_json(&output);
    assert_eq!(error["error"]["code"], "INVALID_ANSWER");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Oracle")),
        "{error}"
    );

    let output = agentctl(
        &["elicitation", "respond", "--request", path],
        &[],
        "[1, 2]",
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error"]["code"], "BAD_REQUEST");
}

#[test]
fn elicitation_respond_with_a_missing_request_file_exits_2() {
    let output = agentctl(
        &[
            "elicitation",
            "respond",
            "--request",
            "/nonexistent/params.json",
        ],
        &[],
        "{}",
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr_lines(&output).len(), 1);
}

#[test]
fn help_explains_how_to_start_and_talk_to_it() {
    let output = agentctl(&["--help"], &[], "");
    let help = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "AGENTCTL_TOKEN",
        "websocat",
        "/api/v1/agent/stream",
        "agent.session.start",
        "KANDEV_ACP_IDLE_TIMEOUT",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}
