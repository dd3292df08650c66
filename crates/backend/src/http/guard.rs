//! The gate in front of every route (docs/architecture.md §10).
//!
//! [`screen`] runs first, on every request: a `Host` that is not this server (DNS
//! rebinding) and, on a WebSocket upgrade or a state-changing request, an `Origin` that
//! is not this server's (cross-site WebSocket hijacking, CSRF) get 403 before anything
//! is read or done. A request without `Origin` (curl, SDKs, agents) is judged by auth
//! alone; one without `Host` cannot come from a browser, which always sends it. Every
//! response forbids framing (clickjacking). `/healthz` and `/readyz` are exempt from the
//! `Host` check, so load balancers may probe them by address.
//!
//! [`authenticate`] then requires an operator on `/api/*` and `/metrics` when auth is on
//! (everything but sign-in and sign-out): a Bearer token or the session cookie, 401 otherwise, 429
//! once an address has failed too often. It puts the [`Operator`] on the request, which
//! handlers take as an argument; without auth that is [`Operator::LOCAL`].

use std::net::IpAddr;
use std::time::SystemTime;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kandev_tls::PeerAddr;

use crate::auth::{CookieCheck, Operator, SESSION_COOKIE};
use crate::config::{Config, normalize_origin};
use crate::http::error::AppError;
use crate::state::AppState;

/// Routes under `/api` that answer without credentials (they handle tokens themselves).
pub(super) const OPEN_API_PATHS: &[&str] = &[
    "/api/v1/auth/login",
    "/api/v1/auth/logout",
    // Their own credentials: a signed answer link, Slack's request signature.
    "/api/v1/answer-links/open",
    "/api/v1/answer-links/respond",
    "/api/v1/integrations/slack/actions",
];

/// The names the web UI is always served under (on the listening port).
const LOOPBACK_NAMES: &[&str] = &["127.0.0.1", "localhost", "[::1]"];

/// The routes exempt from the `Host` check (probes; they say nothing secret).
const PROBE_PATHS: &[&str] = &["/healthz", "/readyz"];

/// Host and Origin checks, and the anti-framing headers.
pub(super) async fn screen(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    // A replica forwarding a verb (docs/architecture.md §12) is no browser: it names the owner
    // by its advertise_url, which the authenticated secret vouches for.
    let cluster = matches!(
        super::forward::cluster_call(&state, request.headers()),
        super::forward::ClusterCall::Valid(_)
    );
    if !cluster && let Err(err) = check_host_and_origin(&state.config, &request) {
        tracing::warn!(
            method = %request.method(),
            path = request.uri().path(),
            code = err.code(),
            "request refused: {err}"
        );
        super::drain(request.into_body()).await;
        return with_frame_guard(err.into_response());
    }
    with_frame_guard(next.run(request).await)
}

fn with_frame_guard(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("frame-ancestors 'none'"));
    response
}

fn check_host_and_origin(config: &Config, request: &Request) -> Result<(), AppError> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(ToString::to_string));
    let tls = config.server.tls.is_some();
    if !PROBE_PATHS.contains(&request.uri().path())
        && let Some(host) = &host
        && !host_allowed(
            host,
            config.listen.port(),
            tls,
            &config.server.allowed_hosts,
        )
    {
        return Err(AppError::Forbidden {
            code: "HOST_NOT_ALLOWED",
            message: format!(
                "host `{host}` is not served here; add it to server.allowed_hosts if kandev \
                 is reached under that name"
            ),
        });
    }
    let guarded = is_websocket_upgrade(headers)
        || !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
    if !guarded {
        return Ok(());
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    if origin_allowed(origin, host.as_deref(), config) {
        Ok(())
    } else {
        Err(AppError::Forbidden {
            code: "ORIGIN_NOT_ALLOWED",
            message: format!(
                "origin `{origin}` may not call this API; add it to server.allowed_origins if it \
                 is yours"
            ),
        })
    }
}

fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// `name` and optional port of a `Host` value (`[::1]:8080` keeps its brackets).
fn split_host(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.trim().to_ascii_lowercase();
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (name.to_owned(), Some(port.parse().ok()?)),
            None if rest.is_empty() => (name.to_owned(), None),
            None => return None,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name.to_owned(), Some(port.parse().ok()?)),
            None => (host, None),
        }
    };
    (!name.is_empty()).then_some((name, port))
}

