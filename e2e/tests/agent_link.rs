//! The backend's agent link (`kandev_backend::agent_link`) against the real `agentctl` and
//! `mock-agent` binaries: the local executor (agentctl started by the link), the remote
//! executor (agentctl started by the test with its own token), a wrong token, agentctl
//! dying, and a dropped stream re-attaching through the fault proxy.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kandev_agent_stream::request::{AgentSpec, Empty, Prompt, SessionStart};
use kandev_agent_stream::response::{PromptAccepted, SessionStarted, Success};
use kandev_agent_stream::{AgentEvent, ErrorCode, SettleOutcome, action};
use kandev_backend::agent_link::{AgentLink, ExecutorConfig, LinkError, LinkEvent, LinkOptions};
use kandev_testkit::process::descendants;
use kandev_testkit::{FaultProxy, RemoteAgentctl, bins, poll_until};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// Generous: the machine is shared and agents are real processes.
const WAIT: Duration = Duration::from_secs(30);
const FLAG: &str = "features.acpElicitation";

fn local() -> ExecutorConfig {
    ExecutorConfig::local(Some(bins::agentctl()))
}

/// The remote executor reaching `agentctl` at `url` with its token.
fn remote(url: String, agentctl: &RemoteAgentctl) -> ExecutorConfig {
    ExecutorConfig::remote(url, agentctl.token().to_owned())
}

fn session_start(session_id: &str, args: &[&str], elicitation: bool) -> SessionStart {
    let mut command = vec![bins::mock_agent().display().to_string()];
    command.extend(args.iter().map(|a| a.to_string()));
    SessionStart {
        session_id: session_id.into(),
        agent: AgentSpec {
            id: "mock".into(),
            command,
            env: BTreeMap::new(),
            cwd: None,
            permission_policy: Default::default(),
            mcp_servers: Default::default(),
            inherit_env: Vec::new(),
            on_deadline: Default::default(),
        },
        flags: BTreeMap::from([(FLAG.to_owned(), elicitation)]),
    }
}

async fn start(link: &AgentLink, start: &SessionStart) -> SessionStarted {
    link.request_with_timeout(action::SESSION_START, start, WAIT)
        .await
        .expect("agent.session.start")
}

async fn prompt(link: &AgentLink, text: &str) {
    let accepted: PromptAccepted = link
        .request(action::PROMPT, &Prompt { text: text.into() })
        .await
        .expect("agent.prompt");
    assert!(accepted.accepted);
}

async fn next_event(events: &mut UnboundedReceiver<LinkEvent>) -> LinkEvent {
    tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event within the deadline")
        .expect("the link is still open")
}

/// The agent text of a `session_update` carrying an `agent_message_chunk`.
fn agent_text(event: &LinkEvent) -> Option<String> {
    match event {
        LinkEvent::Agent(AgentEvent::SessionUpdate { update }) => {
            let update = update.get("update")?;
            (update.get("sessionUpdate")?.as_str()? == "agent_message_chunk")
                .then(|| update.pointer("/content/text")?.as_str().map(str::to_owned))
                .flatten()
        }
        _ => None,
    }
}

/// Collects agent events until the turn completes; returns them, turn end included.
async fn until_turn_completed(events: &mut UnboundedReceiver<LinkEvent>) -> Vec<LinkEvent> {
    let mut seen = Vec::new();
    loop {
        let event = next_event(events).await;
        let done = matches!(event, LinkEvent::Agent(AgentEvent::TurnCompleted { .. }));
        seen.push(event);
        if done {
            return seen;
        }
    }
}

/// Drains the receiver until it ends (the link stopped).
async fn until_end(events: &mut UnboundedReceiver<LinkEvent>) -> Vec<LinkEvent> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    while let Some(event) = tokio::time::timeout_at(deadline, events.recv())
        .await
        .expect("the link ends within the deadline")
    {
        seen.push(event);
    }
    seen
}

