//! Operator tokens: random, shown once, stored only as their SHA-256.

use sha2::{Digest, Sha256};

/// Every token `kandev operator add` makes starts with this (easy to spot in a leak scan).
pub const TOKEN_PREFIX: &str = "kdv_";

/// A fresh token: [`TOKEN_PREFIX`] and 32 random bytes in hex.
pub fn fresh_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{TOKEN_PREFIX}{}", hex(&bytes))
}

/// The SHA-256 of `token`.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The hex SHA-256 of `token`, as `token_sha256` holds it.
pub fn token_sha256(token: &str) -> String {
    hex(&token_digest(token))
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes of a 64-digit hex string.
pub(crate) fn unhex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_hash_to_their_config_line() {
        let a = fresh_token();
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 64);
        assert_ne!(a, fresh_token());
        let hash = token_sha256(&a);
        assert_eq!(hash.len(), 64);
        assert_eq!(unhex32(&hash), Some(token_digest(&a)));
        // The well-known SHA-256 of "abc".
        assert_eq!(
            token_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(unhex32("zz"), None);
        assert_eq!(unhex32(&"g".repeat(64)), None);
    }
}
