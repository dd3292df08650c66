//! The full-stack suite: one test binary (`cargo test --test e2e`), one module per area.
//! Every test drives real `kandev`, `agentctl` and agent processes through the test kit
//! (`kandev-testkit`). Tests that need a tool cargo cannot install (PostgreSQL, node, the
//! real Claude bridges) are `#[ignore = "needs …"]`; `just test` runs them.

mod claude_bridge;
mod declines;
mod dist;
mod faults;
mod flag;
mod foreign_agent;
mod races;
mod replicas;
mod restart;
mod round_trip;
mod security;
mod settlement;
mod transparency;
mod vocabulary;
mod webhooks;
