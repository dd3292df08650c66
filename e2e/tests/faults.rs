//! The fault suite (issue 8, docs/architecture.md §8 "every `elicitation/create` gets exactly one
//! response"): things that try to break that promise at full stack — a hundred operators
//! on one pending, the agent's `$/cancel_request` racing an answer, agentctl and the agent
//! SIGKILLed with pendings, the agent stream cut and restored again and again while
//! elicitations arrive, kandev restarted under a remote agentctl, a burst of a thousand
//! malformed requests, a wrong agent-stream token, and oversized bodies on every operator
//! route.
//!
//! The scenarios are written by each test into its own directory (agent `fault`, a
//! mock-agent with `--scenario-dir` there and its own frame log), so what the agent sent
//! and received is counted per JSON-RPC id.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kandev_testkit::process::{descendants, kill};
use kandev_testkit::{
    DEADLINE, FaultProxy, FrameLog, Kandev, KandevOptions, RemoteAgentctl, TURN_DEADLINE,
    answer_at_once, answer_body, bins, poll, poll_until,
};
use serde_json::{Value, json};
use tempfile::TempDir;

// ---- scenarios of this suite ------------------------------------------------------

/// A directory of generated mock-agent scenarios and the frame log of the agents that
/// play them (agent id `fault`).
struct Scenarios {
    dir: TempDir,
}

impl Scenarios {
    fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("kandev-faults-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// Writes scenario `name` with `steps`.
    fn add(&self, name: &str, steps: Vec<Value>) -> &Self {
        let scenario = json!({"name": name, "description": "fault suite", "steps": steps});
        std::fs::write(
            self.dir.path().join(format!("{name}.json")),
            scenario.to_string(),
        )
        .expect("write scenario");
        self
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("fault-agent-frames.jsonl")
    }

    fn frames(&self) -> FrameLog {
        FrameLog::new(self.log_path())
    }

    /// The `[agents.fault]` table.
    fn toml(&self) -> String {
        format!(
            "[agents.fault]\ncommand = [{}, \"--scenario\", \"plain\", \"--scenario-dir\", {}]\nenv = {{ MOCK_AGENT_LOG = {} }}\n",
            json!(bins::mock_agent().display().to_string()),
            json!(self.dir.path().display().to_string()),
            json!(self.log_path().display().to_string()),
        )
    }

    /// Options for a kandev with the flag on and the `fault` agent.
    fn options(&self) -> KandevOptions {
        KandevOptions::new().flag_env(true).toml(&self.toml())
    }
}

/// A one-text-question form whose message is `tag` (the answer echoes it, so a crossed
/// answer is visible at the agent).
fn text_form(tag: &str) -> Value {
    json!({"mode": "form", "sessionId": "$SESSION_ID", "message": tag,
        "requestedSchema": {"type": "object", "properties": {
            "answer": {"type": "string", "title": "Answer", "description": "Echo the tag."}}}})
}

/// The §C single-select form (question_0: Postgres / SQLite / DynamoDB), message `tag`.
fn single_form(tag: &str) -> Value {
    json!({"mode": "form", "sessionId": "$SESSION_ID", "toolCallId": "tool-f",
        "message": tag,
        "requestedSchema": {"type": "object", "properties": {
            "question_0": {"type": "string", "title": "Datastore", "oneOf": [
                {"const": "Postgres", "title": "Postgres"},
                {"const": "SQLite", "title": "SQLite"},
                {"const": "DynamoDB", "title": "DynamoDB"}]}}}})
}

fn elicit(id: &str, params: Value) -> Value {
    json!({"elicit": {"id": id, "params": params}})
}

fn await_step(id: &str) -> Value {
    json!({"await": {"id": id}})
}

/// Every response the agent received to its `elicitation/create` whose message is
/// `tag` (results, or `{"error"}`); the mock agent picks its own JSON-RPC ids, so the
/// request is found by its message and its responses by the id it went out with.
fn responses_to(frames: &FrameLog, tag: &str) -> Vec<Value> {
    let all = frames.frames();
    let ids: Vec<Value> = all
        .iter()
        .filter(|f| f.dir == "send" && f.method() == Some("elicitation/create"))
        .filter(|f| f.frame["params"]["message"] == tag)
        .map(|f| f.frame["id"].clone())
        .collect();
    assert_eq!(ids.len(), 1, "one request with message {tag:?}");
    all.into_iter()
        .filter(|f| f.dir == "recv" && f.method().is_none() && f.frame["id"] == ids[0])
        .map(|f| {
            f.frame
                .get("result")
                .cloned()
                .unwrap_or_else(|| json!({"error": f.frame.get("error").cloned()}))
        })
        .collect()
}

fn requests_sent(frames: &FrameLog) -> usize {
    frames.elicitation_requests().len()
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

/// The session's pending id of the clarification whose message is `message`.
async fn pending_by_message(kandev: &Kandev, session_id: &str, message: &str) -> String {
    poll_until(
        &format!("a clarification {message:?}"),
        DEADLINE,
        || async {
            kandev
                .clarifications(session_id, None)
                .await
                .into_iter()
                .find(|c| c["message"] == message)
                .and_then(|c| c["pending_id"].as_str().map(str::to_owned))
        },
    )
    .await
}

fn agent_pids(kandev: &Kandev) -> Vec<u32> {
    descendants(kandev.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("mock-agent"))
        .map(|(pid, _)| pid)
        .collect()
}

async fn wait_gone(what: &str, pid: u32) {
    poll_until(&format!("{what} ({pid}) to exit"), DEADLINE, || async {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z")).then_some(())
    })
    .await;
}

fn vm_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0)
}

