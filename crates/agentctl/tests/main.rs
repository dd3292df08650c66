//! agentctl's integration tests: one test binary (`cargo test --workspace --test agentctl`),
//! one module per area. Each drives a real `agentctl` (and the real `mock-agent`) through
//! the test kit's agentctl harness (`kandev_testkit::agentctl`); the binaries are built
//! first (`cargo build --workspace --bins`). Fixtures and extra scenarios stay in
//! `tests/fixtures` and `tests/scenarios`.

mod acp_wire;
mod ask_user_question;
mod capabilities;
mod cli;
mod lifecycle;
mod mcp_servers;
mod refusals;
