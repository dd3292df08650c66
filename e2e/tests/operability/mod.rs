//! Operating kandev in production, against the real processes: readiness that follows
//! the database, structured logs, metrics, graceful drain.

mod drain;
mod logs;
mod metrics;
mod readiness;
