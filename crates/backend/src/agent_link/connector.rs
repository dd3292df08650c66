//! The seam between the sessions and the agent stream: [`SessionLink`] is what a live
//! session needs from its link, [`AgentConnector`] opens one. The production
//! implementations wrap [`AgentLink`]; unit tests substitute fakes.

use std::sync::Arc;

use futures::future::BoxFuture;
use kandev_agent_stream::StreamRequest;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{AgentLink, ExecutorConfig, LinkError, LinkEvent, LinkOptions};

/// One session's connection to its agentctl.
pub trait SessionLink: Send + Sync + 'static {
    /// Sends one request and returns the response payload.
    fn request_value<'a>(
        &'a self,
        action: &'a str,
        payload: Value,
    ) -> BoxFuture<'a, Result<Value, LinkError>>;

    /// Whether the stream is up right now.
    fn is_connected(&self) -> bool;

    /// The sequence number of the last agent event put on the receiver; every event up
    /// to it is queued or consumed. `None` when unknown.
    fn delivered_seq(&self) -> Option<u64> {
        None
    }

    /// Stops the agent and, for a local executor, agentctl.
    fn shutdown(&self) -> BoxFuture<'_, ()>;

    /// Closes the stream without telling agentctl anything: a remote agentctl keeps the
    /// session for whoever attaches next (this replica lost its lease). By default
    /// nothing happens.
    fn detach(&self) {}
}

/// A shared link.
pub type DynLink = Arc<dyn SessionLink>;

/// Opens links.
pub trait AgentConnector: Send + Sync + 'static {
    /// Starts or reaches agentctl for `session_id`; events arrive on the receiver, in order.
    fn connect<'a>(
        &'a self,
        executor: &'a ExecutorConfig,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>>;

    /// Reaches the agentctl that still runs `session_id` (started by a previous backend
    /// process) and attaches to it with `after_seq`; the receiver yields the events
    /// agentctl kept, then [`LinkEvent::Reattached`], then live events. By default a
    /// connector cannot do this and answers `Unreachable`.
    fn resume<'a>(
        &'a self,
        executor: &'a ExecutorConfig,
        session_id: &'a str,
        after_seq: Option<u64>,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>> {
        let _ = (executor, session_id, after_seq);
        Box::pin(async {
            Err(LinkError::Unreachable(
                "this connector cannot re-attach a running session".into(),
            ))
        })
    }
}

/// Sends `request` over a link under its own action and decodes its own response type.
pub async fn call<Q: StreamRequest>(
    link: &dyn SessionLink,
    request: &Q,
) -> Result<Q::Response, LinkError> {
    let action = Q::ACTION;
    let payload = serde_json::to_value(request)
        .map_err(|err| LinkError::Protocol(format!("cannot encode `{action}`: {err}")))?;
    let value = link.request_value(action, payload).await?;
    serde_json::from_value(value)
        .map_err(|err| LinkError::Protocol(format!("unexpected `{action}` response: {err}")))
}

impl SessionLink for AgentLink {
    fn request_value<'a>(
        &'a self,
        action: &'a str,
        payload: Value,
    ) -> BoxFuture<'a, Result<Value, LinkError>> {
        Box::pin(async move { self.request::<Value, Value>(action, &payload).await })
    }

    fn is_connected(&self) -> bool {
        AgentLink::is_connected(self)
    }

    fn delivered_seq(&self) -> Option<u64> {
        AgentLink::delivered_seq(self)
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(AgentLink::shutdown(self))
    }

    fn detach(&self) {
        AgentLink::detach(self);
    }
}

/// The production connector: [`AgentLink::connect`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamConnector;

impl AgentConnector for StreamConnector {
    fn connect<'a>(
        &'a self,
        executor: &'a ExecutorConfig,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>> {
        Box::pin(async move {
            let (link, events) = AgentLink::connect(executor, session_id).await?;
            Ok((Arc::new(link) as DynLink, events))
        })
    }

    fn resume<'a>(
        &'a self,
        executor: &'a ExecutorConfig,
        session_id: &'a str,
        after_seq: Option<u64>,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>> {
        Box::pin(async move {
            let (link, events) =
                AgentLink::resume_with(executor, session_id, after_seq, LinkOptions::default())
                    .await?;
            Ok((Arc::new(link) as DynLink, events))
        })
    }
}
