//! Reaching the operator where they are (docs/architecture.md §15): what tells someone
//! who is not looking at kandev's tab that a question waits, and how long it will.
//!
//! - [`deadline`]: a record's `expires_at`, as agentctl sends it.
//! - [`signature`]: the `Kandev-Signature` header every delivery carries (HMAC-SHA256
//!   over a timestamp and the body), and its check.
//! - [`payload`]: the bodies, kandev's JSON or a Slack message; the question text only
//!   for a hook that opts in.
//! - [`webhooks`]: [`Webhooks`], which writes deliveries into the outbox when a
//!   question is asked, settled, or a turn ends, with its reminder and escalation
//!   scheduled as rows due later.
//! - [`answer_links`]: the signed single-use links a hook may carry to answer its one
//!   question without signing in (docs/decisions/0016).
//! - [`slack`]: Slack's button clicks coming back, verified (`v0`) and read as answers.
//! - [`dispatch`]: the loop that claims due rows and sends them, retrying with
//!   exponential backoff and jitter, at least once, once across replicas.

pub mod answer_links;
pub mod deadline;
pub mod dispatch;
pub mod payload;
pub mod signature;
pub mod slack;
pub mod webhooks;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod reminder_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use webhooks::Webhooks;

use crate::config::Config;
use crate::store::Stores;

/// Starts sending the outbox (after writing what a previous run left unwritten), when
/// any hook is configured. Runs inside a tokio runtime.
pub fn start(stores: Stores, config: &Config, replica_id: &str) {
    if config.notifications.webhooks.is_empty() {
        return;
    }
    let webhooks = Webhooks::from_config(stores.clone(), config);
    let dispatcher = dispatch::Dispatcher::new(
        stores,
        std::sync::Arc::new(config.notifications.clone()),
        replica_id,
    );
    tokio::spawn(async move {
        match webhooks.catch_up().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                deliveries = n,
                "webhook deliveries written for questions still waiting"
            ),
            Err(err) => tracing::warn!(error = %err, "webhook catch-up failed"),
        }
        dispatcher.run().await;
    });
}
