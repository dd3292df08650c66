//! Questions: an elicitation opened, answered, settled, withdrawn or disconnected, and the
//! AskUserQuestion calls.

use super::*;

#[tokio::test]
async fn elicitation_creates_record_message_state_and_one_notification() {
    let Started {
        api,
        task,
        id,
        link,
        ..
    } = started().await;
    let mut ws = api.hub();
    let pending = "0b6c7a4e-1d2f-4a8b-9c3d-5e6f7a8b9c0d";
    link.push(elicitation(pending, "Pick a colour"));
    let s = api.wait_state(&id, "WAITING_FOR_INPUT").await;
    assert_eq!(s["pending_action"], "clarification");
    let t = api.get(&format!("/api/v1/tasks/{task}")).await;
    assert_eq!(
        [&t["state"], &t["pending_action"]],
        [&json!("WAITING_FOR_INPUT"), &json!("clarification")]
    );

    let rec = api.record(pending).await;
    assert_eq!(rec["pending_id"], pending, "agentctl's id verbatim");
    assert_eq!(
        [&rec["source"], &rec["status"]],
        [&json!("elicitation"), &json!("pending")]
    );
    let m = &api.messages(&id).await[0];
    assert_eq!(
        [&m["type"], &m["author_type"], &m["requests_input"]],
        [
            &json!("clarification_request"),
            &json!("agent"),
            &json!(true)
        ]
    );
    assert_eq!(m["metadata"]["pending_id"], pending);
    assert_eq!(m["metadata"]["status"], "pending");
    assert_eq!(m["metadata"]["questions"][0]["id"], "question_0");

    let list = eventually("the notification", || async {
        let list = api.notifications().await.as_array().cloned();
        list.filter(|l| !l.is_empty())
    })
    .await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["event"], "session.clarification_requested");
    let body = list[0]["body"].as_str().expect("body");
    assert!(body.contains("Fix the login page"));
    assert!(!body.contains("Pick a colour"));

    let mut kinds = Vec::new();
    for kind in [
        "clarification.created",
        "message.created",
        "session.updated",
        "task.updated",
        "notification",
    ] {
        while !kinds.contains(&kind) {
            kinds.push(next_hub_event(&mut ws).await.kind);
        }
    }

    let filtered = api
        .clarifications(&format!("session_id={id}&status=pending"))
        .await;
    assert_eq!(filtered.as_array().map(Vec::len), Some(1));
    let none = api.clarifications("status=answered").await;
    assert_eq!(none, json!([]));
    api.refuses_all(&[
        ("GET", "/api/v1/clarifications?status=bogus", None, 400, BAD),
        ("GET", "/api/v1/clarifications/nope", None, 404, NOT_FOUND),
    ])
    .await;
}

#[tokio::test]
async fn respond_forwards_first_and_settles_from_agentctls_verdict() {
    let Started { api, link, id, .. } = asked_twice("Pick a colour").await;
    let answer = Some(
        r#"{"answers": [{"question_id": "question_0", "selected_options": ["Red"]}], "rejected": false, "reject_reason": ""}"#,
    );
    let respond = respond_uri("p-1");

    // Unknown id in the backend: 404 from the backend, nothing forwarded.
    let error = api
        .refuses("POST", &respond_uri("nope"), answer, 404, NOT_FOUND)
        .await;
    assert_eq!(error["origin"], "backend");
    assert!(link.calls_of::<ElicitationsRespond>().is_empty());
    let three = Some(r#"{"answers": 3}"#);
    api.refuses("POST", &respond, three, 400, BAD).await;

    // INVALID_ANSWER passes through as 400, record stays pending.
    link.reply::<ElicitationsRespond>(remote_error(
        ErrorCode::InvalidAnswer,
        "option `Green` is not declared",
    ));
    let error = api
        .refuses("POST", &respond, answer, 400, "INVALID_ANSWER")
        .await;
    assert!(error["message"].as_str().expect("m").contains("Green"));
    assert_eq!(api.status_of("p-1").await, "pending");

    // Stream down: 503, record stays pending (AC-20a).
    link.down.store(true, SeqCst);
    api.refuses("POST", &respond, answer, 503, STREAM_DOWN)
        .await;
    assert_eq!(api.status_of("p-1").await, "pending");
    link.down.store(false, SeqCst);

    // Success: answered, message metadata updated, the twin still pending (D4).
    let (s, v) = api.call("POST", &respond, answer).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    let rec = api.record("p-1").await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    assert!(rec["settled_at"].is_string());
    assert_eq!(api.status_of("p-2").await, "pending");
    assert_eq!(api.state_of(&id).await, "WAITING_FOR_INPUT");

    // A second submission is still forwarded; agentctl's NOT_FOUND comes back as origin agentctl.
    link.reply::<ElicitationsRespond>(remote_error(ErrorCode::NotFound, "no pending `p-1`"));
    let error = api.refuses("POST", &respond, answer, 404, NOT_FOUND).await;
    assert_eq!(error["origin"], "agentctl");
    assert_eq!(
        link.calls_of::<ElicitationsRespond>().len(),
        3,
        "every submission reached agentctl"
    );
    assert_eq!(api.status_of("p-1").await, "answered");

    // Skip: declined.
    let skip = r#"{"rejected": true, "reject_reason": "later"}"#;
    let (s, v) = api.respond("p-2", skip).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "declined"})));
    api.wait_state(&id, "IDLE").await;
    let messages = api.messages(&id).await;
    let statuses: Vec<&Value> = messages
        .as_array()
        .expect("l")
        .iter()
        .map(|m| &m["metadata"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("answered"), &json!("declined")]);
}

