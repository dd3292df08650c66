//! The drain on SIGTERM or SIGINT: [`STEPS`], in order. Each step logs one line
//! (`draining: …`) as it starts; a second signal ends the process at once.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::state::AppState;

/// One step of the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `/readyz` answers 503 and new sessions are refused (503 `DRAINING`); the rest is
    /// still served for `drain.grace`, so a load balancer stops routing here before
    /// connections are refused.
    StopAdmitting,
    /// With replicas and a remote executor: every session live here is handed on (its
    /// link detached, agentctl keeps it, its lease made to run out now), so another
    /// replica takes it over at its next renewal instead of after the lease.
    HandOver,
    /// No new connections; operator WebSockets are closed (1001) and the requests in
    /// flight finish, for at most `drain.finish_within`.
    FinishRequests,
    /// Every session still live here ends `CANCELLED`: agentctl answers its pending
    /// elicitations `cancel` and stops the agent; a local agentctl exits.
    StopSessions,
}

/// The drain, in order.
pub const STEPS: [Step; 4] = [
    Step::StopAdmitting,
    Step::HandOver,
    Step::FinishRequests,
    Step::StopSessions,
];

/// The running HTTP server: how to stop it accepting, and its task.
pub struct HttpServer {
    /// Starts the graceful shutdown.
    pub stop: oneshot::Sender<()>,
    /// Ends once the server has shut down.
    pub task: JoinHandle<std::io::Result<()>>,
}

/// Runs [`STEPS`]; returns what the HTTP server ended with (`None`: it did not end
/// within `drain.finish_within`, and the connections still open are dropped).
pub async fn drain(state: &AppState, server: HttpServer) -> Option<std::io::Result<()>> {
    let mut server = Some(server);
    let mut served = None;
    for step in STEPS {
        match step {
            Step::StopAdmitting => {
                state.drain.begin();
                let grace = state.config.drain.grace;
                tracing::info!(?grace, "draining: not ready, no new sessions");
                tokio::time::sleep(grace).await;
            }
            Step::HandOver => {
                let handed = state.sessions.hand_over_all().await;
                tracing::info!(
                    sessions = handed,
                    "draining: handed sessions to the other replicas"
                );
            }
            Step::FinishRequests => {
                let within = state.config.drain.finish_within;
                tracing::info!(?within, "draining: finishing the requests in flight");
                if let Some(server) = server.take() {
                    served = finish_requests(state, server, within).await;
                }
            }
            Step::StopSessions => {
                let live = state.sessions.attached();
                tracing::info!(sessions = live, "draining: stopping the live sessions");
                state.sessions.shutdown_all().await;
            }
        }
    }
    tracing::info!("drained");
    served
}

async fn finish_requests(
    state: &AppState,
    server: HttpServer,
    within: Duration,
) -> Option<std::io::Result<()>> {
    let _ = server.stop.send(());
    state.drain.close_connections();
    match tokio::time::timeout(within, server.task).await {
        Ok(Ok(result)) => Some(result),
        Ok(Err(panicked)) => Some(Err(std::io::Error::other(panicked.to_string()))),
        Err(_) => {
            tracing::warn!(?within, "draining: requests still in flight were cut off");
            None
        }
    }
}

/// SIGINT and SIGTERM, listened for from the moment [`Signals::listen`] returns: made
/// before the server takes its first request, so a signal sent as soon as kandev answers
/// is drained, never the default action's abrupt end.
pub struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts listening (a listener that cannot be installed is one that never fires).
    pub fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves on the next SIGINT or SIGTERM.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
                let received = match signal {
                    Some(signal) => signal.recv().await.is_some(),
                    None => false,
                };
                if !received {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = recv(&mut self.interrupt) => {}
                () = recv(&mut self.terminate) => {}
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// After the first signal: a second one exits at once (exit code 130). Local agentctls
/// still go, as their stdin pipe closes with this process.
pub fn exit_on_second_signal(mut signals: Signals) {
    tokio::spawn(async move {
        signals.next().await;
        tracing::warn!("second signal: exiting without finishing the drain");
        std::process::exit(130);
    });
}
