//! Signed answer links (docs/decisions/0016-answer-links.md): a webhook may carry, for its
//! one question, a link that opens the answer card on a phone without signing in.
//!
//! The token is `<pending_id>.<expiry unix s>.<hex recipient>.<hex nonce>.<hex tag>`, the
//! tag an HMAC-SHA256 over the other four under a key derived from the hook's `secret`
//! (and `auth.session_secret` when set). It verifies without the database; it is used once
//! (the nonce is marked in `answer_link_uses` before the answer is forwarded); it expires
//! with its record. The link puts the token after `#`, so it never reaches a server log.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::auth::token::hex;
use crate::config::WebhookConfig;
use crate::reach::signature::unhex;

type HmacSha256 = Hmac<Sha256>;

/// How long a link lives when its record has no deadline.
pub const DEFAULT_TTL_SECS: i64 = 60 * 60;

/// A verified link: what it lets its holder do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerGrant {
    /// The one record it answers.
    pub pending_id: String,
    /// The hook it was sent through.
    pub hook: String,
    /// Its single-use mark.
    pub nonce: String,
    /// Who answers through it (`answered_by`).
    pub answered_by: String,
}

/// Why a link is refused. Each is a 4xx, and none changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefused {
    /// Not a token of this shape.
    #[error("the answer link is malformed")]
    Malformed,
    /// The hook it names is not configured (or no longer carries links).
    #[error("the answer link names no hook that carries answer links")]
    UnknownHook,
    /// The tag does not match: changed, or signed with another key.
    #[error("the answer link's signature does not match")]
    Tampered,
    /// Its time is up.
    #[error("the answer link has expired")]
    Expired,
    /// It was issued for another record.
    #[error("the answer link is for another question")]
    OtherRecord,
    /// It was used already.
    #[error("the answer link was used already")]
    Used,
}

fn key(hook: &WebhookConfig, session_secret: Option<&str>) -> [u8; 32] {
    let mut mac = keyed(hook.secret.as_bytes());
    mac.update(b"kandev answer link key v1\0");
    mac.update(session_secret.unwrap_or("").as_bytes());
    mac.finalize().into_bytes().into()
}

fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; the error arm is unreachable.
    HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!())
}

fn tag(key: &[u8; 32], pending_id: &str, expiry: i64, recipient: &str, nonce: &str) -> HmacSha256 {
    let mut mac = keyed(key);
    for part in [pending_id, &expiry.to_string(), recipient, nonce] {
        mac.update(part.as_bytes());
        mac.update(b"\0");
    }
    mac
}

/// Who answers through `hook`'s links.
pub fn recipient(hook: &WebhookConfig) -> String {
    hook.recipient
        .clone()
        .unwrap_or_else(|| format!("webhook:{}", hook.name))
}

/// A fresh token for `pending_id` through `hook`, valid until `expiry` (unix seconds).
pub fn issue(
    hook: &WebhookConfig,
    session_secret: Option<&str>,
    pending_id: &str,
    expiry: i64,
) -> String {
    let nonce = hex(&rand::random::<[u8; 16]>());
    let tag = tag(
        &key(hook, session_secret),
        pending_id,
        expiry,
        &hook.name,
        &nonce,
    )
    .finalize()
    .into_bytes();
    format!(
        "{pending_id}.{expiry}.{}.{nonce}.{}",
        hex(hook.name.as_bytes()),
        hex(&tag)
    )
}

