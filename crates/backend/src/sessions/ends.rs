//! How a live session stops being live here: stopped (by the operator or the shutdown),
//! lost (its agent or agentctl gone), let go (its lease is another replica's now) or, for
//! a session nobody acted for, failed at adoption. Each writes its pending records first,
//! then the session's state, under the session's lease (the fence).

use std::sync::Arc;

use tracing::Instrument;

use crate::clarifications::Clarifications;
use crate::events::{Change, Publisher};
use crate::model::{
    ClarificationStatus, MessageKind, NewMessage, Outcome, SessionLease, SessionRecord,
    SessionState, Settlement, author,
};
use crate::sessions::live::{LiveSession, LiveSessions};
use crate::sessions::ownership::Ownership;
use crate::store::{StoreError, Stores};

/// Ends live sessions and records why.
#[derive(Debug)]
pub struct SessionEnds {
    stores: Stores,
    publisher: Publisher,
    clarifications: Clarifications,
    ownership: Arc<Ownership>,
    live: Arc<LiveSessions>,
}

impl SessionEnds {
    /// Ends sessions of `live`, writing through `stores` and `clarifications` under the
    /// leases `ownership` holds.
    pub fn new(
        stores: Stores,
        publisher: Publisher,
        clarifications: Clarifications,
        ownership: Arc<Ownership>,
        live: Arc<LiveSessions>,
    ) -> Self {
        Self {
            stores,
            publisher,
            clarifications,
            ownership,
            live,
        }
    }

    /// Removes session `id` from the live map (and its open records from memory).
    fn forget_live(&self, id: &str) {
        self.live.remove(id);
        self.clarifications.open.forget_session(id);
    }

    /// Shuts `live`'s link down (agentctl answers its pendings `cancel`) and records the
    /// end as `state`. False when it had already ended.
    pub async fn stop(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        if !live.end() {
            return Ok(false);
        }
        self.forget_live(&live.id);
        let span = tracing::info_span!("session", session_id = %live.id);
        async {
            live.link.shutdown().await;
            let withdrawn =
                Settlement::by_backend(ClarificationStatus::Cancelled, Outcome::Withdrawn);
            self.record_end(live, state, error, &withdrawn).await
        }
        .instrument(span)
        .await?;
        Ok(true)
    }

    /// The agent or agentctl is gone: pending records become `agent_disconnected`, the
    /// session `FAILED`. Ignored once the session has ended (a stop's own teardown). This
    /// is the settlement agentctl can no longer report, so it enters the session's
    /// sequence: only its consumer (or the stop that ended it) calls this.
    pub async fn lost(&self, live: &LiveSession, reason: &str) -> Result<(), StoreError> {
        if live.is_ended() {
            return Ok(());
        }
        if !self.still_owns(live).await {
            // Another replica took the session over (agentctl handed it the stream).
            self.ownership.forget(&live.id);
            self.detach(
                live,
                &format!("{reason}, and its lease is not this replica's"),
            );
            return Ok(());
        }
        if !live.end() {
            return Ok(());
        }
        tracing::warn!(%reason, "session lost its agent");
        self.forget_live(&live.id);
        self.status_message(
            &live.id,
            &live.task_id,
            &format!("Session ended: {reason}."),
        )
        .await;
        self.record_end(
            live,
            SessionState::Failed,
            Some(reason),
            &Settlement::disconnected(),
        )
        .await?;
        // A local agentctl whose agent died is still running: stop it.
        let link = Arc::clone(&live.link);
        tokio::spawn(async move { link.shutdown().await });
        Ok(())
    }

    /// Writes a session's end: its pending records, then its state.
    async fn record_end(
        &self,
        live: &LiveSession,
        state: SessionState,
        error: Option<&str>,
        settlement: &Settlement,
    ) -> Result<(), StoreError> {
        self.clarifications
            .settle_all_pending(&live.id, &settlement.clone().fenced(live.fence))
            .await?;
        self.stores
            .sessions
            .transition(&live.id, state, error, live.fence)
            .await?;
        tracing::info!(state = %state, "session ended");
        if let Some(generation) = live.fence.generation() {
            self.ownership.forget(&live.id);
            self.stores.leases.release(&live.id, generation).await?;
        }
        self.publisher.session_changed(&live.id, &live.task_id);
        Ok(())
    }

    /// Ends a session nobody acted for: `FAILED`, its pending clarifications
    /// `agent_disconnected`, under the lease just claimed.
    pub async fn fail_stale(
        &self,
        row: &SessionRecord,
        lease: &SessionLease,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.clarifications
            .settle_all_pending(&row.id, &Settlement::disconnected().fenced(lease.fence()))
            .await?;
        self.stores
            .sessions
            .transition(&row.id, SessionState::Failed, Some(reason), lease.fence())
            .await?;
        self.release(lease).await;
        self.publisher.session_changed(&row.id, &row.task_id);
        Ok(())
    }

    /// Gives up a lease of a session that ended here.
    pub async fn release(&self, lease: &SessionLease) {
        self.ownership.forget(&lease.session_id);
        if let Err(err) = self
            .stores
            .leases
            .release(&lease.session_id, lease.generation)
            .await
        {
            tracing::warn!(session_id = %lease.session_id, error = %err, "cannot release the lease");
        }
    }

    /// Whether the database still gives `live`'s lease to this replica. False when it
    /// cannot say: nothing could be written then anyway, and letting go leaves the
    /// session to whichever replica claims its lease once it runs out (which records
    /// the loss if the agent is really gone).
    async fn still_owns(&self, live: &LiveSession) -> bool {
        let Some(generation) = live.fence.generation() else {
            return true;
        };
        match self.stores.leases.lease(&live.id).await {
            Ok(Some(lease)) => {
                lease.generation == generation && lease.replica_id == self.ownership.replica_id
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Stops acting for session `id`: forgets its lease and detaches its link, telling
    /// neither the agent nor the database.
    pub fn let_go(&self, id: &str, reason: &str) {
        self.ownership.forget(id);
        if let Some(live) = self.live.get(id) {
            self.detach(&live, reason);
        }
    }

    /// Ends `live` here without a trace: no write, no message to agentctl.
    pub fn detach(&self, live: &LiveSession, reason: &str) {
        if !live.end() {
            return;
        }
        self.forget_live(&live.id);
        live.link.detach();
        tracing::warn!(session_id = %live.id, %reason, "this replica no longer acts for the session");
    }

    /// Writes a status line into a session's chat (agent exited, turn failed, …).
    pub async fn status_message(&self, session_id: &str, task_id: &str, text: &str) {
        let new = NewMessage::new(
            session_id,
            task_id,
            MessageKind::Status,
            author::SYSTEM,
            text,
        );
        match self.stores.messages.insert_message(&new).await {
            Ok(message) => self.publisher.publish(Change::MessageCreated(message)),
            Err(err) => tracing::error!(error = %err, "cannot store a status message"),
        }
    }
}
