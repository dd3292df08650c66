//! Settlement other than by an answer (F7) at full stack: turn cancel (AC-15), the
//! operator's cancel of one question, the answer deadline (AC-64), the agent's own cancel,
//! the agent exiting, agentctl killed (→ `agent_disconnected`, then `not_delivered`), and a
//! dropped agent stream through the fault proxy (AC-20a: 503 while down, the record stays
//! open; re-attach, same pending answered, no event lost).

use kandev_testkit::{
    ApiResponse, Asked, DEADLINE, FaultProxy, Kandev, KandevOptions, OperatorWs, RemoteAgentctl,
    TURN_DEADLINE, poll_until,
};
use serde_json::{Value, json};

async fn kandev_on(options: KandevOptions) -> Kandev {
    Kandev::start(options.flag_env(true)).await
}

/// A kandev with the flag on, its operator WebSocket, and a session of the mock agent
/// waiting on the `/e2e:single` question.
async fn single_question() -> (Kandev, OperatorWs, Asked) {
    let kandev = kandev_on(KandevOptions::new()).await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    (kandev, ws, asked)
}

/// `POST /api/v1/sessions/{id}/{action}` (`cancel`, `stop`), asserting the 202.
async fn session_action(kandev: &Kandev, session_id: &str, action: &str) {
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{session_id}/{action}"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{action}: {r}");
}

/// The first response the agent got to its `elicitation/create`.
async fn first_response(kandev: &Kandev) -> Value {
    kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await
}

/// An operator's answer arriving after the question was settled: 404, agentctl's verdict.
async fn late_answer(kandev: &Kandev, asked: &Asked) -> ApiResponse {
    let late = kandev
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(late.status, 404, "an answer after the settlement: {late}");
    late
}

/// Sends `signal` to the one local agentctl kandev started.
fn signal_the_agentctl(kandev: &Kandev, signal: &str) {
    let agentctls = kandev.agentctls();
    assert_eq!(agentctls.len(), 1, "one local agentctl: {agentctls:?}");
    kandev_testkit::process::kill(&agentctls[0].0.to_string(), signal);
}

/// The surface is withdrawn: record `status`, its message's metadata, `pending_action`
/// and a `clarification.settled` event.
async fn assert_withdrawn(kandev: &Kandev, ws: &OperatorWs, asked: &Asked, status: &str) {
    let record = kandev
        .wait_clarification_status(&asked.pending_id, status)
        .await;
    assert!(record["settled_at"].is_string(), "{record}");
    ws.wait_for_type("clarification.settled", DEADLINE, |d| {
        d["pending_id"] == asked.pending_id.as_str() && d["status"] == status
    })
    .await;
    // Eventually consistent: no pending action and no longer waiting (whether both
    // change in one step is pinned by `session_state_and_pending_action_agree_…`).
    kandev
        .wait_session(
            "pending_action cleared and no longer waiting",
            &asked.session_id,
            |s| s["pending_action"].is_null() && s["state"] != "WAITING_FOR_INPUT",
        )
        .await;
    let messages = kandev.messages(&asked.session_id).await;
    let m = messages
        .iter()
        .find(|m| m["metadata"]["pending_id"] == asked.pending_id.as_str())
        .expect("the clarification message");
    assert_eq!(m["metadata"]["status"], status, "message metadata: {m}");
    ws.wait_for_type("message.updated", DEADLINE, |d| {
        d["metadata"]["pending_id"] == asked.pending_id.as_str()
            && d["metadata"]["status"] == status
    })
    .await;
    let task = kandev.task_in_list(&asked.task_id).await;
    assert_eq!(task["pending_action"], Value::Null, "{task}");
    assert_ne!(task["state"], "WAITING_FOR_INPUT", "{task}");
}

/// The operator's `action` on the session (`cancel` the turn, `stop` the session) answers
/// the pending elicitation `cancel` and withdraws the surface; returns the setup.
async fn session_action_cancels_the_question(action: &str) -> (Kandev, Asked) {
    let (kandev, ws, asked) = single_question().await;
    session_action(&kandev, &asked.session_id, action).await;
    assert_eq!(
        first_response(&kandev).await,
        json!({"action": "cancel"}),
        "{action} → cancel"
    );
    assert_withdrawn(&kandev, &ws, &asked, "cancelled").await;
    (kandev, asked)
}