/// Whether `pid` runs (a zombie counts as gone: it has exited, only its reaping is left).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn local_executor_runs_a_session_and_shutdown_stops_agentctl() {
    let (link, mut events) = AgentLink::connect(&local(), "it-local")
        .await
        .expect("connect");
    assert!(link.is_connected());
    let pid = link.agentctl_pid().expect("a local agentctl has a pid");
    assert!(process_alive(pid));

    let started = start(
        &link,
        &session_start("it-local", &["--scenario", "plain"], false),
    )
    .await;
    assert_eq!(
        started.client_capabilities["_meta"]["terminal_output"],
        json!(true)
    );
    assert!(
        started.client_capabilities.get("elicitation").is_none(),
        "flag off"
    );

    prompt(&link, "go").await;
    let turn = until_turn_completed(&mut events).await;
    let texts: Vec<String> = turn.iter().filter_map(agent_text).collect();
    assert_eq!(
        texts,
        [
            "Looking at the repository.",
            "All done; nothing here needs your input."
        ],
        "agent text in order"
    );
    assert!(matches!(
        turn.last(),
        Some(LinkEvent::Agent(AgentEvent::TurnCompleted { stop_reason, .. })) if stop_reason == "end_turn"
    ));

    let agents: Vec<u32> = descendants(pid).into_iter().map(|(p, _)| p).collect();
    assert_eq!(agents.len(), 1, "agentctl runs the mock agent: {agents:?}");
    link.shutdown().await;
    assert!(
        !process_alive(pid),
        "shutdown stops the agentctl the link started"
    );
    // agent.shutdown (and agentctl's own SIGTERM handling) stop the agent too.
    poll_until("the agent to stop with its agentctl", WAIT, || async {
        (!agents.iter().any(|agent| process_alive(*agent))).then_some(())
    })
    .await;
    let rest = until_end(&mut events).await;
    assert!(
        !rest
            .iter()
            .any(|e| matches!(e, LinkEvent::Disconnected | LinkEvent::Reattached { .. })),
        "no reconnect after shutdown: {rest:?}"
    );
    let after: Result<Value, LinkError> = link.request(action::CANCEL, &Empty {}).await;
    assert!(matches!(after, Err(LinkError::NotConnected)), "{after:?}");
}

#[tokio::test]
async fn the_default_local_agentctl_is_the_one_beside_the_executable() {
    // Under cargo the test executable lives in target/<profile>/deps; the link also
    // looks one level up, where cargo puts the workspace's binaries.
    let executor = ExecutorConfig::local(None);
    let (link, mut events) = AgentLink::connect(&executor, "it-default")
        .await
        .expect("connect");
    let pid = link.agentctl_pid().expect("pid");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("agentctl executable");
    assert_eq!(
        exe,
        bins::agentctl().canonicalize().expect("canonical path")
    );
    link.shutdown().await;
    assert!(!process_alive(pid));
    until_end(&mut events).await;
}

