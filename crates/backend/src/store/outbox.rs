//! [`OutboxStore`]: the webhook outbox (docs/architecture.md §15) and the used answer
//! links (docs/decisions/0016).

use async_trait::async_trait;

use crate::model::{Attempt, Delivery, LastDelivery, NewDelivery, Timestamp};
use crate::store::StoreError;

/// Where deliveries wait to be sent.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Writes deliveries; one whose `dedup_key` is taken is skipped. How many were new.
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<usize, StoreError>;

    /// Claims up to `limit` pending deliveries due at `now` that no live claim holds,
    /// for `claimant` until `until`, in one statement: a delivery is claimed by one
    /// process at a time, across replicas too.
    async fn claim_due(
        &self,
        claimant: &str,
        now: Timestamp,
        until: Timestamp,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Records an attempt on a delivery `claimant` holds, and gives the claim up.
    /// Whether the claim was still `claimant`'s (else nothing changed).
    async fn finish(
        &self,
        id: &str,
        claimant: &str,
        attempt: &Attempt,
        at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Each hook's latest delivery that was attempted or finished.
    async fn last_deliveries(&self) -> Result<Vec<LastDelivery>, StoreError>;

    /// Every delivery about record `pending_id`, oldest first.
    async fn deliveries_for(&self, pending_id: &str) -> Result<Vec<LastDelivery>, StoreError>;

    /// Marks an answer link's `nonce` used: `true` the first time only.
    async fn use_answer_link(
        &self,
        nonce: &str,
        pending_id: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
}
