//! Slack's buttons, coming back (docs/configuration.md, "Slack"): a click on a question's Block Kit
//! button is a request from Slack, signed with the app's signing secret. It is verified
//! (`v0`, five-minute window), read as the operator's answer, and its message updated
//! with who answered through the `response_url` Slack sent.

use hmac::{Hmac, Mac};
use kandev_elicitation::{Answer, OperatorAnswer};
use serde::Deserialize;
use sha2::Sha256;

use crate::model::Clarification;
use crate::reach::payload::{SLACK_ANSWER_ACTION, SLACK_SKIP_ACTION};
use crate::reach::signature::unhex;

/// The request's timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// The request's signature header.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// How far a request's timestamp may be from now (Slack's own advice: five minutes).
pub const WINDOW_SECS: i64 = 5 * 60;

/// Why a Slack request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SlackRefused {
    /// A header is missing or malformed.
    #[error("the request is not signed by Slack")]
    Unsigned,
    /// The timestamp is outside the window (a replay, or a clock far off).
    #[error("the request's timestamp is too old or from the future")]
    Stale,
    /// The signature does not match.
    #[error("the request's signature does not match")]
    Forged,
    /// Signed, but not a button click kandev sent.
    #[error("the request is not a click on a kandev question")]
    NotAClick,
}

/// Checks Slack's `v0` signature: `v0=<hex HMAC-SHA256(signing secret, "v0:{ts}:{body}")>`.
pub fn verify(
    signing_secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SlackRefused> {
    let timestamp = timestamp.ok_or(SlackRefused::Unsigned)?;
    let at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SlackRefused::Unsigned)?;
    let tag = signature
        .and_then(|s| s.trim().strip_prefix("v0="))
        .and_then(unhex)
        .ok_or(SlackRefused::Unsigned)?;
    if now.abs_diff(at) > WINDOW_SECS.unsigned_abs() {
        return Err(SlackRefused::Stale);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .unwrap_or_else(|_| unreachable!());
    mac.update(b"v0:");
    mac.update(timestamp.trim().as_bytes());
    mac.update(b":");
    mac.update(body);
    mac.verify_slice(&tag).map_err(|_| SlackRefused::Forged)
}

/// What was clicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// An option, by id.
    Option(String),
    /// Skip.
    Skip,
}

/// A verified click on one of kandev's buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// The record (the buttons' `block_id`).
    pub pending_id: String,
    /// What was clicked.
    pub choice: Choice,
    /// Who clicked (`answered_by`: `slack:<username>`).
    pub answered_by: String,
    /// Where the message is updated.
    pub response_url: Option<String>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    user: User,
    #[serde(default)]
    actions: Vec<Action>,
    #[serde(default)]
    response_url: Option<String>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    id: String,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct Action {
    action_id: String,
    #[serde(default)]
    block_id: String,
    #[serde(default)]
    value: Option<String>,
}

/// Reads the click out of a verified request body (`payload=<JSON>`, form-encoded).
pub fn click(body: &[u8]) -> Result<Click, SlackRefused> {
    let text = std::str::from_utf8(body).map_err(|_| SlackRefused::NotAClick)?;
    let payload = text
        .split('&')
        .find_map(|pair| pair.strip_prefix("payload="))
        .map(form_decode)
        .ok_or(SlackRefused::NotAClick)?;
    let payload: Payload = serde_json::from_str(&payload).map_err(|_| SlackRefused::NotAClick)?;
    let action = payload.actions.first().ok_or(SlackRefused::NotAClick)?;
    let choice = if action.action_id == SLACK_SKIP_ACTION {
        Choice::Skip
    } else if action.action_id.starts_with(SLACK_ANSWER_ACTION) {
        Choice::Option(action.value.clone().ok_or(SlackRefused::NotAClick)?)
    } else {
        return Err(SlackRefused::NotAClick);
    };
    if action.block_id.is_empty() {
        return Err(SlackRefused::NotAClick);
    }
    let who = payload
        .user
        .username
        .or(payload.user.name)
        .filter(|n| !n.is_empty())
        .unwrap_or(payload.user.id);
    Ok(Click {
        pending_id: action.block_id.clone(),
        choice,
        answered_by: format!("slack:{who}"),
        response_url: payload.response_url,
    })
}

