//! Which live sessions this replica owns (docs/architecture.md §12), and the keeper that holds
//! on to them: every `lease/3` it renews this replica's leases, lets go of the sessions
//! whose lease another replica took (or that ran out while the database was
//! unreachable), then claims and adopts the sessions whose owner stopped renewing.
//!
//! Letting go never tells the agent anything: the link is detached, and a remote
//! agentctl keeps the session for the replica that attaches next. Writes the old owner
//! still makes meanwhile carry its lease generation and change nothing (the fence).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::Config;
use crate::model::{Fence, SessionLease, TakeOver, lease::renew_every};
use crate::sessions::live::LiveSession;
use crate::sessions::registry::SessionRegistry;
use crate::store::{Claimant, Engine};

/// This replica's identity and the leases it holds.
#[derive(Debug)]
pub struct Ownership {
    /// `cluster.replica_id` (or the one made up at start).
    pub replica_id: String,
    /// `cluster.advertise_url` (or `http(s)://<listen>`).
    pub advertise_url: String,
    /// `cluster.lease`.
    pub lease: Duration,
    /// SQLite, or PostgreSQL without `cluster.secret`: the only replica, so every lease
    /// found at start-up is a previous process's.
    pub single_replica: bool,
    /// Session id → generation of every lease held here (starting, live, adopting).
    held: Mutex<HashMap<String, u64>>,
    /// Set by the drain: this replica hands its sessions on and claims none.
    leaving: AtomicBool,
}

impl Ownership {
    /// This replica as `config` describes it (with `listen` the address bound).
    pub fn from_config(config: &Config) -> Self {
        Self {
            replica_id: config.cluster.resolve_replica_id(),
            advertise_url: config
                .cluster
                .resolve_advertise_url(config.listen, config.server.tls.is_some()),
            lease: config.cluster.lease,
            // Without a shared secret no replica can forward to another, so kandev on
            // PostgreSQL without `cluster.secret` is the only one, like SQLite: a restart
            // takes its predecessor's sessions at once instead of waiting out their leases.
            single_replica: Engine::of(&config.database_url) != Some(Engine::Postgres)
                || config.cluster.secret.is_none(),
            held: Mutex::new(HashMap::new()),
            leaving: AtomicBool::new(false),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        // Only inserted into and removed from; a poisoned lock still holds a valid map.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who claims.
    pub fn claimant(&self) -> Claimant<'_> {
        Claimant {
            replica_id: &self.replica_id,
            advertise_url: &self.advertise_url,
            lease: self.lease,
        }
    }

    /// Remembers a lease just claimed (renewed from now on).
    pub(crate) fn hold(&self, lease: &SessionLease) {
        self.map()
            .insert(lease.session_id.clone(), lease.generation);
    }

    /// Forgets the lease of `session_id` (released, or lost).
    pub(crate) fn forget(&self, session_id: &str) {
        self.map().remove(session_id);
    }

    /// Whether this replica still holds `session_id` under `fence`.
    pub(crate) fn holds(&self, session_id: &str, fence: Fence) -> bool {
        fence
            .generation()
            .is_none_or(|g| self.map().get(session_id) == Some(&g))
    }

    /// Whether the drain has begun handing sessions on (no more claims).
    pub(crate) fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// Every lease held, `(session_id, generation)`.
    pub(crate) fn held(&self) -> Vec<(String, u64)> {
        self.map().iter().map(|(id, g)| (id.clone(), *g)).collect()
    }
}

impl SessionRegistry {
    /// Starts the keeper (see the module docs); it runs as long as the process.
    pub fn spawn_lease_keeper(self: &Arc<Self>) {
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
                        self.let_go(id, "another replica took the session over");
                    }
                }
                Ok(Err(err)) => tracing::warn!(error = %err, "cannot renew the session leases"),
                Err(_) => tracing::warn!(?every, "renewing the session leases took too long"),
            }
            if started.duration_since(renewed_at) >= lease {
                for (id, _) in self.ownership.held() {
                    self.let_go(&id, "its lease ran out while the database was unreachable");
                }
            }
            if self.ownership.is_leaving() {
                continue;
            }
            match self.adopt_claimable(TakeOver::Expired).await {
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
        if self.ownership.single_replica || !self.config.executor.is_remote() {
            return None;
        }
        self.ownership.leaving.store(true, Ordering::Release);
        let mut handed = 0;
        for live in self.all_live() {
            let Some(generation) = live.fence.generation() else {
                continue;
            };
            self.let_go(
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

    /// Stops acting for session `id`: forgets its lease and detaches its link, telling
    /// neither the agent nor the database.
    pub(crate) fn let_go(&self, id: &str, reason: &str) {
        self.ownership.forget(id);
        if let Some(live) = self.live(id) {
            self.detach_live(&live, reason);
        }
    }

    /// Ends `live` here without a trace: no write, no message to agentctl.
    pub(crate) fn detach_live(&self, live: &LiveSession, reason: &str) {
        if !live.end() {
            return;
        }
        self.forget_live(&live.id);
        live.link.detach();
        tracing::warn!(session_id = %live.id, %reason, "this replica no longer acts for the session");
    }
}
