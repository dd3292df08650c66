//! What a replica does with live sessions nobody acts for: those a previous process left
//! live (start-up), and those whose owner stopped renewing its lease (takeover,
//! docs/architecture.md §12). Only a session whose lease this replica could claim is touched —
//! at start-up on PostgreSQL, one whose lease ran out or was this replica's own
//! (`cluster.replica_id` kept across the restart); on SQLite, the only replica, all.
//!
//! With a remote executor the agentctl outlives the backend and may still run such a
//! session: the registry re-attaches to it (`agent.session.attach` with the last applied
//! event as `after_seq`), and the session is live again. Its pending clarifications are
//! then reconciled by the `Reattached` event, after the events agentctl kept: a pending
//! it still holds stays answerable, one settled meanwhile takes the status its replayed
//! `elicitation_settled` gives, and one nothing accounts for is `agent_disconnected`.
//! Every other session (local executor: its agentctl exited with the process that ran
//! it; never started; agentctl unreachable or no longer holding it) is marked `FAILED`
//! with the reason, its pending clarifications `agent_disconnected`.

use std::sync::Arc;

use tracing::Instrument;

use crate::model::{SessionLease, SessionRecord, SessionState, TakeOver};
use crate::sessions::consumer::Consumers;
use crate::sessions::ends::SessionEnds;
use crate::sessions::hosts::Hosts;
use crate::sessions::live::{LiveSession, LiveSessions};
use crate::sessions::ownership::Ownership;
use crate::store::{StoreError, Stores};

/// Why a session left live by a previous process of this replica is failed.
const RESTARTED: &str = "the backend restarted while the session was live";

/// What adopting sessions did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Re-attached to the remote agentctl that still runs them: live again.
    pub resumed: usize,
    /// Marked `FAILED`, their pending clarifications `agent_disconnected`.
    pub failed: usize,
}

/// A session claimed for adoption, and who acted for it before.
struct Claimed {
    row: SessionRecord,
    lease: SessionLease,
    /// Why it needs adopting, the start of its failure reason.
    why: String,
}

/// Claims the sessions nobody acts for and makes them live here, or fails them.
#[derive(Debug)]
pub struct Adoption {
    stores: Stores,
    ownership: Arc<Ownership>,
    hosts: Arc<Hosts>,
    live: Arc<LiveSessions>,
    consumers: Arc<Consumers>,
    ends: Arc<SessionEnds>,
}

impl Adoption {
    /// Adopts into `consumers` (sessions of `live`), re-attaching through `hosts`, under
    /// the leases `ownership` claims; a session that cannot be re-attached ends through `ends`.
    pub fn new(
        stores: Stores,
        ownership: Arc<Ownership>,
        hosts: Arc<Hosts>,
        live: Arc<LiveSessions>,
        consumers: Arc<Consumers>,
        ends: Arc<SessionEnds>,
    ) -> Self {
        Self {
            stores,
            ownership,
            hosts,
            live,
            consumers,
            ends,
        }
    }

    /// Start-up: adopts the sessions a previous process left live (see the module docs).
    pub async fn reconcile_after_restart(&self) -> Result<Reconciled, StoreError> {
        let take_over = if self.ownership.single_replica {
            TakeOver::Any
        } else {
            TakeOver::ExpiredOrOwn
        };
        self.adopt_claimable(take_over).await
    }

    /// Claims every live session `take_over` lets this replica claim and adopts it.
    pub async fn adopt_claimable(&self, take_over: TakeOver) -> Result<Reconciled, StoreError> {
        let me = &self.ownership.replica_id;
        let ids = self
            .stores
            .leases
            .claimable(me, take_over, self.ownership.lease)
            .await?;
        let mut claimed = Vec::new();
        for id in ids {
            let held: Vec<String> = self
                .ownership
                .held()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            if self.live.get(&id).is_some() || held.contains(&id) {
                // Ours and acting (a renewal that came late): the next one extends it.
                continue;
            }
            let before = self.stores.leases.lease(&id).await?;
            let Some(lease) = self
                .stores
                .leases
                .claim(&id, self.ownership.claimant(), take_over)
                .await?
            else {
                continue;
            };
            self.ownership.hold(&lease);
            let why = match before {
                Some(old) if old.replica_id != *me && !self.ownership.single_replica => {
                    crate::metrics::lease_taken_over();
                    format!(
                        "replica `{}` that ran the session handed it on or stopped renewing its lease",
                        old.replica_id
                    )
                }
                _ => RESTARTED.to_owned(),
            };
            match self.stores.sessions.session(&id).await? {
                Some(row) if !row.state.is_terminal() => claimed.push(Claimed { row, lease, why }),
                _ => self.ends.release(&lease).await,
            }
        }
        let attempts = claimed.into_iter().map(|c| self.adopt(c));
        let mut reconciled = Reconciled::default();
        for adopted in futures::future::join_all(attempts).await {
            match adopted? {
                true => reconciled.resumed += 1,
                false => reconciled.failed += 1,
            }
        }
        Ok(reconciled)
    }

    /// Re-attaches one claimed session, or fails it. Whether it is live again.
    async fn adopt(&self, claimed: Claimed) -> Result<bool, StoreError> {
        let Claimed { row, lease, why } = claimed;
        let span = tracing::info_span!("session", session_id = %row.id);
        let resumable = row.acp_session_id.is_some()
            && matches!(
                row.state,
                SessionState::Running | SessionState::Idle | SessionState::WaitingForInput
            );
        let reason = match self.hosts.executor_of(&lease) {
            _ if !resumable => why,
            None if !self.hosts.are_remote() => {
                format!("{why}, and its agentctl ran beside that process (local executor)")
            }
            None => format!("{why}, and its agentctl host is no longer configured"),
            Some(executor) => {
                let resumed = self
                    .hosts
                    .resume(&executor, &row.id, row.last_event_seq)
                    .instrument(span.clone())
                    .await;
                match resumed {
                    Ok((link, events)) => match self.stores.tasks.task(&row.task_id).await? {
                        Some(task) => {
                            let live = Arc::new(LiveSession::new(
                                &row.id,
                                &task.id,
                                &task.title,
                                &row.agent,
                                link,
                                lease.fence(),
                            ));
                            tracing::info!(session_id = %row.id, state = %row.state, generation = lease.generation, "session re-attached: {why}");
                            self.consumers.go_live(live, events, row.last_event_seq);
                            return Ok(true);
                        }
                        None => {
                            link.shutdown().await;
                            format!("{why}, and its task is gone")
                        }
                    },
                    Err(err) => format!("{why}, and re-attaching to agentctl failed: {err}"),
                }
            }
        };
        tracing::warn!(session_id = %row.id, %reason, "session nobody acted for marked FAILED");
        self.ends.fail_stale(&row, &lease, &reason).await?;
        Ok(false)
    }
}