// ---- the faults -------------------------------------------------------------------

#[tokio::test]
async fn a_hundred_concurrent_submissions_for_one_pending_deliver_exactly_one_answer() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "one",
        vec![elicit("h1", single_form("h1")), await_step("h1")],
    );
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    let raced = answer_at_once(
        &[kandev.api()],
        &asked.pending_id,
        100,
        &["Postgres", "SQLite", "DynamoDB"],
    )
    .await;
    for r in &raced.refused {
        assert_eq!(r.body["error"]["code"], "NOT_FOUND", "{r}");
    }
    let delivered = raced.delivered;
    assert_eq!(delivered.len(), 1, "exactly one delivered: {delivered:?}");
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(
        responses_to(&scenarios.frames(), "h1"),
        vec![json!({"action": "accept", "content": {"question_0": delivered[0]}})],
        "the agent saw exactly one response, the winner's"
    );
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(
        record["answer"]["answers"][0]["selected_options"],
        json!([delivered[0]]),
        "the record holds the delivered answer: {record}"
    );
}

#[tokio::test]
async fn agent_cancel_racing_an_operator_answer_gets_exactly_one_response_either_way() {
    let scenarios = Scenarios::new();
    let delays = [0u64, 5, 15, 30, 60, 120];
    for d in delays {
        let id = format!("c{d}");
        scenarios.add(
            &format!("race-{d}"),
            vec![
                elicit(&id, single_form(&id)),
                json!({"cancel_elicitation": {"id": id, "after_ms": d}}),
                await_step(&id),
            ],
        );
    }
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    let mut outcomes = Vec::new();
    for d in delays {
        let (_, session) = kandev
            .task_with_session("fault", &format!("/e2e:race-{d}"))
            .await;
        let sid = id_of(&session);
        // Answer the moment the operator surface learns of it.
        let created = ws
            .wait_for_type("clarification.created", TURN_DEADLINE, |data| {
                data["session_id"] == sid.as_str()
            })
            .await;
        let pending = created["data"]["pending_id"]
            .as_str()
            .expect("pending_id")
            .to_owned();
        let r = kandev
            .answer(&pending, &[("question_0", &["Postgres"], "")])
            .await;
        kandev.wait_session_state(&sid, "IDLE").await;
        let got = responses_to(&scenarios.frames(), &format!("c{d}"));
        assert_eq!(got.len(), 1, "delay {d} ms: exactly one response: {got:?}");
        let record = kandev.clarification(&pending).await;
        match r.status {
            200 => {
                assert_eq!(r.body, json!({"status": "answered"}), "{r}");
                assert_eq!(
                    got[0],
                    json!({"action": "accept", "content": {"question_0": "Postgres"}})
                );
                assert_eq!(record["status"], "answered", "{record}");
                outcomes.push("answered");
            }
            404 => {
                assert_eq!(r.body["error"]["code"], "NOT_FOUND", "{r}");
                assert_eq!(got[0], json!({"action": "cancel"}), "delay {d} ms");
                let record = kandev
                    .wait_clarification_status(&pending, "cancelled")
                    .await;
                assert!(record["answer"].is_null(), "{record}");
                outcomes.push("cancelled");
            }
            _ => panic!("delay {d} ms: unexpected respond outcome {r}"),
        }
    }
    eprintln!("race outcomes by delay {delays:?}: {outcomes:?}");
}

