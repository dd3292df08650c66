//! Session ownership across replicas (docs/architecture.md §12): a [`SessionLease`] says which
//! replica acts for a live session until when; its generation is the [`Fence`] every
//! write acting for the session carries, so a replica whose lease was taken over can no
//! longer change the session even before it notices.

use std::time::Duration;

use crate::model::time::Timestamp;

/// One session's owner, as the `session_leases` row holds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionLease {
    /// The session.
    pub session_id: String,
    /// The replica that acts for it (`cluster.replica_id`).
    pub replica_id: String,
    /// Where other replicas reach that replica (`cluster.advertise_url`).
    pub advertise_url: String,
    /// Bumped by every claim; a write carrying an older one changes nothing.
    #[sqlx(try_from = "i64")]
    pub generation: u64,
    /// When the lease runs out unless renewed.
    pub expires_at: Timestamp,
    /// The agentctl the session's agent runs on (remote executor), once connected.
    pub agent_host: Option<String>,
}

impl SessionLease {
    /// The fence of writes made under this lease.
    pub fn fence(&self) -> Fence {
        Fence::lease(self.generation)
    }

    /// Whether it ran out by `now` (a replica may then claim the session).
    pub fn expired_at(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

/// The lease generation a write acting for a session must still find, or none (the
/// write predates ownership, or acts on a session nobody owns any more).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Fence(Option<u64>);

impl Fence {
    /// No check: the write applies whoever owns the session.
    pub const NONE: Fence = Fence(None);

    /// Writes apply only while the session's lease still has `generation`.
    pub fn lease(generation: u64) -> Self {
        Self(Some(generation))
    }

    /// The generation checked, if any.
    pub fn generation(self) -> Option<u64> {
        self.0
    }

    /// The generation as the databases bind it (`BIGINT`, `NULL` for none).
    pub fn bind(self) -> Option<i64> {
        self.0.map(|g| i64::try_from(g).unwrap_or(i64::MAX))
    }
}

/// Which leases a claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOver {
    /// Only a lease that ran out (or a session with none): another replica is alive
    /// until then.
    Expired,
    /// Also this replica's own, still running (a restart under the same `replica_id`:
    /// the previous process is gone).
    ExpiredOrOwn,
    /// Any (one replica on SQLite: whatever holds a lease is a previous process).
    Any,
}

/// How often an owner renews its leases: a third of the lease, so two renewals may fail
/// before it runs out.
pub fn renew_every(lease: Duration) -> Duration {
    lease / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_fences_with_its_generation_and_expires_at_its_instant() {
        let now = Timestamp::now();
        let lease = SessionLease {
            session_id: "s".into(),
            replica_id: "a".into(),
            advertise_url: "http://a".into(),
            generation: 3,
            expires_at: now,
            agent_host: None,
        };
        assert_eq!(lease.fence(), Fence::lease(3));
        assert_eq!(lease.fence().bind(), Some(3));
        assert_eq!(Fence::NONE.bind(), None);
        assert!(lease.expired_at(now));
        assert_eq!(renew_every(Duration::from_secs(15)), Duration::from_secs(5));
    }
}
