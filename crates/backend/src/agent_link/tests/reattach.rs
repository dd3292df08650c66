//! Reconnecting and re-attaching: what fails meanwhile, what is replayed, what agentctl
//! still holds, and resuming a running session.

use super::*;

#[tokio::test]
async fn a_drop_fails_in_flight_requests_refuses_new_ones_then_reattaches() {
    let (mut server, link, mut events, mut conn) = started().await;

    // A request is sent, then the stream dies before its answer.
    let prompt = Prompt {
        text: "lost".into(),
    };
    let (in_flight, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        conn.expect(action::PROMPT, "the prompt").await;
        drop(conn);
    });
    assert!(
        matches!(in_flight, Err(LinkError::Interrupted)),
        "a request lost with its stream may have been carried out: {in_flight:?}"
    );
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);

    // The link dials again; hold its upgrade so the stream stays down meanwhile.
    let held = server.next_tcp().await;
    assert!(!link.is_connected());
    let prompt = Prompt {
        text: "while down".into(),
    };
    refused(&link, action::PROMPT, &prompt).await;

    let mut conn = TestServer::upgrade(held).await.expect("upgrade");
    // The first frame on the new stream is the attach: the refused prompt was never sent.
    answer_attach(&mut conn, &[update(1)], &[update(2)], &["p-1"]).await;
    // The kept events first, then the snapshot taken after them, then live events.
    let mut expected = agent_updates(1..=2);
    expected.push(reattached(&["p-1"]));
    next_events(&mut events, expected).await;
    conn.event(300, &update(3)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(3)));

    assert!(link.is_connected());
    let prompt = Prompt {
        text: "again".into(),
    };
    let accepted = PromptAccepted { accepted: true };
    let (again, ()) = tokio::join!(
        link.request::<_, PromptAccepted>(action::PROMPT, &prompt),
        async {
            let request = conn.recv().await;
            assert_eq!(request.payload, json!({"text": "again"}));
            conn.reply(&request, &accepted).await;
        }
    );
    assert_eq!(again.expect("answered after re-attach"), accepted);
}

#[tokio::test]
async fn a_stream_with_no_session_reconnects_without_attaching() {
    let (mut server, link, mut events, conn) = linked(quick()).await;
    let mut conn = server.redialed(&mut events, conn).await;
    let unknown = LinkEvent::Reattached {
        pending: vec![],
        questions: None,
    };
    assert_eq!(next_event(&mut events).await, unknown);
    let (answer, ()) = tokio::join!(link.request::<_, Value>(action::CANCEL, &Empty {}), async {
        let request = conn
            .expect(action::CANCEL, "no attach without a started session")
            .await;
        conn.reply(&request, &Success::OK).await;
    });
    assert_eq!(answer.expect("cancel"), json!({"success": true}));
}

#[tokio::test]
async fn a_refused_reattach_loses_the_link() {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.refuse(&attach, ErrorCode::NotFound, "no such session")
        .await;
    expect_lost(&mut events, "no such session").await;
    assert!(!link.is_connected());
    refused(&link, action::PROMPT, &Prompt { text: "x".into() }).await;
}

/// The attach's own pending list is older than the events agentctl flushes after it, so a
/// record one of them opened is missing from it: reconciling against it would settle a
/// record whose request agentctl still holds. Without a usable `agent.elicitations.list`
/// the link attaches again instead; a refused question list is only "unknown".
#[tokio::test]
async fn a_refused_pending_list_attaches_again_instead_of_trusting_the_older_attach_list() {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let stale = attached(vec![pending("p-9")]);
    // On each stream: the attach, answered with the stale list; then the pending list.
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &stale).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.refuse(&list, ErrorCode::UnknownAction, "unknown action")
        .await;
    // A second stream, whose list is answered.
    let mut conn = server.next_conn().await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &stale).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.reply(
        &list,
        &json!({"pending": [pending("p-9"), pending("p-10")]}),
    )
    .await;
    let questions = conn.expect(action::QUESTIONS_LIST, "the questions").await;
    conn.refuse(&questions, ErrorCode::UnknownAction, "unknown action")
        .await;
    // Nothing was reported for the first stream: the only snapshot is the list's. No
    // question list is "unknown", never "none held": nothing may be withdrawn on it.
    assert_eq!(
        next_event(&mut events).await,
        LinkEvent::Reattached {
            pending: vec![pending("p-9"), pending("p-10")],
            questions: None,
        }
    );
    assert!(link.is_connected());
}

/// Drops `conn` and plays agentctl's side of the re-attach that follows: checks the
/// attach names `after_seq`, answers it, replays `replay` (sequence, event) behind the
/// answer and answers the pending list with `pending_ids`.
async fn reattach_with_replay(
    server: &mut TestServer,
    events: &mut Events,
    conn: Conn,
    after_seq: Option<u64>,
    replay: &[(u64, AgentEvent)],
    pending_ids: &[&str],
) -> Conn {
    let mut conn = server.redialed(events, conn).await;
    answer_attach_after(&mut conn, after_seq, replay, pending_ids).await;
    conn
}

