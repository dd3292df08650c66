//! Requests and their answers, events in order, the frames' shape and the token.

use super::*;

#[tokio::test]
async fn concurrent_requests_each_get_their_own_answer() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let ask = |text: &'static str| {
        let link = link.clone();
        async move {
            link.request::<_, Value>(action::PROMPT, &Prompt { text: text.into() })
                .await
        }
    };
    let server_side = async {
        let mut requests = Vec::new();
        for _ in 0..3 {
            requests.push(conn.recv().await);
        }
        // Answer in reverse order, echoing each request's own text.
        for request in requests.iter().rev() {
            conn.reply(request, &json!({"echo": request.payload["text"]}))
                .await;
        }
    };
    let (a, b, c, ()) = tokio::join!(ask("a"), ask("b"), ask("c"), server_side);
    assert_eq!(a.expect("a"), json!({"echo": "a"}));
    assert_eq!(b.expect("b"), json!({"echo": "b"}));
    assert_eq!(c.expect("c"), json!({"echo": "c"}));
}

#[tokio::test]
async fn an_error_frame_is_a_remote_error_carrying_its_payload() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let respond = json!({"pending_id": "p-1"});
    let (answer, ()) = tokio::join!(
        link.request::<_, Success>(action::ELICITATIONS_RESPOND, &respond),
        async {
            let request = conn.recv().await;
            conn.refuse(&request, ErrorCode::InvalidAnswer, "not an option")
                .await;
        }
    );
    match answer {
        Err(LinkError::Remote(error)) => {
            assert_eq!(
                error,
                ErrorPayload::new(ErrorCode::InvalidAnswer, "not an option")
            );
        }
        other => panic!("expected Remote, got {other:?}"),
    }
    assert!(
        link.is_connected(),
        "an error frame does not disturb the stream"
    );
}

#[tokio::test]
async fn an_undecodable_answer_is_a_protocol_error() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let prompt = Prompt { text: "hi".into() };
    let (answer, ()) = tokio::join!(
        link.request::<_, PromptAccepted>(action::PROMPT, &prompt),
        async {
            let request = conn.recv().await;
            conn.reply(&request, &json!({"accepted": "maybe"})).await;
        }
    );
    assert!(matches!(answer, Err(LinkError::Protocol(_))), "{answer:?}");
}

#[tokio::test]
async fn an_unanswered_request_times_out_and_its_late_answer_is_ignored() {
    let options = LinkOptions {
        request_timeout: Duration::from_millis(200),
        ..quick()
    };
    let (_server, link, _events, mut conn) = linked(options).await;

    let slow = link
        .request::<_, Value>(
            action::PROMPT,
            &Prompt {
                text: "slow".into(),
            },
        )
        .await;
    assert!(matches!(slow, Err(LinkError::Timeout(t)) if t == Duration::from_millis(200)));
    let unanswered = conn.recv().await;

    let prompt = Prompt {
        text: "next".into(),
    };
    let (next, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        let next = conn.recv().await;
        // The late answer first: it must not be taken for the second request's.
        conn.reply(&unanswered, &json!({"which": "late"})).await;
        conn.reply(&next, &json!({"which": "next"})).await;
    });
    assert_eq!(next.expect("next answered"), json!({"which": "next"}));
}

#[tokio::test]
async fn events_arrive_in_order_interleaved_with_answers() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    let (answer, ()) = tokio::join!(
        link.request::<_, Value>(action::ELICITATIONS_LIST, &Empty {}),
        async {
            conn.events(&updates(0..100)).await;
            let request = conn.recv().await;
            conn.reply(&request, &json!({"pending": []})).await;
            conn.events(&updates(100..200)).await;
            // A notification of another action and an undecodable event are skipped.
            conn.send(&Envelope::notification("x", "agent.other", &json!({})))
                .await;
            conn.send(&Envelope::notification(
                "y",
                action::AGENT_EVENT,
                &json!({"event": "?"}),
            ))
            .await;
            conn.event(200, &update(200)).await;
        }
    );
    assert_eq!(answer.expect("list"), json!({"pending": []}));
    next_events(&mut events, agent_updates(0..=200)).await;
}

#[tokio::test]
async fn frames_carry_the_envelope_shape() {
    let (_server, link, _events, mut conn) = linked(quick()).await;
    let prompt = Prompt {
        text: "shape".into(),
    };
    let (_, ()) = tokio::join!(link.request::<_, Value>(action::PROMPT, &prompt), async {
        let request = conn.recv().await;
        assert_eq!(request.frame_type, FrameType::Request);
        assert!(!request.id.is_empty());
        assert_eq!(request.payload, json!({"text": "shape"}));
        conn.reply(&request, &json!({})).await;
    });
}

#[tokio::test]
async fn a_wrong_token_is_unreachable_with_a_clear_message() {
    let mut server = TestServer::start().await;
    let executor = server.executor("not-the-token");
    let (link, refused) = tokio::join!(
        AgentLink::connect_with(&executor, SESSION, quick()),
        async {
            let tcp = server.next_tcp().await;
            TestServer::upgrade(tcp).await.is_none()
        }
    );
    assert!(refused, "the server refused the upgrade");
    match link {
        Err(LinkError::Unreachable(message)) => {
            assert!(message.contains("rejected the token"), "{message}");
            assert!(message.contains("401"), "{message}");
            assert!(
                !message.contains("not-the-token"),
                "the token is never echoed: {message}"
            );
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
fn the_remote_token_never_shows_in_debug_output() {
    let executor = ExecutorConfig::remote("ws://h:1", "s3cr3t");
    let shown = format!("{executor:?}");
    assert!(shown.contains("ws://h:1"));
    assert!(!shown.contains("s3cr3t"), "{shown}");
}
