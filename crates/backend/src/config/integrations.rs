//! `[integrations]`: chat tools whose buttons come back to kandev.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[integrations]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrationsConfig {
    /// `[integrations.slack]`: Slack's interactivity requests
    /// (`POST /api/v1/integrations/slack/actions`). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackConfig>,
}

/// `[integrations.slack]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The Slack app's signing secret: every action request must carry its `v0`
    /// signature (better set as `KANDEV_INTEGRATIONS__SLACK__SIGNING_SECRET`).
    pub signing_secret: String,
    /// Where kandev may POST a click's message update (the `response_url` Slack sends):
    /// only URLs starting with this are followed.
    #[serde(default = "slack_response_urls")]
    pub response_url_prefix: String,
}

fn slack_response_urls() -> String {
    "https://hooks.slack.com/".to_owned()
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("response_url_prefix", &self.response_url_prefix)
            .finish_non_exhaustive()
    }
}

impl IntegrationsConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(slack) = &self.slack
            && slack.signing_secret.trim().is_empty()
        {
            return Err(ConfigError::new(
                "integrations.slack.signing_secret",
                "must be the Slack app's signing secret",
            ));
        }
        Ok(())
    }
}
