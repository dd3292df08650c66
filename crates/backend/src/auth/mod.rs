//! Operator authentication (docs/architecture.md §10): who is asking, from the `[auth]` section.
//!
//! API clients send `Authorization: Bearer <token>`; the browser signs in once and then
//! carries a signed session cookie ([`session`]). Tokens are compared by their SHA-256
//! in constant time; failed attempts are limited per address ([`limit`]).
//!
//! Handlers learn who is asking by taking an [`Operator`] argument: the HTTP layer
//! (`http::guard`) puts one on every API request it lets through — the operator whose
//! credentials it carried, or [`Operator::LOCAL`] when auth is off.
//!
//! ```text
//! async fn respond(operator: Operator, /* … */) -> Result<…, AppError> {
//!     tracing::info!(answered_by = %operator.name, "clarification answered");
//! }
//! ```

pub mod limit;
pub mod session;
pub mod token;

use std::net::IpAddr;
use std::time::{Instant, SystemTime};

use subtle::ConstantTimeEq;

pub use self::limit::FailureLimiter;
pub use self::session::{SESSION_COOKIE, SESSION_TTL};
pub use self::token::{TOKEN_PREFIX, fresh_token, token_sha256};
use crate::config::Config;

/// Who made a request: an operator's configured name, or `"local"` without auth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The name (`answered_by` of what they settle).
    pub name: String,
}

impl Operator {
    /// The name used when auth is off.
    pub const LOCAL: &'static str = "local";

    /// The operator of a kandev without auth.
    pub fn local() -> Self {
        Self {
            name: Self::LOCAL.to_owned(),
        }
    }
}

/// How a presented session cookie fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CookieCheck {
    /// Signed for this operator and current.
    Valid(Operator),
    /// Genuine but past its expiry (not counted as a failed attempt).
    Expired,
    /// Not ours: unknown operator, bad signature, rotated token, garbage.
    Invalid,
}

struct Registered {
    name: String,
    token_hash: [u8; 32],
    session_key: [u8; 32],
}

