//! Clarification records, on both engines: opening (`opening`), the settlement rule
//! (`settling`), `ask_user_question` calls (`calls`) and the session row their writes keep
//! (`views`). The records, messages and notifications they share are built here.

use kandev_elicitation::{Constraints, OperatorAnswer, Question, QuestionKind, QuestionOption};
use serde_json::json;

use crate::model::{
    Clarification, Message, MessageKind, NewClarification, NewMessage, Notification, Source, author,
};
use crate::store::Stores;

mod calls;
mod opening;
mod settling;
mod views;

fn question(prompt: &str) -> Question {
    Question {
        id: "question_0".into(),
        kind: QuestionKind::SingleSelect,
        title: Some("Colour".into()),
        prompt: prompt.into(),
        options: vec![QuestionOption {
            id: "Red".into(),
            label: "Red".into(),
            description: None,
            preview: None,
        }],
        custom_answer: None,
        required: false,
        default: None,
        constraints: Constraints::default(),
    }
}

fn new_record(id: &str, session: &str, task: &str, source: Source) -> NewClarification {
    NewClarification {
        pending_id: id.into(),
        source,
        task_id: task.into(),
        session_id: session.into(),
        tool_call_id: Some("tool-1".into()),
        message: "Pick a colour".into(),
        questions: vec![question("Pick a colour")],
        // Read back as written (the card's countdown, the board's order).
        expires_at: Some(crate::model::Timestamp::now().plus(std::time::Duration::from_secs(3600))),
        on_deadline: Some("cancel".into()),
    }
}

fn new_message(session: &str, task: &str, id: &str) -> NewMessage {
    NewMessage {
        requests_input: true,
        ..NewMessage::new(
            session,
            task,
            MessageKind::ClarificationRequest,
            author::AGENT,
            "Pick a colour",
        )
        .with_metadata(
            json!({"pending_id": id, "status": "pending"})
                .as_object()
                .cloned()
                .expect("object"),
        )
    }
}

pub(super) async fn open(
    s: &Stores,
    id: &str,
    session: &str,
    task: &str,
) -> (Clarification, Message) {
    s.clarifications
        .open_clarification(
            &new_record(id, session, task, Source::Elicitation),
            &new_message(session, task, id),
            None,
            None,
        )
        .await
        .expect("open")
        .map(|opened| (opened.record, opened.message))
        .expect("new")
}

/// The notification announcing a record of `session`.
fn note(session: &str, task: &str) -> Notification {
    Notification::clarification_requested("T", task, session)
}

/// The session's stored `last_event_seq`.
async fn applied_seq(s: &Stores, session: &str) -> Option<u64> {
    s.sessions
        .session(session)
        .await
        .expect("session")
        .expect("row")
        .last_event_seq
}

/// How many notifications are stored.
async fn notes(s: &Stores) -> usize {
    s.notifications
        .notifications()
        .await
        .expect("notifications")
        .len()
}

fn answer() -> OperatorAnswer {
    OperatorAnswer {
        answers: vec![kandev_elicitation::Answer {
            question_id: "question_0".into(),
            selected_options: vec!["Red".into()],
            custom_text: String::new(),
        }],
        ..OperatorAnswer::default()
    }
}