#[tokio::test]
async fn settled_events_withdraw_the_surface() {
    let Started { api, link, id, .. } = waiting().await;
    let mut ws = api.hub();
    let decline = json!({"action": "decline"});
    link.push(settled("p-1", SettleOutcome::TimedOut, decline));
    let s = api.wait_state(&id, "IDLE").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(api.status_of("p-1").await, "expired");
    let messages = api.messages(&id).await;
    assert_eq!(messages[0]["metadata"]["status"], "expired");
    let kinds: Vec<&str> = std::iter::from_fn(|| ws.try_recv().ok())
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"clarification.settled"), "{kinds:?}");

    // A settled event for a record the operator already settled changes nothing.
    link.push(elicitation("p-2", "q"));
    api.wait_state(&id, "WAITING_FOR_INPUT").await;
    let (s, _) = api.respond("p-2", NO_ANSWERS).await;
    assert_eq!(s, StatusCode::OK);
    let accept = json!({"action": "accept", "content": {}});
    link.push(settled("p-2", SettleOutcome::Answered, accept));
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    assert_eq!(api.status_of("p-2").await, "answered");
}

#[tokio::test]
async fn a_lost_link_disconnects_pendings_and_answers_are_not_delivered() {
    let Started { api, link, id, .. } = waiting().await;
    link.push(LinkEvent::Lost {
        reason: "agentctl died".into(),
    });
    let s = api.wait_state(&id, "FAILED").await;
    assert_eq!(s["pending_action"], Value::Null);
    assert_eq!(api.status_of("p-1").await, "agent_disconnected");
    let (s, v) = api.respond("p-1", RED).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "not_delivered"})));
    assert!(
        link.calls_of::<ElicitationsRespond>().is_empty(),
        "nothing sent"
    );
    let messages = api.messages(&id).await;
    let m = messages
        .as_array()
        .expect("l")
        .iter()
        .find(|m| m["type"] == "clarification_request")
        .expect("msg");
    assert_eq!(m["metadata"]["status"], "agent_disconnected");
    assert_eq!(
        m["metadata"]["undelivered_answer"]["answers"][0]["selected_options"],
        json!(["Red"])
    );
    let x = Some(r#"{"text": "x"}"#);
    api.refuses("POST", &session_uri(&id, "prompt"), x, 409, ENDED)
        .await;
}

#[tokio::test]
async fn reattach_disconnects_records_agentctl_no_longer_holds() {
    let Started { api, link, id, .. } = asked_twice("q").await;
    link.push(LinkEvent::Disconnected);
    link.push(reattached(&["p-2"]));
    api.only_p2_is_held(&id).await;
}

