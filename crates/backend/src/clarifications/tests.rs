//! The clarifications on a fake agentctl link: what reaches the agent, and what the
//! record becomes, for the paths the full-stack tests cannot force (a stream down at the
//! wrong moment, a reply lost with it, a call that returned on its own).

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use kandev_agent_stream::request::{
    ElicitationsCancel, ElicitationsRespond, QuestionsCancel, QuestionsRespond,
};
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ElicitationRequested, ErrorCode, ErrorPayload,
    SettleOutcome,
};
use kandev_elicitation::{
    Answer, Constraints, OperatorAnswer, Question, QuestionKind, QuestionOption,
};
use serde_json::json;

use super::{CancelStatus, ClarificationError, RespondStatus};
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

/// An answer to question `question_id`: `option` picked, or `text` typed.
fn answer_to(question_id: &str, option: Option<&str>, text: &str) -> OperatorAnswer {
    OperatorAnswer {
        answers: vec![Answer {
            question_id: question_id.into(),
            selected_options: option.into_iter().map(Into::into).collect(),
            custom_text: text.into(),
        }],
        ..OperatorAnswer::default()
    }
}

fn answer(option: &str) -> OperatorAnswer {
    answer_to("q1", Some(option), "")
}

/// `operator` answers record `pending` through `state` (which holds the session's link,
/// or not).
async fn respond(
    state: &AppState,
    pending: &str,
    answer: OperatorAnswer,
    operator: &str,
) -> Result<RespondStatus, ClarificationError> {
    let verb = state
        .clarifications
        .respond(&*state.sessions, pending, answer, operator);
    verb.await
}

/// `operator` cancels record `pending` through `state`.
async fn cancel(
    state: &AppState,
    pending: &str,
    operator: &str,
) -> Result<CancelStatus, ClarificationError> {
    state
        .clarifications
        .cancel(&*state.sessions, pending, operator)
        .await
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

/// [`live_session`] whose agent asked `event`: the record it opened is returned too.
async fn asked_with(event: LinkEvent) -> (AppState, String, Arc<FakeLink>, Clarification) {
    let (state, session, link) = live_session().await;
    link.push(event);
    let rec = one_pending(&state, &session).await;
    (state, session, link, rec)
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

/// agentctl's `ask_user_question_settled` for a call that returned without the operator.
fn returned(request_id: &str, outcome: SettleOutcome) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
        request_id: request_id.into(),
        outcome,
        answer: None,
        answered_by: None,
        returned_together: vec![],
    })
}

/// agentctl's `ask_user_question_settled` for a call it returned alone with `operator`'s
/// `answer`, echoing both.
fn answered(request_id: &str, answer: OperatorAnswer, operator: &str) -> LinkEvent {
    LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
        request_id: request_id.into(),
        outcome: SettleOutcome::Answered,
        answer: Some(answer),
        answered_by: Some(operator.into()),
        returned_together: vec![request_id.into()],
    })
}

fn not_found(message: &str) -> Result<serde_json::Value, LinkError> {
    Err(LinkError::Remote(ErrorPayload::new(
        ErrorCode::NotFound,
        message,
    )))
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

/// Waits until the tool calls waiting on the session's records satisfy `done`.
async fn calls_until(state: &AppState, session: &str, what: &str, done: fn(&[String]) -> bool) {
    eventually(what, || async {
        let calls = state
            .stores
            .clarifications
            .waiting_calls_of_session(session)
            .await
            .expect("calls");
        done(&calls).then_some(())
    })
    .await;
}

/// Two calls, `r1` and `r2`, ask the same question: one record, both waiting on it.
async fn asked_twice() -> (AppState, String, Arc<FakeLink>, Clarification) {
    let (state, session, link) = live_session().await;
    link.push(asked("r1"));
    link.push(asked("r2"));
    let rec = one_pending(&state, &session).await;
    let both = |calls: &[String]| calls.len() == 2;
    calls_until(&state, &session, "both calls on the record", both).await;
    (state, session, link, rec)
}

#[tokio::test]
async fn a_shared_record_is_withdrawn_only_when_its_last_call_returns_unanswered() {
    let (state, session, link, rec) = asked_twice().await;
    link.push(returned("r1", SettleOutcome::AgentCancelled));
    calls_until(&state, &session, "r1 returned", |calls| calls == ["r2"]).await;
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
    let (state, session, link, rec) = asked_with(asked("r1")).await;
    link.down.store(true, SeqCst);
    stays_pending(&state, &session, &rec, "alice", "not connected").await;
    link.down.store(false, SeqCst);
    let status = respond(&state, &rec.pending_id, answer("Yes"), "alice")
        .await
        .expect("delivered now: nothing was written while the stream was down");
    assert_eq!(status, RespondStatus::Answered);
    let sent = link.calls_of::<QuestionsRespond>();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (&sent[0]["request_ids"], &sent[0]["answered_by"]),
        (&json!(["r1"]), &json!("alice"))
    );
    assert_eq!(
        sent[0]["result"]["answers"][0]["selected_options"],
        json!(["Yes"])
    );
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
    assert_eq!(done.answered_by.as_deref(), Some("alice"));
    let again = respond(&state, &rec.pending_id, answer("No"), "bob")
        .await
        .expect_err("first answer wins");
    assert_eq!(err_code(&again), ("NOT_ACTIVE", 409));
}

