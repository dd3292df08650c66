//! Live sessions: starting them, driving their agent, applying their events.
//!
//! - [`registry`]: [`SessionRegistry`], the sessions live in this process — start,
//!   prompt, cancel, stop, shutdown — and the [`SessionAgents`](crate::clarifications::SessionAgents)
//!   the clarifications reach agents through.
//! - [`live`]: [`LiveSession`], one session's link and the little it keeps in memory
//!   (whether it ended, which turn it is on) — atomics, never a lock.
//! - [`consumer`]: one task per session applying its link's events in order, a plain
//!   dispatcher to the transcript, the clarifications and the turn.
//! - [`transcript`]: agent text aggregated into messages; tool calls updated in place.
//! - [`restart`]: adopting the sessions nobody acts for — left live by a previous
//!   process, or by a replica that stopped renewing its lease.
//! - [`ownership`]: this replica's leases and the keeper that renews them, lets go of
//!   the lost ones and takes over the expired ones (docs/architecture.md §12).
//! - [`hosts`]: which agentctl host a new session goes to.

pub mod consumer;
pub mod hosts;
pub mod live;
pub mod ownership;
pub mod registry;
pub mod restart;
pub mod transcript;

pub use live::LiveSession;
pub use registry::SessionRegistry;
pub use restart::Reconciled;
