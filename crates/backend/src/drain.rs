//! [`Drain`]: whether this process is on its way out. Set once, on SIGTERM; from then on
//! `/readyz` answers 503 (the load balancer stops sending new work) and new sessions are
//! refused with 503 `DRAINING`. When the HTTP server stops accepting connections,
//! [`Drain::close_connections`] closes the operator WebSockets, so its graceful shutdown
//! only waits for the requests in flight. The steps and their order are `shutdown`'s.

use std::sync::Arc;

use tokio::sync::watch;

/// Shared by every part that acts differently once draining. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Drain {
    state: Arc<watch::Sender<bool>>,
    closing: Arc<watch::Sender<bool>>,
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

impl Drain {
    /// Not draining.
    pub fn new() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(false)),
            closing: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Starts draining (idempotent). Returns whether this call started it.
    pub fn begin(&self) -> bool {
        !self.state.send_replace(true)
    }

    /// Whether draining has begun.
    pub fn is_draining(&self) -> bool {
        *self.state.borrow()
    }

    /// Resolves once draining has begun (at once if it has).
    pub async fn started(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives as long as `self`, so this only ends once it is true.
        let _ = rx.wait_for(|draining| *draining).await;
    }

    /// Tells long-lived connections (operator WebSockets) to close now.
    pub fn close_connections(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once long-lived connections should close.
    pub async fn closing(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|closing| *closing).await;
    }

    /// [`Draining`] once draining: a new session would be cut off at once.
    pub fn admit_new_session(&self) -> Result<(), Draining> {
        if self.is_draining() {
            return Err(Draining);
        }
        Ok(())
    }
}

/// kandev is shutting down: no new session starts here (503 `DRAINING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "kandev is shutting down and takes no new sessions; start it on another replica or after the restart"
)]
pub struct Draining;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn begins_once_and_wakes_waiters() {
        let drain = Drain::new();
        assert!(!drain.is_draining());
        drain.admit_new_session().expect("not draining");
        let waiter = tokio::spawn({
            let drain = drain.clone();
            async move { drain.started().await }
        });
        assert!(drain.begin(), "the first call starts it");
        assert!(!drain.begin(), "the second does nothing more");
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("no panic");
        // (Its 503 `DRAINING` is pinned beside the HTTP mapping, http/error.rs.)
        assert_eq!(drain.admit_new_session(), Err(Draining));
        // Already draining: resolves at once.
        tokio::time::timeout(std::time::Duration::from_secs(5), drain.started())
            .await
            .expect("at once");
        let closing = tokio::spawn({
            let drain = drain.clone();
            async move { drain.closing().await }
        });
        drain.close_connections();
        tokio::time::timeout(std::time::Duration::from_secs(5), closing)
            .await
            .expect("woken")
            .expect("no panic");
    }
}
