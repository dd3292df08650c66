//! Waiting with a deadline, never a fixed sleep.

use std::future::Future;
use std::time::Duration;

/// The default deadline of a wait: generous, because the suite shares two cores; the
/// waits themselves return as soon as the condition holds.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Calls `check` until it returns `Some`, re-checking every 25 ms, and returns the value.
///
/// # Panics
/// When `deadline` passes first, naming `what`.
pub async fn poll_until<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= until {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn returns_the_first_value_the_check_yields() {
        let calls = AtomicU32::new(0);
        let got = poll_until("three calls", DEADLINE, || {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for never")]
    async fn panics_naming_the_condition_at_the_deadline() {
        poll_until::<(), _, _>("never", Duration::from_millis(50), || async { None }).await;
    }
}
