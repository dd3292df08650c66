//! Attacks through the browser: another site's page opening the event stream or posting,
//! a rebound host name, framing; and the proxy that is allowed.

use kandev_testkit::Kandev;
use serde_json::json;

use super::{
    EVIL, assert_refused, assert_ws_refused, create_task, created_task_is_seen, send, task_titles,
    with_toml, ws,
};

#[tokio::test]
async fn cross_site_websocket_hijacking_is_refused() {
    let kandev = Kandev::start_default().await;
    let own = format!("http://{}", kandev.addr());
    // A foreign page must not open the event stream.
    for origin in [
        EVIL,
        "null",
        "http://127.0.0.1:1",
        "http://localhost.evil.example",
    ] {
        let code = if origin == EVIL {
            "ORIGIN_NOT_ALLOWED"
        } else {
            ""
        };
        assert_ws_refused(&kandev, &[("origin", origin)], 403, code).await;
    }
    // The UI's own page and a client without Origin (curl, SDKs) still get the stream.
    let same_origin = ws(kandev.addr(), &[("origin", &own)])
        .await
        .expect("same origin");
    let no_origin = ws(kandev.addr(), &[]).await.expect("no Origin");
    created_task_is_seen(&kandev, &[], &mut [same_origin, no_origin]).await;
}

#[tokio::test]
async fn dns_rebinding_host_is_refused() {
    let kandev = Kandev::start_default().await;
    assert_eq!(
        create_task(&kandev, "secret roadmap", &[]).await.status,
        201
    );
    let port = kandev.addr().port();
    let evil_host = format!("evil.example:{port}");
    let rebound = [("host", evil_host.as_str())];
    for path in [
        "/api/v1/tasks",
        "/api/v1/runtime-flags",
        "/",
        "/app.js",
        "/api/v1/clarifications",
    ] {
        let got = send(&kandev, "GET", path, None, &rebound).await;
        assert_refused(&got, 403, "HOST_NOT_ALLOWED");
        assert!(
            !got.body.to_string().contains("secret roadmap"),
            "{path}: {got}"
        );
    }
    assert_eq!(create_task(&kandev, "planted", &rebound).await.status, 403);
    // The stream refuses a rebound name.
    assert_ws_refused(&kandev, &rebound, 403, "HOST_NOT_ALLOWED").await;
    assert_eq!(
        task_titles(&kandev, None).await,
        ["secret roadmap"],
        "nothing planted"
    );
    // The names the UI is served under.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let got = send(&kandev, "GET", "/", None, &[("host", &host)]).await;
        assert_eq!(got.status, 200, "{host}");
    }
    // /healthz stays probe-able by address (load balancers), and says nothing else.
    let health = send(&kandev, "GET", "/healthz", None, &rebound).await;
    assert_eq!(health.body, json!({"status": "ok"}));
}

#[tokio::test]
async fn allowed_hosts_and_origins_admit_a_proxy() {
    let kandev = with_toml(
        "\n[server]\nallowed_hosts = [\"kandev.example.com\"]\nallowed_origins = [\"https://ops.example.com\"]\n",
    )
    .await;
    let listed = send(
        &kandev,
        "GET",
        "/api/v1/tasks",
        None,
        &[("host", "kandev.example.com")],
    )
    .await;
    assert_eq!(listed.status, 200, "{listed}");
    for (title, headers, status) in [
        // A TLS-terminating proxy: the page is https://kandev.example.com, kandev speaks HTTP.
        (
            "via the proxy",
            &[
                ("host", "kandev.example.com"),
                ("origin", "https://kandev.example.com"),
            ][..],
            201,
        ),
        (
            "from ops",
            &[("origin", "https://ops.example.com")][..],
            201,
        ),
        (
            "from elsewhere",
            &[("origin", "https://ops.example.net")][..],
            403,
        ),
    ] {
        let got = create_task(&kandev, title, headers).await;
        assert_eq!(got.status, status, "{title}: {got}");
    }
    ws(kandev.addr(), &[("origin", "https://ops.example.com")])
        .await
        .expect("an allowed origin opens the stream");
}

#[tokio::test]
async fn cross_origin_task_creation_is_refused() {
    let kandev = Kandev::start_default().await;
    let got = create_task(&kandev, "planted by evil.example", &[("origin", EVIL)]).await;
    assert_refused(&got, 403, "ORIGIN_NOT_ALLOWED");
    // Other state changes from the foreign page: the flag toggle.
    let flags = || async {
        kandev
            .api()
            .get("/api/v1/runtime-flags")
            .await
            .expect_status(200, "flags")
    };
    let flags_before = flags().await;
    let got = send(
        &kandev,
        "PATCH",
        "/api/v1/runtime-flags/features.acpElicitation",
        Some(json!({"override": true})),
        &[("origin", EVIL)],
    )
    .await;
    assert_refused(&got, 403, "ORIGIN_NOT_ALLOWED");
    assert_eq!(flags().await, flags_before, "flag unchanged");
    assert!(
        task_titles(&kandev, None).await.is_empty(),
        "no task was created"
    );
    // Same-origin pages and curl-style clients still create tasks.
    let own = format!("http://{}", kandev.addr());
    assert_eq!(
        create_task(&kandev, "from the UI", &[("origin", &own)])
            .await
            .status,
        201
    );
    assert_eq!(create_task(&kandev, "from curl", &[]).await.status, 201);
    assert_eq!(task_titles(&kandev, None).await.len(), 2);
}

#[tokio::test]
async fn clickjacking_is_refused_by_the_frame_headers() {
    let kandev = Kandev::start_default().await;
    for path in ["/", "/api/v1/tasks", "/nope"] {
        let got = send(&kandev, "GET", path, None, &[]).await;
        assert_eq!(got.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            got.header("content-security-policy"),
            Some("frame-ancestors 'none'"),
            "{path}"
        );
    }
}