/// Whether `host` names this server: a loopback name on `port`, or an allowed host.
pub(crate) fn host_allowed(host: &str, port: u16, tls: bool, allowed: &[String]) -> bool {
    let Some((name, given)) = split_host(host) else {
        return false;
    };
    let effective = given.unwrap_or(if tls { 443 } else { 80 });
    if LOOPBACK_NAMES.contains(&name.as_str()) && effective == port {
        return true;
    }
    allowed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        if let Some(domain) = entry.strip_prefix('.') {
            return name == domain || name.ends_with(&format!(".{domain}"));
        }
        match split_host(&entry) {
            Some((allowed_name, None)) => allowed_name == name,
            Some((allowed_name, Some(allowed_port))) => {
                allowed_name == name && allowed_port == effective
            }
            None => false,
        }
    })
}

/// Whether `origin` is this server's own (its host and port are the request's `Host`,
/// or a loopback name on the listening port) or one of `server.allowed_origins`.
/// `null` (sandboxed frames, `file:` pages) never is.
pub(crate) fn origin_allowed(origin: &str, host: Option<&str>, config: &Config) -> bool {
    let Some(origin) = normalize_origin(origin) else {
        return false;
    };
    if config
        .server
        .allowed_origins
        .iter()
        .filter_map(|o| normalize_origin(o))
        .any(|o| o == origin)
    {
        return true;
    }
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    // The browser leaves the scheme's default port out of both, so the strings compare.
    // The scheme itself is not compared: behind a TLS-terminating proxy kandev speaks
    // plain HTTP to pages served over HTTPS.
    let same_as_host = host.is_some_and(|h| h.trim().eq_ignore_ascii_case(authority));
    let default_port = if scheme == "https" { 443 } else { 80 };
    let loopback = split_host(authority).is_some_and(|(name, port)| {
        LOOPBACK_NAMES.contains(&name.as_str())
            && port.unwrap_or(default_port) == config.listen.port()
    });
    same_as_host || loopback
}

/// The client's IP address, when the request came over a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientIp(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(client_ip(&parts.extensions)))
    }
}

fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<PeerAddr>>()
        .map(|ConnectInfo(PeerAddr(addr))| addr.ip())
}

/// Operators on `/api/*` and `/metrics`; see the module docs.
pub(super) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let needs_operator = ((path == "/api" || path.starts_with("/api/"))
        && !OPEN_API_PATHS.contains(&path))
        || path == super::metrics::METRICS_PATH;
    match super::forward::cluster_call(&state, request.headers()) {
        super::forward::ClusterCall::None => {}
        super::forward::ClusterCall::Valid(operator) => {
            request.extensions_mut().insert(operator);
            return next.run(request).await;
        }
        super::forward::ClusterCall::Invalid => {
            tracing::warn!(path, "replica call refused: wrong cluster secret");
            super::drain(request.into_body()).await;
            return unauthorized(
                "INVALID_CLUSTER_SECRET",
                "the cluster secret does not match this replica's cluster.secret",
            )
            .into_response();
        }
    }
    if !state.auth.required() {
        request.extensions_mut().insert(Operator::local());
        return next.run(request).await;
    }
    if !needs_operator {
        return next.run(request).await;
    }
    let ip = client_ip(request.extensions());
    match identify(&state, request.headers(), ip) {
        Ok(operator) => {
            request.extensions_mut().insert(operator);
            next.run(request).await
        }
        Err(refusal) => {
            tracing::warn!(
                peer = ?ip,
                path = request.uri().path(),
                code = refusal.error.code(),
                "request refused: {}",
                refusal.error
            );
            super::drain(request.into_body()).await;
            refusal.into_response(&state)
        }
    }
}

/// A 401/429 and whether the browser's cookie should be dropped with it.
struct Refusal {
    error: AppError,
    clear_cookie: bool,
}

impl Refusal {
    fn into_response(self, state: &AppState) -> Response {
        let unauthorized = matches!(self.error, AppError::Unauthorized { .. });
        let mut response = self.error.into_response();
        let headers = response.headers_mut();
        if unauthorized {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"kandev\""),
            );
        }
        if self.clear_cookie
            && let Ok(value) = HeaderValue::from_str(&state.auth.clear_cookie())
        {
            headers.insert(header::SET_COOKIE, value);
        }
        response
    }
}

fn unauthorized(code: &'static str, message: &str) -> AppError {
    AppError::Unauthorized {
        code,
        message: message.to_owned(),
    }
}

