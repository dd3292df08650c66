//! The elicitation crate's integration tests: one test binary (`cargo test --workspace
//! --test elicitation`), one module per area. The fixtures stay in `tests/fixtures`.
//!
//! The real-bridge conformance tests need `node` and `npm`; they are
//! `#[ignore = "needs node and npm; …"]`, and `just test` runs them. The long fuzz runs
//! are ignored too; `just fuzz` runs them with many cases.

#[path = "bridge/driver.rs"]
mod bridge;
mod bridge_conformance;
#[path = "bridge/operator.rs"]
mod bridge_operator;
mod common;
mod fuzz;
mod mapping;
mod properties;
mod response;
