//! Any replica answers any request (docs/architecture.md §12): a verb that needs a session's
//! agent — prompt, cancel, stop, respond, clarification cancel — arriving at a replica
//! that does not own the session is forwarded to the owner's `advertise_url`, and the
//! owner's status and body go back unchanged. Reads are served here, from the database.
//!
//! A forwarded call carries [`SECRET_HEADER`] (`cluster.secret`, compared in constant
//! time) and the operator's name in [`OPERATOR_HEADER`], so the owner records who
//! answered. The owner never forwards a forwarded call again: if it lost the session
//! meanwhile, it answers as a replica without it would.
//!
//! The owner stamps its answer with [`REPLICA_HEADER`]. A lease can outlive its replica
//! (a drain or a crash), and another process may then listen on its address; an answer
//! without the owner's stamp is that other process's, so it is reported as the owner
//! being unreachable (a retryable 503) instead of being passed on as the verb's outcome.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use tracing::Instrument;

use crate::auth::Operator;
use crate::http::error::AppError;
use crate::model::{ClarificationStatus, SessionLease};
use crate::state::AppState;

/// The header carrying `cluster.secret` on a replica-to-replica call.
pub const SECRET_HEADER: &str = "x-kandev-cluster-secret";
/// The operator a forwarded call acts for.
pub const OPERATOR_HEADER: &str = "x-kandev-operator";
/// The replica that forwarded the call (for the owner's log).
pub const FORWARDED_BY_HEADER: &str = "x-kandev-forwarded-by";
/// The replica that answered a forwarded call, so the forwarder knows it reached the owner.
pub const REPLICA_HEADER: &str = "x-kandev-replica";

/// How long the owner may take: longer than agentctl's own request timeout, so its
/// `AGENTCTL_TIMEOUT` comes back rather than ours.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(40);

/// What a request acts on, when it is a verb that needs the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Session(String),
    Clarification(String),
}

/// The target of `POST /api/v1/sessions/{id}/{prompt|cancel|stop}` and
/// `POST /api/v1/clarifications/{pending_id}/{respond|cancel}`.
fn target(method: &Method, path: &str) -> Option<Target> {
    if method != Method::POST {
        return None;
    }
    let rest = path.strip_prefix("/api/v1/")?;
    let mut parts = rest.split('/');
    let (kind, id, verb) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || id.is_empty() {
        return None;
    }
    match (kind, verb) {
        ("sessions", "prompt" | "cancel" | "stop") => Some(Target::Session(id.to_owned())),
        ("clarifications", "respond" | "cancel") => Some(Target::Clarification(id.to_owned())),
        _ => None,
    }
}

/// What a `SECRET_HEADER` on a request says.
pub(super) enum ClusterCall {
    /// No such header: an ordinary request.
    None,
    /// The right secret: a replica forwarding for this operator.
    Valid(Operator),
    /// A wrong secret, or no secret configured here.
    Invalid,
}

/// Checks a request's cluster credentials.
pub(super) fn cluster_call(state: &AppState, headers: &HeaderMap) -> ClusterCall {
    let Some(presented) = headers.get(SECRET_HEADER) else {
        return ClusterCall::None;
    };
    let Some(secret) = &state.config.cluster.secret else {
        return ClusterCall::Invalid;
    };
    if !bool::from(presented.as_bytes().ct_eq(secret.as_bytes())) {
        return ClusterCall::Invalid;
    }
    let name = headers
        .get(OPERATOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|n| *n == Operator::LOCAL || crate::config::is_valid_operator_name(n));
    match name {
        Some(name) => ClusterCall::Valid(Operator {
            name: name.to_owned(),
        }),
        None => ClusterCall::Invalid,
    }
}

