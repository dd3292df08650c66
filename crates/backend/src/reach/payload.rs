//! Delivery bodies (docs/configuration.md, "Reaching the operator"): kandev's JSON, or a Slack message. A body names
//! the task, never the question, unless its hook sets `include_question` (F9).

use kandev_elicitation::QuestionKind;
use serde_json::{Value, json};

use crate::config::{HookEvent, HookFormat, WebhookConfig};
use crate::model::{Clarification, Source};

/// What a body is about.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The event.
    pub event: HookEvent,
    /// The task.
    pub task_id: &'a str,
    /// Its title.
    pub task_title: &'a str,
    /// The session.
    pub session_id: &'a str,
    /// The record, for a clarification's events.
    pub record: Option<&'a Clarification>,
}

/// What the deadline brings: for an elicitation, the agent's `on_deadline` as agentctl
/// sent it (`decline` when it did not); the `ask_user_question_kandev` tool times out.
pub fn on_deadline(record: &Clarification) -> &str {
    match record.source {
        Source::Elicitation => record.on_deadline.as_deref().unwrap_or("decline"),
        Source::AskUserQuestion => "time_out",
    }
}

/// The operator UI's page of a session, under `public_url`.
pub fn session_url(public_url: Option<&str>, session_id: &str) -> Option<String> {
    public_url.map(|base| format!("{}/#/sessions/{session_id}", base.trim_end_matches('/')))
}

/// The body `hook` gets for `facts`. `answer_url` is the record's signed answer link,
/// when the hook carries them; `buttons` whether Slack clicks come back to kandev.
pub fn body(
    hook: &WebhookConfig,
    public_url: Option<&str>,
    facts: &Facts<'_>,
    answer_url: Option<&str>,
    buttons: bool,
) -> String {
    let url = session_url(public_url, facts.session_id);
    let value = match hook.format {
        HookFormat::Json => json_body(hook, facts, url.as_deref(), answer_url),
        HookFormat::Slack => slack_body(hook, facts, url.as_deref(), answer_url, buttons),
    };
    value.to_string()
}

fn json_body(
    hook: &WebhookConfig,
    facts: &Facts<'_>,
    url: Option<&str>,
    answer_url: Option<&str>,
) -> Value {
    let mut body = json!({
        "event": facts.event.as_str(),
        "task": {"id": facts.task_id, "title": facts.task_title},
        "session_id": facts.session_id,
        "url": url,
    });
    if let Some(record) = facts.record {
        body["pending_id"] = json!(record.pending_id);
        body["source"] = json!(record.source);
        body["expires_at"] = json!(record.expires_at);
        body["on_deadline"] = json!(on_deadline(record));
        body["created_at"] = json!(record.created_at);
        if facts.event == HookEvent::ClarificationSettled {
            body["status"] = json!(record.status);
            body["outcome"] = json!(record.outcome);
            body["answered_by"] = json!(record.answered_by);
        }
        if hook.include_question {
            body["message"] = json!(record.message);
            body["questions"] = json!(record.questions);
        }
        if let Some(link) = answer_url {
            body["answer_url"] = json!(link);
        }
    }
    body
}

/// The line a person reads.
fn summary(facts: &Facts<'_>) -> String {
    let title = facts.task_title;
    let deadline = facts
        .record
        .and_then(|r| r.expires_at.map(|at| (r, at)))
        .map(|(record, at)| {
            let verb = match on_deadline(record) {
                "decline" => "declines",
                "defaults" => "sends the defaults",
                "cancel" => "is cancelled",
                _ => "times out",
            };
            format!(" (it {verb} at {} UTC)", at.instant().format("%H:%M"))
        })
        .unwrap_or_default();
    match facts.event {
        HookEvent::ClarificationRequested => {
            format!("An agent working on *{title}* is waiting for your answer{deadline}.")
        }
        HookEvent::Reminder => {
            format!("Reminder: *{title}* is still waiting for an answer{deadline}.")
        }
        HookEvent::Escalation => {
            format!("Escalation: *{title}* has waited long for an answer{deadline}.")
        }
        HookEvent::ClarificationSettled => {
            let record = facts.record;
            let outcome = record
                .and_then(|r| r.outcome)
                .map_or("settled", |o| o.as_str());
            match record.and_then(|r| r.answered_by.as_deref()) {
                Some(who) => format!("The question on *{title}* was {outcome} by {who}."),
                None => format!("The question on *{title}* was {outcome}."),
            }
        }
        HookEvent::TurnFinished => format!("The agent working on *{title}* finished its turn."),
    }
}

fn slack_body(
    hook: &WebhookConfig,
    facts: &Facts<'_>,
    url: Option<&str>,
    answer_url: Option<&str>,
    buttons: bool,
) -> Value {
    let text = summary(facts);
    let mut blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})];
    let asking = matches!(
        facts.event,
        HookEvent::ClarificationRequested | HookEvent::Reminder | HookEvent::Escalation
    );
    if let Some(record) = facts.record.filter(|_| asking) {
        if hook.include_question {
            for question in &record.questions {
                blocks.push(json!({"type": "section", "text": {"type": "plain_text", "text": question.prompt}}));
            }
        }
        match single_select(record).filter(|_| buttons && hook.include_question) {
            Some(elements) => blocks.push(json!({
                "type": "actions",
                "block_id": record.pending_id,
                "elements": elements,
            })),
            None => {
                if let Some(link) = answer_url.or(url) {
                    blocks.push(json!({"type": "actions", "elements": [
                        {"type": "button", "text": {"type": "plain_text", "text": "Answer"}, "url": link}
                    ]}));
                }
            }
        }
    } else if let Some(link) = url {
        blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("<{link}|Open in kandev>")}]}));
    }
    json!({"text": text, "blocks": blocks})
}

