//! The full-stack suite: one test binary (`cargo test --test e2e`), one module per area.
//! Every test drives real `kandev`, `agentctl` and agent processes through the test kit
//! (`kandev-testkit`), but for `agent_link` (the backend's agent link library against real
//! `agentctl` and mock-agent processes) and `config_mcp_servers` (the backend's config
//! loader). Tests that need a tool cargo cannot install (PostgreSQL, node, the
//! real Claude bridges) are `#[ignore = "needs …"]`; `just test` runs them.

mod agent_link;
mod api_security;
mod ask_user_question;
mod claude_bridge;
mod config_mcp_servers;
mod database_url;
mod declines;
mod dist;
mod faults;
mod flag;
mod foreign_agent;
mod migrate_db;
mod operability;
mod races;
mod replicas;
mod restart;
mod round_trip;
mod security;
mod session_lifecycle;
mod settlement;
mod streaming;
mod transparency;
mod unattended;
mod vocabulary;
mod webhooks;
