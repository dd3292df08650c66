//! [`Clarifications`]: settles and announces records, and serves the operator's verbs.

use serde::Serialize;

use crate::agent_link::{DynLink, LinkError};
use crate::events::{Change, Publisher};
use crate::model::{Fence, Notification, Settlement};
use crate::notifications::Notifier;
use crate::store::{Opened, SettledRecord, StoreError, Stores};

/// What the clarifications need of the live sessions: the link of a session this
/// process holds. Implemented by the session registry; owned here so this module never
/// names it.
pub trait SessionAgents: Send + Sync {
    /// The link of session `session_id` and the fence of its lease, when it is live here.
    fn link_of(&self, session_id: &str) -> Option<(DynLink, Fence)>;
}

/// A session, as the clarifications name it on messages and notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    /// The session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// The task's title (notifications name the task, never the question).
    pub task_title: String,
    /// The fence of the session's lease: settlements made for it carry it.
    pub fence: Fence,
}

/// What became of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RespondStatus {
    /// Delivered; the agent got the answer.
    Answered,
    /// Delivered as a skip (`decline`).
    Declined,
    /// The agent is gone; the answer is recorded on the message only.
    NotDelivered,
}

/// What became of a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelStatus {
    /// The agent got `{"action": "cancel"}` (the tool call is aborted).
    Cancelled,
}

/// Whether agentctl gave a verdict on a verb (accepted or refused it), as opposed to
/// the request never being answered (for the delivery latency).
pub(super) fn has_verdict<T>(result: &Result<T, LinkError>) -> bool {
    matches!(result, Ok(_) | Err(LinkError::Remote(_)))
}

/// The clarifications' shared parts. Cheap to clone.
#[derive(Clone)]
pub struct Clarifications {
    pub(crate) stores: Stores,
    pub(crate) publisher: Publisher,
    pub(crate) notifier: Notifier,
    /// The records opened here and not yet settled.
    pub(crate) open: std::sync::Arc<super::OpenRecords>,
}

impl std::fmt::Debug for Clarifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clarifications").finish_non_exhaustive()
    }
}

impl Clarifications {
    /// Clarifications on `stores`, announcing on `publisher`, notifying through `notifier`.
    pub fn new(stores: Stores, publisher: Publisher, notifier: Notifier) -> Self {
        Self {
            stores,
            publisher,
            notifier,
            open: std::sync::Arc::default(),
        }
    }

    /// Settles one record and, when that changed it, announces it (F7).
    pub async fn settle_and_announce(
        &self,
        pending_id: &str,
        settlement: &Settlement,
    ) -> Result<Option<SettledRecord>, StoreError> {
        let settled = self
            .stores
            .clarifications
            .settle(pending_id, settlement)
            .await?;
        if let Some(done) = &settled {
            self.announce(done);
        }
        Ok(settled)
    }

    /// Settles every pending record of a session (the session ended, or its agent is
    /// gone) in one transaction, and announces each.
    pub async fn settle_all_pending(
        &self,
        session_id: &str,
        settlement: &Settlement,
    ) -> Result<usize, StoreError> {
        let settled = self
            .stores
            .clarifications
            .settle_pending(session_id, None, &[], settlement)
            .await?;
        for done in &settled {
            self.announce(done);
        }
        Ok(settled.len())
    }

    /// Pushes what a settlement changed: the record, its message, and (when it left
    /// `pending`) its session, whose state and `pending_action` follow the count.
    pub(crate) fn announce(&self, done: &SettledRecord) {
        self.open.changed(&done.record);
        if done.effect == crate::model::settlement::Effect::Settle {
            crate::metrics::clarification_settled(&done.record);
        }
        self.publisher
            .publish(Change::ClarificationSettled(done.record.clone()));
        if let Some(message) = &done.message {
            self.publisher
                .publish(Change::MessageUpdated(message.clone()));
        }
        if done.effect == crate::model::settlement::Effect::Settle {
            self.publisher.session_written(
                &done.record.session_id,
                &done.record.task_id,
                done.session.clone(),
            );
            let webhooks = self.notifier.webhooks().clone();
            let record = done.record.clone();
            tokio::spawn(async move {
                if let Err(err) = webhooks.settled(&record).await {
                    tracing::warn!(pending_id = %record.pending_id, error = %err, "clarification_settled webhooks not written");
                }
            });
        }
    }

    /// Pushes a new record, its message and its session, and notifies the operator once
    /// (F9: the body names the task, never the question).
    pub(crate) async fn announce_opened(
        &self,
        session: &SessionRef,
        opened: Opened,
        notification: Option<Notification>,
    ) -> Result<(), StoreError> {
        let Opened {
            record,
            message,
            session: written,
        } = opened;
        // Never the question text at info, only counts (F9, logs alike).
        tracing::info!(
            pending_id = %record.pending_id,
            source = record.source.as_str(),
            questions = record.questions.len(),
            "clarification requested"
        );
        crate::metrics::clarification_received(record.source);
        let opened_at = record.created_at;
        if let Err(err) = self
            .notifier
            .webhooks()
            .requested(&session.task_title, &record)
            .await
        {
            // The record stands; the next start writes what is missing (`catch_up`).
            tracing::warn!(pending_id = %record.pending_id, error = %err, "clarification_requested webhooks not written");
        }
        self.open.opened(&record);
        self.publisher.publish(Change::ClarificationCreated(record));
        self.publisher.publish(Change::MessageCreated(message));
        self.publisher
            .session_written(&session.session_id, &session.task_id, written);
        if let Some(n) = notification {
            // Stored at the record's time (the store's open); pushed the same.
            self.notifier.announce(Notification {
                created_at: opened_at,
                ..n
            });
        }
        Ok(())
    }

    /// The notification that announces a record `session` opens, stored with it.
    pub(crate) fn opening_notification(&self, session: &SessionRef) -> Option<Notification> {
        self.notifier.clarification_requested(
            &session.task_title,
            &session.task_id,
            &session.session_id,
        )
    }
}
