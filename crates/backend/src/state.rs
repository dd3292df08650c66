//! [`AppState`]: what every handler shares.

use std::sync::Arc;

use crate::auth::Auth;
use crate::config::Config;
use crate::db::Db;
use crate::events::EventHub;
use crate::flags::Flags;
use crate::sessions::SessionRuntime;
use crate::sessions::link::AgentConnector;

/// Shared by every handler. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// The configuration.
    pub config: Arc<Config>,
    /// Runtime flags.
    pub flags: Arc<Flags>,
    /// Operator events.
    pub hub: EventHub,
    /// Live sessions.
    pub runtime: Arc<SessionRuntime>,
    /// Operators and their sessions (ARCHITECTURE §10).
    pub auth: Arc<Auth>,
}

impl AppState {
    /// Wires the state from its parts.
    pub fn new(db: Db, config: Config, flags: Flags, connector: Arc<dyn AgentConnector>) -> Self {
        let auth = Arc::new(Auth::from_config(&config));
        let config = Arc::new(config);
        let flags = Arc::new(flags);
        let hub = EventHub::new();
        let runtime = Arc::new(SessionRuntime::new(
            db.clone(),
            hub.clone(),
            Arc::clone(&config),
            Arc::clone(&flags),
            connector,
        ));
        Self {
            db,
            config,
            flags,
            hub,
            runtime,
            auth,
        }
    }
}
