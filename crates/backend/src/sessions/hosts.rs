//! Which agentctl a session's agent runs on: with several remote hosts
//! (`executor.hosts`), a new session goes to the one with the fewest live sessions
//! (counted in the database, across replicas), and a host that cannot be reached is
//! skipped with the reason logged. The host is recorded on the session's lease, so a
//! replica taking the session over re-attaches to the same agentctl.

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::agent_link::{AgentConnector, DynLink, ExecutorConfig, LinkError, LinkEvent};
use crate::config::Config;
use crate::model::SessionLease;
use crate::store::Stores;

/// A link and the events it delivers.
pub type Connected = (DynLink, UnboundedReceiver<LinkEvent>);

/// The configured agentctl hosts and the connector that reaches them.
pub struct Hosts {
    config: Arc<Config>,
    connector: Arc<dyn AgentConnector>,
    stores: Stores,
}

/// `hosts` ordered by how many live sessions `loads` counts on each, fewest first; ties
/// keep the configured order.
pub fn by_load(mut hosts: Vec<ExecutorConfig>, loads: &[(String, usize)]) -> Vec<ExecutorConfig> {
    let load = |host: &ExecutorConfig| {
        host.remote_url()
            .and_then(|url| loads.iter().find(|(h, _)| h == url))
            .map_or(0, |(_, n)| *n)
    };
    hosts.sort_by_key(load);
    hosts
}

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts").finish_non_exhaustive()
    }
}

impl Hosts {
    /// The hosts `config.executor` names, reached through `connector`; `stores` counts
    /// their sessions and records where each one runs.
    pub fn new(config: Arc<Config>, connector: Arc<dyn AgentConnector>, stores: Stores) -> Self {
        Self {
            config,
            connector,
            stores,
        }
    }

    /// Whether agentctl runs apart from this process (and so outlives it).
    pub fn are_remote(&self) -> bool {
        self.config.executor.is_remote()
    }

    /// Starts or reaches the agentctl for the session `lease` names (see the module docs).
    pub async fn connect(&self, lease: &SessionLease) -> Result<Connected, String> {
        let executor = &self.config.executor;
        if !executor.is_remote() {
            return self
                .connector
                .connect(executor, &lease.session_id)
                .await
                .map_err(|err| err.to_string());
        }
        let loads = self.stores.leases.host_loads().await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot count the sessions per agentctl host");
            Vec::new()
        });
        let hosts = by_load(executor.hosts(), &loads);
        let single = hosts.len() == 1;
        let mut skipped = Vec::new();
        for host in hosts {
            let url = host.remote_url().unwrap_or_default().to_owned();
            match self.connector.connect(&host, &lease.session_id).await {
                Ok(link) => {
                    if let Err(err) = self
                        .stores
                        .leases
                        .set_agent_host(&lease.session_id, lease.generation, &url)
                        .await
                    {
                        tracing::warn!(error = %err, "cannot record the session's agentctl host");
                    }
                    return Ok(link);
                }
                Err(err) if single => return Err(err.to_string()),
                Err(err) => {
                    tracing::warn!(host = %url, error = %err, "agentctl host skipped: it cannot be reached");
                    skipped.push(format!("{url}: {err}"));
                }
            }
        }
        Err(format!(
            "no agentctl host could be reached ({})",
            skipped.join("; ")
        ))
    }

    /// The agentctl a session taken over runs on: the host its lease records (or the one
    /// remote host). `None` with a local executor, or a host no longer configured.
    pub fn executor_of(&self, lease: &SessionLease) -> Option<ExecutorConfig> {
        let hosts = self.config.executor.hosts();
        if !self.config.executor.is_remote() {
            return None;
        }
        match &lease.agent_host {
            Some(url) => hosts.into_iter().find(|h| h.remote_url() == Some(url)),
            None if hosts.len() == 1 => hosts.into_iter().next(),
            None => None,
        }
    }

    /// Re-attaches to session `session_id` on `executor`, from the events after `after_seq`.
    pub async fn resume(
        &self,
        executor: &ExecutorConfig,
        session_id: &str,
        after_seq: Option<u64>,
    ) -> Result<Connected, LinkError> {
        self.connector.resume(executor, session_id, after_seq).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_loaded_host_goes_first_and_ties_keep_the_configured_order() {
        let hosts = vec![
            ExecutorConfig::remote("ws://a:1", "t"),
            ExecutorConfig::remote("ws://b:1", "t"),
            ExecutorConfig::remote("ws://c:1", "t"),
        ];
        let loads = vec![("ws://a:1".to_owned(), 2), ("ws://c:1".to_owned(), 1)];
        let order: Vec<String> = by_load(hosts.clone(), &loads)
            .iter()
            .filter_map(|h| h.remote_url().map(str::to_owned))
            .collect();
        assert_eq!(order, ["ws://b:1", "ws://c:1", "ws://a:1"]);
        let order: Vec<String> = by_load(hosts, &[])
            .iter()
            .filter_map(|h| h.remote_url().map(str::to_owned))
            .collect();
        assert_eq!(order, ["ws://a:1", "ws://b:1", "ws://c:1"]);
    }
}