/// `operator` answers `Yes` to `rec`, and the link cannot say it arrived (`why`): the
/// answer fails `AGENT_STREAM_NOT_CONNECTED` and the record is still the one pending.
async fn stays_pending(
    state: &AppState,
    session: &str,
    rec: &Clarification,
    operator: &str,
    why: &str,
) {
    let err = respond(state, &rec.pending_id, answer("Yes"), operator)
        .await
        .expect_err(why);
    assert_eq!(err_code(&err).0, "AGENT_STREAM_NOT_CONNECTED", "{why}");
    let pending = one_pending(state, session).await;
    assert_eq!(pending.pending_id, rec.pending_id, "{why}");
}

/// The code and status the API answers `err` with.
fn err_code(err: &ClarificationError) -> (&'static str, u16) {
    let err = crate::http::error::AppError::from(err.clone());
    (err.code(), err.status().as_u16())
}

#[tokio::test]
async fn an_answer_whose_reply_was_cut_off_is_settled_by_the_replayed_return() {
    let (state, session, link, rec) = asked_with(asked("r1")).await;
    link.reply::<QuestionsRespond>(Err(LinkError::Interrupted));
    let why = "the reply was lost with the stream: nothing says yet whether the answer arrived";
    stays_pending(&state, &session, &rec, "local", why).await;
    // agentctl's settlement of the call, replayed after the re-attach, says it did, and
    // with whose answer.
    link.push(answered("r1", answer("Yes"), "local"));
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
    assert_eq!(
        (done.answered_by.as_deref(), done.answer),
        (Some("local"), Some(answer("Yes")))
    );
}

#[tokio::test]
async fn a_respond_whose_call_returned_on_its_own_meanwhile_is_409_and_the_call_settles_the_record()
{
    let (state, _session, link, rec) = asked_with(asked("r1")).await;
    // agentctl no longer holds the call: it timed out, and its settlement was on the
    // stream before the refusal.
    link.reply::<QuestionsRespond>(not_found("gone"));
    let verb = tokio::spawn({
        let state = state.clone();
        let id = rec.pending_id.clone();
        async move { respond(&state, &id, answer("No"), "local").await }
    });
    eventually("the answer sent", || async {
        (!link.calls_of::<QuestionsRespond>().is_empty()).then_some(())
    })
    .await;
    link.push(returned("r1", SettleOutcome::TimedOut));
    let err = verb.await.expect("task").expect_err("the call is gone");
    assert_eq!(err_code(&err), ("NOT_ACTIVE", 409));
    let rec = record_becomes(&state, &rec.pending_id, ClarificationStatus::Expired).await;
    assert_eq!(
        (rec.outcome, rec.answered_by),
        (Some(Outcome::TimedOut), None)
    );
}

#[tokio::test]
async fn two_answers_at_once_one_wins_and_the_other_is_409() {
    let (state, _session, link, rec) = asked_with(asked("r1")).await;
    // agentctl takes the call for the first verb it gets; the second finds none.
    link.reply::<QuestionsRespond>(Ok(json!({"success": true})));
    link.reply::<QuestionsRespond>(not_found("gone"));
    let (alice, bob) = tokio::join!(
        respond(&state, &rec.pending_id, answer("Yes"), "alice"),
        respond(&state, &rec.pending_id, answer("No"), "bob")
    );
    let (won, lost) = match (&alice, &bob) {
        (Ok(_), Err(lost)) => ("alice", lost),
        (Err(lost), Ok(_)) => ("bob", lost),
        _ => panic!("exactly one answer wins: {alice:?} {bob:?}"),
    };
    assert_eq!(err_code(lost), ("NOT_ACTIVE", 409));
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
    assert_eq!(done.answered_by.as_deref(), Some(won));
}

#[tokio::test]
async fn a_call_that_joined_after_the_answer_was_sent_gets_the_same_answer() {
    let (state, session, link, rec) = asked_twice().await;
    // The verb named r1 only: r2 joined the record after it was sent.
    link.push(answered("r1", answer("Yes"), "alice"));
    let done = record_becomes(&state, &rec.pending_id, ClarificationStatus::Answered).await;
    assert_eq!(done.answered_by.as_deref(), Some("alice"));
    calls_until(&state, &session, "r2 returned", <[String]>::is_empty).await;
    assert_eq!(
        link.calls_of::<QuestionsRespond>(),
        [json!({"request_ids": ["r2"], "result": answer("Yes"), "answered_by": "alice"})],
        "the consumer sends r2 the answer the record took"
    );
}

