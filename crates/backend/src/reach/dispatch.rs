//! The outbox's sender: claims due deliveries, sends each signed, and records what
//! became of it. At least once (a row stays pending until a receiver answered 2xx or
//! every attempt failed), once across replicas (a row is claimed by one process at a
//! time, and its claim runs out if that process dies), retried on a jittered exponential
//! schedule (`backon`'s), bounded by `notifications.max_attempts`. No lock is held while
//! a request is in flight: the claim is a column, not a transaction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tracing::Instrument;

use crate::config::{HookEvent, NotificationsConfig, WebhookConfig};
use crate::model::{Attempt, ClarificationStatus, Delivery, Timestamp};
use crate::reach::signature;
use crate::store::Stores;

/// How often the outbox is looked at for due rows (a reminder is late by at most this).
pub const POLL: Duration = Duration::from_millis(250);
/// How long a claim holds: well past a request's timeout, so a live sender never loses
/// its row, and short enough that a dead one's rows are soon taken over.
pub const CLAIM: Duration = Duration::from_secs(60);
/// How long one request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows claimed per look.
const BATCH: u32 = 16;

/// Sends the outbox's deliveries.
pub struct Dispatcher {
    stores: Stores,
    hooks: HashMap<String, WebhookConfig>,
    config: Arc<NotificationsConfig>,
    client: reqwest::Client,
    claimant: String,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("claimant", &self.claimant)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A sender for the hooks of `config`, claiming rows as `claimant` (the replica id).
    pub fn new(stores: Stores, config: Arc<NotificationsConfig>, claimant: &str) -> Self {
        // reqwest is built without a rustls provider of its own; ring is the process's.
        kandev_tls::install_process_provider();
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            hooks: config
                .webhooks
                .iter()
                .map(|h| (h.name.clone(), h.clone()))
                .collect(),
            stores,
            config,
            client,
            claimant: format!("{claimant}/{}", uuid::Uuid::new_v4()),
        }
    }

    /// Looks at the outbox every [`POLL`] until the process ends. Does nothing (and
    /// returns) when no hook is configured.
    pub async fn run(self) {
        if self.hooks.is_empty() {
            return;
        }
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.once().await;
        }
    }

    /// Claims the rows due now and sends them; how many were claimed.
    pub async fn once(&self) -> usize {
        let now = Timestamp::now();
        let due = match self
            .stores
            .outbox
            .claim_due(&self.claimant, now, now.plus(CLAIM), BATCH)
            .await
        {
            Ok(due) => due,
            Err(err) => {
                tracing::warn!(error = %err, "webhook outbox unreadable; trying again");
                return 0;
            }
        };
        let claimed = due.len();
        futures::future::join_all(due.into_iter().map(|d| self.attempt(d))).await;
        claimed
    }

    async fn attempt(&self, delivery: Delivery) {
        let span = tracing::info_span!(
            "webhook",
            hook = %delivery.hook,
            event = %delivery.event,
            pending_id = delivery.pending_id.as_deref().unwrap_or(""),
        );
        self.attempt_in_span(delivery).instrument(span).await;
    }

    async fn attempt_in_span(&self, delivery: Delivery) {
        let attempt = match self.reason_to_drop(&delivery).await {
            Some(reason) => Attempt::Dropped { reason },
            None => match self.hooks.get(&delivery.hook) {
                Some(hook) => self.send(hook, &delivery).await,
                None => Attempt::Dropped {
                    reason: "the hook is no longer configured".into(),
                },
            },
        };
        crate::metrics::webhook_delivery(&delivery.hook, attempt.outcome());
        match &attempt {
            Attempt::Delivered { status } => tracing::info!(status, "webhook delivered"),
            Attempt::Retry { error, .. } => {
                tracing::info!(%error, attempts = delivery.attempts + 1, "webhook failed; retrying")
            }
            Attempt::Failed { error, .. } => {
                tracing::warn!(%error, attempts = delivery.attempts + 1, "webhook given up")
            }
            Attempt::Dropped { reason } => tracing::info!(%reason, "webhook dropped"),
        }
        match self
            .stores
            .outbox
            .finish(&delivery.id, &self.claimant, &attempt, Timestamp::now())
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!("webhook claim lost before its attempt was recorded"),
            Err(err) => {
                tracing::warn!(error = %err, "webhook attempt not recorded; its claim runs out and it is sent again")
            }
        }
    }

    /// Why a reminder or escalation is no longer to be sent: its record was settled or
    /// its deadline has come.
    async fn reason_to_drop(&self, delivery: &Delivery) -> Option<String> {
        let event = delivery.event.as_str();
        if event != HookEvent::Reminder.as_str() && event != HookEvent::Escalation.as_str() {
            return None;
        }
        if delivery
            .not_after
            .is_some_and(|deadline| Timestamp::now() >= deadline)
        {
            return Some("the question's deadline has passed".into());
        }
        let pending_id = delivery.pending_id.as_deref()?;
        match self.stores.clarifications.clarification(pending_id).await {
            Ok(Some(record)) if record.status == ClarificationStatus::Pending => None,
            Ok(Some(record)) => Some(format!("the question is {}", record.status.as_str())),
            Ok(None) => Some("the question is gone".into()),
            // Unsure: send it (a reminder too many beats one lost).
            Err(_) => None,
        }
    }

    async fn send(&self, hook: &WebhookConfig, delivery: &Delivery) -> Attempt {
        let timestamp = chrono::Utc::now().timestamp();
        let header = signature::sign(hook.secret.as_bytes(), timestamp, delivery.body.as_bytes());
        let sent = self
            .client
            .post(&hook.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(signature::HEADER, header)
            .header("Kandev-Event", &delivery.event)
            .header("Kandev-Delivery", &delivery.id)
            .body(delivery.body.clone())
            .send()
            .await;
        let (status, error) = match sent {
            Ok(response) if response.status().is_success() => {
                return Attempt::Delivered {
                    status: response.status().as_u16(),
                };
            }
            Ok(response) => (
                Some(response.status().as_u16()),
                format!("the receiver answered {}", response.status()),
            ),
            // Without the URL: it may hold a token in its path.
            Err(err) => (None, describe(err)),
        };
        match retry_delay(&self.config, delivery.attempts) {
            Some(delay) => Attempt::Retry {
                at: Timestamp::now().plus(delay),
                status,
                error,
            },
            None => Attempt::Failed { status, error },
        }
    }
}

