//! The clarifications on a fake agentctl link: what reaches the agent, and what the
//! record becomes, for the paths the full-stack tests cannot force (a stream down at the
//! wrong moment, a reply lost with it, a call that returned on its own).

use std::sync::Arc;

use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ElicitationRequested, ErrorCode, ErrorPayload,
    SettleOutcome, action,
};
use kandev_elicitation::{
    Answer, Constraints, OperatorAnswer, Question, QuestionKind, QuestionOption,
};
use serde_json::json;

use crate::agent_link::{LinkError, LinkEvent};
use crate::model::{Clarification, ClarificationStatus, Outcome, Task};
use crate::state::AppState;
use crate::store::ClarificationFilter;
use crate::testing::{FakeLink, app, eventually};

fn question(prompt: &str) -> Question {
    Question {
        id: "q1".into(),
        kind: QuestionKind::SingleSelect,
        title: None,
        prompt: prompt.into(),
        options: ["Yes", "No"]
            .into_iter()
            .map(|l| QuestionOption {
                id: l.into(),
                label: l.into(),
                description: None,
                preview: None,
            })
            .collect(),
        custom_answer: None,
        required: true,
        default: None,
        constraints: Constraints::default(),
    }
}

fn answer(option: &str) -> OperatorAnswer {
    OperatorAnswer {
        answers: vec![Answer {
            question_id: "q1".into(),
            selected_options: vec![option.into()],
            custom_text: String::new(),
        }],
        ..OperatorAnswer::default()
    }
}

/// A started session on a fake link: the app, the session id and the link.
async fn live_session() -> (AppState, String, Arc<FakeLink>) {
    let (state, connector) = app().await;
    let task = Task::new("t", "");
    state.stores.tasks.create_task(&task).await.expect("task");
    let session = state
        .sessions
        .start(&task, "mock", None)
        .await
        .expect("session");
    let link = connector.link(&session.id);
    (state, session.id, link)
}

fn asked(request_id: &str) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::AskUserQuestionRequested(
        AskUserQuestionRequested {
            request_id: request_id.into(),
            acp_session_id: "acp-1".into(),
            questions: vec![question("Ship it?")],
            context: None,
            expires_at: None,
        },
    ))
}

fn elicited(pending_id: &str) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::ElicitationRequested(ElicitationRequested {
        pending_id: pending_id.into(),
        acp_session_id: "acp-1".into(),
        tool_call_id: Some("tool-1".into()),
        message: "Ship it?".into(),
        questions: vec![question("Ship it?")],
        expires_at: Some("2030-01-01T00:00:00Z".into()),
        on_deadline: None,
    }))
}

fn returned(request_id: &str, outcome: SettleOutcome) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
        request_id: request_id.into(),
        outcome,
    })
}

async fn one_pending(state: &AppState, session: &str) -> Clarification {
    eventually("one pending record", || async {
        let filter = ClarificationFilter {
            session_id: Some(session.to_owned()),
            status: Some(ClarificationStatus::Pending),
        };
        let list = state
            .stores
            .clarifications
            .clarifications(&filter)
            .await
            .expect("list");
        (list.len() == 1).then(|| list[0].clone())
    })
    .await
}

async fn record_becomes(state: &AppState, id: &str, status: ClarificationStatus) -> Clarification {
    eventually(&format!("record {status:?}"), || async {
        let rec = state
            .stores
            .clarifications
            .clarification(id)
            .await
            .expect("get")?;
        (rec.status == status).then_some(rec)
    })
    .await
}