#[tokio::test]
async fn agentctl_sigkilled_with_three_pendings_disconnects_them_all_and_kandev_keeps_serving() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "three",
        vec![
            elicit("k1", text_form("k1")),
            elicit("k2", text_form("k2")),
            elicit("k3", text_form("k3")),
            await_step("k1"),
            await_step("k2"),
            await_step("k3"),
        ],
    );
    scenarios.add("one", vec![elicit("k4", text_form("k4")), await_step("k4")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let (_, session) = kandev.task_with_session("fault", "/e2e:three").await;
    let sid = id_of(&session);
    let pendings: Vec<String> = kandev
        .wait_pending(&sid, 3)
        .await
        .iter()
        .map(|c| c["pending_id"].as_str().expect("id").to_owned())
        .collect();
    let agentctls = kandev.agentctls();
    assert_eq!(agentctls.len(), 1, "{agentctls:?}");
    let agents = agent_pids(&kandev);
    kill(&agentctls[0].0.to_string(), "KILL");

    for pending in &pendings {
        kandev
            .wait_clarification_status(pending, "agent_disconnected")
            .await;
    }
    kandev.wait_session_state(&sid, "FAILED").await;
    for agent in agents {
        wait_gone("the orphaned agent", agent).await;
    }
    for pending in &pendings {
        let r = kandev.answer(pending, &[("answer", &[], "late")]).await;
        assert_eq!(r.status, 200, "{r}");
        assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    }
    for id in ["k1", "k2", "k3"] {
        assert!(
            responses_to(&scenarios.frames(), id).is_empty(),
            "{id}: no agent got an answer"
        );
    }
    // The backend keeps serving: a new session asks and is answered.
    let asked = kandev.ask("fault", "/e2e:one").await;
    let r = kandev
        .answer(&asked.pending_id, &[("answer", &[], "k4")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = scenarios
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"answer": "k4"}})
    );
}

#[tokio::test]
async fn the_agent_sigkilled_mid_turn_disconnects_its_pendings_and_nothing_is_delivered() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "two",
        vec![
            elicit("a1", text_form("a1")),
            elicit("a2", text_form("a2")),
            await_step("a1"),
            await_step("a2"),
        ],
    );
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    let (_, session) = kandev.task_with_session("fault", "/e2e:two").await;
    let sid = id_of(&session);
    let pendings: Vec<String> = kandev
        .wait_pending(&sid, 2)
        .await
        .iter()
        .map(|c| c["pending_id"].as_str().expect("id").to_owned())
        .collect();
    let agents = agent_pids(&kandev);
    assert_eq!(agents.len(), 1, "one agent process");
    kill(&agents[0].to_string(), "KILL");

    for pending in &pendings {
        kandev
            .wait_clarification_status(pending, "agent_disconnected")
            .await;
        ws.wait_for_type("clarification.settled", DEADLINE, |d| {
            d["pending_id"] == pending.as_str()
        })
        .await;
    }
    let session = kandev.wait_session_state(&sid, "FAILED").await;
    assert!(session["pending_action"].is_null(), "{session}");
    for pending in &pendings {
        let r = kandev.answer(pending, &[("answer", &[], "late")]).await;
        assert_eq!(r.status, 200, "{r}");
        assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    }
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the dead agent"
    );
}