#[tokio::test]
async fn an_operator_cancel_aborts_each_waiting_call_and_records_who() {
    let (state, _session, link, rec) = asked_twice().await;
    let status = cancel(&state, &rec.pending_id, "alice")
        .await
        .expect("cancelled");
    assert_eq!(status, CancelStatus::Cancelled);
    assert_eq!(
        link.calls_of::<QuestionsCancel>(),
        [json!({"request_ids": ["r1", "r2"], "cancelled_by": "alice"})],
        "one verb for every waiting call, naming who cancelled"
    );
    let rec = record_becomes(&state, &rec.pending_id, ClarificationStatus::Cancelled).await;
    assert_eq!(
        (rec.outcome, rec.answered_by.as_deref()),
        (Some(Outcome::Cancelled), Some("alice"))
    );
}

#[tokio::test]
async fn an_elicitation_cancel_is_forwarded_first_and_a_second_is_agentctls_404() {
    let (state, _session, link, _) = asked_with(elicited("p-1")).await;
    let status = cancel(&state, "p-1", "local").await.expect("cancelled");
    assert_eq!(status, CancelStatus::Cancelled);
    assert_eq!(
        link.calls_of::<ElicitationsCancel>(),
        [json!({"pending_id": "p-1", "cancelled_by": "local"})],
        "agentctl is told who cancelled, and echoes it in its settlement"
    );
    let rec = record_becomes(&state, "p-1", ClarificationStatus::Cancelled).await;
    assert_eq!(
        (rec.outcome, rec.answered_by.as_deref()),
        (Some(Outcome::Cancelled), Some("local"))
    );
    // Forward first (D5): the second cancel still goes to agentctl, which no longer holds it.
    link.reply::<ElicitationsCancel>(not_found("no pending elicitation"));
    let err = cancel(&state, "p-1", "local")
        .await
        .expect_err("already settled");
    assert_eq!(err_code(&err), ("NOT_FOUND", 404));
    assert_eq!(link.calls_of::<ElicitationsCancel>().len(), 2);
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
    let (state, session, link, opened) = asked_with(elicited("p-1")).await;
    let remembered = state.clarifications.open.get("p-1").expect("remembered");
    assert_eq!(remembered, opened, "the record in memory is the stored one");
    let status = respond(&state, "p-1", answer("Yes"), "alice")
        .await
        .expect("delivered");
    assert_eq!(status, RespondStatus::Answered);
    assert_eq!(link.calls_of::<ElicitationsRespond>().len(), 1);
    assert_eq!(
        state.clarifications.open.get("p-1"),
        None,
        "settled: forgotten"
    );
    let again = respond(&state, "p-1", answer("No"), "bob").await;
    assert!(
        again.is_ok(),
        "read back from the database and forwarded (D5)"
    );
    assert_eq!(link.calls_of::<ElicitationsRespond>().len(), 2);

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
    let (state, session, link, _) = asked_with(elicited("p-1")).await;
    // A second process over the same database, before it adopts the session (a restart):
    // it holds no link, so nothing is sent and the record is not its to write.
    let (other, _) = crate::testing::app_on(state.stores.clone()).await;
    let err = respond(&other, "p-1", answer("Yes"), "alice")
        .await
        .expect_err("no link here");
    assert_eq!(err_code(&err), ("AGENT_STREAM_NOT_CONNECTED", 503));
    let err = cancel(&other, "p-1", "alice")
        .await
        .expect_err("no link here");
    assert_eq!(err_code(&err), ("AGENT_STREAM_NOT_CONNECTED", 503));
    assert_eq!(one_pending(&state, &session).await.pending_id, "p-1");
    assert!(link.calls_of::<ElicitationsRespond>().is_empty());
    // The process that holds the session still answers it.
    respond(&state, "p-1", answer("Yes"), "alice")
        .await
        .expect("delivered");
    assert_eq!(link.calls_of::<ElicitationsRespond>().len(), 1);
}

#[tokio::test]
async fn a_secret_answer_reaches_the_agent_and_is_kept_redacted() {
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
    let (state, session, link, _) = asked_with(LinkEvent::Agent(AgentEvent::ElicitationRequested(
        ElicitationRequested {
            pending_id: "p-1".into(),
            acp_session_id: "acp-1".into(),
            tool_call_id: None,
            message: "The deploy server needs an API key.".into(),
            questions: vec![api_key],
            expires_at: None,
            on_deadline: None,
        },
    )))
    .await;
    let secret = answer_to("apiKey", None, "sk-live-0123");
    respond(&state, "p-1", secret, "alice")
        .await
        .expect("delivered");
    let sent = link.calls_of::<ElicitationsRespond>();
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