/// The middleware: forwards a verb for a session another replica owns.
pub(super) async fn to_owner(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(target) = target(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    if request.headers().contains_key(SECRET_HEADER) {
        let from_a_replica = matches!(
            cluster_call(&state, request.headers()),
            ClusterCall::Valid(_)
        );
        let mut response = next.run(request).await;
        if from_a_replica
            && let Ok(me) = HeaderValue::from_str(&state.sessions.ownership.replica_id)
        {
            response.headers_mut().insert(REPLICA_HEADER, me);
        }
        return response;
    }
    match owner_elsewhere(&state, &target).await {
        Ok(Some(lease)) => {
            let span = tracing::info_span!("forward", session_id = %lease.session_id, owner = %lease.replica_id);
            forward(&state, &lease, request).instrument(span).await
        }
        Ok(None) => next.run(request).await,
        Err(err) => err.into_response(),
    }
}

/// The lease of the replica that owns the target's session, when that is not this one.
async fn owner_elsewhere(
    state: &AppState,
    target: &Target,
) -> Result<Option<SessionLease>, AppError> {
    let (session_id, settled) = match target {
        Target::Session(id) => (id.clone(), false),
        Target::Clarification(pending_id) => {
            match state
                .clarifications
                .record_of(&*state.sessions, pending_id)
                .await?
            {
                Some(record) => (
                    record.session_id,
                    record.status != ClarificationStatus::Pending,
                ),
                None => return Ok(None),
            }
        }
    };
    if state.sessions.live(&session_id).is_some() {
        return Ok(None);
    }
    let Some(lease) = state.stores.leases.lease(&session_id).await? else {
        return Ok(None);
    };
    if lease.replica_id != state.sessions.ownership.replica_id {
        return Ok(Some(lease));
    }
    if matches!(target, Target::Clarification(_)) && !settled {
        // Ours, not live, the record still pending: being re-attached after a takeover.
        // Answered now, it would be settled as if its agent were gone. (A settled record
        // is answered here: its session ended, and its lease is about to be released.)
        return Err(AppError::Unavailable {
            code: "SESSION_TAKEOVER",
            message: format!(
                "this replica is re-attaching session `{session_id}` to its agent; retry in a moment"
            ),
        });
    }
    Ok(None)
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(FORWARD_TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            .no_proxy()
            .build()
            .unwrap_or_default()
    })
}

/// Sends `request` to the owner and returns its answer as it came.
async fn forward(state: &AppState, owner: &SessionLease, request: Request) -> Response {
    let operator = request
        .extensions()
        .get::<Operator>()
        .cloned()
        .unwrap_or_else(Operator::local);
    let path = request
        .uri()
        .path_and_query()
        .map_or_else(|| request.uri().path().to_owned(), ToString::to_string);
    let content_type = request.headers().get(header::CONTENT_TYPE).cloned();
    let body = match axum::body::to_bytes(request.into_body(), super::BODY_LIMIT).await {
        Ok(body) => body,
        Err(_) => {
            return AppError::PayloadTooLarge {
                limit: super::BODY_LIMIT,
            }
            .into_response();
        }
    };
    send(state, owner, &operator, &path, content_type, body).await
}

/// The replica that owns the session of clarification `pending_id`, when that is not
/// this one (a verb on it must then be forwarded there, as [`to_owner`] does).
pub(crate) async fn clarification_owner(
    state: &AppState,
    pending_id: &str,
) -> Result<Option<SessionLease>, AppError> {
    owner_elsewhere(state, &Target::Clarification(pending_id.to_owned())).await
}

/// Forwards `POST path` with the JSON `body` to `owner` for `operator` (a verb that did
/// not arrive as that HTTP request, such as an MCP tool call), as [`to_owner`] would.
pub(crate) async fn forward_verb(
    state: &AppState,
    owner: &SessionLease,
    operator: &Operator,
    path: &str,
    body: &serde_json::Value,
) -> Response {
    let body = axum::body::Bytes::from(body.to_string());
    let json = HeaderValue::from_static("application/json");
    send(state, owner, operator, path, Some(json), body).await
}

/// Sends one verb to the owner and returns its answer as it came.
async fn send(
    state: &AppState,
    owner: &SessionLease,
    operator: &Operator,
    path: &str,
    content_type: Option<HeaderValue>,
    body: axum::body::Bytes,
) -> Response {
    let Some(secret) = state.config.cluster.secret.clone() else {
        return AppError::Unavailable {
            code: "CLUSTER_NOT_CONFIGURED",
            message: format!(
                "session `{}` is owned by replica `{}`; set the same cluster.secret on every replica so requests are forwarded to it",
                owner.session_id, owner.replica_id
            ),
        }
        .into_response();
    };
    let mut call = client()
        .post(format!("{}{path}", owner.advertise_url))
        .header(SECRET_HEADER, secret)
        .header(OPERATOR_HEADER, &operator.name)
        .header(FORWARDED_BY_HEADER, &state.sessions.ownership.replica_id)
        .body(body);
    if let Some(content_type) = content_type {
        call = call.header(header::CONTENT_TYPE, content_type);
    }
    let answer = match call.send().await {
        Ok(answer) => answer,
        Err(err) => {
            tracing::warn!(session_id = %owner.session_id, owner = %owner.replica_id, error = %err, "the owning replica cannot be reached");
            return AppError::Unavailable {
                code: "OWNER_UNREACHABLE",
                message: format!(
                    "replica `{}`, which owns session `{}`, cannot be reached; another replica takes the session over once its lease runs out (cluster.lease)",
                    owner.replica_id, owner.session_id
                ),
            }
            .into_response();
        }
    };
    if !answered_by(answer.headers(), &owner.replica_id) {
        tracing::warn!(session_id = %owner.session_id, owner = %owner.replica_id, status = answer.status().as_u16(), "the owner's address answered, but not as that replica");
        return AppError::Unavailable {
            code: "OWNER_UNREACHABLE",
            message: format!(
                "replica `{}`, which owns session `{}`, no longer answers at {}; another replica takes the session over once its lease runs out (cluster.lease)",
                owner.replica_id, owner.session_id, owner.advertise_url
            ),
        }
        .into_response();
    }
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(err) => {
            return AppError::Unavailable {
                code: "OWNER_UNREACHABLE",
                message: format!(
                    "replica `{}` did not finish its answer: {err}",
                    owner.replica_id
                ),
            }
            .into_response();
        }
    };
    tracing::debug!(session_id = %owner.session_id, owner = %owner.replica_id, status = status.as_u16(), "forwarded to the owning replica");
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    } else {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    response
}