#[tokio::test]
async fn the_stream_cut_and_restored_repeatedly_while_elicitations_arrive_loses_and_doubles_nothing()
 {
    const N: usize = 12;
    let scenarios = Scenarios::new();
    let mut steps = Vec::new();
    for i in 0..N {
        steps.push(elicit(&format!("s{i}"), text_form(&format!("s{i}"))));
        steps.push(json!({"sleep_ms": 120}));
    }
    for i in 0..N {
        steps.push(await_step(&format!("s{i}")));
    }
    scenarios.add("stream", steps);
    let agentctl = RemoteAgentctl::start(&[]).await;
    let proxy = Arc::new(FaultProxy::start(agentctl.addr()).await);
    let kandev = Arc::new(
        Kandev::start(
            scenarios
                .options()
                .remote(&proxy.ws_url(), agentctl.token()),
        )
        .await,
    );
    let (_, session) = kandev.task_with_session("fault", "/e2e:stream").await;
    let sid = id_of(&session);

    // The fault: cut for 150 ms every 250 ms until every request is answered.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cutter = {
        let proxy = Arc::clone(&proxy);
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut cuts = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(250)).await;
                proxy.cut();
                cuts += 1;
                tokio::time::sleep(Duration::from_millis(150)).await;
                proxy.restore();
            }
            cuts
        })
    };

    // The operator: answer every pending record with its own tag; 503 while the
    // stream is down means try again.
    let answered: RefCell<Vec<String>> = RefCell::default();
    let statuses: RefCell<Vec<u16>> = RefCell::default();
    let late_settled: RefCell<Vec<String>> = RefCell::default();
    let all_answered = poll(Duration::from_secs(90), || async {
        for record in kandev.clarifications(&sid, None).await {
            let tag = record["message"].as_str().expect("message").to_owned();
            if answered.borrow().contains(&tag) {
                continue;
            }
            if record["status"] != "pending" {
                // Settled without a 200 here: the answer reached agentctl but its reply
                // was cut off, and the replayed settlement closed the record. Only
                // agentctl's word may close it: a record the backend settled on its own
                // while agentctl still held the request is the failure this test hunts.
                // The backend writes an answer and its operator only from agentctl's
                // echo of them (the API does not expose `settled_by`; these do).
                assert_eq!(
                    (
                        &record["status"],
                        &record["outcome"],
                        &record["answered_by"],
                        &record["answer"]["answers"][0]["custom_text"]
                    ),
                    (
                        &json!("answered"),
                        &json!("answered"),
                        &json!("local"),
                        &json!(tag)
                    ),
                    "{tag} left pending by agentctl's echo of this operator's answer: {record}"
                );
                late_settled
                    .borrow_mut()
                    .push(format!("{tag}: {}", record["status"]));
                answered.borrow_mut().push(tag);
                continue;
            }
            let pending = record["pending_id"].as_str().expect("id");
            let r = kandev.answer(pending, &[("answer", &[], &tag)]).await;
            statuses.borrow_mut().push(r.status);
            // Only a 200 counts. 404: agentctl no longer holds it (an earlier answer whose
            // reply was cut off reached it); its replayed settlement closes the record,
            // which the next pass sees. Anything else (503 while cut): the record stays
            // pending and is answered again. Never counted as answered on its own.
            if r.status == 200 {
                answered.borrow_mut().push(tag);
            }
        }
        (answered.borrow().len() >= N).then_some(())
    })
    .await;
    let (answered, statuses, late_settled) = (
        answered.into_inner(),
        statuses.into_inner(),
        late_settled.into_inner(),
    );
    assert!(
        all_answered.is_some(),
        "not every elicitation was answered: {answered:?}, respond statuses {statuses:?}"
    );
    let frames = scenarios.frames();
    let delivered = poll(TURN_DEADLINE, || async {
        (frames.elicitation_responses().len() >= N).then_some(())
    })
    .await;
    if delivered.is_none() {
        let records: Vec<String> = kandev
            .clarifications(&sid, None)
            .await
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} by {}",
                    r["message"], r["pending_id"], r["status"], r["settled_by"]
                )
            })
            .collect();
        panic!(
            "the agent got {} of {N} responses; records {records:?}; respond statuses {statuses:?}; \
             settled without a 200 {late_settled:?}",
            frames.elicitation_responses().len()
        );
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let cuts = cutter.await.expect("cutter");
    proxy.restore();

    assert_eq!(requests_sent(&frames), N, "the agent sent {N} requests");
    for i in 0..N {
        let tag = format!("s{i}");
        assert_eq!(
            responses_to(&frames, &tag),
            vec![json!({"action": "accept", "content": {"answer": tag}})],
            "{tag}: exactly one response, its own answer (after {cuts} cuts)"
        );
    }
    let records = kandev.clarifications(&sid, None).await;
    assert_eq!(records.len(), N, "one record per elicitation: {records:?}");
    for record in &records {
        kandev
            .wait_clarification_status(record["pending_id"].as_str().expect("id"), "answered")
            .await;
    }
    // The turn's end survives the cuts too: an event written into a stream that died is
    // replayed after the re-attach (`after_seq`).
    kandev.wait_session_state(&sid, "IDLE").await;
    let state = kandev.session(&sid).await["state"].clone();
    assert!(cuts >= 3, "the stream was cut only {cuts} times");
    assert!(
        proxy.accepted() >= 2,
        "kandev reconnected through the proxy"
    );
    eprintln!(
        "stream faults: {cuts} cuts, {} connections, respond statuses {statuses:?}, settled by replay {late_settled:?}, session state {state}",
        proxy.accepted()
    );
}

