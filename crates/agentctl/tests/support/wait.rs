//! Waiting with a deadline, never a fixed sleep: the one poll loop of the agentctl tests.
//! (Frames and events are awaited on their channels, not polled.)

use std::future::Future;
use std::time::Duration;

use super::DEADLINE;

/// How often a condition is re-checked.
const INTERVAL: Duration = Duration::from_millis(20);

/// Calls `check` every 20 ms until it returns `Some`; `None` once [`DEADLINE`] has
/// passed (checked once more at the deadline), so the caller can fail with what it saw.
pub async fn poll<T, F, Fut>(mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// [`poll`] that fails the test at the deadline, naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll(check).await {
        Some(v) => v,
        None => panic!("timed out after {DEADLINE:?} waiting for {what}"),
    }
}