#[tokio::test]
async fn a_shared_record_is_withdrawn_only_when_its_last_call_returns_unanswered() {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    link.push(asked("r2"));
    let rec = one_pending(&state, &session).await;
    eventually("both calls on the record", || async {
        let calls = state
            .stores
            .clarifications
            .waiting_calls_of_session(&session)
            .await
            .expect("calls");
        (calls.len() == 2).then_some(())
    })
    .await;
    link.push(returned("r1", SettleOutcome::AgentCancelled));
    eventually("r1 returned", || async {
        let calls = state
            .stores
            .clarifications
            .waiting_calls_of_session(&session)
            .await
            .expect("calls");
        (calls == ["r2"]).then_some(())
    })
    .await;
    assert_eq!(
        one_pending(&state, &session).await.pending_id,
        rec.pending_id,
        "r2 still waits on it"
    );
    link.push(returned("r2", SettleOutcome::TimedOut));
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Expired).await;
    assert_eq!(done.outcome, Some(Outcome::TimedOut));
}

#[tokio::test]
async fn a_respond_while_the_stream_is_down_is_503_and_the_record_stays_open() {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    let rec = one_pending(&state, &session).await;
    link.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = state
        .clarifications
        .respond(&*state.sessions, &rec.pending_id, answer("Yes"), "alice")
        .await
        .expect_err("not connected");
    assert_eq!(err_code(&err).0, "AGENT_STREAM_NOT_CONNECTED");
    assert_eq!(
        one_pending(&state, &session).await.pending_id,
        rec.pending_id
    );
    link.down.store(false, std::sync::atomic::Ordering::SeqCst);
    let status = state
        .clarifications
        .respond(&*state.sessions, &rec.pending_id, answer("Yes"), "alice")
        .await
        .expect("delivered now: the claim was given back");
    assert_eq!(status, crate::clarifications::RespondStatus::Answered);
    let sent = link.calls_of(action::QUESTIONS_RESPOND);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["request_id"], "r1");
    assert_eq!(
        sent[0]["result"]["answers"][0]["selected_options"],
        json!(["Yes"])
    );
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
    assert_eq!(done.answered_by.as_deref(), Some("alice"));
    let again = state
        .clarifications
        .respond(&*state.sessions, &rec.pending_id, answer("No"), "bob")
        .await
        .expect_err("first answer wins");
    assert_eq!(err_code(&again), ("NOT_ACTIVE", 409));
}

/// The code and status the API answers `err` with.
fn err_code(err: &super::ClarificationError) -> (&'static str, u16) {
    let err = crate::http::error::AppError::from(err.clone());
    (err.code(), err.status().as_u16())
}

#[tokio::test]
async fn an_answer_whose_reply_was_cut_off_is_settled_by_the_replayed_return() {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    let rec = one_pending(&state, &session).await;
    link.reply(action::QUESTIONS_RESPOND, Err(LinkError::Interrupted));
    let err = state
        .clarifications
        .respond(&*state.sessions, &rec.pending_id, answer("Yes"), "local")
        .await
        .expect_err("the reply was lost with the stream");
    assert_eq!(err_code(&err).0, "AGENT_STREAM_NOT_CONNECTED");
    assert_eq!(
        one_pending(&state, &session).await.pending_id,
        rec.pending_id,
        "nothing says yet whether the answer arrived"
    );
    // agentctl's settlement of the call, replayed after the re-attach, says it did.
    link.push(returned("r1", SettleOutcome::Answered));
    record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
}

#[tokio::test]
async fn a_respond_whose_call_already_returned_is_404_and_withdraws_the_record() {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    let rec = one_pending(&state, &session).await;
    link.reply(
        action::QUESTIONS_RESPOND,
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::NotFound,
            "gone",
        ))),
    );
    let err = state
        .clarifications
        .respond(&*state.sessions, &rec.pending_id, answer("No"), "local")
        .await
        .expect_err("the call is gone");
    assert_eq!(err_code(&err).0, "NOT_FOUND");
    let rec = record_becomes(&state, &rec.pending_id, ClarificationStatus::Cancelled).await;
    assert_eq!(rec.outcome, Some(Outcome::Withdrawn));
}