/// The operators, the cookie keys and the failure limiter. Never prints a secret.
pub struct Auth {
    required: bool,
    operators: Vec<Registered>,
    secure_cookie: bool,
    limiter: FailureLimiter,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("required", &self.required)
            .field(
                "operators",
                &self.operators.iter().map(|o| &o.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// From a validated configuration (an operator whose hash does not parse is skipped;
    /// validation has refused it already).
    pub fn from_config(config: &Config) -> Self {
        let secret = config.auth.session_secret.as_deref();
        let operators = config
            .auth
            .operators
            .iter()
            .filter_map(|op| {
                let token_hash = token::unhex32(&op.token_sha256.to_ascii_lowercase())?;
                Some(Registered {
                    name: op.name.clone(),
                    token_hash,
                    session_key: session::session_key(&token_hash, secret),
                })
            })
            .collect();
        Self {
            required: config.auth_required(),
            operators,
            secure_cookie: config.server.tls.is_some(),
            limiter: FailureLimiter::default(),
        }
    }

    /// Whether API calls need credentials.
    pub fn required(&self) -> bool {
        self.required
    }

    /// The operator whose token this is. Every configured hash is compared, in constant
    /// time, against the token's SHA-256.
    pub fn verify_token(&self, token: &str) -> Option<Operator> {
        let digest = token::token_digest(token);
        let mut found = None;
        for operator in &self.operators {
            if bool::from(digest.ct_eq(&operator.token_hash)) {
                found = Some(Operator {
                    name: operator.name.clone(),
                });
            }
        }
        found
    }

    /// A session cookie value for `operator`, if it is configured.
    pub fn issue_session(&self, operator: &Operator, now: SystemTime) -> Option<String> {
        let registered = self.operators.iter().find(|o| o.name == operator.name)?;
        Some(session::issue(
            &registered.session_key,
            &registered.name,
            now,
        ))
    }

    /// Checks a session cookie value.
    pub fn verify_session(&self, value: &str, now: SystemTime) -> CookieCheck {
        let Some(claimed) = session::parse(value) else {
            return CookieCheck::Invalid;
        };
        let Some(registered) = self.operators.iter().find(|o| o.name == claimed.name) else {
            return CookieCheck::Invalid;
        };
        match session::verify(&registered.session_key, &claimed, now) {
            session::Verdict::Valid => CookieCheck::Valid(Operator {
                name: registered.name.clone(),
            }),
            session::Verdict::Expired => CookieCheck::Expired,
            session::Verdict::Forged => CookieCheck::Invalid,
        }
    }

    /// The `Set-Cookie` value that signs the browser in with `value`.
    pub fn set_cookie(&self, value: &str) -> String {
        format!(
            "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
            SESSION_TTL.as_secs(),
            self.secure_suffix()
        )
    }

    /// The `Set-Cookie` value that signs the browser out.
    pub fn clear_cookie(&self) -> String {
        format!(
            "{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
            self.secure_suffix()
        )
    }

    fn secure_suffix(&self) -> &'static str {
        if self.secure_cookie { "; Secure" } else { "" }
    }

    /// `Err(retry_after)` while `addr` has used up its failed attempts.
    pub fn check_limit(&self, addr: Option<IpAddr>) -> Result<(), std::time::Duration> {
        self.limiter.check(addr, Instant::now())
    }

    /// Counts a failed attempt from `addr`.
    pub fn record_failure(&self, addr: Option<IpAddr>) {
        self.limiter.record_failure(addr, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OperatorConfig;

    fn auth_with(tokens: &[(&str, &str)], secret: Option<&str>) -> Auth {
        let mut config = Config::default();
        config.auth.required = Some(true);
        config.auth.session_secret = secret.map(str::to_owned);
        config.auth.operators = tokens
            .iter()
            .map(|(name, token)| OperatorConfig {
                name: (*name).to_owned(),
                token_sha256: token_sha256(token),
            })
            .collect();
        Auth::from_config(&config)
    }

    #[test]
    fn a_token_names_its_operator_and_nothing_else_matches() {
        let auth = auth_with(&[("alice", "kdv_a"), ("bob", "kdv_b")], None);
        assert!(auth.required());
        assert_eq!(
            auth.verify_token("kdv_a").map(|o| o.name).as_deref(),
            Some("alice")
        );
        assert_eq!(
            auth.verify_token("kdv_b").map(|o| o.name).as_deref(),
            Some("bob")
        );
        for wrong in ["", "kdv_", "kdv_A", "kdv_a ", &token_sha256("kdv_a")] {
            assert_eq!(auth.verify_token(wrong), None, "{wrong:?}");
        }
    }

    #[test]
    fn a_cookie_verifies_on_any_process_with_the_same_config() {
        let now = SystemTime::now();
        let one = auth_with(&[("alice", "kdv_a")], Some("s"));
        let replica = auth_with(&[("alice", "kdv_a")], Some("s"));
        let alice = Operator {
            name: "alice".into(),
        };
        let value = one.issue_session(&alice, now).expect("issued");
        assert_eq!(
            replica.verify_session(&value, now),
            CookieCheck::Valid(alice.clone())
        );
        assert_eq!(
            replica.verify_session(&value, now + SESSION_TTL),
            CookieCheck::Expired
        );
        let rotated = auth_with(&[("alice", "kdv_new")], Some("s"));
        assert_eq!(rotated.verify_session(&value, now), CookieCheck::Invalid);
        let other_secret = auth_with(&[("alice", "kdv_a")], Some("t"));
        assert_eq!(
            other_secret.verify_session(&value, now),
            CookieCheck::Invalid
        );
        assert_eq!(one.verify_session("garbage", now), CookieCheck::Invalid);
        assert!(one.issue_session(&Operator::local(), now).is_none());
    }

    #[test]
    fn cookies_are_http_only_and_same_site_strict() {
        let auth = auth_with(&[("alice", "kdv_a")], None);
        let set = auth.set_cookie("v");
        assert!(set.starts_with("kandev_session=v;"), "{set}");
        for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
            assert!(set.contains(attr), "{set}");
        }
        assert!(!set.contains("Secure"), "no TLS, no Secure: {set}");
        assert!(auth.clear_cookie().contains("Max-Age=0"));
    }

    #[test]
    fn debug_output_shows_names_only() {
        let auth = auth_with(&[("alice", "kdv_secret_token")], Some("the-secret"));
        let text = format!("{auth:?}");
        assert!(text.contains("alice"));
        assert!(!text.contains(&token_sha256("kdv_secret_token")), "{text}");
        assert!(!text.contains("the-secret"), "{text}");
    }
}
