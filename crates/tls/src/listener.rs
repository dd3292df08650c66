//! [`ServeListener`]: plain or TLS connections for `axum::serve`, with TCP_NODELAY.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to complete its TLS handshake before it is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many finished handshakes may wait for the server to take them.
const READY_BACKLOG: usize = 64;

/// The listener both `kandev` and `agentctl` serve on.
pub struct ServeListener {
    local: SocketAddr,
    inner: Inner,
}

enum Inner {
    Plain(TcpListener),
    Tls {
        ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
        acceptor_task: JoinHandle<()>,
    },
}

impl std::fmt::Debug for ServeListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeListener")
            .field("local", &self.local)
            .field("tls", &self.is_tls())
            .finish()
    }
}

impl ServeListener {
    /// Serves `tcp` as it is, or behind TLS with `tls`.
    pub fn new(tcp: TcpListener, tls: Option<Arc<ServerConfig>>) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let inner = match tls {
            None => Inner::Plain(tcp),
            Some(config) => {
                let (tx, ready) = mpsc::channel(READY_BACKLOG);
                let acceptor_task = tokio::spawn(accept_tls(tcp, TlsAcceptor::from(config), tx));
                Inner::Tls {
                    ready,
                    acceptor_task,
                }
            }
        };
        Ok(Self { local, inner })
    }

    /// Whether connections speak TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.inner, Inner::Tls { .. })
    }
}

impl Drop for ServeListener {
    fn drop(&mut self) {
        // The accept loop owns the socket: stop it, so the port closes with the server.
        if let Inner::Tls { acceptor_task, .. } = &self.inner {
            acceptor_task.abort();
        }
    }
}

impl axum::serve::Listener for ServeListener {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stream, SocketAddr) {
        match &mut self.inner {
            Inner::Plain(tcp) => {
                let (stream, addr) = accept_tcp(tcp).await;
                (Stream::Plain(stream), addr)
            }
            Inner::Tls { ready, .. } => match ready.recv().await {
                Some((stream, addr)) => (Stream::Tls(Box::new(stream)), addr),
                // The accept loop is gone (aborted on drop): nothing more will come.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The client's address, as `ConnectInfo<PeerAddr>` (use
/// `into_make_service_with_connect_info::<PeerAddr>()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, ServeListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, ServeListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

/// Accepts the next TCP connection, riding out transient errors the way `axum::serve`
/// does for its own listener.
async fn accept_tcp(tcp: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match tcp.accept().await {
            Ok((stream, addr)) => {
                // Small, latency-bound frames (operator WS, agent stream): no Nagle delay.
                if let Err(err) = stream.set_nodelay(true) {
                    tracing::debug!(error = %err, "cannot set TCP_NODELAY");
                }
                return (stream, addr);
            }
            Err(err) if is_connection_error(&err) => {}
            Err(err) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::error!(error = %err, "accept failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Accepts TCP connections and completes each handshake in its own task.
async fn accept_tls(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, addr) = accept_tcp(&tcp).await;
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, addr)).await;
                }
                // A scanner or a client that does not trust the certificate: not worth a warning.
                Ok(Err(err)) => tracing::debug!(%addr, error = %err, "TLS handshake failed"),
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        });
    }
}

/// One accepted connection.
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}
