//! # kandev-agentctl
//!
//! agentctl runs one ACP agent subprocess per session and serves the **agent stream**
//! (ARCHITECTURE §4.2) to the Kandev backend. It is the only process that holds the
//! agent's open ACP requests, so it is where "exactly one response per
//! `elicitation/create`" is won or lost.
//!
//! - [`server`]: the axum WebSocket at `/api/v1/agent/stream` (bearer token) and `/healthz`.
//! - [`session`]: one agent session: the ACP client ([`agent`]), its pending
//!   elicitations ([`pending`]) and its event outbox ([`outbox`]).
//! - [`capabilities`]: the one function that builds `initialize`'s `clientCapabilities`.
//! - [`config`]: the answer deadline and ACP idle timeout from agentctl's environment.
//! - [`debug_cli`]: `agentctl elicitation map|respond`, the mapping on stdin/stdout.
//!
//! Lifecycle of one elicitation: the agent sends `elicitation/create`; agentctl declines at
//! once when the session's flag is off or the body does not map, otherwise parks the ACP
//! responder under a fresh UUID `pending_id` and emits `elicitation_requested`. Whoever
//! *removes* that pending from the session's [`pending::PendingSet`] — the operator's answer,
//! the answer deadline, the agent's `$/cancel_request`, a turn cancel, shutdown, or the
//! agent exiting — is the only one allowed to respond, and each such settlement emits
//! `elicitation_settled`.

pub mod agent;
pub mod capabilities;
pub mod config;
pub mod debug_cli;
pub mod outbox;
pub mod pending;
pub mod server;
pub mod session;
