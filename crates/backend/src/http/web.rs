//! The operator web UI: the static files of `apps/web/static`, embedded into the
//! `kandev` binary at build time (no Node needed to build or run it) and served at `/`.
//!
//! Routing inside the UI is hash-based (`#/sessions/<id>`), so the server only ever
//! serves real files: `/` is `index.html`, anything else is looked up verbatim.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

/// The embedded `apps/web/static` directory.
#[derive(RustEmbed)]
#[folder = "../../apps/web/static"]
struct WebAssets;

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
}