/// Whether an answer carries `replica_id`'s stamp, i.e. came from that replica.
fn answered_by(headers: &HeaderMap, replica_id: &str) -> bool {
    headers
        .get(REPLICA_HEADER)
        .is_some_and(|v| v.as_bytes() == replica_id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owners_stamp_makes_an_answer_the_owners() {
        let stamped = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(REPLICA_HEADER, HeaderValue::from_str(v).expect("header"));
            h
        };
        assert!(answered_by(&stamped("replica-a"), "replica-a"));
        assert!(!answered_by(&stamped("replica-b"), "replica-a"));
        assert!(!answered_by(&HeaderMap::new(), "replica-a"));
    }

    /// A local HTTP receiver at `advertise_url` answering every call 401, with `stamp` (when
    /// given) as its replica header; returns its URL.
    async fn receiver(stamp: Option<&'static str>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let app = axum::Router::new().fallback(move || async move {
            let mut response = axum::http::StatusCode::UNAUTHORIZED.into_response();
            if let Some(stamp) = stamp {
                response
                    .headers_mut()
                    .insert(REPLICA_HEADER, HeaderValue::from_static(stamp));
            }
            response
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn a_stale_owners_address_answered_by_another_process_is_owner_unreachable() {
        kandev_tls::install_process_provider();
        let mut config = crate::config::Config::default();
        config.cluster.secret = Some("s3cret-s3cret-s3cret".into());
        let (state, _) = crate::testing::app_with(Default::default(), config).await;
        let lease = |advertise_url: String| SessionLease {
            session_id: "s1".into(),
            replica_id: "replica-a".into(),
            advertise_url,
            generation: 1,
            expires_at: crate::model::time::Timestamp::now(),
            agent_host: None,
        };
        let call = |owner: SessionLease| {
            let state = state.clone();
            async move {
                let body = serde_json::json!({});
                forward_verb(
                    &state,
                    &owner,
                    &Operator::local(),
                    "/api/v1/sessions/s1/cancel",
                    &body,
                )
                .await
            }
        };
        // Another process (an agentctl that reused the port) refuses: not the verb's outcome.
        let stranger = call(lease(receiver(None).await)).await;
        assert_eq!(
            stranger.status(),
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        );
        let body = axum::body::to_bytes(stranger.into_body(), 4096)
            .await
            .expect("body");
        assert!(
            String::from_utf8_lossy(&body).contains("OWNER_UNREACHABLE"),
            "{body:?}"
        );
        // Another replica is no better; the owner's own 401 is passed on as it came.
        let other = call(lease(receiver(Some("replica-b")).await)).await;
        assert_eq!(other.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        let owner = call(lease(receiver(Some("replica-a")).await)).await;
        assert_eq!(owner.status(), axum::http::StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn only_the_verbs_that_need_the_agent_are_forwarded() {
        let post = Method::POST;
        assert_eq!(
            target(&post, "/api/v1/sessions/s1/prompt"),
            Some(Target::Session("s1".into()))
        );
        for verb in ["cancel", "stop"] {
            assert!(target(&post, &format!("/api/v1/sessions/s1/{verb}")).is_some());
        }
        assert_eq!(
            target(&post, "/api/v1/clarifications/p1/respond"),
            Some(Target::Clarification("p1".into()))
        );
        assert!(target(&post, "/api/v1/clarifications/p1/cancel").is_some());
        assert_eq!(target(&Method::GET, "/api/v1/sessions/s1/messages"), None);
        assert_eq!(target(&Method::GET, "/api/v1/sessions/s1"), None);
        assert_eq!(target(&post, "/api/v1/tasks/t1/sessions"), None);
        assert_eq!(target(&post, "/api/v1/sessions/s1/prompt/x"), None);
        assert_eq!(target(&post, "/api/v1/sessions//prompt"), None);
    }
}
