//! The records kandev keeps and the rules they obey, with no I/O: tasks, sessions and
//! their state machine, chat messages, clarifications and their settlement rules,
//! notifications. The stores persist them (each binds and reads itself: `sqlx::Type`,
//! `FromRow`); the session and clarifications change
//! them. Nothing here depends on another module of the crate.

pub mod clarification;
mod column;
pub mod delivery;
pub mod id;
pub mod lease;
pub mod message;
pub mod notification;
pub mod session;
pub mod settlement;
pub mod task;
pub mod time;

pub use clarification::{
    Clarification, ClarificationStatus, NewClarification, Outcome, SettledBy, Source,
};
pub use delivery::{Attempt, Delivery, DeliveryStatus, LastDelivery, NewDelivery};
pub use id::new_record_id;
pub use lease::{Fence, SessionLease, TakeOver};
pub use message::{Message, MessageKind, NewMessage, author};
pub use notification::Notification;
pub use session::{Session, SessionRecord, SessionState};
pub use settlement::Settlement;
pub use task::{Task, TaskView};
pub use time::Timestamp;