/// What went wrong with a request, without its URL.
fn describe(err: reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    format!("{kind}: {}", err.without_url())
}

/// The wait before the next attempt, after `attempts_before + 1` failed ones; `None`
/// when that was the last allowed (`notifications.max_attempts`).
pub fn retry_delay(config: &NotificationsConfig, attempts_before: u32) -> Option<Duration> {
    let retries = config.max_attempts.saturating_sub(1) as usize;
    ExponentialBuilder::default()
        .with_min_delay(config.retry_delay)
        .with_max_delay(config.retry_delay.saturating_mul(64))
        .with_max_times(retries)
        .with_jitter()
        .build()
        .nth(attempts_before as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_grow_with_jitter_and_stop_at_max_attempts() {
        let config = NotificationsConfig {
            retry_delay: Duration::from_millis(100),
            max_attempts: 4,
            ..NotificationsConfig::default()
        };
        for attempt in 0..3u32 {
            let delay = retry_delay(&config, attempt).expect("a retry is left");
            let base = Duration::from_millis(100) * 2u32.pow(attempt);
            // backon's jitter adds up to one more base delay.
            assert!(delay >= base && delay <= base * 2, "{attempt}: {delay:?}");
        }
        assert_eq!(
            retry_delay(&config, 3),
            None,
            "the fourth attempt was the last"
        );
        let once = NotificationsConfig {
            max_attempts: 1,
            ..config
        };
        assert_eq!(retry_delay(&once, 0), None);
    }
}
