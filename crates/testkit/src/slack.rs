//! What Slack sends when an operator clicks a button in a message: the interaction
//! `payload`, form-encoded, and its `v0` signature. The tests of kandev's Slack endpoint
//! send it as Slack would, so both sides of the signature are checked against one recipe.

use serde_json::Value;

use crate::signature::hmac_sha256_hex;

/// The request body Slack posts for an interaction: `payload=<the JSON, form-encoded>`.
pub fn click_body(payload: &Value) -> String {
    format!("payload={}", form_encode(&payload.to_string()))
}

/// Slack's `v0` signature (`X-Slack-Signature`) of `body` sent at `ts` (the
/// `X-Slack-Request-Timestamp`, Unix seconds), under the app's signing `secret`.
pub fn signature(secret: &str, ts: i64, body: &str) -> String {
    format!("v0={}", hmac_sha256_hex(secret, &format!("v0:{ts}:{body}")))
}

/// `application/x-www-form-urlencoded` value encoding, as Slack sends its payload.
fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_body_is_form_encoded_json() {
        let body = click_body(&serde_json::json!({"a b": "é&"}));
        assert_eq!(body, "payload=%7B%22a+b%22%3A%22%C3%A9%26%22%7D");
    }

    #[test]
    fn the_signature_is_slacks_documented_example() {
        // The worked example of Slack's "Verifying requests from Slack" guide.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            signature("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }
}
