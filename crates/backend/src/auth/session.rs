//! Stateless session cookies (docs/decisions/0001-stateless-session-cookies.md).
//!
//! A cookie is `<operator>.<expiry unix seconds>.<hex HMAC-SHA256>`, signed with a key
//! derived from the operator's `token_sha256` (and `auth.session_secret` when set). Any
//! replica with the same configuration verifies it, it survives a restart, and
//! rotating an operator's token invalidates every cookie issued for the old one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::token::hex;

/// The cookie's name.
pub const SESSION_COOKIE: &str = "kandev_session";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

type HmacSha256 = Hmac<Sha256>;

/// The signing key of one operator's cookies.
pub(super) fn session_key(token_hash: &[u8; 32], secret: Option<&str>) -> [u8; 32] {
    // Without a secret the key is still per operator and per token; with one, the
    // config file alone is not enough to forge a cookie.
    let mut mac = keyed(secret.unwrap_or("").as_bytes());
    mac.update(b"kandev session key v1\0");
    mac.update(token_hash);
    mac.finalize().into_bytes().into()
}

fn keyed(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length")
}

fn signature(key: &[u8; 32], name: &str, expiry: u64) -> HmacSha256 {
    let mut mac = keyed(key);
    mac.update(b"kandev session v1\0");
    mac.update(name.as_bytes());
    mac.update(b"\0");
    mac.update(expiry.to_string().as_bytes());
    mac
}

fn unix(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The cookie value for `name`, valid until `now + SESSION_TTL`.
pub(super) fn issue(key: &[u8; 32], name: &str, now: SystemTime) -> String {
    let expiry = unix(now) + SESSION_TTL.as_secs();
    let tag = signature(key, name, expiry).finalize().into_bytes();
    format!("{name}.{expiry}.{}", hex(&tag))
}

/// A cookie value split into its parts (nothing verified yet).
pub(super) struct Claimed<'a> {
    pub name: &'a str,
    expiry: u64,
    tag: Vec<u8>,
}

/// Splits a cookie value; `None` when it is not one of ours.
pub(super) fn parse(value: &str) -> Option<Claimed<'_>> {
    let mut parts = value.rsplitn(3, '.');
    let tag_hex = parts.next()?;
    let expiry = parts.next()?.parse().ok()?;
    let name = parts.next()?;
    if tag_hex.len() != 64 {
        return None;
    }
    let tag = (0..32)
        .map(|i| u8::from_str_radix(tag_hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(Claimed { name, expiry, tag })
}

/// What a presented cookie turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Signed by this key and not expired.
    Valid,
    /// Signed by this key, but too old: a normal sign-out by time, not an attack.
    Expired,
    /// Not signed by this key.
    Forged,
}

/// Checks `claimed` against `key` (constant-time tag comparison), then its expiry.
pub(super) fn verify(key: &[u8; 32], claimed: &Claimed<'_>, now: SystemTime) -> Verdict {
    let mac = signature(key, claimed.name, claimed.expiry);
    if mac.verify_slice(&claimed.tag).is_err() {
        return Verdict::Forged;
    }
    if unix(now) >= claimed.expiry {
        Verdict::Expired
    } else {
        Verdict::Valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: [u8; 32] = [7u8; 32];

    #[test]
    fn a_cookie_verifies_until_it_expires() {
        let key = session_key(&HASH, None);
        let now = SystemTime::now();
        let value = issue(&key, "alice", now);
        let claimed = parse(&value).expect("parses");
        assert_eq!(claimed.name, "alice");
        assert_eq!(verify(&key, &claimed, now), Verdict::Valid);
        assert_eq!(verify(&key, &claimed, now + SESSION_TTL), Verdict::Expired);
    }

    #[test]
    fn names_with_dots_survive_the_split() {
        let key = session_key(&HASH, None);
        let value = issue(&key, "bob.smith@example.com", SystemTime::now());
        let claimed = parse(&value).expect("parses");
        assert_eq!(claimed.name, "bob.smith@example.com");
    }

    #[test]
    fn tampering_or_another_key_is_forged() {
        let now = SystemTime::now();
        let key = session_key(&HASH, None);
        let value = issue(&key, "alice", now);
        // Another operator's name on alice's signature.
        let swapped = value.replacen("alice", "admin", 1);
        assert_eq!(
            verify(&key, &parse(&swapped).expect("parses"), now),
            Verdict::Forged
        );
        // A later expiry on the same signature.
        let (head, tag) = value.rsplit_once('.').expect("tag");
        let (name, expiry) = head.rsplit_once('.').expect("expiry");
        let stretched = format!("{name}.{}.{tag}", expiry.parse::<u64>().expect("n") + 3600);
        assert_eq!(
            verify(&key, &parse(&stretched).expect("parses"), now),
            Verdict::Forged
        );
        // A rotated token, or a session secret, changes the key.
        let claimed = parse(&value).expect("parses");
        assert_eq!(
            verify(&session_key(&[8u8; 32], None), &claimed, now),
            Verdict::Forged
        );
        assert_eq!(
            verify(&session_key(&HASH, Some("s")), &claimed, now),
            Verdict::Forged
        );
        for junk in ["", "alice", "alice.1", "alice.x.00", "a.1.zz"] {
            assert!(parse(junk).is_none(), "{junk}");
        }
    }
}