#[tokio::test]
async fn an_operator_cancel_aborts_each_waiting_call_and_records_who() {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    link.push(asked("r2"));
    let rec = one_pending(&state, &session).await;
    eventually("both calls on the record", || async {
        let calls = state
            .stores
            .clarifications
            .waiting_calls_of_session(&session)
            .await
            .expect("calls");
        (calls.len() == 2).then_some(())
    })
    .await;
    let status = state
        .clarifications
        .cancel(&*state.sessions, &rec.pending_id, "alice")
        .await
        .expect("cancelled");
    assert_eq!(status, crate::clarifications::CancelStatus::Cancelled);
    let sent: Vec<_> = link
        .calls_of(action::QUESTIONS_CANCEL)
        .iter()
        .map(|p| p["request_id"].clone())
        .collect();
    assert_eq!(sent, [json!("r1"), json!("r2")]);
    let rec = record_becomes(&state, &rec.pending_id, ClarificationStatus::Cancelled).await;
    assert_eq!(
        (rec.outcome, rec.answered_by.as_deref()),
        (Some(Outcome::Cancelled), Some("alice"))
    );
}

#[tokio::test]
async fn an_elicitation_cancel_is_forwarded_first_and_a_second_is_agentctls_404() {
    let (state, session, link) = live_session().await;
    link.push(elicited("p-1"));
    one_pending(&state, &session).await;
    let status = state
        .clarifications
        .cancel(&*state.sessions, "p-1", "local")
        .await
        .expect("cancelled");
    assert_eq!(status, crate::clarifications::CancelStatus::Cancelled);
    assert_eq!(
        link.calls_of(action::ELICITATIONS_CANCEL),
        [json!({"pending_id": "p-1", "cancelled_by": "local"})],
        "agentctl is told who cancelled, and echoes it in its settlement"
    );
    let rec = record_becomes(&state, "p-1", ClarificationStatus::Cancelled).await;
    assert_eq!(
        (rec.outcome, rec.answered_by.as_deref()),
        (Some(Outcome::Cancelled), Some("local"))
    );
    // Forward first (D5): the second cancel still goes to agentctl, which no longer holds it.
    link.reply(
        action::ELICITATIONS_CANCEL,
        Err(LinkError::Remote(ErrorPayload::new(
            ErrorCode::NotFound,
            "no pending elicitation",
        ))),
    );
    let err = state
        .clarifications
        .cancel(&*state.sessions, "p-1", "local")
        .await
        .expect_err("already settled");
    assert_eq!(err_code(&err), ("NOT_FOUND", 404));
    assert_eq!(link.calls_of(action::ELICITATIONS_CANCEL).len(), 2);
    let rec = state
        .stores
        .clarifications
        .clarification("p-1")
        .await
        .expect("get")
        .expect("row");
    assert_eq!(
        rec.outcome,
        Some(Outcome::Cancelled),
        "the operator's cancel stays recorded"
    );
}

#[tokio::test]
async fn a_record_opened_here_is_answered_from_memory_and_forgotten_once_settled_or_left() {
    let (state, session, link) = live_session().await;
    link.push(elicited("p-1"));
    let opened = one_pending(&state, &session).await;
    let remembered = state.clarifications.open.get("p-1").expect("remembered");
    assert_eq!(remembered, opened, "the record in memory is the stored one");
    let status = state
        .clarifications
        .respond(&*state.sessions, "p-1", answer("Yes"), "alice")
        .await
        .expect("delivered");
    assert_eq!(status, crate::clarifications::RespondStatus::Answered);
    assert_eq!(link.calls_of(action::ELICITATIONS_RESPOND).len(), 1);
    assert_eq!(
        state.clarifications.open.get("p-1"),
        None,
        "settled: forgotten"
    );
    let again = state
        .clarifications
        .respond(&*state.sessions, "p-1", answer("No"), "bob")
        .await;
    assert!(
        again.is_ok(),
        "read back from the database and forwarded (D5)"
    );
    assert_eq!(link.calls_of(action::ELICITATIONS_RESPOND).len(), 2);

    link.push(elicited("p-2"));
    one_pending(&state, &session).await;
    assert!(state.clarifications.open.get("p-2").is_some());
    state.sessions.stop(&session).await.expect("stop");
    assert!(
        state.clarifications.open.is_empty(),
        "a session no longer live here leaves nothing behind"
    );
    let withdrawn = state
        .clarifications
        .record_of(&*state.sessions, "p-2")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(withdrawn.status, ClarificationStatus::Cancelled);
}