#[tokio::test]
async fn ac_15_turn_cancel_answers_cancel_and_withdraws_the_surface() {
    let (kandev, asked) = session_action_cancels_the_question("cancel").await;
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    late_answer(&kandev, &asked).await;
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "one response on the wire"
    );
}

#[tokio::test]
async fn an_operator_cancel_reaches_the_agent_as_cancel_and_a_second_is_agentctls_404() {
    let (kandev, ws, asked) = single_question().await;
    let path = format!("/api/v1/clarifications/{}/cancel", asked.pending_id);
    let r = kandev.api().request("POST", &path, None).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "cancelled"})));
    assert_eq!(first_response(&kandev).await, json!({"action": "cancel"}));
    assert_withdrawn(&kandev, &ws, &asked, "cancelled").await;
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(
        (record["outcome"].as_str(), record["answered_by"].as_str()),
        (Some("cancelled"), Some("local")),
        "{record}"
    );
    // Forward first: agentctl adjudicates a second cancel, and an answer after it.
    for r in [
        kandev.api().request("POST", &path, None).await,
        late_answer(&kandev, &asked).await,
    ] {
        assert_eq!(
            (r.status, r.body["error"]["origin"].as_str()),
            (404, Some("agentctl")),
            "{r}"
        );
    }
    assert_eq!(
        kandev.frames().elicitation_responses().len(),
        1,
        "one response, ever"
    );
    assert_eq!(
        kandev.clarification(&asked.pending_id).await["outcome"],
        "cancelled"
    );
}

#[tokio::test]
async fn ac_64_answer_deadline_declines_the_request_the_turn_continues_the_surface_is_withdrawn_and_a_deadline_not_below_the_idle_timeout_is_refused()
 {
    assert_a_deadline_not_below_the_idle_timeout_is_refused().await;
    // The idle timeout is far away: the decline is the answer deadline's.
    let kandev = kandev_on(
        KandevOptions::new()
            .answer_timeout("1500ms")
            .env("KANDEV_ACP_IDLE_TIMEOUT", "1h"),
    )
    .await;
    let ws = kandev.ws().await;
    // The deadline is short: find the record whatever its status by now.
    let asked = asked_any_status(&kandev, "/e2e:single").await;
    assert_eq!(
        first_response(&kandev).await,
        json!({"action": "decline"}),
        "decline, not cancel"
    );
    assert_withdrawn(&kandev, &ws, &asked, "expired").await;
    // The turn continued: the agent reported the decline and ended on its original prompt.
    let text = kandev
        .wait_agent_text(&asked.session_id, "elicitation e1 result")
        .await;
    assert!(text.contains("decline"), "{text}");
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    assert_eq!(kandev.frames().prompt_requests().len(), 1);
    let late = late_answer(&kandev, &asked).await;
    assert_eq!(late.body["error"]["origin"], "agentctl", "{late}");
    assert_eq!(kandev.frames().elicitation_responses().len(), 1);
}

#[tokio::test]
async fn agent_cancelling_its_own_request_settles_the_record_cancelled_and_withdraws_the_surface() {
    // The agent cancels 100 ms after asking: wait for the record whatever its status.
    let (kandev, asked) = settled_by_the_agent("/e2e:agent-cancel", "cancelled").await;
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    let late = late_answer(&kandev, &asked).await;
    assert_eq!(
        late.body["error"]["origin"], "agentctl",
        "agentctl no longer holds it: {late}"
    );
    assert_eq!(
        kandev.frames().elicitation_responses(),
        vec![json!({"action": "cancel"})],
        "exactly one response, the cancellation's; the late answer never reached the agent"
    );
}

