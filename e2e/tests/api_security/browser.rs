//! The browser's sign-in: an HTTP-only strict cookie, cleared on sign-out and honoured
//! by a replica with the same config.

use kandev_backend::auth::token_sha256;

use super::{ALICE, EVIL, assert_refused, login, me, send, sign_in, with_auth, with_toml};

#[tokio::test]
async fn browser_sign_in_sets_an_http_only_strict_cookie_and_sign_out_clears_it() {
    let kandev = with_auth().await;
    let wrong = login(&kandev, "kdv_wrong", &[]).await;
    assert!(wrong.header("set-cookie").is_none());
    assert_refused(&wrong, 401, "INVALID_TOKEN");

    let response = login(&kandev, ALICE, &[]).await;
    let set_cookie = response.header("set-cookie").expect("cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains(ALICE), "the cookie is not the token");
    assert_eq!(response.body["operator"], "alice");
    let cookie = set_cookie.split(';').next().expect("pair").to_owned();
    assert_eq!(
        me(&kandev, &[("cookie", &cookie)]).await.body["operator"],
        "alice"
    );

    // Signing in from another site (login CSRF) is refused like any cross-origin POST.
    let csrf = login(&kandev, ALICE, &[("origin", EVIL)]).await;
    assert!(csrf.header("set-cookie").is_none());
    assert_eq!(csrf.status, 403);

    let out = send(
        &kandev,
        "POST",
        "/api/v1/auth/logout",
        None,
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(out.status, 204);
    let cleared = out.header("set-cookie").expect("cleared");
    assert!(
        cleared.starts_with("kandev_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn a_session_cookie_verifies_on_a_replica_with_the_same_config() {
    let first = with_auth().await;
    let cookie = sign_in(&first, ALICE).await;
    // Another process (a replica, or this one restarted) with the same [auth].
    let replica = with_auth().await;
    assert_eq!(
        me(&replica, &[("cookie", &cookie)]).await.body["operator"],
        "alice"
    );
    // Rotating alice's token signs her out everywhere.
    let rotated = with_toml(&format!(
        "\n[auth]\nrequired = true\n[[auth.operators]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n",
        token_sha256("kdv_rotated")
    ))
    .await;
    let got = me(&rotated, &[("cookie", &cookie)]).await;
    assert_refused(&got, 401, "INVALID_SESSION");
}
