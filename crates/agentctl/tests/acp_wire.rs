//! agentctl ⇄ mock-agent over real processes: the elicitation handler and the answers,
//! cancels and streamed updates the agent receives, asserted on the mock agent's own wire
//! log.

use kandev_testkit::agentctl::{AgentCtl, Harness, choose, message_texts, pending_id};
use kandev_testkit::{DEADLINE, is_uuid_v7};
use serde_json::{Value, json};

#[tokio::test]
async fn ac03_elicitation_create_reaches_the_handler_not_method_not_found() {
    let mut h = Harness::start("single", true).await;
    let requested = h.prompt_until_elicitation("go").await;
    assert_eq!(requested["questions"][0]["id"], "question_0");
    assert_eq!(requested["tool_call_id"], "tool-42");
    assert_eq!(requested["acp_session_id"], h.started["acp_session_id"]);
    assert!(
        is_uuid_v7(&pending_id(&requested)),
        "pending_id is a time-ordered UUID (v7): {requested}"
    );
    // Parked, not answered: no response (and no MethodNotFound error) has reached the agent.
    // The event can overtake the agent's own log line, so wait for the line first.
    h.log.wait_for_elicitation_request(1, DEADLINE).await;
    let create = h.log.sent_requests("elicitation/create");
    assert_eq!(create.len(), 1);
    assert!(h.log.responses_to(&create[0]["id"]).is_empty());
    let reply = h
        .respond(&pending_id(&requested), choose("SQLite"), false)
        .await;
    assert_eq!(reply["payload"], json!({"success": true}));
    let (_, result) = h.log.elicitation_answer(1).await;
    assert!(
        result.get("action").is_some(),
        "a result, not an error: {result}"
    );
}

/// A `scenario` session (flag on) whose first elicitation was answered with `answers`.
struct Answered {
    h: Harness,
    /// The `elicitation_requested` payload.
    requested: Value,
    /// agentctl's answer frame to `agent.elicitations.respond`.
    reply: Value,
    /// The result the agent received (its one response).
    result: Value,
}

async fn answered(scenario: &str, answers: Value) -> Answered {
    let mut h = Harness::start(scenario, true).await;
    let requested = h.prompt_until_elicitation("go").await;
    let reply = h.respond(&pending_id(&requested), answers, false).await;
    let (_, result) = h.log.elicitation_answer(1).await;
    Answered {
        h,
        requested,
        reply,
        result,
    }
}

#[tokio::test]
async fn ac10_selected_option_is_sent_under_the_schema_key() {
    let Answered {
        mut h,
        requested,
        reply,
        result,
    } = answered("single", choose("Postgres")).await;
    assert_eq!(reply["type"], "response");
    assert_eq!(
        result,
        json!({"action": "accept", "content": {"question_0": "Postgres"}})
    );
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(
        settled,
        json!({
            "event": "elicitation_settled", "pending_id": pending_id(&requested), "outcome": "answered", "response": result,
            // The answer as the backend sent it: the backend writes the record from this event.
            "answer": {"answers": [{"question_id": "question_0", "selected_options": ["Postgres"], "custom_text": ""}],
                       "rejected": false, "reject_reason": ""}
        })
    );
}

#[tokio::test]
async fn ac11_free_text_goes_to_the_marked_companion_key() {
    let answers = json!([{"question_id": "question_0", "custom_text": "CockroachDB"}]);
    let Answered {
        requested, result, ..
    } = answered("freeform", answers).await;
    let questions = requested["questions"].as_array().map(Vec::len);
    assert_eq!(questions, Some(1), "the companion is no question");
    let key = &requested["questions"][0]["custom_answer"]["key"];
    assert_eq!(key, "answer_freeform");
    let content = json!({"answer_freeform": "CockroachDB"});
    assert_eq!(result, json!({"action": "accept", "content": content}));
}

#[tokio::test]
async fn ac12_multi_select_sends_an_array_in_declaration_order() {
    // Clicked prod first: the wire still carries declaration order (F12).
    let answers = json!([{"question_id": "question_1", "selected_options": ["prod", "dev"]}]);
    let Answered {
        requested, result, ..
    } = answered("multi", answers).await;
    assert_eq!(requested["questions"][1]["kind"], "multi_select");
    let content = json!({"question_1": ["dev", "prod"]});
    assert_eq!(result, json!({"action": "accept", "content": content}));
}

#[tokio::test]
async fn an_accepted_answer_is_confirmed_before_its_elicitation_settled() {
    let (mut h, first, _) = Harness::two_identical().await;
    let answer = h
        .respond(&pending_id(&first), choose("Postgres"), false)
        .await;
    assert_eq!(answer["type"], "response", "{answer}");
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(settled["outcome"], "answered");
    let arrivals = h.stream.arrivals();
    let at = |what: &str| {
        arrivals
            .iter()
            .position(|a| a == what)
            .unwrap_or_else(|| panic!("{what} not in {arrivals:?}"))
    };
    let response = format!("response {}", answer["id"].as_str().expect("id"));
    assert!(
        at(&response) < at("event elicitation_settled"),
        "the backend's answer must come first: {arrivals:?}"
    );
}