#[tokio::test]
async fn agent_exit_marks_the_record_agent_disconnected_and_a_later_answer_is_200_not_delivered() {
    // The agent exits 200 ms after asking: wait for the record whatever its status.
    let (kandev, asked) = settled_by_the_agent("/e2e:crash", "agent_disconnected").await;
    let session = assert_failed_and_not_delivered(&kandev, &asked).await;
    assert!(
        session["error"].as_str().expect("error").contains('3'),
        "the reason names the exit code: {session}"
    );
    assert_eq!(
        kandev.clarifications(&asked.session_id, None).await.len(),
        1
    );
    // The session's agentctl is stopped too.
    kandev.wait_agentctls_gone().await;
}

/// A kandev with the flag on, a session on `prompt` whose question the agent settles
/// itself within ms, withdrawn as `status`.
async fn settled_by_the_agent(prompt: &str, status: &str) -> (Kandev, Asked) {
    let kandev = kandev_on(KandevOptions::new()).await;
    let ws = kandev.ws().await;
    let asked = asked_any_status(&kandev, prompt).await;
    assert_withdrawn(&kandev, &ws, &asked, status).await;
    (kandev, asked)
}

/// A session of the mock agent on `prompt` and its first clarification record, in
/// whatever status it has by the time it is seen (for questions settled within ms).
async fn asked_any_status(kandev: &Kandev, prompt: &str) -> Asked {
    let (task, session) = kandev.task_with_session("mock", prompt).await;
    let session_id = session["id"].as_str().expect("id").to_owned();
    let record = poll_until("the clarification record", DEADLINE, || async {
        kandev
            .clarifications(&session_id, None)
            .await
            .into_iter()
            .next()
    })
    .await;
    Asked {
        task_id: task["id"].as_str().expect("id").to_owned(),
        pending_id: record["pending_id"].as_str().expect("id").to_owned(),
        session_id,
        record,
    }
}

