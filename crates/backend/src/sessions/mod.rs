//! Live sessions: starting them, driving their agent, applying their events.
//!
//! Each file is one part with its own dependencies; a part imports only the parts listed
//! before it, so there is no cycle.
//!
//! - [`live`]: [`LiveSession`], one session's link and the little it keeps in memory
//!   (whether it ended, which turn it is on) — atomics, never a lock; [`LiveSessions`],
//!   every one live here: the [`SessionAgents`](crate::clarifications::SessionAgents) the
//!   clarifications reach agents through.
//! - [`error`]: [`SessionError`], why a verb on a session did not go through.
//! - [`ownership`]: this replica's identity and the leases it holds.
//! - [`hosts`]: which agentctl host a new session goes to, and reaching it.
//! - [`transcript`]: agent text aggregated into messages; tool calls updated in place.
//! - [`chunks`]: a burst of queued text chunks merged into one append.
//! - [`ends`]: how a live session ends — stopped, lost, let go, or failed at adoption.
//! - [`consumer`]: one task per session applying its link's events in order, a plain
//!   dispatcher to the transcript, the clarifications and the turn: the one writer of
//!   the session's records.
//! - [`restart`]: adopting the sessions nobody acts for — left live by a previous
//!   process, or by a replica that stopped renewing its lease.
//! - [`keeper`]: the task that renews this replica's leases, lets go of the lost ones,
//!   takes over the expired ones and hands them on at shutdown (docs/architecture.md §12).
//! - [`registry`]: [`SessionRegistry`], the operator's verbs — start, prompt, cancel,
//!   stop, shutdown — wired from the parts above.

pub mod chunks;
pub mod consumer;
pub mod ends;
pub mod error;
pub mod hosts;
pub mod keeper;
pub mod live;
pub mod ownership;
pub mod registry;
pub mod restart;
pub mod transcript;

pub use error::SessionError;
pub use live::{LiveSession, LiveSessions};
pub use registry::SessionRegistry;
pub use restart::Reconciled;
