//! `GET /healthz` (the process answers) and `GET /readyz` (it can do its work: the
//! database answers within [`PROBE_DEADLINE`], every migration is applied, and it is
//! not draining). Both JSON; both exempt from the `Host` check, for probes by address.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::state::AppState;

/// How long the database may take to answer the readiness probe.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(2);

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Response {
    let draining = state.drain.is_draining();
    let started = Instant::now();
    let probe = tokio::time::timeout(PROBE_DEADLINE, state.stores.health.probe()).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (database, migrations) = match probe {
        Ok(Ok(applied)) => (
            json!({"ok": true, "latency_ms": latency_ms}),
            json!({"ok": applied.complete(), "applied": applied.applied, "expected": applied.expected}),
        ),
        Ok(Err(err)) => (
            json!({"ok": false, "latency_ms": latency_ms, "error": err.to_string()}),
            json!({"ok": false, "error": "unknown: the database did not answer"}),
        ),
        Err(_) => (
            json!({"ok": false, "latency_ms": latency_ms,
                   "error": format!("no answer within {PROBE_DEADLINE:?}")}),
            json!({"ok": false, "error": "unknown: the database did not answer"}),
        ),
    };
    let ready = !draining && database["ok"] == true && migrations["ok"] == true;
    if !ready {
        tracing::debug!(%database, %migrations, draining, "not ready");
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {
            "database": database,
            "migrations": migrations,
            "draining": {"ok": !draining},
        },
    });
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(router: &Router, uri: &str, host: &str) -> (StatusCode, Value) {
        let request = Request::get(uri)
            .header("host", host)
            .body(Body::empty())
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn ready_until_draining_and_probed_by_address() {
        let (state, _) = crate::testing::app().await;
        let router = crate::http::router(state.clone());
        // A load balancer probes by address: no Host check on the probes.
        let (status, body) = get(&router, "/readyz", "10.1.2.3:8080").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "ready");
        assert_eq!(body["checks"]["database"]["ok"], true);
        assert_eq!(body["checks"]["migrations"]["ok"], true);
        let (status, _) = get(&router, "/healthz", "10.1.2.3:8080").await;
        assert_eq!(status, StatusCode::OK);
        let (status, _) = get(&router, "/api/v1/agents", "10.1.2.3:8080").await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "the API keeps its Host check"
        );

        state.drain.begin();
        let (status, body) = get(&router, "/readyz", "127.0.0.1:8080").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["status"], "not_ready");
        assert_eq!(body["checks"]["draining"]["ok"], false);
        assert_eq!(body["checks"]["database"]["ok"], true);
        let (status, body) = get(&router, "/healthz", "127.0.0.1:8080").await;
        assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    }
}
