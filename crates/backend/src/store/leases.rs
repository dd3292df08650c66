//! [`LeaseStore`]: which replica owns each live session (docs/architecture.md §12), and
//! [`ChangeBus`]: the database's own channel between replicas (PostgreSQL
//! `LISTEN/NOTIFY`; nothing on SQLite, which has one replica).

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::model::{SessionLease, TakeOver};
use crate::store::StoreError;

/// Who claims, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant<'a> {
    /// `cluster.replica_id`.
    pub replica_id: &'a str,
    /// `cluster.advertise_url`.
    pub advertise_url: &'a str,
    /// `cluster.lease`.
    pub lease: Duration,
}

/// Where session leases are kept. Every change is one conditional statement, so two
/// replicas claiming the same session get one lease between them.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Claims session `session_id` for `by`: a session with no lease gets generation 1;
    /// one whose lease `take_over` allows is taken with the next generation. `None`
    /// when another replica holds it.
    async fn claim(
        &self,
        session_id: &str,
        by: Claimant<'_>,
        take_over: TakeOver,
    ) -> Result<Option<SessionLease>, StoreError>;

    /// Extends the leases `held` (`(session_id, generation)`) by `lease` from now, for
    /// those still held by `replica_id` under that generation. The ids still held.
    async fn renew(
        &self,
        replica_id: &str,
        held: &[(String, u64)],
        lease: Duration,
    ) -> Result<Vec<String>, StoreError>;

    /// Gives up a lease (its session ended here).
    async fn release(&self, session_id: &str, generation: u64) -> Result<(), StoreError>;

    /// Hands a lease on (this replica is shutting down): it runs out now, under the same
    /// generation and agentctl host, so the next replica to look claims it with
    /// [`TakeOver::Expired`] instead of waiting for it to run out. Whether it was still
    /// held under `generation`.
    async fn hand_over(&self, session_id: &str, generation: u64) -> Result<bool, StoreError>;

    /// A session's lease, if it has one.
    async fn lease(&self, session_id: &str) -> Result<Option<SessionLease>, StoreError>;

    /// Live sessions `replica_id` may claim under `take_over`: their lease ran out, or
    /// they have none and were created more than `unowned_after` ago (a start that died
    /// between storing the session and claiming it).
    async fn claimable(
        &self,
        replica_id: &str,
        take_over: TakeOver,
        unowned_after: Duration,
    ) -> Result<Vec<String>, StoreError>;

    /// Records the agentctl host session `session_id` runs on, under its lease.
    async fn set_agent_host(
        &self,
        session_id: &str,
        generation: u64,
        host: &str,
    ) -> Result<(), StoreError>;

    /// How many live sessions run on each agentctl host, across replicas.
    async fn host_loads(&self) -> Result<Vec<(String, usize)>, StoreError>;
}

/// Short notes between replicas on the database. At-most-once, in the order one
/// replica sent them; what a note names is read from the stores.
#[async_trait]
pub trait ChangeBus: Send + Sync {
    /// Whether notes reach other replicas (PostgreSQL) or go nowhere (SQLite).
    fn is_shared(&self) -> bool;

    /// Sends `notes`, in order, to every listening replica in one round trip.
    async fn notify(&self, notes: &[String]) -> Result<(), StoreError>;

    /// Every note sent from now on, by any replica (this one's too); `None` when the
    /// engine has no bus. The stream yields an error when the listening connection
    /// broke (notes may have been missed); it reconnects after that.
    async fn listen(
        &self,
    ) -> Result<Option<BoxStream<'static, Result<String, StoreError>>>, StoreError>;
}
