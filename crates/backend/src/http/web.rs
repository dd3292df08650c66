//! The operator web UI: the static files of `apps/web/static`, embedded into the
//! `kandev` binary at build time (no Node needed to build or run it) and served at `/`.
//!
//! Routing inside the UI is hash-based (`#/sessions/<id>`), so the server only ever
//! serves real files: `/` is `index.html`, anything else is looked up verbatim.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::RustEmbed;

use crate::error::AppError;

/// The embedded `apps/web/static` directory.
#[derive(RustEmbed)]
#[folder = "../../apps/web/static"]
struct WebAssets;

/// The routes of the embedded UI: `GET`/`HEAD` of `/` and of every file path.
///
/// It has no router fallback, so it merges into the API router (`.merge(web::router())`)
/// beside that router's own fallback. The API's routes are more specific and win over
/// the catch-all; an unknown path under `/api/` still gets the API's JSON 404, whatever
/// the method, and an unknown file a plain 404.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/", get(index))
        .route("/{*path}", get(file).fallback(other_method))
}

async fn index() -> Response {
    asset("/")
}

async fn file(uri: Uri) -> Response {
    if is_api(uri.path()) {
        return api_not_found(uri.path());
    }
    asset(uri.path())
}

async fn other_method(uri: Uri) -> Response {
    if is_api(uri.path()) {
        return api_not_found(uri.path());
    }
    StatusCode::METHOD_NOT_ALLOWED.into_response()
}

fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

fn api_not_found(path: &str) -> Response {
    AppError::not_found(format!("no route for {path}")).into_response()
}

/// The response for a request path: the embedded file with its content type, or 404.
pub fn asset(path: &str) -> Response {
    let name = match path.trim_start_matches('/') {
        "" => "index.html",
        other => other,
    };
    // The API namespace is never the UI's: an unknown API route stays a JSON-less 404.
    if name.starts_with("api/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let Some(file) = WebAssets::get(name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mime = content_type(name, file.metadata.mimetype());
    let mut response = Response::new(Body::from(file.data.into_owned()));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&mime) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    // The files change with every build of kandev; revalidate instead of caching stale UI.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The content type for a file: JavaScript modules must be served as JavaScript, text
/// types carry their charset.
fn content_type(name: &str, guessed: &str) -> String {
    let base = if name.ends_with(".js") || name.ends_with(".mjs") {
        "text/javascript"
    } else {
        guessed
    };
    if base.starts_with("text/") && !base.contains("charset") {
        format!("{base}; charset=utf-8")
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content_type_of(path: &str) -> (StatusCode, Option<String>) {
        let response = asset(path);
        let ct = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (response.status(), ct)
    }

    #[test]
    fn root_serves_index_html() {
        let (status, ct) = content_type_of("/");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct.as_deref(), Some("text/html; charset=utf-8"));
        let index = WebAssets::get("index.html").expect("index.html is embedded");
        let text = String::from_utf8_lossy(&index.data);
        assert!(
            text.contains(r#"src="/app.js""#),
            "index.html loads the app module"
        );
    }

    #[test]
    fn modules_and_styles_have_their_content_types() {
        for (path, want) in [
            ("/app.js", "text/javascript; charset=utf-8"),
            ("/clarification.js", "text/javascript; charset=utf-8"),
            ("/style.css", "text/css; charset=utf-8"),
        ] {
            let (status, ct) = content_type_of(path);
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(ct.as_deref(), Some(want), "{path}");
        }
    }

    #[test]
    fn every_module_the_ui_imports_is_embedded() {
        let names: Vec<String> = WebAssets::iter().map(|n| n.into_owned()).collect();
        for module in [
            "api.js",
            "ws.js",
            "i18n.js",
            "board.js",
            "session.js",
            "clarification.js",
            "settings.js",
            "notifications.js",
            "login.js",
        ] {
            assert!(
                names.iter().any(|n| n == module),
                "{module} missing: {names:?}"
            );
        }
    }

    #[test]
    fn unknown_files_and_api_paths_are_not_found() {
        assert_eq!(asset("/nope.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("/api/v1/unknown").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("/../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }

    /// One raw HTTP/1.1 request over a real socket; returns (status line, headers+body).
    async fn http(addr: std::net::SocketAddr, method: &str, path: &str) -> (String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (status, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
        (status.to_owned(), rest.to_owned())
    }

    #[tokio::test]
    async fn merges_beside_an_api_with_its_own_fallback() {
        let api = Router::new()
            .nest(
                "/api/v1",
                Router::new().route("/ping", get(|| async { "pong" })),
            )
            .fallback(|| async { (StatusCode::NOT_FOUND, "api-fallback") })
            .merge(router());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move { axum::serve(listener, api).await });

        let (status, rest) = http(addr, "GET", "/").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            rest.to_ascii_lowercase()
                .contains("content-type: text/html; charset=utf-8"),
            "{rest}"
        );
        assert!(rest.contains(r#"src="/app.js""#), "index.html body");

        let (status, rest) = http(addr, "GET", "/session.js").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            rest.to_ascii_lowercase()
                .contains("content-type: text/javascript"),
            "{rest}"
        );

        let (status, rest) = http(addr, "GET", "/api/v1/ping").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(rest.ends_with("pong"), "the API route wins: {rest}");

        for method in ["GET", "POST", "DELETE"] {
            let (status, rest) = http(addr, method, "/api/v1/nope").await;
            assert_eq!(status, "HTTP/1.1 404 Not Found", "{method}");
            assert!(
                rest.contains(r#""code":"NOT_FOUND""#)
                    && rest.contains("no route for /api/v1/nope"),
                "unknown API paths keep the API's JSON 404 ({method}): {rest}"
            );
        }
        let (status, rest) = http(addr, "GET", "/elsewhere").await;
        assert_eq!(status, "HTTP/1.1 404 Not Found");
        assert!(
            !rest.contains("NOT_FOUND"),
            "an unknown file is a plain 404: {rest}"
        );

        let (status, _) = http(addr, "HEAD", "/style.css").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        let (status, _) = http(addr, "POST", "/").await;
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
        let (status, _) = http(addr, "GET", "/missing.js").await;
        assert_eq!(status, "HTTP/1.1 404 Not Found");
        server.abort();
    }
}