/// Issue 8: kandev SIGKILLed under a remote agentctl that holds the session and two
/// parked elicitations. The next kandev finds the session live in its database, re-attaches
/// to agentctl (`agent.session.attach`, `SessionRuntime::reconcile_after_restart`) instead
/// of failing it, reconciles the records against agentctl's pending list (both still
/// pending), and the operator's answer reaches the agent exactly once. (A local agentctl
/// exits with its kandev, so there the session is FAILED as before.)
#[tokio::test]
async fn kandev_restarted_under_a_remote_agentctl_holding_pendings_can_answer_them_after() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "held",
        vec![
            elicit("r1", text_form("r1")),
            elicit("r2", text_form("r2")),
            await_step("r1"),
            await_step("r2"),
        ],
    );
    let agentctl = RemoteAgentctl::start(&[]).await;
    let db_dir = tempfile::tempdir().expect("db dir");
    let db = kandev_testkit::fresh_database(db_dir.path()).await;
    let options = || {
        scenarios
            .options()
            .remote(&format!("ws://{}", agentctl.addr()), agentctl.token())
            .database(&db)
    };
    let first = Kandev::start(options()).await;
    let (_, session) = first.task_with_session("fault", "/e2e:held").await;
    let sid = id_of(&session);
    first.wait_pending(&sid, 2).await;
    // A crash, not a graceful stop (a graceful stop ends its sessions on purpose).
    kill(&first.pid().to_string(), "KILL");

    let second = Kandev::start(options()).await;
    let r1 = pending_by_message(&second, &sid, "r1").await;
    let record = second.clarification(&r1).await;
    assert_eq!(
        record["status"], "pending",
        "the pending agentctl still holds is still answerable after the restart: {record}"
    );
    let r = second.answer(&r1, &[("answer", &[], "r1")]).await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "answered"}), "{r}");
    let got = scenarios
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"answer": "r1"}})
    );
    drop(first);
}

