//! What start-up does with the sessions a previous process left live (a crash: a
//! graceful stop ends them).
//!
//! With a remote executor the agentctl outlives the backend and may still run such a
//! session: the registry re-attaches to it (`agent.session.attach` with the last applied
//! event as `after_seq`), and the session is live again. Its pending clarifications are
//! then reconciled by the `Reattached` event, after the events agentctl kept: a pending
//! it still holds stays answerable, one settled meanwhile takes the status its replayed
//! `elicitation_settled` gives, and one nothing accounts for is `agent_disconnected`.
//! Every other session (local executor: its agentctl exited with the previous process;
//! never started; agentctl unreachable or no longer holding it) is marked `FAILED`, its
//! pending clarifications `agent_disconnected`.

use std::sync::Arc;

use tracing::Instrument;

use crate::agent_link::ExecutorConfig;
use crate::model::{SessionRecord, SessionState, Settlement};
use crate::sessions::live::LiveSession;
use crate::sessions::registry::SessionRegistry;
use crate::store::StoreError;

/// Why a session left live by a previous process is failed at start-up.
const RESTARTED: &str = "the backend restarted while the session was live";

/// What start-up did with the sessions a previous process left live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Re-attached to the remote agentctl that still runs them: live again.
    pub resumed: usize,
    /// Marked `FAILED`, their pending clarifications `agent_disconnected`.
    pub failed: usize,
}

impl SessionRegistry {
    /// Re-attaches or fails every session a previous process left live.
    pub async fn reconcile_after_restart(self: &Arc<Self>) -> Result<Reconciled, StoreError> {
        let stale = self.stores.sessions.live_sessions().await?;
        let remote = matches!(self.config.executor, ExecutorConfig::Remote { .. });
        let attempts = stale.into_iter().map(|row| async move {
            let resumable = row.acp_session_id.is_some()
                && matches!(
                    row.state,
                    SessionState::Running | SessionState::Idle | SessionState::WaitingForInput
                );
            if !remote || !resumable {
                return (row, Err(RESTARTED.to_owned()));
            }
            let span = tracing::info_span!("session", session_id = %row.id);
            let resumed = self
                .connector
                .resume(&self.config.executor, &row.id, row.last_event_seq)
                .instrument(span)
                .await
                .map_err(|err| format!("{RESTARTED}, and re-attaching to agentctl failed: {err}"));
            (row, resumed)
        });
        let mut reconciled = Reconciled::default();
        for (row, attempt) in futures::future::join_all(attempts).await {
            let reason = match attempt {
                Ok((link, events)) => match self.stores.tasks.task(&row.task_id).await? {
                    Some(task) => {
                        let live = Arc::new(LiveSession::new(
                            &row.id,
                            &task.id,
                            &task.title,
                            &row.agent,
                            link,
                        ));
                        tracing::info!(session_id = %row.id, state = %row.state, "session re-attached after a restart");
                        self.go_live(live, events, row.last_event_seq);
                        reconciled.resumed += 1;
                        continue;
                    }
                    None => {
                        link.shutdown().await;
                        format!("{RESTARTED}, and its task is gone")
                    }
                },
                Err(reason) => reason,
            };
            tracing::warn!(session_id = %row.id, %reason, "session left live by a previous run failed");
            self.fail_stale(&row, &reason).await?;
            reconciled.failed += 1;
        }
        Ok(reconciled)
    }

    /// Ends a session a previous process left live: `FAILED`, its pending
    /// clarifications `agent_disconnected`.
    async fn fail_stale(&self, row: &SessionRecord, reason: &str) -> Result<(), StoreError> {
        self.clarifications
            .settle_all_pending(&row.id, &Settlement::disconnected())
            .await?;
        self.stores
            .sessions
            .transition(&row.id, SessionState::Failed, Some(reason))
            .await?;
        self.publisher.session_changed(&row.id, &row.task_id);
        Ok(())
    }
}
