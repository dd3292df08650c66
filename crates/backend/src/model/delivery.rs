//! Webhook deliveries (docs/architecture.md §15): the rows of the outbox through which
//! kandev tells the outside that a question waits, was settled, or still waits.

use serde::Serialize;

use crate::model::time::Timestamp;

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Not sent yet, or to be tried again at its due time.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed.
    Failed,
    /// Not sent, on purpose: a reminder whose record was settled or whose deadline passed.
    Dropped,
}

impl DeliveryStatus {
    /// Every status.
    pub const ALL: [DeliveryStatus; 4] =
        [Self::Pending, Self::Delivered, Self::Failed, Self::Dropped];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A delivery to write into the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// The hook's configured name.
    pub hook: String,
    /// The event (`clarification_requested`, `reminder`, …).
    pub event: String,
    /// Names the delivery once: writing the same key again writes nothing.
    pub dedup_key: String,
    /// The record it is about, when any.
    pub pending_id: Option<String>,
    /// The exact body to send (and sign).
    pub body: String,
    /// When it may be sent.
    pub due_at: Timestamp,
    /// When it must no longer be sent (a reminder, at its record's deadline).
    pub not_after: Option<Timestamp>,
}

/// A delivery claimed for sending.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Delivery {
    /// Its id (sent as `Kandev-Delivery`, so a receiver can drop a repeat).
    pub id: String,
    /// The hook's name.
    pub hook: String,
    /// The event.
    pub event: String,
    /// The record it is about.
    pub pending_id: Option<String>,
    /// The body.
    pub body: String,
    /// Attempts made before this one.
    #[sqlx(try_from = "i32")]
    pub attempts: u32,
    /// When it must no longer be sent.
    pub not_after: Option<Timestamp>,
}

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver answered 2xx.
    Delivered {
        /// Its HTTP status.
        status: u16,
    },
    /// It failed; try again at `at`.
    Retry {
        /// When.
        at: Timestamp,
        /// The receiver's HTTP status, when it answered.
        status: Option<u16>,
        /// What went wrong (never the body).
        error: String,
    },
    /// It failed and was the last attempt.
    Failed {
        /// The receiver's HTTP status, when it answered.
        status: Option<u16>,
        /// What went wrong.
        error: String,
    },
    /// Not sent, on purpose.
    Dropped {
        /// Why.
        reason: String,
    },
}

impl Attempt {
    /// The status the row takes.
    pub fn status(&self) -> DeliveryStatus {
        match self {
            Self::Delivered { .. } => DeliveryStatus::Delivered,
            Self::Retry { .. } => DeliveryStatus::Pending,
            Self::Failed { .. } => DeliveryStatus::Failed,
            Self::Dropped { .. } => DeliveryStatus::Dropped,
        }
    }

    /// The metric's `outcome` label.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Delivered { .. } => "delivered",
            Self::Retry { .. } => "retried",
            Self::Failed { .. } => "failed",
            Self::Dropped { .. } => "dropped",
        }
    }
}

/// A hook's latest delivery, as the Settings page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct LastDelivery {
    /// The hook's name.
    pub hook: String,
    /// The event.
    pub event: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    #[sqlx(try_from = "i32")]
    pub attempts: u32,
    /// The receiver's last HTTP status (as the `INTEGER` column holds it).
    pub last_status: Option<i32>,
    /// The last error.
    pub last_error: Option<String>,
    /// When it was written.
    pub created_at: Timestamp,
    /// When it was delivered, failed or dropped.
    pub finished_at: Option<Timestamp>,
}