#[tokio::test]
async fn a_burst_of_a_thousand_malformed_elicitations_is_all_declined_with_no_operator_surface() {
    const N: usize = 1000;
    let malformed = [
        json!("not an object"),
        json!(42),
        json!([1, 2]),
        json!(null),
        json!({}),
        json!({"mode": "url", "sessionId": "$SESSION_ID", "url": "https://x", "message": "m"}),
        json!({"mode": "form", "message": "no scope", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        json!({"mode": "form", "requestId": "r", "message": "request scope", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        json!({"mode": "form", "sessionId": "s", "message": "no questions", "requestedSchema": {"type": "object", "properties": {}}}),
        json!({"mode": "form", "sessionId": "s", "message": 7, "requestedSchema": "nope"}),
        json!({"mode": 3, "sessionId": ["x"]}),
    ];
    let scenarios = Scenarios::new();
    let steps: Vec<Value> = (0..N)
        .map(|i| json!({"elicit_raw": {"id": format!("m{i}"), "params": malformed[i % malformed.len()]}}))
        .collect();
    scenarios.add("burst", steps);
    scenarios.add("none", vec![json!({"text": "ready"})]);
    let kandev = Kandev::start(scenarios.options()).await;
    let ws = kandev.ws().await;
    // A first turn that elicits nothing brings the session (and its agentctl) up.
    let (_, session) = kandev.task_with_session("fault", "/e2e:none").await;
    let sid = id_of(&session);
    kandev.wait_session_state(&sid, "IDLE").await;
    let agentctl = kandev.agentctls()[0].0;
    let baseline_kb = vm_rss_kb(agentctl);

    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{sid}/prompt"),
            &json!({"text": "/e2e:burst"}),
        )
        .await;
    assert_eq!(r.status, 202, "{r}");
    let frames = scenarios.frames();
    poll_until("a response to each of the burst", TURN_DEADLINE, || async {
        (frames.elicitation_responses().len() >= N).then_some(())
    })
    .await;
    let responses = frames.elicitation_responses();
    assert_eq!(responses.len(), N, "exactly one response each");
    for (i, r) in responses.iter().enumerate() {
        assert_eq!(r, &json!({"action": "decline"}), "request {i}");
    }
    kandev.wait_session_state(&sid, "IDLE").await;
    assert!(
        kandev.clarifications(&sid, None).await.is_empty(),
        "no record"
    );
    assert!(
        ws.of_type("clarification.created").is_empty(),
        "no operator event"
    );
    assert!(
        !kandev
            .notifications()
            .await
            .iter()
            .any(|n| n["event"] == "session.clarification_requested"),
        "no notification"
    );
    let after_kb = vm_rss_kb(agentctl);
    eprintln!("agentctl VmRSS: {baseline_kb} kB before the burst, {after_kb} kB after");
    assert!(
        after_kb <= baseline_kb + 8 * 1024,
        "agentctl memory back near its baseline: {baseline_kb} kB → {after_kb} kB"
    );
}

#[tokio::test]
async fn a_wrong_agent_stream_token_is_401_and_starts_nothing() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let url = format!("ws://{}/api/v1/agent/stream", agentctl.addr());
    for token in [Some("wrong-token"), None] {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.as_str().into_client_request().expect("request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}").parse().expect("header"),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 401, "token {token:?}");
            }
            other => panic!("token {token:?}: expected 401, got {other:?}"),
        }
    }

    // kandev configured with the wrong token: the session fails, no agent ever runs.
    let scenarios = Scenarios::new();
    scenarios.add("none", vec![json!({"text": "ready"})]);
    let kandev = Kandev::start(
        scenarios
            .options()
            .remote(&format!("ws://{}", agentctl.addr()), "wrong-token"),
    )
    .await;
    let task = kandev.create_task("wrong token").await;
    let r = kandev
        .try_start_session(&id_of(&task), "fault", Some("/e2e:none"))
        .await;
    if r.status == 201 {
        kandev.wait_session_state(&id_of(&r.body), "FAILED").await;
    } else {
        assert!(r.status >= 400, "{r}");
    }
    assert!(
        !scenarios.log_path().exists(),
        "no agent was started: {}",
        scenarios.frames().tail(5)
    );
}