/// The operator's answer a click on `record` gives: the option of its one question, or
/// a skip. `None` when the option is not one of the question's.
pub fn answer(click: &Click, record: &Clarification) -> Option<OperatorAnswer> {
    match &click.choice {
        Choice::Skip => Some(OperatorAnswer {
            rejected: true,
            ..OperatorAnswer::default()
        }),
        Choice::Option(id) => {
            let [question] = record.questions.as_slice() else {
                return None;
            };
            question
                .options
                .iter()
                .any(|o| &o.id == id)
                .then(|| OperatorAnswer {
                    answers: vec![Answer {
                        question_id: question.id.clone(),
                        selected_options: vec![id.clone()],
                        custom_text: String::new(),
                    }],
                    ..OperatorAnswer::default()
                })
        }
    }
}

/// The text that replaces the question's message once it is settled.
pub fn settled_text(click: &Click, record: &Clarification, outcome: &str) -> String {
    let what = match &click.choice {
        Choice::Skip => "Skipped".to_owned(),
        Choice::Option(id) => {
            let label = record
                .questions
                .first()
                .and_then(|q| q.options.iter().find(|o| &o.id == id))
                .map_or(id.as_str(), |o| o.label.as_str());
            format!("Answered “{label}”")
        }
    };
    let who = click.answered_by.trim_start_matches("slack:");
    match outcome {
        "ok" => format!("{what} by @{who}."),
        other => format!("@{who}'s click was not applied: {other}."),
    }
}

/// `application/x-www-form-urlencoded` value decoding (`+` is a space, `%XX` a byte).
fn form_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (other, None) => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const BODY: &[u8] = b"payload=%7B%22user%22%3A%7B%22id%22%3A%22U1%22%2C%22username%22%3A%22alice%22%7D%2C%22actions%22%3A%5B%7B%22action_id%22%3A%22kandev_answer%3APostgres%22%2C%22block_id%22%3A%22p1%22%2C%22value%22%3A%22Postgres%22%7D%5D%2C%22response_url%22%3A%22http%3A%2F%2F127.0.0.1%3A9%2Fr%22%7D";

    #[test]
    fn a_request_signed_by_slack_verifies_within_five_minutes_only() {
        // Computed independently (Python's hmac module) over "v0:1531420618:" + BODY.
        let sig = "v0=a58976da92745a1c1264a79ae0380ea0dc8d86190cf93493217545a411a3ef6f";
        assert_eq!(
            verify(
                SECRET,
                Some("1531420618"),
                Some(sig),
                BODY,
                1531420618 + 299
            ),
            Ok(())
        );
        assert_eq!(
            verify(
                SECRET,
                Some("1531420618"),
                Some(sig),
                BODY,
                1531420618 + 301
            ),
            Err(SlackRefused::Stale)
        );
        assert_eq!(
            verify(
                SECRET,
                Some("1531420618"),
                Some(sig),
                BODY,
                1531420618 - 301
            ),
            Err(SlackRefused::Stale)
        );
        assert_eq!(
            verify("other", Some("1531420618"), Some(sig), BODY, 1531420618),
            Err(SlackRefused::Forged)
        );
        assert_eq!(
            verify(SECRET, Some("1531420619"), Some(sig), BODY, 1531420618),
            Err(SlackRefused::Forged)
        );
        assert_eq!(
            verify(SECRET, None, Some(sig), BODY, 0),
            Err(SlackRefused::Unsigned)
        );
        assert_eq!(
            verify(SECRET, Some("1531420618"), Some("v1=00"), BODY, 1531420618),
            Err(SlackRefused::Unsigned)
        );
    }

    #[test]
    fn a_click_names_its_record_option_and_clicker() {
        let click = click(BODY).expect("a click");
        assert_eq!(click.pending_id, "p1");
        assert_eq!(click.choice, Choice::Option("Postgres".into()));
        assert_eq!(click.answered_by, "slack:alice");
        assert_eq!(click.response_url.as_deref(), Some("http://127.0.0.1:9/r"));
        assert_eq!(
            super::click(b"payload=%7B%7D"),
            Err(SlackRefused::NotAClick)
        );
        assert_eq!(form_decode("a+b%20c%2"), "a b c%2");
    }
}
