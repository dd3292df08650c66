//! # kandev-backend
//!
//! The `kandev` process: the operator HTTP/WS API over sessions, their agents and the
//! clarifications agents raise. Its modules, and which way data flows:
//!
//! - [`http`] — routes per domain, one [`AppState`](state::AppState), one error type
//!   ([`http::error::AppError`]) that the modules' own errors map to. Requests go to the
//!   modules below; reads go straight to the [`store`].
//! - [`sessions`] — the sessions live here: start/prompt/cancel/stop ([`sessions::registry`]),
//!   one consumer per session applying agent events in order ([`sessions::consumer`]),
//!   restart reconciliation.
//! - [`clarifications`] — questions from `elicitation/create` and `ask_user_question_kandev`,
//!   settled exactly once; they reach agents through a narrow trait the sessions implement.
//! - [`auto_answers`] — the agents' auto-answer rules for unattended runs, answering through
//!   the clarifications' own answer path as `rule:<name>`.
//! - [`agent_link`] — the agent stream to agentctl, and the executors that start it.
//! - [`store`] — one trait per domain, implemented on SQLite and on PostgreSQL; every
//!   invariant that must hold across processes is a transaction or a conditional update
//!   there. [`model`] holds the records and their rules, with no I/O.
//! - [`events`] — modules publish committed changes; one feed turns them into operator events.
//! - [`auth`] says who is asking (the guard in [`http`] enforces it); [`notifications`],
//!   [`flags`], [`config`]; [`app`] wires it all and serves.
//! - [`migrate_db`] — `kandev migrate-db`: one SQLite database copied into an empty PostgreSQL one.
//! - [`metrics`] — what the event points record, one call each, for `GET /metrics`;
//!   [`drain`] — whether the process is on its way out, and [`shutdown`] the way out.
//!
//! The modules and their imports are drawn in docs/architecture.md §2.

pub mod agent_link;
pub mod app;
pub mod auth;
pub mod auto_answers;
pub mod clarifications;
pub mod config;
pub mod drain;
pub mod events;
pub mod flags;
pub mod http;
pub mod metrics;
pub mod migrate_db;
pub mod model;
pub mod notifications;
pub mod reach;
pub mod sessions;
pub mod shutdown;
pub mod state;
pub mod store;

#[cfg(test)]
mod module_map;
#[cfg(test)]
pub(crate) mod testing;
