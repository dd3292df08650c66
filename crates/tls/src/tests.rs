//! Real sockets, certificates generated at run time with rcgen.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use kandev_testkit::pki::TestPki;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A CA and a leaf for `localhost`/127.0.0.1 it signed, as PEM files in `dir` (the kit's).
fn pki(dir: &Path, name: &str) -> TestPki {
    TestPki::new(dir, name)
}

/// Serves `GET /` answering the peer address, on a fresh port; TLS when `tls` is given.
async fn serve(tls: Option<Arc<ServerConfig>>) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listener = ServeListener::new(tcp, tls).expect("listener");
    let addr = axum::serve::Listener::local_addr(&listener).expect("addr");
    let app = Router::new().route(
        "/",
        get(|ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>| async move { peer.to_string() }),
    );
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<PeerAddr>(),
        )
        .await
    });
    addr
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

async fn https_get(addr: SocketAddr, ca: Option<&Path>) -> std::io::Result<(SocketAddr, String)> {
    let config = client_config(ca).expect("client config");
    let connector = tokio_rustls::TlsConnector::from(config);
    let tcp = TcpStream::connect(addr).await?;
    let local = tcp.local_addr()?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(REQUEST).await?;
    let mut raw = Vec::new();
    tls.read_to_end(&mut raw).await?;
    Ok((local, String::from_utf8_lossy(&raw).into_owned()))
}

#[tokio::test]
async fn https_works_with_the_ca_that_signed_the_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(dir.path(), "good");
    let addr = serve(Some(
        server_config(&pki.cert, &pki.key).expect("server config"),
    ))
    .await;
    let (local, response) = https_get(addr, Some(&pki.ca)).await.expect("https");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(
        response.ends_with(&local.to_string()),
        "the connect info is the client's address: {response}"
    );
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_and_the_server_serves_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = pki(dir.path(), "good");
    let other = pki(dir.path(), "other");
    let addr = serve(Some(server_config(&good.cert, &good.key).expect("config"))).await;
    let err = https_get(addr, Some(&other.ca))
        .await
        .expect_err("the wrong CA must not verify");
    assert!(
        err.to_string().contains("invalid peer certificate"),
        "refused for the certificate: {err}"
    );
    let (_, response) = https_get(addr, Some(&good.ca))
        .await
        .expect("still serving");
    assert!(response.starts_with("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn a_client_that_stalls_its_handshake_does_not_hold_up_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(dir.path(), "good");
    let addr = serve(Some(server_config(&pki.cert, &pki.key).expect("config"))).await;
    let _stalled = TcpStream::connect(addr).await.expect("connect");
    // Well inside HANDSHAKE_TIMEOUT: the stalled client is still being waited for.
    let next = tokio::time::timeout(Duration::from_secs(5), https_get(addr, Some(&pki.ca)))
        .await
        .expect("served while the other handshake waits")
        .expect("https");
    assert!(next.1.starts_with("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn without_a_config_it_serves_plain_http() {
    let addr = serve(None).await;
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(REQUEST).await.expect("write");
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.expect("read");
    assert!(raw.starts_with("HTTP/1.1 200 OK"), "{raw}");
}

#[test]
fn bad_material_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = pki(dir.path(), "a");
    let b = pki(dir.path(), "b");
    let missing = dir.path().join("missing.pem");
    let err = server_config(&missing, &a.key).expect_err("missing cert");
    assert!(err.to_string().contains("missing.pem"), "{err}");
    let err = server_config(&a.cert, &missing).expect_err("missing key");
    assert!(err.to_string().contains("private key"), "{err}");
    let err = server_config(&a.cert, &b.key).expect_err("key of another certificate");
    assert!(matches!(err, TlsError::Invalid { .. }), "{err}");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").expect("write");
    let err = client_config(Some(&empty)).expect_err("no certificate");
    assert!(matches!(err, TlsError::Empty { .. }), "{err}");
    assert!(err.to_string().contains("empty.pem"), "{err}");
    client_config(Some(&a.ca)).expect("a CA file is fine");
}