/// The operator a request's credentials name.
fn identify(
    state: &AppState,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
) -> Result<Operator, Refusal> {
    let auth = &state.auth;
    if let Err(wait) = auth.check_limit(ip) {
        return Err(Refusal {
            error: AppError::TooManyAttempts {
                retry_after_secs: wait.as_secs().max(1),
            },
            clear_cookie: false,
        });
    }
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        if let Some(operator) = token.and_then(|t| auth.verify_token(t)) {
            return Ok(operator);
        }
        auth.record_failure(ip);
        return Err(Refusal {
            error: unauthorized(
                "INVALID_TOKEN",
                "the Authorization header does not carry a valid operator token (Bearer <token>)",
            ),
            clear_cookie: false,
        });
    }
    let Some(cookie) = session_cookie(headers) else {
        return Err(Refusal {
            error: unauthorized(
                "AUTH_REQUIRED",
                "sign in first: send Authorization: Bearer <token>, or sign in on the web UI",
            ),
            clear_cookie: false,
        });
    };
    match auth.verify_session(cookie, SystemTime::now()) {
        CookieCheck::Valid(operator) => Ok(operator),
        CookieCheck::Expired => Err(Refusal {
            error: unauthorized("SESSION_EXPIRED", "the sign-in has expired; sign in again"),
            clear_cookie: true,
        }),
        CookieCheck::Invalid => {
            auth.record_failure(ip);
            Err(Refusal {
                error: unauthorized(
                    "INVALID_SESSION",
                    "the session cookie is not valid; sign in again",
                ),
                clear_cookie: true,
            })
        }
    }
}

/// The value of our session cookie among the `Cookie` headers.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim_matches('"'))
}

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // `authenticate` puts one on every API request it lets through.
        parts.extensions.get::<Operator>().cloned().ok_or_else(|| {
            AppError::Internal("no operator on this request: the auth layer did not run".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn loopback_names_on_the_listening_port_are_served() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
        ] {
            assert!(host_allowed(host, 8080, false, &[]), "{host}");
        }
        for host in [
            "evil.example:8080",
            "127.0.0.1:9090",
            "localhost",
            "127.0.0.2:8080",
            "localhost.:8080",
            "[::1]x:8080",
            "",
            ":8080",
        ] {
            assert!(!host_allowed(host, 8080, false, &[]), "{host}");
        }
        assert!(host_allowed("localhost", 80, false, &[]), "default port");
        assert!(
            host_allowed("localhost", 443, true, &[]),
            "default TLS port"
        );
    }

    #[test]
    fn allowed_hosts_match_by_name_by_name_and_port_or_by_domain() {
        let allowed = strings(&[
            "kandev.example.com",
            "ops.example.org:8443",
            ".corp.example",
        ]);
        assert!(host_allowed("kandev.example.com", 8080, true, &allowed));
        assert!(host_allowed(
            "kandev.example.com:1234",
            8080,
            true,
            &allowed
        ));
        assert!(host_allowed("ops.example.org:8443", 8080, true, &allowed));
        assert!(!host_allowed("ops.example.org", 8080, true, &allowed));
        assert!(host_allowed("corp.example", 8080, true, &allowed));
        assert!(host_allowed("a.b.corp.example:9", 8080, true, &allowed));
        assert!(!host_allowed("evilcorp.example", 8080, true, &allowed));
        assert!(!host_allowed(
            "kandev.example.com.evil.example",
            8080,
            true,
            &allowed
        ));
    }

    fn config(port: u16, allowed_origins: &[&str]) -> Config {
        let mut config = Config::default();
        config.listen.set_port(port);
        config.server.allowed_origins = strings(allowed_origins);
        config
    }

    #[test]
    fn only_the_servers_own_origin_or_an_allowed_one_passes() {
        let c = config(8080, &["https://ops.example.com"]);
        let host = Some("127.0.0.1:8080");
        assert!(origin_allowed("http://127.0.0.1:8080", host, &c));
        assert!(origin_allowed("http://localhost:8080", host, &c));
        assert!(origin_allowed("https://ops.example.com", host, &c));
        assert!(origin_allowed("https://OPS.example.com:443", host, &c));
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "null",
            "",
            "http://127.0.0.1:8080.evil.example",
        ] {
            assert!(!origin_allowed(bad, host, &c), "{bad}");
        }
        // Behind a proxy that keeps the Host: the origin equals it.
        let proxied = config(8080, &[]);
        assert!(origin_allowed(
            "http://kandev.example.com",
            Some("kandev.example.com"),
            &proxied
        ));
        assert!(!origin_allowed(
            "http://kandev.example.com:81",
            Some("kandev.example.com"),
            &proxied
        ));
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; kandev_session=v.1.x"),
        );
        assert_eq!(session_cookie(&headers), Some("v.1.x"));
        let mut other = HeaderMap::new();
        other.append(
            header::COOKIE,
            HeaderValue::from_static("kandev_sessionx=1"),
        );
        assert_eq!(session_cookie(&other), None);
    }
}
