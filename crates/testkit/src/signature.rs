//! What signatures that cross to and from the outside are made of, computed here on the
//! test's side, apart from kandev's own code: Slack's request signatures and kandev's
//! webhook signatures are both HMAC-SHA256 in hex over a message of their own shape.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256 of `message` under `secret`, in lowercase hex: what Slack signs its requests
/// with, and kandev its webhooks.
pub fn hmac_sha256_hex(secret: &str, message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(message.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_rfc_4231s_second_test_case() {
        assert_eq!(
            hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
