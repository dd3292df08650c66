//! # kandev-testkit
//!
//! The one test kit of the workspace (issue 25), used by every integration and e2e test and
//! by the bench. It drives real `kandev`, `agentctl` and agent
//! processes, real sockets, real SQLite or PostgreSQL, driven only the way users drive the system —
//! the operator HTTP API and WebSocket (docs/architecture.md §4.4), the configuration of §4.5,
//! and what an agent sees on the wire (the mock agent's `MOCK_AGENT_LOG`).
//!
//! - [`Kandev`] starts one backend per test on an ephemeral port with its own temp
//!   directory, database and `kandev.toml`, and kills everything it started (its whole
//!   process group) on drop, printing the logs when the test is failing. [`operator`] is
//!   what a test asks of it as an operator: tasks, sessions, answers, the flag.
//! - [`OperatorWs`] is the operator event stream with [`OperatorWs::wait_for`].
//! - [`poll_until`] (and [`poll`]) wait for an API condition with a deadline (never a
//!   fixed sleep); [`HttpClient`] is the operator API over `reqwest`.
//! - [`FrameLog`] reads the agent's JSON-RPC frames.
//! - [`agentctl::AgentCtl`] runs one `agentctl serve` on its own, [`agentctl::Stream`] speaks its
//!   agent stream as the backend does, and [`agentctl::Harness`] starts a mock-agent session on
//!   it (agentctl's integration tests).
//! - [`FaultProxy`] sits between `kandev` and a remote `agentctl` and can be cut.
//! - [`slack`] signs a button click as Slack does, for kandev's Slack endpoint, with
//!   [`signature`]'s HMAC, which also checks kandev's webhook signatures.
//! - [`claude`] runs the real claude-agent-acp bridge and CLI against a fake model.
//! - [`postgres`] is a throwaway PostgreSQL cluster (Debian's binaries, a temp dir), a fresh
//!   database per test; [`fresh_database`] picks the engine under test.
//!
//! The binaries come from `target/debug` (`just e2e` builds them first), or from the profile
//! [`bins::use_profile`] names (the bench uses `target/release`).

pub mod agentctl;
pub mod bins;
pub mod claude;
pub mod database;
pub mod frames;
pub mod http;
pub mod kandev;
pub mod operator;
pub mod pki;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod remote;
pub mod signature;
pub mod slack;
pub mod wait;
pub mod ws;

pub use database::{fresh_database, on_postgres};
pub use frames::FrameLog;
pub use http::{ApiResponse, HttpClient};
pub use kandev::{
    Executor, Kandev, KandevOptions, TURN_DEADLINE, is_uuid_v7, kandev_command, refused_start,
};
pub use operator::{Asked, RacedAnswers, answer_at_once, answer_body};
pub use pki::TestPki;
pub use proxy::FaultProxy;
pub use remote::RemoteAgentctl;
pub use wait::{DEADLINE, poll, poll_until};
pub use ws::OperatorWs;