/// Checks `token` for record `pending_id` at `now` (unix seconds) against the hooks that
/// carry links — no database read. Single use is the caller's next step.
pub fn verify<'a>(
    token: &str,
    pending_id: Option<&str>,
    now: i64,
    hooks: impl IntoIterator<Item = &'a WebhookConfig>,
    session_secret: Option<&str>,
) -> Result<AnswerGrant, LinkRefused> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [id, expiry, hook_hex, nonce, tag_hex] = parts.as_slice() else {
        return Err(LinkRefused::Malformed);
    };
    let expiry: i64 = expiry.parse().map_err(|_| LinkRefused::Malformed)?;
    let hook_name = unhex(hook_hex)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or(LinkRefused::Malformed)?;
    let given = unhex(tag_hex).ok_or(LinkRefused::Malformed)?;
    if nonce.len() != 32 || unhex(nonce).is_none() {
        return Err(LinkRefused::Malformed);
    }
    let hook = hooks
        .into_iter()
        .find(|h| h.name == hook_name && h.answer_links)
        .ok_or(LinkRefused::UnknownHook)?;
    tag(&key(hook, session_secret), id, expiry, &hook.name, nonce)
        .verify_slice(&given)
        .map_err(|_| LinkRefused::Tampered)?;
    if now >= expiry {
        return Err(LinkRefused::Expired);
    }
    if pending_id.is_some_and(|wanted| wanted != *id) {
        return Err(LinkRefused::OtherRecord);
    }
    Ok(AnswerGrant {
        pending_id: (*id).to_owned(),
        hook: hook.name.clone(),
        nonce: (*nonce).to_owned(),
        answered_by: recipient(hook),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HookEvent, HookFormat};

    fn hook(name: &str, secret: &str) -> WebhookConfig {
        WebhookConfig {
            name: name.into(),
            url: "https://h".into(),
            secret: secret.into(),
            events: vec![HookEvent::ClarificationRequested],
            format: HookFormat::Json,
            include_question: false,
            answer_links: true,
            recipient: Some("alice".into()),
        }
    }

    #[test]
    fn a_link_verifies_for_its_record_until_it_expires() {
        let hooks = [hook("team", "s1"), hook("other", "s2")];
        let token = issue(&hooks[0], None, "p1", 1000);
        let grant = verify(&token, Some("p1"), 999, &hooks, None).expect("valid");
        assert_eq!(grant.pending_id, "p1");
        assert_eq!(grant.answered_by, "alice");
        assert_eq!(
            verify(&token, None, 999, &hooks, None).map(|g| g.hook),
            Ok("team".into())
        );
        assert_eq!(
            verify(&token, Some("p1"), 1000, &hooks, None),
            Err(LinkRefused::Expired)
        );
        assert_eq!(
            verify(&token, Some("p2"), 999, &hooks, None),
            Err(LinkRefused::OtherRecord)
        );
        assert_eq!(
            verify(&token, Some("p1"), 999, &hooks, Some("x")),
            Err(LinkRefused::Tampered)
        );
        assert_ne!(
            issue(&hooks[0], None, "p1", 1000),
            token,
            "each link its own nonce"
        );
    }

    #[test]
    fn every_changed_part_is_refused() {
        let hooks = [hook("team", "s1"), hook("other", "s2")];
        let token = issue(&hooks[0], None, "p1", 1000);
        let parts: Vec<&str> = token.split('.').collect();
        let with = |i: usize, v: &str| {
            let mut p = parts.clone();
            p[i] = v;
            p.join(".")
        };
        assert_eq!(
            verify(&with(0, "p2"), None, 0, &hooks, None),
            Err(LinkRefused::Tampered)
        );
        assert_eq!(
            verify(&with(1, "99999"), None, 0, &hooks, None),
            Err(LinkRefused::Tampered)
        );
        assert_eq!(
            verify(&with(2, &hex(b"other")), None, 0, &hooks, None),
            Err(LinkRefused::Tampered)
        );
        assert_eq!(
            verify(&with(2, &hex(b"nope")), None, 0, &hooks, None),
            Err(LinkRefused::UnknownHook)
        );
        assert_eq!(
            verify(&with(3, &"0".repeat(32)), None, 0, &hooks, None),
            Err(LinkRefused::Tampered)
        );
        assert_eq!(
            verify(&with(4, &"0".repeat(64)), None, 0, &hooks, None),
            Err(LinkRefused::Tampered)
        );
        assert_eq!(
            verify("p1.1000", None, 0, &hooks, None),
            Err(LinkRefused::Malformed)
        );
        assert_eq!(
            verify(&with(1, "soon"), None, 0, &hooks, None),
            Err(LinkRefused::Malformed)
        );
        let mut off = hooks[0].clone();
        off.answer_links = false;
        assert_eq!(
            verify(&token, None, 0, [&off], None),
            Err(LinkRefused::UnknownHook)
        );
        let rotated = hook("team", "s1-rotated");
        assert_eq!(
            verify(&token, None, 0, [&rotated], None),
            Err(LinkRefused::Tampered)
        );
    }
}
