//! Which live sessions this replica owns (docs/architecture.md §12): its identity and the
//! generation of every lease it holds, which the lease keeper renews. Writes an
//! old owner still makes after losing a lease carry its generation and change nothing
//! (the fence).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::config::Config;
use crate::model::{Fence, SessionLease};
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

    /// The drain begins handing sessions on: from now on this replica claims none.
    pub(crate) fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
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