#[tokio::test]
async fn ac12f_identical_questions_get_two_pendings_answered_independently() {
    let (h, first, second) = Harness::two_identical().await;
    assert_ne!(pending_id(&first), pending_id(&second));
    assert_eq!(
        first["questions"], second["questions"],
        "identical question text"
    );

    h.respond(&pending_id(&first), choose("Postgres"), false)
        .await;
    let (_, result) = h.log.elicitation_answer(1).await;
    assert_eq!(result["content"]["question_0"], "Postgres");
    let listed = h.stream.ok("agent.elicitations.list", json!({})).await;
    let ids: Vec<&str> = listed["pending"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["pending_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        [pending_id(&second).as_str()],
        "the second is still awaiting"
    );
    // The mock agent logs a frame after writing it: an event can overtake its line.
    let second_create = h.log.wait_for_elicitation_request(2, DEADLINE).await;
    assert!(
        h.log.responses_to(&second_create["id"]).is_empty(),
        "answering the first settled the second"
    );

    h.respond(&pending_id(&second), choose("SQLite"), false)
        .await;
    let (_, result) = h.log.elicitation_answer(2).await;
    assert_eq!(result["content"]["question_0"], "SQLite");
}

#[tokio::test]
async fn d3_two_pendings_settle_independently_in_either_order() {
    let (mut h, first, second) = Harness::two_identical().await;
    let (first, second) = (pending_id(&first), pending_id(&second));
    // Answer the second first, then reject the first.
    h.respond(&second, choose("DynamoDB"), false).await;
    h.stream.settled(&second, "answered").await;
    let first_create = &h.log.sent_requests("elicitation/create")[0];
    assert!(h.log.responses_to(&first_create["id"]).is_empty());
    h.respond(&first, json!([]), true).await;
    h.stream.settled(&first, "declined").await;
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "decline"})
    );
    assert_eq!(
        h.log.elicitation_answer(2).await.1,
        json!({"action": "accept", "content": {"question_0": "DynamoDB"}})
    );
    h.stream.turn_ends("end_turn").await;
}

#[tokio::test]
async fn ac12g_second_answer_is_not_found_and_the_agent_sees_one_response() {
    let Answered {
        mut h,
        requested,
        reply,
        ..
    } = answered("single", choose("Postgres")).await;
    assert_eq!(reply["type"], "response");
    let again = h
        .respond(&pending_id(&requested), choose("Postgres"), false)
        .await;
    assert_eq!(again["type"], "error");
    assert_eq!(again["payload"]["code"], "NOT_FOUND");
    h.stream.event("turn_completed").await;
    let create = &h.log.sent_requests("elicitation/create")[0];
    assert_eq!(h.log.responses_to(&create["id"]).len(), 1);
}

#[tokio::test]
async fn ac13_answer_continues_the_original_prompt_which_returns_the_stop_reason() {
    let Answered { mut h, .. } = answered("single", choose("Postgres")).await;
    h.stream.turn_ends("end_turn").await;

    // turn_completed can overtake the agent's log line of its prompt response.
    h.log
        .wait_until("the prompt's response", |log| {
            let sent = log.messages("send");
            sent.iter().any(|f| f["result"].get("stopReason").is_some())
        })
        .await;
    let prompts = h.log.received_requests("session/prompt");
    assert_eq!(
        prompts.len(),
        1,
        "exactly one session/prompt for the whole exchange"
    );
    let frames = h.log.frames();
    let position = |dir: &str, pred: &dyn Fn(&Value) -> bool| {
        frames
            .iter()
            .position(|f| f.dir == dir && pred(&f.frame))
            .expect("present")
    };
    let create_id = h.log.sent_requests("elicitation/create")[0]["id"].clone();
    let answered_at = position("recv", &|f| {
        f["id"] == create_id && f.get("result").is_some()
    });
    let prompt_done_at = position("send", &|f| {
        f["id"] == prompts[0]["id"] && f["result"]["stopReason"] == "end_turn"
    });
    assert!(
        answered_at < prompt_done_at,
        "the stop reason came on the original prompt, after the answer"
    );
}

#[tokio::test]
async fn ac14_reject_sends_decline() {
    let mut h = Harness::start("single", true).await;
    let id = h.elicit().await;
    let reply = h.stream.ok(
        "agent.elicitations.respond",
        json!({"pending_id": id, "answers": [], "rejected": true, "reject_reason": "not now"}),
    );
    assert_eq!(reply.await, json!({"success": true}));
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "decline"})
    );
    let settled = h.stream.event("elicitation_settled").await;
    assert_eq!(settled["outcome"], "declined");
    assert_eq!(settled["response"], json!({"action": "decline"}));
}

