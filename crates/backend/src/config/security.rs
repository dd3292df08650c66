//! `[server]` and `[auth]` (docs/architecture.md §10): who may reach the operator API, from
//! where, and over what; checked at start-up so a deployment never runs open by mistake.

use std::net::SocketAddr;
use std::path::PathBuf;

use kandev_agent_stream::agent_env;
use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};
use crate::agent_link::ExecutorConfig;

/// `[server]`: the names and origins the API answers, and TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Extra `Host` names served besides `127.0.0.1`, `localhost` and `[::1]` on the
    /// listening port: `kandev.example.com` (any port), `kandev.example.com:8443`, or
    /// `.example.com` (that domain and every subdomain), for a deployment behind a proxy.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Extra origins (`https://ops.example.com`) allowed to open the WebSocket and send
    /// state-changing requests, besides the server's own.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Serve HTTPS/WSS with this certificate and key.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

/// `[server.tls]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// Its PEM private key.
    pub key: PathBuf,
}

/// `[auth]`: operator authentication.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Whether every API call needs an operator's credentials. Unset means "yes unless
    /// `listen` is a loopback address"; `false` is refused on any other address.
    #[serde(default)]
    pub required: Option<bool>,
    /// Who may operate: `[[auth.operators]]`.
    #[serde(default)]
    pub operators: Vec<OperatorConfig>,
    /// Mixed into the key that signs session cookies, so that reading `kandev.toml` (which
    /// holds only token hashes) is not enough to forge a cookie. Every replica needs the
    /// same value; best set as `KANDEV_AUTH__SESSION_SECRET`.
    #[serde(default)]
    pub session_secret: Option<String>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("required", &self.required)
            .field("operators", &self.operators)
            .field(
                "session_secret",
                &self.session_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// One `[[auth.operators]]` entry.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// Who this is; shown as `answered_by` on what they settle.
    pub name: String,
    /// Hex SHA-256 of the operator's token (`kandev operator add NAME` prints both).
    pub token_sha256: String,
}

impl std::fmt::Debug for OperatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The hash keys the operator's session cookies: not for logs either.
        f.debug_struct("OperatorConfig")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// Whether credentials are needed on `listen`.
    pub fn is_required(&self, listen: SocketAddr) -> bool {
        self.required.unwrap_or(!listen.ip().is_loopback())
    }
}

/// Whether `name` can be an operator name: 1 to 64 of `A-Z a-z 0-9 . _ @ -`, starting
/// with a letter or digit (it travels in a cookie and in clarification records).
pub fn is_valid_operator_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}

/// The checks of `[server]`, `[auth]`, `executor.ca_cert` and the agents' environment.
pub(super) fn validate(config: &Config) -> Result<(), ConfigError> {
    validate_auth(config)?;
    validate_server(&config.server)?;
    if let ExecutorConfig::Remote {
        ca_cert: Some(ca), ..
    } = &config.executor
    {
        let hosts = config.executor.hosts();
        if let Some(url) = hosts
            .iter()
            .filter_map(ExecutorConfig::remote_url)
            .find(|url| !url.starts_with("wss://"))
        {
            return Err(ConfigError::new(
                "executor.ca_cert",
                format!("only applies to a wss:// url, and executor.url is `{url}`"),
            ));
        }
        if !ca.is_file() {
            return Err(ConfigError::new(
                "executor.ca_cert",
                format!("{} does not exist", ca.display()),
            ));
        }
    }
    for (id, agent) in &config.agents {
        for name in &agent.inherit_env {
            check_agent_var(&format!("agents.{id}.inherit_env"), name)?;
        }
        for name in agent.env.keys() {
            check_agent_var(&format!("agents.{id}.env"), name)?;
        }
    }
    Ok(())
}

fn check_agent_var(key: &str, name: &str) -> Result<(), ConfigError> {
    if !agent_env::is_valid_name(name) {
        return Err(ConfigError::new(
            key,
            format!("`{name}` is not an environment variable name"),
        ));
    }
    if agent_env::is_withheld(name) {
        return Err(ConfigError::new(
            key,
            format!(
                "`{name}` is never given to an agent (AGENTCTL_TOKEN, DATABASE_URL and KANDEV_* \
                 stay with kandev and agentctl)"
            ),
        ));
    }
    Ok(())
}

