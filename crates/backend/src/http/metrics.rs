//! `GET /metrics` (Prometheus text): on the main listener behind operator auth, and, when
//! `metrics.listen` is set, alone on a listener of its own without auth or `Host` check
//! (for a scraper on a private network). Also the layer counting every response by its
//! route template. What is recorded is [`crate::metrics`].

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::auth::Operator;
use crate::state::AppState;

/// The path, on either listener.
pub const METRICS_PATH: &str = "/metrics";

/// The route on the main listener; the guard asks for an operator on it.
pub(super) fn routes() -> Router<AppState> {
    Router::new().route(METRICS_PATH, get(scrape_as_operator))
}

async fn scrape_as_operator(_operator: Operator, State(state): State<AppState>) -> Response {
    scrape(State(state)).await
}

/// Refreshes the gauges (database counts within the readiness deadline, the pool, the
/// sessions held here, the drain) and renders every metric.
async fn scrape(State(state): State<AppState>) -> Response {
    let counted =
        tokio::time::timeout(super::health::PROBE_DEADLINE, state.stores.health.gauges()).await;
    let gauges = match counted {
        Ok(Ok(gauges)) => Some(gauges),
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "metrics: the database did not answer");
            None
        }
        Err(_) => None,
    };
    crate::metrics::set_gauges(
        gauges.as_ref(),
        state.stores.health.pool_use(),
        state.sessions.attached(),
        state.drain.is_draining(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::handle().render(),
    )
        .into_response()
}

/// Counts the response by the route that matched (`fallback` when none did: the web
/// UI's files and unknown paths), never by the raw path, which holds ids.
pub(super) async fn count(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "fallback".to_owned(), |m| m.as_str().to_owned());
    let method = request.method().clone();
    let response = next.run(request).await;
    crate::metrics::http_request(&route, &method, response.status().as_u16());
    response
}

/// Binds `addr` and serves only `GET /metrics` there, without auth; returns the bound
/// address. The server runs until the process exits.
pub async fn serve_separately(addr: SocketAddr, state: AppState) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route(METRICS_PATH, get(scrape))
        .with_state(state);
    // TCP_NODELAY like every other listener, so a scrape's reply is never held back.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(error = %err, "the metrics listener failed");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use crate::config::{AuthConfig, Config, OperatorConfig};

    async fn get(router: &Router, uri: &str, token: Option<&str>) -> (StatusCode, String) {
        let mut request = Request::get(uri).header("host", "127.0.0.1:8080");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = router
            .clone()
            .oneshot(request.body(Body::empty()).expect("request"))
            .await
            .expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    use super::*;

    #[tokio::test]
    async fn metrics_need_an_operator_when_auth_is_on_and_count_routes_by_template() {
        let token = crate::auth::fresh_token();
        let config = Config {
            auth: AuthConfig {
                required: Some(true),
                operators: vec![OperatorConfig {
                    name: "ops".into(),
                    token_sha256: crate::auth::token_sha256(&token),
                }],
                ..AuthConfig::default()
            },
            ..Config::default()
        };
        let (state, _) = crate::testing::app_with(BTreeMap::new(), config).await;
        let router = crate::http::router(state);
        let (status, _) = get(&router, "/metrics", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _) = get(&router, "/api/v1/tasks/some-task-id", Some(&token)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, text) = get(&router, "/metrics", Some(&token)).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert!(text.contains("kandev_database_up 1"), "{text}");
        assert!(
            text.contains(r#"kandev_http_requests_total{route="/api/v1/tasks/{id}",method="GET",status="404"}"#),
            "the template, not the path: {text}"
        );
        assert!(
            text.contains(
                r#"kandev_http_requests_total{route="/metrics",method="GET",status="401"}"#
            ),
            "refusals count: {text}"
        );
        assert!(!text.contains("some-task-id"), "{text}");
        assert!(!text.contains(&token), "{text}");
    }
}
