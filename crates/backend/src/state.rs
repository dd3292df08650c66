//! [`AppState`]: what every handler shares.

use std::sync::Arc;

use crate::agent_link::AgentConnector;
use crate::auth::Auth;
use crate::clarifications::Clarifications;
use crate::config::Config;
use crate::drain::Drain;
use crate::events::{EventHub, Publisher};
use crate::flags::Flags;
use crate::notifications::Notifier;
use crate::sessions::SessionRegistry;
use crate::store::Stores;

/// Shared by every handler: one `Arc`, since axum clones the state for every request and
/// middleware, and a clone of the parts themselves counted some thirty references each time.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// What every handler shares, behind the [`AppState`] handle.
#[derive(Debug)]
pub struct Services {
    /// The stores.
    pub stores: Stores,
    /// The configuration.
    pub config: Arc<Config>,
    /// Runtime flags.
    pub flags: Arc<Flags>,
    /// Where committed changes are published.
    pub publisher: Publisher,
    /// Operator events, as the WebSocket sends them.
    pub hub: EventHub,
    /// The sessions live in this process.
    pub sessions: Arc<SessionRegistry>,
    /// The clarifications.
    pub clarifications: Clarifications,
    /// Operators and their sessions (docs/architecture.md §10).
    pub auth: Arc<Auth>,
    /// Set once shutting down (readiness, new sessions, operator WebSockets).
    pub drain: Drain,
}

impl AppState {
    /// Wires the state from its parts and starts the operator feed (so it must run
    /// inside a tokio runtime).
    pub fn new(
        stores: Stores,
        config: Config,
        flags: Flags,
        connector: Arc<dyn AgentConnector>,
    ) -> Self {
        let auth = Arc::new(Auth::from_config(&config));
        let config = Arc::new(config);
        let flags = Arc::new(flags);
        let hub = EventHub::new();
        let (publisher, changes) = Publisher::new();
        let notifier = Notifier::new(
            stores.clone(),
            publisher.clone(),
            config.notifications.clone(),
        )
        .with_webhooks(crate::reach::Webhooks::from_config(stores.clone(), &config));
        let clarifications =
            Clarifications::new(stores.clone(), publisher.clone(), notifier.clone());
        let sessions = Arc::new(SessionRegistry::new(
            stores.clone(),
            publisher.clone(),
            notifier,
            clarifications.clone(),
            Arc::clone(&config),
            Arc::clone(&flags),
            connector,
        ));
        crate::reach::start(stores.clone(), &config, &sessions.ownership.replica_id);
        // The only replica has no one to tell: no NOTIFY for each change, no LISTEN.
        let peers = stores.bus.is_shared() && !sessions.ownership.single_replica;
        let peers = peers.then(|| {
            let replica = sessions.ownership.replica_id.clone();
            let (tell, told) = tokio::sync::mpsc::unbounded_channel();
            let (hear, heard) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(crate::events::bus::send(
                stores.clone(),
                replica.clone(),
                told,
            ));
            tokio::spawn(crate::events::bus::listen(
                stores.clone(),
                Arc::clone(&flags),
                hear,
                replica,
            ));
            crate::events::feed::Peers { tell, heard }
        });
        tokio::spawn(crate::events::feed::run(
            stores.clone(),
            changes,
            hub.clone(),
            peers,
        ));
        Self(Arc::new(Services {
            stores,
            config,
            flags,
            publisher,
            hub,
            sessions,
            clarifications,
            auth,
            drain: Drain::new(),
        }))
    }
}
