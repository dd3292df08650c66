//! # kandev-backend
//!
//! The `kandev` process: the operator HTTP/WS API, the SQLite store, sessions and
//! their executors, clarifications, runtime flags and notifications.

pub mod agent_link;