/// The action id of an answer button (docs/configuration.md, "Slack").
pub const SLACK_ANSWER_ACTION: &str = "kandev_answer";
/// The action id of the Skip button.
pub const SLACK_SKIP_ACTION: &str = "kandev_skip";

/// Buttons for a record of one single-select question (plus Skip); `None` for any other
/// form, which links to the answer page instead.
fn single_select(record: &Clarification) -> Option<Vec<Value>> {
    let [question] = record.questions.as_slice() else {
        return None;
    };
    if question.kind != QuestionKind::SingleSelect || question.options.is_empty() {
        return None;
    }
    let mut buttons: Vec<Value> = question
        .options
        .iter()
        .map(|option| {
            json!({
                "type": "button",
                "action_id": format!("{SLACK_ANSWER_ACTION}:{}", option.id),
                "text": {"type": "plain_text", "text": option.label},
                "value": option.id,
            })
        })
        .collect();
    buttons.push(json!({
        "type": "button",
        "action_id": SLACK_SKIP_ACTION,
        "text": {"type": "plain_text", "text": "Skip"},
        "value": "skip",
    }));
    Some(buttons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewClarification, Timestamp};
    use kandev_elicitation::{Question, QuestionOption};

    fn hook(format: HookFormat, include_question: bool) -> WebhookConfig {
        WebhookConfig {
            name: "team".into(),
            url: "http://127.0.0.1:1/hook".into(),
            secret: "s".into(),
            events: vec![HookEvent::ClarificationRequested],
            format,
            include_question,
            answer_links: false,
            recipient: None,
        }
    }

    fn record() -> Clarification {
        let question: Question = serde_json::from_value(json!({
            "id": "db", "kind": "single_select", "title": null,
            "prompt": "Which database holds the secret plans?",
            "options": [{"id": "pg", "label": "Postgres"}, {"id": "lite", "label": "SQLite"}],
            "required": true
        }))
        .expect("question");
        assert_eq!(
            question.options[0],
            QuestionOption {
                id: "pg".into(),
                label: "Postgres".into(),
                description: None,
                preview: None,
            }
        );
        NewClarification {
            pending_id: "p1".into(),
            source: Source::Elicitation,
            task_id: "t1".into(),
            session_id: "s1".into(),
            tool_call_id: None,
            message: "Which database holds the secret plans?".into(),
            questions: vec![question],
            expires_at: Some("2030-01-01T10:30:00Z".parse().expect("time")),
            on_deadline: None,
        }
        .pending_at("m1", Timestamp::now())
    }

    fn facts(record: &Clarification) -> Facts<'_> {
        Facts {
            event: HookEvent::ClarificationRequested,
            task_id: "t1",
            task_title: "Fix the login page",
            session_id: "s1",
            record: Some(record),
        }
    }

    #[test]
    fn a_json_body_names_the_task_and_the_deadline_never_the_question() {
        let record = record();
        let body = body(
            &hook(HookFormat::Json, false),
            Some("https://k.example/"),
            &facts(&record),
            None,
            false,
        );
        assert!(!body.contains("secret plans"), "{body}");
        assert!(!body.contains("Postgres"), "{body}");
        let v: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["event"], "clarification_requested");
        assert_eq!(v["task"]["title"], "Fix the login page");
        assert_eq!(v["pending_id"], "p1");
        assert_eq!(v["expires_at"], "2030-01-01T10:30:00.000000Z");
        assert_eq!(v["on_deadline"], "decline");
        assert_eq!(v["url"], "https://k.example/#/sessions/s1");
        let with = super::body(
            &hook(HookFormat::Json, true),
            None,
            &facts(&record),
            None,
            false,
        );
        assert!(with.contains("secret plans"), "{with}");
        // An agent whose deadline sends the defaults: the body says so.
        let defaults = Clarification {
            on_deadline: Some("defaults".into()),
            ..record.clone()
        };
        let v: Value = serde_json::from_str(&super::body(
            &hook(HookFormat::Json, false),
            None,
            &facts(&defaults),
            None,
            false,
        ))
        .expect("json");
        assert_eq!(v["on_deadline"], "defaults");
    }

    #[test]
    fn a_slack_body_has_buttons_for_one_single_select_question_only() {
        let record = record();
        let plain = body(
            &hook(HookFormat::Slack, false),
            Some("https://k"),
            &facts(&record),
            None,
            true,
        );
        assert!(
            !plain.contains("secret plans") && !plain.contains("Postgres"),
            "{plain}"
        );
        let v: Value = serde_json::from_str(&plain).expect("json");
        assert!(
            v["text"]
                .as_str()
                .expect("text")
                .contains("declines at 10:30 UTC")
        );
        let asked = body(
            &hook(HookFormat::Slack, true),
            Some("https://k"),
            &facts(&record),
            None,
            true,
        );
        let v: Value = serde_json::from_str(&asked).expect("json");
        let actions = v["blocks"]
            .as_array()
            .expect("blocks")
            .last()
            .expect("actions")
            .clone();
        assert_eq!(actions["block_id"], "p1");
        let labels: Vec<&str> = actions["elements"]
            .as_array()
            .expect("buttons")
            .iter()
            .map(|b| b["text"]["text"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(labels, ["Postgres", "SQLite", "Skip"]);
        let mut two = record.clone();
        two.questions.push(two.questions[0].clone());
        let linked = body(
            &hook(HookFormat::Slack, true),
            Some("https://k"),
            &facts(&two),
            Some("https://k/a#x"),
            true,
        );
        assert!(
            linked.contains("https://k/a#x") && !linked.contains(SLACK_SKIP_ACTION),
            "{linked}"
        );
    }
}