fn validate_auth(config: &Config) -> Result<(), ConfigError> {
    let auth = &config.auth;
    let listen = config.listen;
    let mut names = std::collections::BTreeSet::new();
    for (i, operator) in auth.operators.iter().enumerate() {
        if !is_valid_operator_name(&operator.name) {
            return Err(ConfigError::new(
                format!("auth.operators[{i}].name"),
                format!(
                    "`{}` is not a usable name: 1 to 64 letters, digits, `.`, `_`, `@` or `-`",
                    operator.name
                ),
            ));
        }
        if !names.insert(operator.name.as_str()) {
            return Err(ConfigError::new(
                format!("auth.operators[{i}].name"),
                format!("operator `{}` is listed twice", operator.name),
            ));
        }
        let hash = &operator.token_sha256;
        if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ConfigError::new(
                format!("auth.operators[{i}].token_sha256"),
                "must be the 64 hex digits `kandev operator add NAME` printed (the hash, never the token)",
            ));
        }
    }
    if listen.ip().is_loopback() {
        if auth.is_required(listen) && auth.operators.is_empty() {
            return Err(ConfigError::new(
                "auth.operators",
                "auth.required = true needs at least one operator: run `kandev operator add NAME` \
                 and paste the [[auth.operators]] lines it prints into kandev.toml",
            ));
        }
        return Ok(());
    }
    if auth.required == Some(false) {
        return Err(ConfigError::new(
            "auth.required",
            format!(
                "`false` is refused on the non-loopback address {listen}: remove it and add an \
                 operator with `kandev operator add NAME` (or listen on 127.0.0.1)"
            ),
        ));
    }
    if auth.operators.is_empty() {
        return Err(ConfigError::new(
            "auth.operators",
            format!(
                "listen = {listen} is not a loopback address, so kandev needs an operator: run \
                 `kandev operator add NAME` and paste the [[auth.operators]] lines it prints into \
                 kandev.toml (or listen on 127.0.0.1)"
            ),
        ));
    }
    Ok(())
}

fn validate_server(server: &ServerConfig) -> Result<(), ConfigError> {
    for (i, host) in server.allowed_hosts.iter().enumerate() {
        let bare = host.trim_start_matches('.');
        if bare.is_empty() || host.contains("://") || host.contains(['/', ' ', '@', '*', '?', '#'])
        {
            return Err(ConfigError::new(
                format!("server.allowed_hosts[{i}]"),
                format!(
                    "`{host}` is not a host name: use `kandev.example.com`, \
                     `kandev.example.com:8443` or `.example.com`"
                ),
            ));
        }
    }
    for (i, origin) in server.allowed_origins.iter().enumerate() {
        if normalize_origin(origin).is_none() {
            return Err(ConfigError::new(
                format!("server.allowed_origins[{i}]"),
                format!(
                    "`{origin}` is not an origin: use scheme://host[:port], e.g. \
                     https://ops.example.com"
                ),
            ));
        }
    }
    if let Some(tls) = &server.tls {
        for (key, path) in [("server.tls.cert", &tls.cert), ("server.tls.key", &tls.key)] {
            if !path.is_file() {
                return Err(ConfigError::new(
                    key,
                    format!("{} does not exist", path.display()),
                ));
            }
        }
    }
    Ok(())
}

/// An origin as browsers send it — `scheme://host[:port]`, lower case, the scheme's
/// default port left out — or `None` when `text` is not an http(s) origin. A trailing
/// `/` is tolerated (it is easy to paste).
pub fn normalize_origin(text: &str) -> Option<String> {
    let text = text.trim().to_ascii_lowercase();
    let (scheme, rest) = text.split_once("://")?;
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return None,
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let authority = authority.strip_suffix(default_port).unwrap_or(authority);
    Some(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_normalize_the_way_browsers_send_them() {
        assert_eq!(
            normalize_origin("https://Ops.Example.com:443/").as_deref(),
            Some("https://ops.example.com")
        );
        assert_eq!(
            normalize_origin("http://localhost:8080").as_deref(),
            Some("http://localhost:8080")
        );
        assert_eq!(
            normalize_origin("http://[::1]:80").as_deref(),
            Some("http://[::1]")
        );
        for bad in [
            "null",
            "ops.example.com",
            "ftp://x",
            "https://",
            "https://a/b",
            "https://u@h",
        ] {
            assert_eq!(normalize_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn operator_names_fit_a_cookie_and_a_record() {
        for good in ["alice", "bob.smith", "ops@example.com", "a-1_b"] {
            assert!(is_valid_operator_name(good), "{good}");
        }
        for bad in ["", ".alice", "al ice", "a;b", "a,b", &"x".repeat(65)] {
            assert!(!is_valid_operator_name(bad), "{bad}");
        }
    }
}