#[tokio::test]
async fn oversized_bodies_on_every_operator_route_are_413_and_store_nothing() {
    let scenarios = Scenarios::new();
    scenarios.add("one", vec![elicit("o1", text_form("o1")), await_step("o1")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    // Ids only: the session's own row may still be written (its stored state catches up
    // with the pending record the view already counts) while this test runs.
    let task_ids = |tasks: Value| -> Vec<Value> {
        tasks["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].clone())
            .collect()
    };
    let tasks_before = task_ids(kandev.api().get("/api/v1/tasks").await.body);
    let messages_before = kandev.messages(&asked.session_id).await.len();
    let flag_before = kandev.flag().await;
    let session_before = kandev.session(&asked.session_id).await;

    let big = "x".repeat(1024 * 1024 + 1);
    let sid = &asked.session_id;
    let routes = [
        (
            "POST",
            "/api/v1/tasks".to_owned(),
            json!({"title": big, "description": "d"}),
        ),
        (
            "PATCH",
            "/api/v1/runtime-flags/features.acpElicitation".to_owned(),
            json!({"override": false, "pad": big}),
        ),
        (
            "POST",
            format!("/api/v1/tasks/{}/sessions", asked.task_id),
            json!({"agent": "fault", "prompt": big}),
        ),
        (
            "POST",
            format!("/api/v1/sessions/{sid}/prompt"),
            json!({"text": big}),
        ),
        (
            "POST",
            format!("/api/v1/clarifications/{}/respond", asked.pending_id),
            answer_body(&[("answer", &[], &big)]),
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, body) in &routes {
        let r = kandev.api().request(method, path, Some(body)).await;
        if r.status != 413 || r.body["error"]["code"].as_str().is_none() {
            wrong.push(format!("{method} {path} → {} {}", r.status, r.body));
        }
    }
    assert!(wrong.is_empty(), "not 413 with a JSON error: {wrong:#?}");

    assert_eq!(
        task_ids(kandev.api().get("/api/v1/tasks").await.body),
        tasks_before,
        "no task stored"
    );
    assert_eq!(
        kandev.messages(sid).await.len(),
        messages_before,
        "no message stored"
    );
    assert_eq!(kandev.flag().await, flag_before, "the flag is unchanged");
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "pending", "{record}");
    let session = kandev.session(sid).await;
    assert_eq!(session["state"], session_before["state"], "{session}");
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the agent"
    );
}

/// `POST /api/v1/sessions/{id}/cancel` and `/stop` take no body, so axum's
/// `DefaultBodyLimit` alone would never apply to them; the backend's body-limit layer
/// answers 413 before any handler runs, and nothing is cancelled or stopped.
#[tokio::test]
async fn oversized_bodies_on_cancel_and_stop_are_413_and_change_nothing() {
    let scenarios = Scenarios::new();
    scenarios.add("one", vec![elicit("o2", text_form("o2")), await_step("o2")]);
    let kandev = Kandev::start(scenarios.options()).await;
    let asked = kandev.ask("fault", "/e2e:one").await;
    let big = "x".repeat(1024 * 1024 + 1);
    let sid = &asked.session_id;
    for action in ["cancel", "stop"] {
        let r = kandev
            .api()
            .post(
                &format!("/api/v1/sessions/{sid}/{action}"),
                &json!({"pad": big}),
            )
            .await;
        assert_eq!(r.status, 413, "{action}: {r}");
    }
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(
        record["status"], "pending",
        "nothing was cancelled: {record}"
    );
    assert!(
        scenarios.frames().elicitation_responses().is_empty(),
        "nothing reached the agent"
    );
}

/// Issue 8: agentctl writes the settlement, the agent's last message and the turn's end
/// into a stream that is frozen and then cut, so none of it reaches kandev on that stream.
/// kandev's link remembers the last event sequence number it delivered and re-attaches
/// with `agent.session.attach {after_seq}`; agentctl replays what followed (the link drops
/// any replayed event it already delivered). The operator's answer, cut off mid-flight,
/// gets a 503 that no longer claims nothing was sent, the record settles `answered` from
/// the replayed `elicitation_settled`, and the replayed `turn_completed` ends the turn.
/// Seen first as a flaky end of the repeated-cut test.
#[tokio::test]
async fn an_event_handed_to_a_dying_stream_is_replayed_after_the_reattach() {
    let scenarios = Scenarios::new();
    scenarios.add(
        "last",
        vec![
            elicit("b1", text_form("b1")),
            await_step("b1"),
            json!({"text": "after"}),
        ],
    );
    let agentctl = RemoteAgentctl::start(&[]).await;
    // Frozen, the proxy swallows what agentctl writes: what a stream dying mid-write does
    // to the frames in flight.
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let kandev = Arc::new(
        Kandev::start(
            scenarios
                .options()
                .remote(&proxy.ws_url(), agentctl.token()),
        )
        .await,
    );
    let asked = kandev.ask("fault", "/e2e:last").await;
    proxy.freeze();
    let answering = {
        let kandev = Arc::clone(&kandev);
        let pending = asked.pending_id.clone();
        tokio::spawn(async move { kandev.answer(&pending, &[("answer", &[], "b1")]).await })
    };
    // The agent got its answer and ended the turn: agentctl has written the settlement
    // and the turn's end into the frozen stream.
    let frames = scenarios.frames();
    poll_until("the agent to end its turn", TURN_DEADLINE, || async {
        frames
            .frames()
            .iter()
            .any(|f| f.dir == "send" && f.frame["result"]["stopReason"] == "end_turn")
            .then_some(())
    })
    .await;
    assert_eq!(
        responses_to(&frames, "b1"),
        vec![json!({"action": "accept", "content": {"answer": "b1"}})]
    );
    // Every connection closed; new ones forwarded both ways again.
    proxy.cut();
    proxy.restore();
    let r = answering.await.expect("join");
    eprintln!("the answer cut off mid-flight: {r}");
    kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert!(
        kandev.agent_text(&asked.session_id).await.contains("after"),
        "the turn's last message arrived"
    );
}