#[tokio::test]
async fn an_answer_to_a_pending_record_whose_session_is_not_live_here_writes_nothing() {
    let (state, session, link) = live_session().await;
    link.push(elicited("p-1"));
    one_pending(&state, &session).await;
    // A second process over the same database, before it adopts the session (a restart):
    // it holds no link, so nothing is sent and the record is not its to write.
    let (other, _) = crate::testing::app_on(state.stores.clone()).await;
    let err = other
        .clarifications
        .respond(&*other.sessions, "p-1", answer("Yes"), "alice")
        .await
        .expect_err("no link here");
    assert_eq!(err_code(&err), ("AGENT_STREAM_NOT_CONNECTED", 503));
    let err = other
        .clarifications
        .cancel(&*other.sessions, "p-1", "alice")
        .await
        .expect_err("no link here");
    assert_eq!(err_code(&err), ("AGENT_STREAM_NOT_CONNECTED", 503));
    assert_eq!(one_pending(&state, &session).await.pending_id, "p-1");
    assert!(link.calls_of(action::ELICITATIONS_RESPOND).is_empty());
    // The process that holds the session still answers it.
    state
        .clarifications
        .respond(&*state.sessions, "p-1", answer("Yes"), "alice")
        .await
        .expect("delivered");
    assert_eq!(link.calls_of(action::ELICITATIONS_RESPOND).len(), 1);
}

#[tokio::test]
async fn a_secret_answer_reaches_the_agent_and_is_kept_redacted() {
    let (state, session, link) = live_session().await;
    let api_key = Question {
        id: "apiKey".into(),
        kind: QuestionKind::Text,
        title: None,
        prompt: "The deploy server needs an API key.".into(),
        options: Vec::new(),
        custom_answer: None,
        required: false,
        default: None,
        constraints: Constraints::default(),
    };
    link.push(LinkEvent::Agent(AgentEvent::ElicitationRequested(
        ElicitationRequested {
            pending_id: "p-1".into(),
            acp_session_id: "acp-1".into(),
            tool_call_id: None,
            message: "The deploy server needs an API key.".into(),
            questions: vec![api_key],
            expires_at: None,
            on_deadline: None,
        },
    )));
    one_pending(&state, &session).await;
    let secret = OperatorAnswer {
        answers: vec![Answer {
            question_id: "apiKey".into(),
            selected_options: Vec::new(),
            custom_text: "sk-live-0123".into(),
        }],
        ..OperatorAnswer::default()
    };
    state
        .clarifications
        .respond(&*state.sessions, "p-1", secret, "alice")
        .await
        .expect("delivered");
    let sent = link.calls_of(action::ELICITATIONS_RESPOND);
    assert!(
        sent[0].to_string().contains("sk-live-0123"),
        "the agent gets the value: {sent:?}"
    );
    let rec = record_becomes(&state, "p-1", ClarificationStatus::Answered).await;
    let kept = serde_json::to_string(&rec).expect("json");
    assert!(
        !kept.contains("sk-live"),
        "the record keeps no secret: {kept}"
    );
    assert_eq!(
        rec.answer.expect("answer").answers[0].custom_text,
        kandev_elicitation::REDACTED
    );
    let messages = state
        .stores
        .messages
        .messages(&session)
        .await
        .expect("messages");
    let shown = serde_json::to_string(&messages).expect("json");
    assert!(!shown.contains("sk-live"), "no message keeps it: {shown}");
}
