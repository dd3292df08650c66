//! `[notifications]`: what is dispatched in the app, and the outbound webhooks, reminders
//! and escalation that reach an operator who is not looking at it (docs/architecture.md §15).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Which notifications are dispatched, and where else they go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// `session.clarification_requested` (on by default).
    #[serde(default = "yes")]
    pub clarification_requested: bool,
    /// `session.turn_finished` (off by default).
    #[serde(default)]
    pub turn_finished: bool,
    /// The address operators reach kandev at (`https://kandev.example.com`): webhook
    /// bodies link to `{public_url}/sessions/{session_id}`. Without it they carry no link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Sends `reminder` this long after a question was asked, while it still waits
    /// (off by default; shorter than the answer deadline).
    #[serde(
        default,
        with = "humantime_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub remind_after: Option<Duration>,
    /// Sends `escalation` this long after a question was asked, while it still waits
    /// (off by default; shorter than the answer deadline).
    #[serde(
        default,
        with = "humantime_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub escalate_after: Option<Duration>,
    /// The first retry's delay after a failed delivery; each next one doubles, with jitter.
    #[serde(default = "default_retry_delay", with = "super::humantime_text")]
    pub retry_delay: Duration,
    /// Attempts per delivery before it is given up as failed.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// `[[notifications.webhooks]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookConfig>,
}

fn yes() -> bool {
    true
}

fn default_retry_delay() -> Duration {
    Duration::from_secs(2)
}

fn default_max_attempts() -> u32 {
    8
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        Self {
            clarification_requested: true,
            turn_finished: false,
            public_url: None,
            remind_after: None,
            escalate_after: None,
            retry_delay: default_retry_delay(),
            max_attempts: default_max_attempts(),
            webhooks: Vec::new(),
        }
    }
}

/// What a webhook is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// A question waits for the operator.
    ClarificationRequested,
    /// It still waits, `remind_after` later.
    Reminder,
    /// It still waits, `escalate_after` later.
    Escalation,
    /// It was answered, skipped, cancelled, or given up.
    ClarificationSettled,
    /// A turn ended.
    TurnFinished,
}

impl HookEvent {
    /// The wire name (the body's `event`, the `Kandev-Event` header).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClarificationRequested => "clarification_requested",
            Self::Reminder => "reminder",
            Self::Escalation => "escalation",
            Self::ClarificationSettled => "clarification_settled",
            Self::TurnFinished => "turn_finished",
        }
    }
}

/// The body a webhook gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookFormat {
    /// kandev's JSON (docs/configuration.md, "Reaching the operator").
    #[default]
    Json,
    /// A Slack incoming-webhook message (Block Kit).
    Slack,
}

/// One `[[notifications.webhooks]]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Its name (metrics, Settings, the answerer a link names: `webhook:{name}`).
    pub name: String,
    /// Where it is POSTed: `http://` or `https://`.
    pub url: String,
    /// The HMAC-SHA256 key of the `Kandev-Signature` header.
    pub secret: String,
    /// The events it gets.
    pub events: Vec<HookEvent>,
    /// `json` (default) or `slack`.
    #[serde(default)]
    pub format: HookFormat,
    /// Puts the question text in the body (off: bodies name the task only).
    #[serde(default)]
    pub include_question: bool,
    /// Puts a signed single-use answer link for the question in the body (needs operator
    /// auth and `public_url`; docs/decisions/0016).
    #[serde(default)]
    pub answer_links: bool,
    /// Who answers through this hook's links (`answered_by`); `webhook:{name}` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret never reaches a log.
        f.debug_struct("WebhookConfig")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("format", &self.format)
            .field("include_question", &self.include_question)
            .field("answer_links", &self.answer_links)
            .field("recipient", &self.recipient)
            .finish_non_exhaustive()
    }
}

impl WebhookConfig {
    /// Whether it gets `event`.
    pub fn wants(&self, event: HookEvent) -> bool {
        self.events.contains(&event)
    }
}

