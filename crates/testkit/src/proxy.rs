//! A TCP fault proxy on 127.0.0.1, put between `kandev` and a remote `agentctl` so a test
//! can drop the agent stream for real: [`FaultProxy::cut`] closes every live connection
//! and refuses new ones (accepted and closed at once) until [`FaultProxy::restore`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

#[derive(Debug, Default)]
struct Shared {
    open: AtomicBool,
    live: Mutex<Vec<AbortHandle>>,
    accepted: AtomicUsize,
    refused: AtomicUsize,
}

/// A running proxy to one upstream address.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on an ephemeral 127.0.0.1 port and forwards every connection to `upstream`.
    ///
    /// # Panics
    /// When it cannot bind.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fault proxy: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("fault proxy: local addr");
        let shared = Arc::new(Shared {
            open: AtomicBool::new(true),
            ..Shared::default()
        });
        let state = Arc::clone(&shared);
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !state.open.load(Ordering::SeqCst) {
                    state.refused.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                state.accepted.fetch_add(1, Ordering::SeqCst);
                let task = tokio::spawn(forward(client, upstream));
                let mut live = state.live.lock().unwrap_or_else(PoisonError::into_inner);
                live.retain(|t| !t.is_finished());
                live.push(task.abort_handle());
            }
        });
        Self {
            addr,
            shared,
            acceptor,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://<addr>`, the URL to configure as the remote executor.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Drops every live connection and refuses new ones.
    pub fn cut(&self) {
        self.shared.open.store(false, Ordering::SeqCst);
        let live = std::mem::take(
            &mut *self
                .shared
                .live
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for task in live {
            task.abort();
        }
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.shared.open.store(true, Ordering::SeqCst);
    }

    /// Connections forwarded so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections refused while cut.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut();
    }
}

/// Copies both ways until either side closes; aborting the task closes both sockets.
async fn forward(mut client: TcpStream, upstream: SocketAddr) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await?;
        Ok(buf.to_vec())
    }

    #[tokio::test]
    async fn forwards_then_cuts_live_connections_refuses_new_ones_and_restores() {
        let proxy = FaultProxy::start(echo_server().await).await;
        let mut live = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(round_trip(&mut live).await.expect("echo"), b"ping");

        proxy.cut();
        let mut buf = [0u8; 4];
        let n = live.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0, "the live connection is closed by the cut");
        let mut refused = TcpStream::connect(proxy.addr()).await.expect("tcp accept");
        assert!(round_trip(&mut refused).await.is_err(), "refused while cut");
        assert_eq!(proxy.refused(), 1);

        proxy.restore();
        let mut again = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(round_trip(&mut again).await.expect("echo"), b"ping");
        assert_eq!(proxy.accepted(), 2);
    }
}