#[tokio::test]
async fn dropping_the_link_stops_its_local_agentctl() {
    let (link, mut events) = AgentLink::connect(&local(), "it-dropped")
        .await
        .expect("connect");
    let pid = link.agentctl_pid().expect("pid");
    drop(link);
    until_end(&mut events).await;
    poll_until("agentctl to stop with its dropped link", WAIT, || async {
        (!process_alive(pid)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_killed_local_agentctl_loses_the_link() {
    let (link, mut events) = AgentLink::connect(&local(), "it-killed")
        .await
        .expect("connect");
    let pid = link.agentctl_pid().expect("pid");
    start(
        &link,
        &session_start("it-killed", &["--scenario", "plain"], false),
    )
    .await;

    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());

    let rest = until_end(&mut events).await;
    let Some(LinkEvent::Lost { reason }) = rest.last() else {
        panic!("the last event is Lost: {rest:?}");
    };
    assert!(reason.contains("agentctl exited"), "{reason}");
    assert!(rest.contains(&LinkEvent::Disconnected));
    assert!(
        !rest
            .iter()
            .any(|e| matches!(e, LinkEvent::Reattached { .. })),
        "{rest:?}"
    );
    assert!(!link.is_connected());
    let after: Result<Value, LinkError> = link.request(action::CANCEL, &Empty {}).await;
    assert!(matches!(after, Err(LinkError::NotConnected)), "{after:?}");
    link.shutdown().await;
}

#[tokio::test]
async fn a_local_agentctl_that_cannot_start_reports_its_stderr() {
    // agentctl refuses to start when the answer deadline is not below the idle timeout;
    // the local executor hands it the backend's environment, so set that here.
    let dir = tempfile::tempdir().expect("tempdir");
    let wrapper = dir.path().join("agentctl-misconfigured");
    let script = format!(
        "#!/bin/sh\nKANDEV_ELICITATION_ANSWER_TIMEOUT=2h KANDEV_ACP_IDLE_TIMEOUT=1h exec '{}' \"$@\"\n",
        bins::agentctl().display()
    );
    write_executable(&wrapper, &script);
    let misconfigured = ExecutorConfig::local(Some(wrapper));
    let Err(LinkError::Unreachable(message)) = AgentLink::connect(&misconfigured, "it-bad").await
    else {
        panic!("a misconfigured agentctl is unreachable");
    };
    assert!(message.contains("before listening"), "{message}");
    assert!(
        message.contains("KANDEV_ELICITATION_ANSWER_TIMEOUT"),
        "stderr tail: {message}"
    );
}

/// Writes an executable through a child `sh` so this process never holds a write
/// handle on a file it is about to execute (ETXTBSY under parallel tests).
fn write_executable(path: &Path, body: &str) {
    use std::io::Write;
    let mut writer = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod +x \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh");
    writer
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("write");
    assert!(writer.wait().expect("sh").success());
}

#[tokio::test]
async fn remote_executor_runs_an_elicitation_round_trip() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let executor = remote(format!("ws://{}", agentctl.addr()), &agentctl);
    let (link, mut events) = AgentLink::connect(&executor, "it-remote")
        .await
        .expect("connect");
    assert_eq!(link.agentctl_pid(), None);

    let started = start(
        &link,
        &session_start("it-remote", &["--scenario", "demo"], true),
    )
    .await;
    assert_eq!(
        started.client_capabilities["elicitation"],
        json!({"form": {}})
    );
    prompt(&link, "ask me").await;

    let requested = loop {
        if let LinkEvent::Agent(AgentEvent::ElicitationRequested(requested)) =
            next_event(&mut events).await
        {
            break requested;
        }
    };
    assert_eq!(requested.questions.len(), 1);
    assert_eq!(requested.questions[0].id, "question_0");

    let respond = json!({
        "pending_id": requested.pending_id,
        "answers": [{"question_id": "question_0", "selected_options": ["Red"]}],
    });
    let answered: Success = link
        .request(action::ELICITATIONS_RESPOND, &respond)
        .await
        .expect("respond");
    assert!(answered.success);
    // The same pending again: agentctl's verdict arrives as a Remote error.
    let again: Result<Success, LinkError> =
        link.request(action::ELICITATIONS_RESPOND, &respond).await;
    match again {
        Err(LinkError::Remote(error)) => assert_eq!(error.code, ErrorCode::NotFound),
        other => panic!("expected NOT_FOUND, got {other:?}"),
    }

    let turn = until_turn_completed(&mut events).await;
    assert!(turn.iter().any(|e| matches!(
        e,
        LinkEvent::Agent(AgentEvent::ElicitationSettled { pending_id, outcome: SettleOutcome::Answered, .. })
            if *pending_id == requested.pending_id
    )));
    let texts: Vec<String> = turn.iter().filter_map(agent_text).collect();
    assert!(
        texts.iter().any(|t| t.contains("Red")),
        "the agent got the answer: {texts:?}"
    );
    link.shutdown().await;
    until_end(&mut events).await;
}

#[tokio::test]
async fn a_wrong_token_is_unreachable_with_a_clear_message() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let executor = ExecutorConfig::remote(
        format!("ws://{}", agentctl.addr()),
        "certainly-not-the-token",
    );
    let Err(LinkError::Unreachable(message)) = AgentLink::connect(&executor, "it-token").await
    else {
        panic!("a wrong token is refused");
    };
    assert!(message.contains("rejected the token"), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(
        !message.contains("certainly-not-the-token"),
        "the token is never echoed: {message}"
    );
}

#[tokio::test]
async fn a_dropped_stream_reattaches_with_the_pending_elicitation() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let executor = remote(proxy.ws_url(), &agentctl);
    let (link, mut events) = AgentLink::connect(&executor, "it-drop")
        .await
        .expect("connect");
    start(
        &link,
        &session_start("it-drop", &["--scenario", "demo"], true),
    )
    .await;
    prompt(&link, "ask me").await;
    let requested = loop {
        if let LinkEvent::Agent(AgentEvent::ElicitationRequested(requested)) =
            next_event(&mut events).await
        {
            break requested;
        }
    };

    proxy.cut();
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    let respond = json!({
        "pending_id": requested.pending_id,
        "answers": [{"question_id": "question_0", "selected_options": ["Blue"]}],
    });
    // While down: refused at once, nothing sent (AC-20a).
    let refused: Result<Success, LinkError> =
        link.request(action::ELICITATIONS_RESPOND, &respond).await;
    assert!(
        matches!(refused, Err(LinkError::NotConnected)),
        "{refused:?}"
    );

    proxy.restore();
    match next_event(&mut events).await {
        LinkEvent::Reattached { pending, questions } => {
            assert_eq!(
                questions,
                Some(Vec::new()),
                "agentctl answers the question list"
            );
            assert_eq!(pending.len(), 1);
            assert_eq!(pending[0].pending_id, requested.pending_id);
        }
        other => panic!("expected Reattached, got {other:?}"),
    }
    assert!(proxy.accepted() >= 2);

    let answered: Success = link
        .request(action::ELICITATIONS_RESPOND, &respond)
        .await
        .expect("respond after re-attach");
    assert!(answered.success);
    let turn = until_turn_completed(&mut events).await;
    let texts: Vec<String> = turn.iter().filter_map(agent_text).collect();
    assert!(texts.iter().any(|t| t.contains("Blue")), "{texts:?}");
    link.shutdown().await;
}

#[tokio::test]
async fn events_emitted_while_detached_arrive_after_reattach_in_order() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let scenarios = tempfile::tempdir().expect("tempdir");
    let scenario = json!({
        "name": "slow-talk",
        "description": "Talks, pauses, talks on: the pause is where the test cuts the stream.",
        "steps": [
            {"text": "one"},
            {"sleep_ms": 400},
            {"text": "two"},
            {"text": "three"},
            {"end_turn": "end_turn"}
        ]
    });
    std::fs::write(
        scenarios.path().join("slow-talk.json"),
        scenario.to_string(),
    )
    .expect("scenario");
    let agent_log = scenarios.path().join("agent.log");
    let mut start_request = session_start(
        "it-detached",
        &[
            "--scenario",
            "slow-talk",
            "--scenario-dir",
            &scenarios.path().display().to_string(),
        ],
        false,
    );
    start_request
        .agent
        .env
        .insert("MOCK_AGENT_LOG".into(), agent_log.display().to_string());

    let executor = remote(proxy.ws_url(), &agentctl);
    let options = LinkOptions {
        reconnect_window: WAIT,
        ..LinkOptions::default()
    };
    let (link, mut events) = AgentLink::connect_with(&executor, "it-detached", options)
        .await
        .expect("connect");
    start(&link, &start_request).await;
    prompt(&link, "talk").await;
    loop {
        let event = next_event(&mut events).await;
        if agent_text(&event).as_deref() == Some("one") {
            break;
        }
    }
    proxy.cut();
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);

    // Keep the stream down until the agent has finished its turn, so agentctl must
    // buffer "two", "three" and the turn end.
    wait_for_agent_log(&agent_log, "stopReason").await;
    proxy.restore();

    let rest = until_reattached_and_turn_completed(&mut events).await;
    // agentctl may send "two" and "three", written back to back, as one chunk.
    let texts: Vec<String> = rest.iter().filter_map(agent_text).collect();
    assert_eq!(
        texts.concat(),
        "twothree",
        "nothing lost, nothing reordered"
    );
    assert!(
        rest.contains(&LinkEvent::Reattached {
            pending: vec![],
            questions: Some(vec![])
        }),
        "{rest:?}"
    );
    link.shutdown().await;
}