impl NotificationsConfig {
    /// Checks what serde cannot; `answer_deadline` is agentctl's (reminders must come
    /// before it).
    pub fn validate(&self, answer_deadline: Duration) -> Result<(), ConfigError> {
        if let Some(url) = &self.public_url
            && !is_http(url)
        {
            return Err(ConfigError::new(
                "notifications.public_url",
                format!("`{url}` must start with http:// or https://"),
            ));
        }
        for (key, after) in [
            ("notifications.remind_after", self.remind_after),
            ("notifications.escalate_after", self.escalate_after),
        ] {
            let Some(after) = after else { continue };
            if after.is_zero() || after >= answer_deadline {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "{} must be above zero and shorter than the answer deadline ({})",
                        humantime::format_duration(after),
                        humantime::format_duration(answer_deadline)
                    ),
                ));
            }
        }
        if self.webhooks.iter().any(|h| h.answer_links) && self.public_url.is_none() {
            return Err(ConfigError::new(
                "notifications.public_url",
                "a hook with answer_links = true needs public_url, where its links point",
            ));
        }
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "notifications.max_attempts",
                "must be at least 1",
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, hook) in self.webhooks.iter().enumerate() {
            let at = format!("notifications.webhooks[{i}]");
            if hook.name.trim().is_empty() || !names.insert(hook.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("`{}` must be a non-empty name no other hook has", hook.name),
                ));
            }
            if !is_http(&hook.url) {
                return Err(ConfigError::new(
                    format!("{at}.url"),
                    format!("`{}` must start with http:// or https://", hook.url),
                ));
            }
            if hook.secret.trim().is_empty() {
                return Err(ConfigError::new(
                    format!("{at}.secret"),
                    "a webhook needs a secret to sign its deliveries with",
                ));
            }
            if hook.events.is_empty() {
                return Err(ConfigError::new(
                    format!("{at}.events"),
                    "name at least one of clarification_requested, reminder, escalation, clarification_settled, turn_finished",
                ));
            }
        }
        Ok(())
    }
}

fn is_http(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://"].iter().any(|scheme| {
        lower
            .strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    })
}

/// An optional humantime duration (`10m`).
mod humantime_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map(Some)
            .map_err(|err| serde::de::Error::custom(format!("`{text}` is not a duration: {err}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("kandev.toml");
        std::fs::write(&file, toml).expect("write");
        Config::load(
            Some(&file),
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    const HOOK: &str = r#"
        [[notifications.webhooks]]
        name = "team"
        url = "https://hooks.example.com/kandev"
        secret = "s3cret"
        events = ["clarification_requested", "reminder"]
    "#;

    #[test]
    fn a_webhook_loads_with_its_defaults_and_never_debug_prints_its_secret() {
        let c = load(HOOK, &[]).expect("loads");
        let hook = &c.notifications.webhooks[0];
        assert_eq!(hook.format, HookFormat::Json);
        assert!(!hook.include_question);
        assert!(hook.wants(HookEvent::Reminder));
        assert!(!hook.wants(HookEvent::TurnFinished));
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(NotificationsConfig::default().remind_after, None);
        assert_eq!(NotificationsConfig::default().escalate_after, None);
    }

    #[test]
    fn a_hook_without_an_http_url_or_a_secret_is_a_one_line_error() {
        let err = load(&HOOK.replace("https://", "ftp://"), &[]).expect_err("ftp");
        assert_eq!(err.key, "notifications.webhooks[0].url");
        assert!(!err.to_string().contains('\n'));
        let err = load(&HOOK.replace("\"s3cret\"", "\"\""), &[]).expect_err("no secret");
        assert_eq!(err.key, "notifications.webhooks[0].secret");
        let err = load(&HOOK.replace("secret = \"s3cret\"", ""), &[]).expect_err("missing");
        assert!(err.to_string().contains("missing field `secret`"), "{err}");
        let err = load(
            &HOOK.replace("name = \"team\"", "name = \"team\"\nformat = \"xml\""),
            &[],
        )
        .expect_err("format");
        assert!(err.key.contains("format"), "{err}");
        let err = load(&format!("{HOOK}\nsecrte = \"x\""), &[]).expect_err("unknown key");
        assert!(err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn reminders_must_come_before_the_answer_deadline() {
        let toml = "[notifications]\nremind_after = \"10m\"\nescalate_after = \"20m\"\n";
        let c = load(toml, &[]).expect("under 55 min");
        assert_eq!(c.notifications.remind_after, Some(Duration::from_secs(600)));
        let err = load(toml, &[("KANDEV_ELICITATION_ANSWER_TIMEOUT", "15m")])
            .expect_err("escalation after the deadline");
        assert_eq!(err.key, "notifications.escalate_after");
        let err = load("[notifications]\nremind_after = \"1h\"\n", &[]).expect_err("1h");
        assert_eq!(err.key, "notifications.remind_after");
    }
}
