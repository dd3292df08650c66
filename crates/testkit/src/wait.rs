//! Waiting with a deadline, never a fixed sleep.

use std::future::Future;
use std::time::Duration;

/// The default deadline of a wait: generous, because the suite shares two cores; the
/// waits themselves return as soon as the condition holds.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How often a condition is re-checked.
const INTERVAL: Duration = Duration::from_millis(25);

/// Calls `check` until it returns `Some`, re-checking every 25 ms, and returns the
/// value; `None` once `deadline` has passed (checked once more at the deadline), for a
/// caller that fails with what it saw or that may legitimately give up. The suite's only
/// poll loop: every other wait either calls it or awaits an event.
pub async fn poll<T, F, Fut>(deadline: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// [`poll`], failing the test at the deadline.
///
/// # Panics
/// When `deadline` passes first, naming `what`.
pub async fn poll_until<T, F, Fut>(what: &str, deadline: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll(deadline, check).await {
        Some(value) => value,
        None => panic!("timed out after {deadline:?} waiting for {what}"),
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
    async fn poll_gives_up_with_none_after_checking_at_the_deadline() {
        let calls = AtomicU32::new(0);
        let got: Option<()> = poll(Duration::from_millis(60), || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { None }
        })
        .await;
        assert_eq!(got, None);
        assert!(
            calls.load(Ordering::SeqCst) >= 2,
            "re-checked before giving up"
        );
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for never")]
    async fn panics_naming_the_condition_at_the_deadline() {
        poll_until::<(), _, _>("never", Duration::from_millis(50), || async { None }).await;
    }
}