/// Collects events until both `Reattached` and the turn's end have arrived.
async fn until_reattached_and_turn_completed(
    events: &mut UnboundedReceiver<LinkEvent>,
) -> Vec<LinkEvent> {
    let mut seen = Vec::new();
    let (mut reattached, mut completed) = (false, false);
    while !(reattached && completed) {
        let event = next_event(events).await;
        reattached |= matches!(event, LinkEvent::Reattached { .. });
        completed |= matches!(event, LinkEvent::Agent(AgentEvent::TurnCompleted { .. }));
        seen.push(event);
    }
    seen
}

/// Polls the mock agent's frame log until it contains `needle`.
async fn wait_for_agent_log(log: &Path, needle: &str) {
    poll_until(&format!("{needle} in the agent log"), WAIT, || async {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(needle)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_pending_settled_while_detached_is_reported_before_the_snapshot() {
    // A one-second answer deadline: agentctl declines the elicitation while the stream
    // is down. The link must deliver that `elicitation_settled` before `Reattached`,
    // whose snapshot then no longer lists it (so the backend never mistakes it for lost).
    let agentctl = RemoteAgentctl::start(&[("KANDEV_ELICITATION_ANSWER_TIMEOUT", "1s")]).await;
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let logs = tempfile::tempdir().expect("tempdir");
    let agent_log = logs.path().join("agent.log");
    let mut start_request = session_start("it-timeout", &["--scenario", "demo"], true);
    start_request
        .agent
        .env
        .insert("MOCK_AGENT_LOG".into(), agent_log.display().to_string());

    let executor = remote(proxy.ws_url(), &agentctl);
    let (link, mut events) = AgentLink::connect(&executor, "it-timeout")
        .await
        .expect("connect");
    start(&link, &start_request).await;
    prompt(&link, "ask me").await;
    let requested = loop {
        if let LinkEvent::Agent(AgentEvent::ElicitationRequested(requested)) =
            next_event(&mut events).await
        {
            break requested;
        }
    };
    proxy.cut();
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    // The agent got the deadline's decline and finished its turn: all of it is buffered.
    wait_for_agent_log(&agent_log, "stopReason").await;
    proxy.restore();

    let rest = until_reattached_and_turn_completed(&mut events).await;
    let settled = rest.iter().position(|e| {
        matches!(
            e,
            LinkEvent::Agent(AgentEvent::ElicitationSettled { pending_id, outcome: SettleOutcome::TimedOut, .. })
                if *pending_id == requested.pending_id
        )
    });
    let reattached = rest
        .iter()
        .position(|e| matches!(e, LinkEvent::Reattached { .. }));
    let (Some(settled), Some(reattached)) = (settled, reattached) else {
        panic!("both the settlement and the re-attach arrive: {rest:?}");
    };
    assert!(
        settled < reattached,
        "kept events come before the snapshot: {rest:?}"
    );
    assert_eq!(
        rest[reattached],
        LinkEvent::Reattached {
            pending: vec![],
            questions: Some(vec![])
        }
    );
    link.shutdown().await;
}

#[tokio::test]
async fn heartbeats_keep_a_quiet_stream_alive() {
    // agentctl stays silent while the agent sleeps for 12 heartbeat intervals; it must
    // answer the pings, or the link would count the stream as dropped.
    let scenarios = tempfile::tempdir().expect("tempdir");
    let scenario = json!({
        "name": "quiet",
        "description": "A long pause inside a turn.",
        "steps": [{"text": "thinking"}, {"sleep_ms": 1200}, {"text": "done"}, {"end_turn": "end_turn"}]
    });
    std::fs::write(scenarios.path().join("quiet.json"), scenario.to_string()).expect("scenario");
    let options = LinkOptions {
        heartbeat_interval: Duration::from_millis(100),
        ..LinkOptions::default()
    };
    let (link, mut events) = AgentLink::connect_with(&local(), "it-quiet", options)
        .await
        .expect("connect");
    let dir = scenarios.path().display().to_string();
    start(
        &link,
        &session_start(
            "it-quiet",
            &["--scenario", "quiet", "--scenario-dir", &dir],
            false,
        ),
    )
    .await;
    prompt(&link, "think").await;
    let turn = until_turn_completed(&mut events).await;
    assert!(
        !turn
            .iter()
            .any(|e| matches!(e, LinkEvent::Disconnected | LinkEvent::Lost { .. })),
        "the stream never dropped: {turn:?}"
    );
    let texts: Vec<String> = turn.iter().filter_map(agent_text).collect();
    assert_eq!(texts, ["thinking", "done"]);
    link.shutdown().await;
}