#[tokio::test]
async fn permission_requests_are_answered_by_the_session_policy() {
    let mut h = Harness::start_on(AgentCtl::start(&[]), "permission", true, |payload| {
        payload["agent"]["permission_policy"] = json!("reject_once");
    })
    .await;
    h.prompt("go").await;
    let resolved = h.stream.event("permission_resolved").await;
    assert_eq!(
        (
            resolved["tool_call_id"].as_str(),
            resolved["option_id"].as_str()
        ),
        (Some("t1"), Some("reject"))
    );
    h.log
        .wait_until("the permission answer", |log| {
            log.sent_requests("session/request_permission")
                .first()
                .is_some_and(|r| !log.responses_to(&r["id"]).is_empty())
        })
        .await;
    let request = &h.log.sent_requests("session/request_permission")[0];
    assert_eq!(
        h.log.responses_to(&request["id"])[0]["result"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject"}})
    );
    h.stream.turn_ends("end_turn").await;
}

#[tokio::test]
async fn a_burst_of_text_crosses_as_fewer_events_with_all_its_text_before_the_question() {
    let mut h = Harness::start("burst", true).await;
    h.prompt("go").await;
    let events = h.stream.events_until("elicitation_requested").await;
    let sent: Vec<String> = h
        .log
        .messages("send")
        .into_iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| {
            f["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(sent.len(), 41, "the agent's own chunks: {sent:?}");
    let forwarded = message_texts(&events);
    // Every chunk's text, in order, is out before the question behind it.
    assert_eq!(forwarded.concat(), sent.concat());
    // The agent wrote them back to back: they are held and go out together.
    assert!(
        forwarded.len() < sent.len(),
        "{} events for {} chunks",
        forwarded.len(),
        sent.len()
    );
}

#[tokio::test]
async fn session_updates_are_forwarded_verbatim() {
    let mut h = Harness::start("plain", false).await;
    h.prompt("go").await;
    let events = h.stream.events_until("turn_completed").await;
    let forwarded: Vec<Value> = events
        .iter()
        .filter(|f| f["payload"]["event"] == "session_update")
        .map(|f| f["payload"]["update"].clone())
        .collect();
    let sent: Vec<Value> = h
        .log
        .messages("send")
        .into_iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| f["params"].clone())
        .collect();
    assert_eq!(forwarded, sent);
    assert_eq!(
        message_texts(&events),
        [
            "Looking at the repository.",
            "All done; nothing here needs your input."
        ]
    );
}

#[tokio::test]
async fn an_operator_cancel_answers_the_agent_cancel_once() {
    let (mut h, first, second) = Harness::two_identical().await;
    let (first, second) = (pending_id(&first), pending_id(&second));
    let cancel = json!({"pending_id": first});
    let reply = h
        .stream
        .ok("agent.elicitations.cancel", cancel.clone())
        .await;
    assert_eq!(reply, json!({"success": true}));
    let settled = h.stream.settled(&first, "operator_cancelled").await;
    assert_eq!(settled["response"], json!({"action": "cancel"}));
    assert_eq!(
        h.log.elicitation_answer(1).await.1,
        json!({"action": "cancel"})
    );
    // Exactly once: a second cancel, or an answer after it, finds nothing.
    let again = h.stream.err("agent.elicitations.cancel", cancel).await;
    assert_eq!(again["code"], "NOT_FOUND");
    let late = h
        .stream
        .err(
            "agent.elicitations.respond",
            json!({"pending_id": first, "answers": [], "rejected": true}),
        )
        .await;
    assert_eq!(late["code"], "NOT_FOUND");
    let listed = h.stream.ok("agent.elicitations.list", json!({})).await;
    assert_eq!(
        listed["pending"][0]["pending_id"],
        second.as_str(),
        "the other stays open"
    );
}

/// A `single` pending settled by `action` with `payload` (plus its `pending_id`), which
/// agentctl accepts; returns the `elicitation_settled` payload.
async fn settled_by(action: &str, mut payload: Value) -> Value {
    let mut h = Harness::start("single", true).await;
    payload["pending_id"] = json!(h.elicit().await);
    let reply = h.stream.request(action, payload).await;
    assert_eq!(reply["type"], "response", "{reply}");
    h.stream.event("elicitation_settled").await
}

/// The backend writes a record only from `elicitation_settled`, so agentctl echoes who
/// answered or cancelled, as the request named them.
#[tokio::test]
async fn the_settlement_echoes_who_answered_and_who_cancelled() {
    let cancelled = json!({"cancelled_by": "bob"});
    let settled = settled_by("agent.elicitations.cancel", cancelled).await;
    assert_eq!(
        (
            &settled["outcome"],
            &settled["answered_by"],
            settled.get("answer")
        ),
        (&json!("operator_cancelled"), &json!("bob"), None)
    );

    let answer = json!({"answers": choose("Postgres"), "rejected": false, "reject_reason": "",
                        "answered_by": "alice"});
    let settled = settled_by("agent.elicitations.respond", answer).await;
    assert_eq!(
        (&settled["outcome"], &settled["answered_by"]),
        (&json!("answered"), &json!("alice"))
    );
    assert_eq!(
        settled["answer"]["answers"][0]["selected_options"],
        json!(["Postgres"])
    );
}
