//! The `Kandev-Signature` header (docs/configuration.md, "Verifying a webhook").
//!
//! `Kandev-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`. The
//! timestamp is signed with the body, so a receiver that refuses an old `t` refuses a
//! replayed delivery; `v1` names the scheme, so a later one can be added beside it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::auth::token::hex;

/// The header's name.
pub const HEADER: &str = "Kandev-Signature";

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; the error arm is unreachable.
    let mut mac = HmacSha256::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header value for `body` sent at `timestamp` (unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let tag = mac(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex(&tag))
}

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadSignature {
    /// The header is not `t=…,v1=…`.
    #[error("the signature header is malformed")]
    Malformed,
    /// `t` is outside the tolerance.
    #[error("the signature is too old or from the future")]
    Stale,
    /// The tag does not match.
    #[error("the signature does not match")]
    Mismatch,
}

/// Checks `header` over `body` at `now` (unix seconds), allowing `tolerance` seconds
/// of age either way — what a receiver does (tests use it as one).
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: i64,
) -> Result<(), BadSignature> {
    let mut timestamp = None;
    let mut tag = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => tag = Some(v),
            _ => {}
        }
    }
    let (Some(timestamp), Some(tag)) = (timestamp, tag) else {
        return Err(BadSignature::Malformed);
    };
    if now.abs_diff(timestamp) > tolerance.unsigned_abs() {
        return Err(BadSignature::Stale);
    }
    let bytes = unhex(tag).ok_or(BadSignature::Malformed)?;
    mac(secret, timestamp, body)
        .verify_slice(&bytes)
        .map_err(|_| BadSignature::Mismatch)
}

/// Bytes of a lower-case hex string.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() {
        // Computed independently (Python's hmac module), as a receiver would.
        assert_eq!(
            sign(b"key", 1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=a438e398bfafc57e4396bb7fc2304422f0f768e965d073ca313cb52e22e6ad03"
        );
    }

    proptest! {
        #[test]
        fn a_signature_verifies_only_with_its_key_body_and_time(
            body in proptest::collection::vec(any::<u8>(), 0..64),
            other in proptest::collection::vec(any::<u8>(), 0..64),
            t in 1_000_000i64..2_000_000_000,
        ) {
            let header = sign(b"secret", t, &body);
            prop_assert_eq!(verify(b"secret", &header, &body, t + 10, 300), Ok(()));
            prop_assert_eq!(verify(b"secret", &header, &body, t + 301, 300), Err(BadSignature::Stale));
            prop_assert_eq!(verify(b"other", &header, &body, t, 300), Err(BadSignature::Mismatch));
            if other != body {
                prop_assert_eq!(verify(b"secret", &header, &other, t, 300), Err(BadSignature::Mismatch));
            }
            let forged = header.replace(&format!("t={t}"), &format!("t={}", t + 1));
            prop_assert_eq!(verify(b"secret", &forged, &body, t, 300), Err(BadSignature::Mismatch));
            prop_assert_eq!(verify(b"secret", "v1=00", &body, t, 300), Err(BadSignature::Malformed));
        }
    }
}
