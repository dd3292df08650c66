//! The keeper that holds on to this replica's sessions (docs/architecture.md §12): every
//! `lease/3` it renews this replica's leases, lets go of the sessions whose lease another
//! replica took (or that ran out while the database was unreachable), then claims and
//! adopts the sessions whose owner stopped renewing. At shutdown it hands them on.
//!
//! Letting go never tells the agent anything: the link is detached, and a remote
//! agentctl keeps the session for the replica that attaches next.

use std::sync::Arc;

use tokio::time::Instant;

use crate::model::{TakeOver, lease::renew_every};
use crate::sessions::ends::SessionEnds;
use crate::sessions::hosts::Hosts;
use crate::sessions::live::LiveSessions;
use crate::sessions::ownership::Ownership;
use crate::sessions::restart::Adoption;
use crate::store::Stores;

/// Renews, lets go of, takes over and hands on this replica's session leases.
#[derive(Debug)]
pub struct LeaseKeeper {
    stores: Stores,
    ownership: Arc<Ownership>,
    hosts: Arc<Hosts>,
    live: Arc<LiveSessions>,
    ends: Arc<SessionEnds>,
    adoption: Arc<Adoption>,
}

impl LeaseKeeper {
    /// Keeps the leases `ownership` holds for the sessions of `live`, taking over through
    /// `adoption` and letting go through `ends`.
    pub fn new(
        stores: Stores,
        ownership: Arc<Ownership>,
        hosts: Arc<Hosts>,
        live: Arc<LiveSessions>,
        ends: Arc<SessionEnds>,
        adoption: Arc<Adoption>,
    ) -> Self {
        Self {
            stores,
            ownership,
            hosts,
            live,
            ends,
            adoption,
        }
    }

    /// Starts the keeper (see the module docs); it runs as long as the process.
    pub fn spawn(self: &Arc<Self>) {
        let this = Arc::clone(self);
        let span = tracing::info_span!("lease_keeper", replica_id = %self.ownership.replica_id);
        tokio::spawn(tracing::Instrument::instrument(
            async move { this.keep_leases().await },
            span,
        ));
    }

    async fn keep_leases(self: Arc<Self>) {
        let lease = self.ownership.lease;
        let every = renew_every(lease);
        // The start of the last renewal that went through: the database set every
        // lease to run out no sooner than `lease` after it.
        let mut renewed_at = Instant::now();
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let started = Instant::now();
            let held = self.ownership.held();
            let renewal = tokio::time::timeout(
                every,
                self.stores
                    .leases
                    .renew(&self.ownership.replica_id, &held, lease),
            )
            .await;
            match renewal {
                Ok(Ok(still)) => {
                    renewed_at = started;
                    for (id, _) in held.iter().filter(|(id, _)| !still.contains(id)) {
                        self.ends
                            .let_go(id, "another replica took the session over");
                    }
                }
                Ok(Err(err)) => tracing::warn!(error = %err, "cannot renew the session leases"),
                Err(_) => tracing::warn!(?every, "renewing the session leases took too long"),
            }
            if started.duration_since(renewed_at) >= lease {
                for (id, _) in self.ownership.held() {
                    self.ends
                        .let_go(&id, "its lease ran out while the database was unreachable");
                }
            }
            if self.ownership.is_leaving() {
                continue;
            }
            match self.adoption.adopt_claimable(TakeOver::Expired).await {
                Ok(adopted) if adopted != Default::default() => {
                    tracing::info!(
                        resumed = adopted.resumed,
                        failed = adopted.failed,
                        "took over sessions whose owner stopped renewing its lease"
                    );
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "cannot look for sessions to take over"),
            }
        }
    }

    /// The drain's hand-over (docs/architecture.md §12): with replicas and a remote executor,
    /// every session live here is detached (agentctl keeps it, the agent notices nothing)
    /// and its lease made to run out now, so another replica claims it at its next
    /// renewal (within `lease/3`) instead of after the lease. From here on this replica
    /// claims nothing. How many were handed on (`None`: no replica could take them, as
    /// on SQLite or with a local executor); the rest are stopped by the drain's last step.
    pub async fn hand_over_all(&self) -> Option<usize> {
        if self.ownership.single_replica || !self.hosts.are_remote() {
            return None;
        }
        self.ownership.leave();
        let mut handed = 0;
        for live in self.live.all() {
            let Some(generation) = live.fence.generation() else {
                continue;
            };
            self.ends.let_go(
                &live.id,
                "handed to another replica: this one is shutting down",
            );
            match self.stores.leases.hand_over(&live.id, generation).await {
                Ok(true) => handed += 1,
                Ok(false) => {}
                Err(err) => {
                    // Not lost: the lease still runs out, later.
                    tracing::warn!(session_id = %live.id, error = %err, "cannot hand the lease on; it runs out by itself");
                }
            }
        }
        crate::metrics::sessions_handed_over(handed);
        Some(handed)
    }
}
