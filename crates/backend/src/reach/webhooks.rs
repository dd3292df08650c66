//! [`Webhooks`]: writes deliveries into the outbox when something happens that a hook
//! listens for. A question's reminder and escalation are written with it, due later, so
//! neither lives in a timer a restart would lose; the dispatcher drops them unsent once the
//! record is settled or its deadline has come.

use std::sync::Arc;

use crate::config::{HookEvent, NotificationsConfig, WebhookConfig};
use crate::model::{Clarification, ClarificationStatus, NewDelivery, Timestamp, new_record_id};
use crate::reach::answer_links;
use crate::reach::payload::{Facts, body};
use crate::store::{ClarificationFilter, StoreError, Stores};

/// Writes deliveries for the configured hooks. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    stores: Stores,
    config: Arc<NotificationsConfig>,
    /// Whether Slack clicks come back (`[integrations.slack]` is set).
    slack_buttons: bool,
    /// `auth.session_secret`, part of the answer links' key.
    session_secret: Option<String>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("hooks", &self.config.webhooks.len())
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Hooks of `config`, writing into `stores`.
    pub fn new(stores: Stores, config: Arc<NotificationsConfig>, slack_buttons: bool) -> Self {
        Self {
            stores,
            config,
            slack_buttons,
            session_secret: None,
        }
    }

    /// The hooks of a whole configuration.
    pub fn from_config(stores: Stores, config: &crate::config::Config) -> Self {
        Self {
            session_secret: config.auth.session_secret.clone(),
            ..Self::new(
                stores,
                Arc::new(config.notifications.clone()),
                config.integrations.slack.is_some(),
            )
        }
    }

    /// A fresh answer link for `record` through `hook`, when the hook carries them: it
    /// expires with the record (an hour after it was asked when it has no deadline).
    fn answer_link(&self, hook: &WebhookConfig, record: &Clarification) -> Option<String> {
        let base = self
            .config
            .public_url
            .as_deref()
            .filter(|_| hook.answer_links)?;
        let expiry = record
            .expires_at
            .unwrap_or_else(|| record.created_at.plus(std::time::Duration::from_secs(3600)))
            .instant()
            .timestamp();
        let token = answer_links::issue(
            hook,
            self.session_secret.as_deref(),
            &record.pending_id,
            expiry,
        );
        Some(format!(
            "{}/answer.html#{token}",
            base.trim_end_matches('/')
        ))
    }

    fn hooks(&self, event: HookEvent) -> impl Iterator<Item = &WebhookConfig> {
        self.config.webhooks.iter().filter(move |h| h.wants(event))
    }

    fn delivery(
        &self,
        hook: &WebhookConfig,
        facts: &Facts<'_>,
        key: String,
        due_at: Timestamp,
    ) -> NewDelivery {
        NewDelivery {
            hook: hook.name.clone(),
            event: facts.event.as_str().to_owned(),
            dedup_key: format!("{}\u{1f}{key}", hook.name),
            pending_id: facts.record.map(|r| r.pending_id.clone()),
            body: body(
                hook,
                self.config.public_url.as_deref(),
                facts,
                facts
                    .record
                    .filter(|_| facts.event != HookEvent::ClarificationSettled)
                    .and_then(|record| self.answer_link(hook, record))
                    .as_deref(),
                self.slack_buttons,
            ),
            due_at,
            not_after: facts.record.and_then(|r| r.expires_at),
        }
    }

    /// The deliveries of a new question: `clarification_requested` now, a reminder and
    /// an escalation later when configured and due before the record's deadline.
    pub fn requested_deliveries(
        &self,
        task_title: &str,
        record: &Clarification,
    ) -> Vec<NewDelivery> {
        let mut out = Vec::new();
        let scheduled = [
            (
                HookEvent::ClarificationRequested,
                Some(std::time::Duration::ZERO),
            ),
            (HookEvent::Reminder, self.config.remind_after),
            (HookEvent::Escalation, self.config.escalate_after),
        ];
        for (event, after) in scheduled {
            let Some(after) = after else { continue };
            let due_at = record.created_at.plus(after);
            if event != HookEvent::ClarificationRequested
                && record.expires_at.is_some_and(|deadline| due_at >= deadline)
            {
                continue;
            }
            let facts = Facts {
                event,
                task_id: &record.task_id,
                task_title,
                session_id: &record.session_id,
                record: Some(record),
            };
            for hook in self.hooks(event) {
                let key = format!("{}\u{1f}{}", event.as_str(), record.pending_id);
                out.push(self.delivery(hook, &facts, key, due_at));
            }
        }
        out
    }

    /// A question was asked.
    pub async fn requested(
        &self,
        task_title: &str,
        record: &Clarification,
    ) -> Result<usize, StoreError> {
        let rows = self.requested_deliveries(task_title, record);
        if rows.is_empty() {
            return Ok(0);
        }
        self.stores.outbox.enqueue(&rows).await
    }

    /// A question was settled.
    pub async fn settled(&self, record: &Clarification) -> Result<usize, StoreError> {
        let event = HookEvent::ClarificationSettled;
        if self.hooks(event).next().is_none() {
            return Ok(0);
        }
        let title = self.task_title(&record.task_id).await?;
        let facts = Facts {
            event,
            task_id: &record.task_id,
            task_title: &title,
            session_id: &record.session_id,
            record: Some(record),
        };
        let key = format!("{}\u{1f}{}", event.as_str(), record.pending_id);
        let rows: Vec<NewDelivery> = self
            .hooks(event)
            .map(|hook| self.delivery(hook, &facts, key.clone(), Timestamp::now()))
            .collect();
        self.stores.outbox.enqueue(&rows).await
    }

    /// A turn ended.
    pub async fn turn_finished(
        &self,
        task_title: &str,
        task_id: &str,
        session_id: &str,
    ) -> Result<usize, StoreError> {
        let event = HookEvent::TurnFinished;
        let facts = Facts {
            event,
            task_id,
            task_title,
            session_id,
            record: None,
        };
        // A turn has no id of its own; each end is one delivery.
        let key = format!("{}\u{1f}{}", event.as_str(), new_record_id());
        let rows: Vec<NewDelivery> = self
            .hooks(event)
            .map(|hook| self.delivery(hook, &facts, key.clone(), Timestamp::now()))
            .collect();
        if rows.is_empty() {
            return Ok(0);
        }
        self.stores.outbox.enqueue(&rows).await
    }

    /// Writes the deliveries of every waiting question that lacks them: a kandev that
    /// stopped between storing a question and writing its deliveries sends them on its
    /// next start (the keys make this a no-op for the rest).
    pub async fn catch_up(&self) -> Result<usize, StoreError> {
        if self.config.webhooks.is_empty() {
            return Ok(0);
        }
        let waiting = self
            .stores
            .clarifications
            .clarifications(&ClarificationFilter {
                session_id: None,
                status: Some(ClarificationStatus::Pending),
            })
            .await?;
        let mut rows = Vec::new();
        for record in &waiting {
            let title = self.task_title(&record.task_id).await?;
            rows.extend(self.requested_deliveries(&title, record));
        }
        if rows.is_empty() {
            return Ok(0);
        }
        self.stores.outbox.enqueue(&rows).await
    }

    async fn task_title(&self, task_id: &str) -> Result<String, StoreError> {
        Ok(self
            .stores
            .tasks
            .task(task_id)
            .await?
            .map(|task| task.title)
            .unwrap_or_default())
    }
}
