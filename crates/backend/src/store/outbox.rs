//! [`OutboxStore`]: the webhook outbox (docs/architecture.md §15) and the used answer
//! links (docs/decisions/0016). Both engines run the same SQL texts, below.

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
    /// process at a time (across replicas: `FOR UPDATE SKIP LOCKED` on PostgreSQL).
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

/// Writes one delivery unless its key is taken: binds `$1` id, `$2` hook, `$3` event,
/// `$4` dedup key, `$5` pending id, `$6` body, `$7` due at, `$8` not after, `$9` now.
pub(crate) const ENQUEUE: &str = "INSERT INTO webhook_deliveries \
     (id, hook, event, dedup_key, pending_id, body, due_at, not_after, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (dedup_key) DO NOTHING";

/// Records an attempt: binds `$1` id, `$2` claimant, `$3` status, `$4` attempts added,
/// `$5` next due (NULL keeps it), `$6` HTTP status, `$7` error, `$8` finished at.
pub(crate) const FINISH: &str = "UPDATE webhook_deliveries SET status = $3, \
     attempts = attempts + $4, due_at = COALESCE($5, due_at), last_status = $6, \
     last_error = $7, finished_at = $8, claimed_by = NULL, claimed_until = NULL \
     WHERE id = $1 AND claimed_by = $2 AND status = 'pending'";

/// Deliveries attempted or finished, newest first (the first per hook is its latest).
pub(crate) const LATEST: &str = "SELECT hook, event, status, attempts, last_status, \
     last_error, created_at, finished_at FROM webhook_deliveries \
     WHERE attempts > 0 OR status <> 'pending' ORDER BY created_at DESC, id LIMIT 1000";

/// The deliveries of one record, oldest first: binds `$1` pending id.
pub(crate) const OF_RECORD: &str = "SELECT hook, event, status, attempts, last_status, \
     last_error, created_at, finished_at FROM webhook_deliveries \
     WHERE pending_id = $1 ORDER BY created_at, id";

/// Marks a link used: binds `$1` nonce, `$2` pending id, `$3` now.
pub(crate) const USE_LINK: &str = "INSERT INTO answer_link_uses (nonce, pending_id, used_at) \
     VALUES ($1, $2, $3) ON CONFLICT (nonce) DO NOTHING";

/// The row values an attempt writes (see [`FINISH`]).
pub(crate) struct AttemptRow {
    /// The status the row takes.
    pub status: &'static str,
    /// Attempts to add (0 for a drop).
    pub added: i32,
    /// The next due time, for a retry.
    pub due_at: Option<Timestamp>,
    /// The receiver's HTTP status.
    pub code: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// When it finished (not for a retry).
    pub finished_at: Option<Timestamp>,
}

impl AttemptRow {
    /// The values of `attempt` recorded at `at`.
    pub(crate) fn of(attempt: &Attempt, at: Timestamp) -> Self {
        let row = Self {
            status: attempt.status().as_str(),
            added: 1,
            due_at: None,
            code: None,
            error: None,
            finished_at: Some(at),
        };
        match attempt {
            Attempt::Delivered { status } => Self {
                code: Some(i32::from(*status)),
                ..row
            },
            Attempt::Retry {
                at: next,
                status,
                error,
            } => Self {
                due_at: Some(*next),
                code: status.map(i32::from),
                error: Some(error.clone()),
                finished_at: None,
                ..row
            },
            Attempt::Failed { status, error } => Self {
                code: status.map(i32::from),
                error: Some(error.clone()),
                ..row
            },
            Attempt::Dropped { reason } => Self {
                added: 0,
                error: Some(reason.clone()),
                ..row
            },
        }
    }
}

/// Keeps the first (latest) delivery of each hook.
pub(crate) fn latest_per_hook(rows: Vec<LastDelivery>) -> Vec<LastDelivery> {
    let mut seen = std::collections::BTreeSet::new();
    rows.into_iter()
        .filter(|row| seen.insert(row.hook.clone()))
        .collect()
}
