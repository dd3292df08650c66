//! A TCP fault proxy on 127.0.0.1, put between `kandev` and a remote `agentctl` so a test
//! can drop the agent stream for real: [`FaultProxy::cut`] closes every live connection
//! and refuses new ones (accepted and closed at once) until [`FaultProxy::restore`].
//! [`FaultProxy::freeze`] swallows what the upstream sends (accepted by the socket, never
//! forwarded), which is what a stream dying mid-write does to the frames in flight.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

#[derive(Debug, Default)]
struct Shared {
    open: AtomicBool,
    frozen: AtomicBool,
    live: Mutex<Vec<AbortHandle>>,
    accepted: AtomicUsize,
    refused: AtomicUsize,
    swallowed: AtomicUsize,
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
                let task = tokio::spawn(forward(client, upstream, Arc::clone(&state)));
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

    /// Accepts connections again and forwards both ways again (ends a [`FaultProxy::freeze`]).
    pub fn restore(&self) {
        self.shared.frozen.store(false, Ordering::SeqCst);
        self.shared.open.store(true, Ordering::SeqCst);
    }

    /// From now on, what the upstream sends is read and dropped (the downstream hears
    /// nothing), while what the downstream sends still goes through; until
    /// [`FaultProxy::restore`].
    pub fn freeze(&self) {
        self.shared.frozen.store(true, Ordering::SeqCst);
    }

    /// Connections forwarded so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections refused while cut.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Bytes from the upstream dropped while frozen.
    pub fn swallowed(&self) -> usize {
        self.shared.swallowed.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut();
    }
}

/// Copies both ways until both sides close (dropping what the upstream sends while
/// frozen); aborting the task closes both sockets.
async fn forward(client: TcpStream, upstream: SocketAddr, state: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = server_read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            if state.frozen.load(Ordering::SeqCst) {
                state.swallowed.fetch_add(n, Ordering::SeqCst);
            } else if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn a_frozen_proxy_swallows_what_the_upstream_sends_until_restored() {
        let proxy = FaultProxy::start(echo_server().await).await;
        let mut live = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(round_trip(&mut live).await.expect("echo"), b"ping");

        proxy.freeze();
        live.write_all(b"lost").await.expect("write");
        crate::wait::poll_until("the echo to be swallowed", crate::DEADLINE, || async {
            (proxy.swallowed() == 4).then_some(())
        })
        .await;
        proxy.restore();
        assert_eq!(
            round_trip(&mut live).await.expect("echo"),
            b"ping",
            "what was sent while frozen never arrives"
        );

        proxy.freeze();
        proxy.cut();
        proxy.restore();
        let mut again = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(round_trip(&mut again).await.expect("echo"), b"ping");
    }
}
