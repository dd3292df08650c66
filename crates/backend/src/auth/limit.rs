//! The per-address limit on failed credential attempts (429 once reached).
//!
//! Each address (an IPv6 client by its /64, which one host usually owns whole) has a
//! fixed window that starts with its first failure; once [`MAX_FAILURES`] have failed
//! inside it, every credential check from that address is refused until the window ends,
//! a right token included, so guessing gains nothing. In memory, per process.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed attempts an address may make per [`WINDOW`].
pub const MAX_FAILURES: u32 = 10;
/// How long failures count.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Above this many tracked addresses, expired windows are dropped.
const PRUNE_AT: usize = 4096;

/// Failed attempts by address.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    windows: Mutex<HashMap<Option<IpAddr>, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    failures: u32,
}

/// The bucket of an address: IPv4 as is, IPv6 by its /64 (a v4-mapped one as IPv4).
fn bucket(addr: Option<IpAddr>) -> Option<IpAddr> {
    match addr? {
        IpAddr::V4(v4) => Some(IpAddr::V4(v4)),
        IpAddr::V6(v6) => Some(match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        }),
    }
}

impl FailureLimiter {
    /// `Err(retry_after)` while `addr` is locked out. `None` is a request without a peer
    /// address (never over a real socket); those share one bucket.
    pub fn check(&self, addr: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        match windows.get(&bucket(addr)) {
            Some(w) if now.duration_since(w.start) < WINDOW && w.failures >= MAX_FAILURES => {
                Err(WINDOW.saturating_sub(now.duration_since(w.start)))
            }
            _ => Ok(()),
        }
    }

    /// Counts one failed attempt from `addr`.
    pub fn record_failure(&self, addr: Option<IpAddr>, now: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= PRUNE_AT {
            windows.retain(|_, w| now.duration_since(w.start) < WINDOW);
        }
        let window = windows.entry(bucket(addr)).or_insert(Window {
            start: now,
            failures: 0,
        });
        if now.duration_since(window.start) >= WINDOW {
            *window = Window {
                start: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("ip"))
    }

    #[test]
    fn the_limit_locks_an_address_for_the_rest_of_its_window() {
        let limiter = FailureLimiter::default();
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            assert_eq!(limiter.check(ip("10.0.0.1"), t0), Ok(()), "attempt {i}");
            limiter.record_failure(ip("10.0.0.1"), t0);
        }
        let later = t0 + Duration::from_secs(15);
        assert_eq!(
            limiter.check(ip("10.0.0.1"), later),
            Err(WINDOW - Duration::from_secs(15))
        );
        assert_eq!(
            limiter.check(ip("10.0.0.2"), later),
            Ok(()),
            "others unaffected"
        );
        assert_eq!(
            limiter.check(ip("10.0.0.1"), t0 + WINDOW),
            Ok(()),
            "window over"
        );
        limiter.record_failure(ip("10.0.0.1"), t0 + WINDOW);
        assert_eq!(
            limiter.check(ip("10.0.0.1"), t0 + WINDOW),
            Ok(()),
            "a fresh window"
        );
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64() {
        let limiter = FailureLimiter::default();
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            limiter.record_failure(ip(&format!("2001:db8:1:2::{i:x}")), t0);
        }
        assert!(limiter.check(ip("2001:db8:1:2::ffff"), t0).is_err());
        assert_eq!(limiter.check(ip("2001:db8:1:3::1"), t0), Ok(()));
        assert_eq!(bucket(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
    }

    proptest::proptest! {
        #[test]
        fn fewer_failures_than_the_limit_never_lock(n in 0..MAX_FAILURES, gap in 0u64..120) {
            let limiter = FailureLimiter::default();
            let t0 = Instant::now();
            for i in 0..n {
                limiter.record_failure(ip("192.0.2.7"), t0 + Duration::from_millis(u64::from(i) * gap));
            }
            proptest::prop_assert!(limiter.check(ip("192.0.2.7"), t0 + Duration::from_secs(gap)).is_ok());
        }
    }
}
