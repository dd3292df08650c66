//! The real Claude bridge in the suite (issue 15): the real
//! `@agentclientprotocol/claude-agent-acp` and the real Claude Code CLI it starts, with a
//! fake Anthropic Messages API on loopback standing in for the model.
//!
//! - [`model`]: the scripted model (which tool to call with what input, an echo of tool
//!   results) and its SSE encoding.
//! - [`fake_api`]: [`FakeAnthropic`], the HTTP server recording every request.
//! - [`bridge`]: installing a bridge version (`e2e/claude/install.sh`) and the agent's
//!   explicit environment.
//! - [`stack`]: [`ClaudeStack`], kandev + agentctl + the bridge behind `acp-tap`.

pub mod bridge;
pub mod fake_api;
pub mod model;
pub mod stack;

pub use bridge::{Bridge, PINNED};
pub use fake_api::FakeAnthropic;
pub use model::{ModelRequest, Offer, Reply, Script};
pub use stack::{AGENT, ClaudeStack, StackOptions};
