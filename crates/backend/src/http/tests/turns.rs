//! A turn: prompts, the agent's text as operators see it, and agentctl's errors.

use super::*;

#[tokio::test]
async fn prompt_runs_a_turn_and_messages_aggregate() {
    let Started { api, link, id, .. } = started().await;
    let prompt = session_uri(&id, "prompt");
    let nope = "/api/v1/sessions/nope/prompt";
    api.refuses_all(&[
        ("POST", nope, Some(r#"{"text": "hi"}"#), 404, NOT_FOUND),
        ("POST", &prompt, Some(r#"{"text": ""}"#), 400, BAD),
        ("POST", &prompt, Some(r#"{"txt": "x"}"#), 400, BAD),
    ])
    .await;
    let hello = Some(r#"{"text": "Say hello"}"#);
    api.post(&prompt, hello, StatusCode::ACCEPTED).await;
    assert_eq!(api.state_of(&id).await, "RUNNING");
    let again = Some(r#"{"text": "again"}"#);
    api.refuses("POST", &prompt, again, 409, "TURN_IN_PROGRESS")
        .await;
    for text in ["Hel", "lo"] {
        link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}),
        }));
    }
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    let messages = api.messages(&id).await;
    let summary: Vec<(&str, &str)> = messages
        .as_array()
        .expect("list")
        .iter()
        .map(|m| {
            let text = |key: &str| m[key].as_str().unwrap_or_default();
            (text("author_type"), text("content"))
        })
        .collect();
    assert_eq!(summary, [("user", "Say hello"), ("agent", "Hello")]);
    let nope = "/api/v1/sessions/nope/messages";
    api.refuses("GET", nope, None, 404, NOT_FOUND).await;
    // turn_finished is off by default.
    assert_eq!(api.notifications().await, json!([]));
}

#[tokio::test]
async fn operators_see_the_prompt_before_an_agent_reply_that_outran_the_prompts_request() {
    let Started { api, link, id, .. } = started().await;
    let (release, gate) = tokio::sync::oneshot::channel();
    *link.prompt_gate.lock().expect("lock") = Some(gate);
    let mut ws = api.hub();
    let uri = session_uri(&id, "prompt");
    let prompt = api.post(&uri, Some(r#"{"text": "Say hi"}"#), StatusCode::ACCEPTED);
    // agentctl has the prompt but its reply is held; the agent answers meanwhile, and its
    // message is stored before the prompt's request is back.
    let agent_replies_first = async {
        eventually("the prompt sent", || async {
            (link.calls_of::<Prompt>().len() == 1).then_some(())
        })
        .await;
        link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Hi"}}}),
        }));
        eventually("the agent's message stored", || async {
            (api.messages(&id).await.as_array().map(Vec::len) == Some(2)).then_some(())
        })
        .await;
        release.send(()).expect("the request waits");
    };
    tokio::join!(prompt, agent_replies_first);
    let mut created = Vec::new();
    while created.len() < 2 {
        let e = next_hub_event(&mut ws).await;
        if e.kind == "message.created" {
            created.push((e.data["seq"].clone(), e.data["author_type"].clone()));
        }
    }
    assert_eq!(
        created,
        [(json!(1), json!("user")), (json!(2), json!("agent"))],
        "in seq order, the prompt first"
    );
}

#[tokio::test]
async fn queued_chunks_reach_operators_as_one_created_then_appends_of_the_new_text() {
    let Started { api, link, id, .. } = started().await;
    api.post(
        &session_uri(&id, "prompt"),
        Some(r#"{"text": "Stream"}"#),
        StatusCode::ACCEPTED,
    )
    .await;
    let mut ws = api.hub();
    let chunk = |kind: &str, text: &str| {
        LinkEvent::Agent(AgentEvent::SessionUpdate {
            update: json!({"sessionId": "acp-1", "update": {"sessionUpdate": kind,
                "content": {"type": "text", "text": text}}}),
        })
    };
    // 300 chunks of 10 bytes (8 UTF-16 units: the emoji is two), queued before the
    // consumer runs (this runtime has one thread): one batch of `MAX_EVENTS`, then the rest.
    let texts: Vec<String> = (1..=300).map(|i| format!("{i:04}🙂ab")).collect();
    *link.delivered.lock().expect("lock") = Some(303);
    for text in &texts {
        link.push(chunk("agent_message_chunk", text));
    }
    link.push(LinkEvent::Agent(AgentEvent::SessionUpdate {
        update: json!({"update": {"sessionUpdate": "tool_call", "toolCallId": "t1",
            "title": "Read", "status": "pending"}}),
    }));
    link.push(chunk("agent_thought_chunk", "t1"));
    link.push(chunk("agent_thought_chunk", "t2"));
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;

    let mut messages = Vec::new();
    while messages.len() < 4 {
        let e = next_hub_event(&mut ws).await;
        // The prompt's own message may still be on its way.
        if e.kind.starts_with("message.") && e.data["author_type"] != "user" {
            messages.push(e);
        }
    }
    let kinds: Vec<&str> = messages.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            "message.created",
            "message.appended",
            "message.created",
            "message.created"
        ]
    );
    let (created, appended) = (&*messages[0].data, &*messages[1].data);
    let max = crate::sessions::chunks::MAX_EVENTS;
    assert_eq!(created["content"], texts[..max].concat());
    let all = texts.concat();
    assert_eq!(
        appended,
        &json!({
            "id": created["id"],
            "session_id": id,
            "task_id": created["task_id"],
            "seq": created["seq"],
            "type": "message",
            "author_type": "agent",
            "updated_at": appended["updated_at"],
            "text": texts[max..].concat(),
            "length": all.encode_utf16().count(),
        }),
        "the appended text and the length after it, never the whole content"
    );
    assert_eq!(all.encode_utf16().count(), 300 * 8);
    assert_eq!(messages[2].data["type"], "tool_call");
    assert_eq!(
        [&messages[3].data["type"], &messages[3].data["content"]],
        [&json!("thought"), &json!("t1t2")]
    );
    let stored = api.messages(&id).await;
    assert_eq!(stored[1]["content"], all);
    // Merged events count as applied like any: how far is stored once all are applied.
    eventually("the last applied event stored", || async {
        let row = api.state.stores.sessions.session(&id).await.expect("row");
        (row.expect("session").last_event_seq == Some(303)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn prompt_when_the_stream_is_down_is_503() {
    let Started { api, link, id, .. } = started().await;
    link.down.store(true, SeqCst);
    let x = Some(r#"{"text": "x"}"#);
    api.refuses("POST", &session_uri(&id, "prompt"), x, 503, STREAM_DOWN)
        .await;
    api.nothing_left_behind(&id).await;
    api.refuses_all(&[
        ("POST", &session_uri(&id, "cancel"), None, 503, STREAM_DOWN),
        ("POST", "/api/v1/sessions/nope/cancel", None, 404, NOT_FOUND),
    ])
    .await;
}

#[tokio::test]
async fn agentctl_errors_map_to_their_statuses() {
    let Started { api, link, id, .. } = started().await;
    let prompt = session_uri(&id, "prompt");
    let errors = [
        (
            remote_error(ErrorCode::Internal, "agent crashed"),
            502,
            "AGENTCTL_ERROR",
        ),
        (
            Err(LinkError::Timeout(Duration::from_secs(30))),
            504,
            "AGENTCTL_TIMEOUT",
        ),
        (remote_error(ErrorCode::BadRequest, "no session"), 400, BAD),
        (
            Err(LinkError::Protocol("garbled".into())),
            502,
            "AGENTCTL_ERROR",
        ),
    ];
    for (reply, status, code) in errors {
        link.reply::<Prompt>(reply);
        api.refuses("POST", &prompt, Some(r#"{"text": "x"}"#), status, code)
            .await;
    }
    // None of them left a turn running or a user message behind.
    api.nothing_left_behind(&id).await;
}

#[tokio::test]
async fn agent_exit_fails_the_session() {
    let Started { api, link, id, .. } = started().await;
    link.push(LinkEvent::Agent(AgentEvent::AgentExited { code: Some(3) }));
    let s = api.wait_state(&id, "FAILED").await;
    assert!(s["error"].as_str().expect("error").contains('3'));
    eventually("agentctl stopped", || async {
        link.shut.load(SeqCst).then_some(())
    })
    .await;
}

#[tokio::test]
async fn cancel_and_stop() {
    let Started { api, link, id, .. } = waiting().await;
    let (cancel, stop) = (session_uri(&id, "cancel"), session_uri(&id, "stop"));
    api.post(&cancel, None, StatusCode::ACCEPTED).await;
    assert_eq!(link.calls_of::<Cancel>().len(), 1);
    api.post(&stop, None, StatusCode::ACCEPTED).await;
    let v = api.session(&id).await;
    assert_eq!(
        [&v["state"], &v["pending_action"]],
        [&json!("COMPLETED"), &Value::Null]
    );
    assert!(link.shut.load(SeqCst));
    assert_eq!(api.status_of("p-1").await, "cancelled");
    api.refuses_all(&[
        ("POST", &stop, None, 409, ENDED),
        ("POST", &cancel, None, 409, ENDED),
        ("POST", "/api/v1/sessions/nope/stop", None, 404, NOT_FOUND),
    ])
    .await;
    // A late answer to a record of an ended session: agentctl cannot be asked, the backend says so.
    let no_answers = Some(NO_ANSWERS);
    let error = api
        .refuses("POST", &respond_uri("p-1"), no_answers, 404, NOT_FOUND)
        .await;
    assert_eq!(error["origin"], "backend");
}

#[tokio::test]
async fn turn_finished_notification_when_enabled() {
    let mut config = Config::default();
    config.notifications.turn_finished = true;
    let (state, connector) = app_with(BTreeMap::new(), config).await;
    let api = api(state);
    let task = task(&api).await;
    let s = session(&api, &task, Some("go")).await;
    assert_eq!(s["state"], "RUNNING");
    let id = s["id"].as_str().expect("id");
    let link = connector.link(id);
    assert_eq!(link.calls_of::<Prompt>(), [json!({"text": "go"})]);
    link.push(turn_completed());
    api.wait_state(id, "IDLE").await;
    let n = api.notifications().await;
    assert_eq!(n[0]["event"], "session.turn_finished");
}
