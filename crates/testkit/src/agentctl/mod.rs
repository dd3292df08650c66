//! agentctl on its own, the harness of agentctl's integration tests
//! (`crates/agentctl/tests`): a real `agentctl serve` ([`AgentCtl`]), its agent stream as
//! the backend speaks it ([`Stream`]), and a session of the real mock agent
//! ([`Harness`], [`start_payload`]) whose wire is read from its [`FrameLog`].
//!
//! Nothing here sleeps and hopes: every wait is for a frame, a log line or a process exit,
//! with [`DEADLINE`]; conditions that cannot be awaited are polled by [`poll`].

mod harness;
mod process;
mod stream;

pub use harness::{Harness, choose, message_texts, pending_id, start_payload, start_payload_in};
pub use process::{AgentCtl, TOKEN, scenario_dir};
pub use stream::Stream;