/// Answers an `agent.session.attach` that must carry `after_seq`, replays `replay`
/// behind its answer, then answers the pending list that must follow.
async fn answer_attach_after(
    conn: &mut Conn,
    after_seq: Option<u64>,
    replay: &[(u64, AgentEvent)],
    pending_ids: &[&str],
) {
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    let mut expected = json!({"session_id": SESSION});
    if let Some(after) = after_seq {
        expected["after_seq"] = json!(after);
    }
    assert_eq!(
        attach.payload, expected,
        "the attach names the last delivered event"
    );
    conn.reply(&attach, &attached(Vec::new())).await;
    conn.events(replay).await;
    answer_lists(conn, "the list", pending_ids).await;
}

#[tokio::test]
async fn a_reattach_asks_for_what_followed_the_last_delivered_event_and_drops_replays() {
    let (mut server, _link, mut events, mut conn) = started().await;
    for n in 1..=3 {
        conn.event(n, &update(n)).await;
        assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(n)));
    }
    // agentctl replays from further back than asked: 2 and 3 are not delivered again.
    let replay = updates(2..=5);
    let mut conn =
        reattach_with_replay(&mut server, &mut events, conn, Some(3), &replay, &["p-1"]).await;
    let mut expected = agent_updates(4..=5);
    expected.push(reattached(&["p-1"]));
    next_events(&mut events, expected).await;
    // A live duplicate is dropped as well; the next new event comes through.
    conn.events(&updates(5..=6)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(6)));
    // The next drop asks from the newest event delivered.
    let _conn = reattach_with_replay(&mut server, &mut events, conn, Some(6), &[], &[]).await;
    assert_eq!(next_event(&mut events).await, reattached(&[]));
}

#[tokio::test]
async fn an_event_swallowed_by_a_dying_stream_arrives_once_after_the_reattach() {
    let (mut server, _link, mut events, mut conn) = started().await;
    conn.event(1, &update(1)).await;
    assert_eq!(next_event(&mut events).await, LinkEvent::Agent(update(1)));
    // agentctl handed the settlement (seq 2) to this stream, which died before it
    // arrived; it is replayed after the answer to an attach with after_seq 1.
    let settled = AgentEvent::ElicitationSettled {
        pending_id: "p-1".into(),
        outcome: kandev_agent_stream::SettleOutcome::Answered,
        response: json!({"action": "accept"}),
        answer: None,
        answered_by: None,
    };
    let done = AgentEvent::TurnCompleted {
        stop_reason: "end_turn".into(),
        error: None,
    };
    let replay = [(2, settled.clone()), (3, done.clone())];
    let _conn = reattach_with_replay(&mut server, &mut events, conn, Some(1), &replay, &[]).await;
    let expected = [
        LinkEvent::Agent(settled),
        LinkEvent::Agent(done),
        reattached(&[]),
    ];
    next_events(&mut events, expected).await;
}

#[tokio::test]
async fn resume_attaches_a_running_session_after_the_given_sequence() {
    let mut server = TestServer::start().await;
    let executor = server.executor(TOKEN);
    // The server side is returned, so the stream stays open for the rest of the test.
    let (resumed, _conn) = tokio::join!(
        AgentLink::resume_with(&executor, SESSION, Some(7), quick()),
        async {
            let mut conn = server.next_conn().await;
            answer_attach_after(&mut conn, Some(7), &updates(7..=8), &["p-1"]).await;
            conn
        }
    );
    let (link, mut events) = resumed.expect("resumed");
    let expected = [LinkEvent::Agent(update(8)), reattached(&["p-1"])];
    next_events(&mut events, expected).await;
    assert!(link.is_connected());
}

#[tokio::test]
async fn a_resume_agentctl_refuses_is_unreachable() {
    let mut server = TestServer::start().await;
    let executor = server.executor(TOKEN);
    let (resumed, ()) = tokio::join!(
        AgentLink::resume_with(&executor, SESSION, None, quick()),
        async {
            let mut conn = server.next_conn().await;
            let attach = conn.recv().await;
            assert_eq!(attach.payload, json!({"session_id": SESSION}));
            conn.refuse(&attach, ErrorCode::NotFound, "no session `s-1`")
                .await;
        }
    );
    match resumed {
        Err(LinkError::Unreachable(reason)) => {
            assert!(reason.contains("no session"), "{reason}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn reattached_carries_the_held_calls_and_events_newer_than_the_elicitation_snapshot_follow_it()
 {
    let (mut server, link, mut events, conn) = started().await;
    let mut conn = server.redialed(&mut events, conn).await;
    let attach = conn.expect(action::SESSION_ATTACH, "the attach").await;
    conn.reply(&attach, &attached(Vec::new())).await;
    conn.event(1, &update(1)).await;
    let list = conn.expect(action::ELICITATIONS_LIST, "the list").await;
    conn.reply(&list, &json!({ "pending": [] })).await;
    answer_questions_list(&mut conn, &[(2, update(2))], &["call-1"]).await;
    let with_the_call = LinkEvent::Reattached {
        pending: Vec::new(),
        questions: Some(vec![question("call-1")]),
    };
    // The update newer than the elicitation snapshot follows the `Reattached`: it must
    // not be reconciled against it.
    let expected = [
        LinkEvent::Agent(update(1)),
        with_the_call,
        LinkEvent::Agent(update(2)),
    ];
    next_events(&mut events, expected).await;
    assert!(link.is_connected());
}
