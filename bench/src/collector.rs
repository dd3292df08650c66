//! The loopback socket the bench agents report to: every JSON line from every agent
//! lands in one channel, in arrival order; a command line can go back to every agent
//! (the sweep's "send at this rate").

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// The command channel of each connected agent.
type Agents = Arc<Mutex<Vec<mpsc::UnboundedSender<String>>>>;

/// Agent reports, as they arrive.
pub struct Collector {
    addr: SocketAddr,
    lines: mpsc::UnboundedReceiver<Value>,
    agents: Agents,
}

impl Collector {
    /// Listens on an ephemeral 127.0.0.1 port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, lines) = mpsc::unbounded_channel();
        let agents = Agents::default();
        let registry = Arc::clone(&agents);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                let (read, mut write) = socket.into_split();
                let (commands, mut pending) = mpsc::unbounded_channel::<String>();
                registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(commands);
                tokio::spawn(async move {
                    while let Some(line) = pending.recv().await {
                        if write.write_all(line.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(read).lines();
                    while let Ok(Some(line)) = reader.next_line().await {
                        if let Ok(value) = serde_json::from_str::<Value>(&line) {
                            let _ = tx.send(value);
                        }
                    }
                });
            }
        });
        Ok(Self {
            addr,
            lines,
            agents,
        })
    }

    /// Sends `command` as one line to every agent connected so far; how many got it.
    pub fn broadcast(&self, command: &Value) -> usize {
        let line = format!("{command}\n");
        let mut agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        agents.retain(|agent| agent.send(line.clone()).is_ok());
        agents.len()
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

        assert_eq!(collector.broadcast(&serde_json::json!({"go": 1})), 2);
        for socket in [&mut a, &mut b] {
            let mut line = String::new();
            BufReader::new(socket)
                .read_line(&mut line)
                .await
                .expect("read");
            assert_eq!(line, "{\"go\":1}\n");
        }
    }
}
