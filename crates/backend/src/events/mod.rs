//! Operator events: what changed, and how it reaches every operator's WebSocket.
//!
//! Modules [`Publisher::publish`] a [`Change`] after their transaction commits. One
//! [`feed`] task per process turns each change into the operator events of
//! `GET /api/v1/ws` (`{"type", "data"}`), reading from the stores what the change does
//! not carry (for a session change only the session: the feed's board holds its task),
//! and broadcasts them on the [`EventHub`] every WebSocket subscribes to.
//! With replicas on PostgreSQL, the [`bus`] carries each change's ids to the other
//! replicas, whose listeners read it and hand it to their own feed.

mod board;
pub mod bus;
mod change;
pub mod feed;
mod hub;
pub mod named;
mod publish;
pub mod watch;

pub use change::Change;
pub use hub::{EventHub, OperatorEvent, kind};
pub use publish::Publisher;
pub use watch::Watch;
