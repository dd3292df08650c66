//! Waiting with a deadline, never a fixed sleep: the one poll loop of the backend tests.

use std::future::Future;
use std::time::Duration;

use super::DEADLINE;

/// How often a condition is re-checked.
const INTERVAL: Duration = Duration::from_millis(20);

/// Calls `check` every 20 ms until it returns `Some`; `None` once `within` has passed
/// (checked once more at the deadline), for callers that fail with their own message.
pub async fn poll<T, F, Fut>(within: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
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

/// [`poll`] that fails the test after `within`, naming `what`.
pub async fn wait_within<T, F, Fut>(what: &str, within: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll(within, check).await {
        Some(v) => v,
        None => panic!("timed out after {within:?} waiting for {what}"),
    }
}

/// [`wait_within`] the tests' [`DEADLINE`].
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_within(what, DEADLINE, check).await
}