/// The session failed saying why, with no pending action, and a submission after
/// `agent_disconnected` is 200 `not_delivered`, recorded on the message, and nothing
/// reaches an agent; returns the failed session.
async fn assert_failed_and_not_delivered(kandev: &Kandev, asked: &Asked) -> Value {
    let session = kandev.wait_session_state(&asked.session_id, "FAILED").await;
    assert_eq!(session["pending_action"], Value::Null);
    assert!(
        session["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{session}"
    );
    let r = kandev
        .answer(&asked.pending_id, &[("question_0", &["SQLite"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(r.body, json!({"status": "not_delivered"}), "{r}");
    assert!(
        kandev.frames().elicitation_responses().is_empty(),
        "nothing on the wire"
    );
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(record["status"], "agent_disconnected", "{record}");
    let messages = kandev.messages(&asked.session_id).await;
    let m = messages
        .iter()
        .find(|m| m["metadata"]["pending_id"] == asked.pending_id.as_str())
        .expect("the clarification message");
    assert_eq!(
        m["metadata"]["undelivered_answer"]["answers"][0]["selected_options"],
        json!(["SQLite"]),
        "what the operator chose is kept on the message: {m}"
    );
    session
}

#[tokio::test]
async fn agentctl_killed_marks_the_record_agent_disconnected_and_a_later_answer_is_200_not_delivered()
 {
    let (kandev, ws, asked) = single_question().await;
    signal_the_agentctl(&kandev, "KILL");
    assert_withdrawn(&kandev, &ws, &asked, "agent_disconnected").await;
    assert_failed_and_not_delivered(&kandev, &asked).await;
    let r = kandev
        .api()
        .post(
            &format!("/api/v1/sessions/{}/prompt", asked.session_id),
            &json!({"text": "hi"}),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (409, "SESSION_ENDED"), "{r}");
}

#[tokio::test]
async fn ac_20a_dropped_stream_is_503_with_the_record_open_then_reattach_answers_the_same_pending_and_loses_no_event()
 {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let kandev = kandev_on(KandevOptions::new().remote(&proxy.ws_url(), agentctl.token())).await;
    let ws = kandev.ws().await;
    let asked = kandev.ask("mock", "/e2e:e2e-detach").await;

    proxy.cut();
    kandev.wait_log("agent stream dropped", 1).await;
    let r = kandev
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(r.status, 503, "{r}");
    assert_eq!(r.body["error"]["code"], "AGENT_STREAM_NOT_CONNECTED", "{r}");
    let record = kandev.clarification(&asked.pending_id).await;
    assert_eq!(
        record["status"], "pending",
        "the record stays open: {record}"
    );
    assert!(
        kandev.frames().elicitation_responses().is_empty(),
        "no ACP frame sent"
    );
    assert!(ws.of_type("clarification.settled").is_empty());
    assert_eq!(
        kandev.session(&asked.session_id).await["state"],
        "WAITING_FOR_INPUT"
    );

    // Restored: the backend re-attaches, the pending is still agentctl's and takes the answer.
    proxy.restore();
    kandev.wait_log("agent stream re-attached", 1).await;
    assert_eq!(
        kandev.clarification(&asked.pending_id).await["status"],
        "pending"
    );
    let answered = kandev
        .answer(&asked.pending_id, &[("question_0", &["Postgres"], "")])
        .await;
    assert_eq!(answered.status, 200, "{answered}");
    assert_eq!(answered.body, json!({"status": "answered"}));
    // The agent pauses 1.5 s after this answer before its next question: drop the
    // stream again at once, so that question is raised while kandev is detached.
    proxy.cut();
    assert_eq!(
        first_response(&kandev).await,
        json!({"action": "accept", "content": {"question_0": "Postgres"}})
    );
    assert_eq!(
        kandev.frames().elicitation_requests().len(),
        1,
        "the second question must come after the cut"
    );
    kandev
        .frames()
        .wait_for_elicitation_request(2, TURN_DEADLINE)
        .await;
    assert_eq!(
        kandev.clarifications(&asked.session_id, None).await.len(),
        1,
        "kandev cannot know of the second question while detached"
    );

    // Restored again: the buffered events arrive (none lost) and the turn goes on.
    proxy.restore();
    let second = poll_until("the buffered second question", DEADLINE, || async {
        kandev
            .clarifications(&asked.session_id, Some("pending"))
            .await
            .into_iter()
            .find(|c| c["pending_id"] != asked.pending_id.as_str())
    })
    .await;
    assert_eq!(second["tool_call_id"], "tool-43");
    kandev
        .wait_clarification_status(&asked.pending_id, "answered")
        .await;
    let second_id = second["pending_id"].as_str().expect("id");
    let r = kandev
        .answer(second_id, &[("question_0", &["Redis"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = kandev
        .frames()
        .wait_for_elicitation_response(2, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"question_0": "Redis"}})
    );
    kandev
        .wait_agent_text(&asked.session_id, "both answered")
        .await;
    kandev.wait_session_state(&asked.session_id, "IDLE").await;
    let text = kandev.agent_text(&asked.session_id).await;
    assert!(
        text.contains("elicitation e1 result") && text.contains("elicitation e2 result"),
        "every agent update arrived: {text}"
    );
    assert!(
        proxy.accepted() >= 3,
        "the stream was re-established twice: {} connections",
        proxy.accepted()
    );
}

#[tokio::test]
async fn session_stop_answers_the_pending_elicitation_cancel_and_withdraws_the_surface() {
    // The session torn down → cancel.
    let (kandev, asked) = session_action_cancels_the_question("stop").await;
    kandev
        .wait_session_state(&asked.session_id, "COMPLETED")
        .await;
}

#[tokio::test]
async fn agentctl_sigterm_answers_the_pending_elicitation_cancel_and_the_surface_is_withdrawn() {
    let (kandev, ws, asked) = single_question().await;
    signal_the_agentctl(&kandev, "TERM");
    assert_eq!(
        first_response(&kandev).await,
        json!({"action": "cancel"}),
        "agentctl shutting down → cancel"
    );
    // Settled by agentctl's shutdown (cancelled) or, if its event lost the race with
    // the exit, by the backend (agent_disconnected): either way withdrawn, never pending.
    let record = poll_until("the record to leave pending", DEADLINE, || async {
        let r = kandev.clarification(&asked.pending_id).await;
        (r["status"] != "pending").then_some(r)
    })
    .await;
    let status = record["status"].as_str().expect("status").to_owned();
    assert!(
        status == "cancelled" || status == "agent_disconnected",
        "{record}"
    );
    assert_withdrawn(&kandev, &ws, &asked, &status).await;
    assert_eq!(kandev.frames().elicitation_responses().len(), 1);
}

#[tokio::test]
async fn ac_20b_agentctl_serves_no_acp_http_route_the_answer_travels_on_the_agent_stream() {
    let agentctl = RemoteAgentctl::start(&[]).await;
    let api = kandev_testkit::HttpClient::new(agentctl.addr());
    for path in [
        "/api/v1/acp/elicitations/respond",
        "/api/v1/acp/permissions/respond",
    ] {
        let r = api.post(path, &json!({"pending_id": "x"})).await;
        assert_eq!(r.status, 404, "POST {path}: {r}");
    }
    // The one route is the agent stream, and it wants the token.
    let r = api.get("/api/v1/agent/stream").await;
    assert!(r.status == 401 || r.status == 400 || r.status == 426, "{r}");
    // And an answer through kandev still arrives: over that stream.
    let proxy = FaultProxy::start(agentctl.addr()).await;
    let kandev = kandev_on(KandevOptions::new().remote(&proxy.ws_url(), agentctl.token())).await;
    let asked = kandev.ask("mock", "/e2e:single").await;
    let r = kandev
        .answer(&asked.pending_id, &[("question_0", &["SQLite"], "")])
        .await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(
        first_response(&kandev).await,
        json!({"action": "accept", "content": {"question_0": "SQLite"}})
    );
    assert_eq!(
        proxy.accepted(),
        1,
        "one agent-stream connection carried it all"
    );
}

/// A kandev whose answer deadline is not below its idle timeout refuses to run a session,
/// and the failure names the variable (AC-64).
async fn assert_a_deadline_not_below_the_idle_timeout_is_refused() {
    let kandev = kandev_on(
        KandevOptions::new()
            .answer_timeout("2s")
            .env("KANDEV_ACP_IDLE_TIMEOUT", "1s"),
    )
    .await;
    let task = kandev.create_task("bad timeouts").await;
    let tid = task["id"].as_str().expect("id");
    let r = kandev
        .try_start_session(tid, "mock", Some("/e2e:single"))
        .await;
    let failed = if r.status == 201 {
        let sid = r.body["id"].as_str().expect("id").to_owned();
        kandev.wait_session_state(&sid, "FAILED").await
    } else {
        assert!(r.status >= 400, "{r}");
        r.body
    };
    let text = failed.to_string();
    assert!(
        text.contains("KANDEV_ELICITATION_ANSWER_TIMEOUT"),
        "the reason names the variable: {failed}"
    );
    assert!(
        kandev.frames().elicitation_requests().is_empty(),
        "no agent ran"
    );
}

/// The session view never contradicts itself while clarifications are raised and settled:
/// `WAITING_FOR_INPUT` exactly when `pending_action` is `"clarification"` (§4.4, AC-09).
/// Every view is read back to back while five questions are raised and withdrawn by a
/// turn cancel.
#[tokio::test]
async fn session_state_and_pending_action_agree_in_every_view_while_clarifications_come_and_go() {
    let kandev = kandev_on(KandevOptions::new()).await;
    let mut contradictions = Vec::new();
    let mut views = 0usize;
    for round in 0..5 {
        let (_, session) = kandev.task_with_session("mock", "/e2e:single").await;
        let sid = session["id"].as_str().expect("id").to_owned();
        let mut answered = false;
        let until = tokio::time::Instant::now() + DEADLINE;
        loop {
            let view = kandev.session(&sid).await;
            views += 1;
            let waiting = view["state"] == "WAITING_FOR_INPUT";
            let pending = view["pending_action"] == "clarification";
            if waiting != pending {
                contradictions.push(format!(
                    "round {round}: state {} with pending_action {}",
                    view["state"], view["pending_action"]
                ));
            }
            if pending && !answered {
                // Settled asynchronously (202 at once), as agentctl's own settlements are.
                session_action(&kandev, &sid, "cancel").await;
                answered = true;
            }
            if answered && view["state"] == "IDLE" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "round {round}: the turn did not end: {view}"
            );
        }
    }
    assert!(
        contradictions.is_empty(),
        "{} of {views} session views contradicted themselves: {contradictions:?}",
        contradictions.len()
    );
}
