//! The loopback socket the bench agents report to: every JSON line from every agent
//! lands in one channel, in arrival order.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Agent reports, as they arrive.
pub struct Collector {
    addr: SocketAddr,
    lines: mpsc::UnboundedReceiver<Value>,
}

impl Collector {
    /// Listens on an ephemeral 127.0.0.1 port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(socket).lines();
                    while let Ok(Some(line)) = reader.next_line().await {
                        if let Ok(value) = serde_json::from_str::<Value>(&line) {
                            let _ = tx.send(value);
                        }
                    }
                });
            }
        });
        Ok(Self { addr, lines })
    }

    /// `127.0.0.1:port`, the agents' `BENCH_REPORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next report, or `None` when `timeout` passes first.
    pub async fn next(&mut self, timeout: Duration) -> Option<Value> {
        tokio::time::timeout(timeout, self.lines.recv())
            .await
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn lines_from_every_connection_arrive_and_silence_times_out() {
        let mut collector = Collector::start().await.expect("start");
        let mut a = tokio::net::TcpStream::connect(collector.addr())
            .await
            .expect("a");
        a.write_all(b"{\"n\": 1}\nnot json\n").await.expect("write");
        let first = collector.next(Duration::from_secs(10)).await;
        assert_eq!(first, Some(serde_json::json!({"n": 1})));
        let mut b = tokio::net::TcpStream::connect(collector.addr())
            .await
            .expect("b");
        b.write_all(b"{\"n\": 2}\n").await.expect("write");
        let second = collector.next(Duration::from_secs(10)).await;
        assert_eq!(second, Some(serde_json::json!({"n": 2})));
        assert_eq!(collector.next(Duration::from_millis(50)).await, None);
    }
}