#[tokio::test]
async fn a_settled_event_racing_the_respond_success_ends_in_one_consistent_state() {
    let Started { api, link, id, .. } = waiting().await;
    let mut ws = api.hub();
    let blue = r#"{"answers": [{"question_id": "question_0", "selected_options": ["Blue"]}]}"#;
    let (s, v) = api.respond("p-1", blue).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "answered"})));
    // Let the consumer apply the settled event it received during the request.
    link.push(turn_completed());
    api.wait_state(&id, "IDLE").await;
    let rec = api.record("p-1").await;
    assert_eq!(rec["status"], "answered");
    assert_eq!(
        rec["answer"]["answers"][0]["selected_options"],
        json!(["Blue"])
    );
    let settled: Vec<_> = std::iter::from_fn(|| ws.try_recv().ok())
        .filter(|e| e.kind == "clarification.settled")
        .collect();
    assert_eq!(settled.len(), 1, "withdrawn once");
    assert_eq!(
        settled[0].data["answer"]["answers"][0]["selected_options"],
        json!(["Blue"])
    );
}

fn ask_user_question(request_id: &str, prompt: &str) -> AskUserQuestionRequested {
    serde_json::from_value(json!({
        "request_id": request_id,
        "acp_session_id": "acp-1",
        "questions": [{"id": "q1", "title": null, "prompt": prompt, "kind": "single_select",
            "options": [{"id": "Yes", "label": "Yes", "description": null},
                {"id": "No", "label": "No", "description": null}],
            "custom_answer": null, "required": true, "default": null, "constraints": {}}],
        "context": null
    }))
    .expect("ask_user_question_requested")
}

#[tokio::test]
async fn reattach_cancels_ask_user_question_calls_agentctl_no_longer_holds() {
    let Started { api, link, id, .. } = started().await;
    let gone = ask_user_question("call-gone", "Deploy now?");
    let held = ask_user_question("call-held", "Run the migration?");
    for call in [&gone, &held] {
        link.push(LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(
            call.clone(),
        )));
    }
    api.wait_pending_count(2).await;

    // No question list (agentctl did not answer it) is "unknown": nothing is withdrawn.
    // The elicitation pushed behind it is the sync point: events are applied in order.
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: None,
    });
    link.push(elicitation("p-sync", "q"));
    api.wait_pending_count(3).await;

    // call-gone's `ask_user_question_settled` was lost; agentctl lists only call-held,
    // and a call whose requested event was lost as well.
    let mut ws = api.hub();
    let unseen = ask_user_question("call-unseen", "Rotate the keys?");
    link.push(LinkEvent::Disconnected);
    link.push(LinkEvent::Reattached {
        pending: Vec::new(),
        questions: Some(vec![held, unseen]),
    });
    // The surface is withdrawn like any settlement: the WS event (published last, after
    // the record and its message metadata are written) is the sync point.
    let event = loop {
        let e = next_hub_event(&mut ws).await;
        if e.kind == "clarification.settled" && e.data["message"] == "Deploy now?" {
            break e;
        }
    };
    assert_eq!(event.data["status"], "cancelled");
    let cancelled = api.record_asking(&id, "Deploy now?").await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["pending_id"], event.data["pending_id"]);
    let messages = api.messages(&id).await;
    let message = messages
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|m| m["metadata"]["pending_id"] == cancelled["pending_id"])
        })
        .expect("the record's message");
    assert_eq!(message["metadata"]["status"], "cancelled");
    // p-sync is an elicitation agentctl no longer lists either; call-held and
    // call-unseen remain, so the session still waits for input.
    api.wait_pending_count(2).await;
    let still = [
        (
            "Run the migration?",
            "a call agentctl still holds stays pending",
        ),
        (
            "Rotate the keys?",
            "a held call the backend never saw is opened",
        ),
    ];
    for (prompt, why) in still {
        let record = api.record_asking(&id, prompt).await;
        assert_eq!(record["status"], "pending", "{why}");
    }
    assert_eq!(
        api.wait_state(&id, "WAITING_FOR_INPUT").await["pending_action"],
        "clarification"
    );

    // The held call's record is still answerable.
    let held = api.record_asking(&id, "Run the migration?").await;
    let held_id = held["pending_id"].as_str().expect("pending_id");
    let yes = r#"{"answers": [{"question_id": "q1", "selected_options": ["Yes"]}]}"#;
    let (s, v) = api.respond(held_id, yes).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(api.status_of(held_id).await, "answered");
}
