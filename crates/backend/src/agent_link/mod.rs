//! The backend's side of the agent stream: starting or reaching an agentctl (the
//! [`ExecutorConfig`]), and one [`AgentLink`] per session that correlates requests
//! with responses, delivers agent events in order, and re-attaches after a drop.

use std::path::PathBuf;
use std::time::Duration;

use kandev_agent_stream::{AgentEvent, ElicitationRequested, ErrorPayload};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use tokio::sync::mpsc;

/// Where agentctl runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ExecutorConfig {
    /// Start the sibling `agentctl serve` per session, with a fresh random token.
    Local {
        /// The agentctl binary; by default the one beside `kandev`.
        #[serde(default)]
        agentctl: Option<PathBuf>,
    },
    /// Connect to an agentctl deployed elsewhere.
    Remote {
        /// Base URL, e.g. `ws://10.0.0.5:7740` (the stream path is appended).
        url: String,
        /// Its bearer token.
        token: String,
    },
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self::Local { agentctl: None }
    }
}

/// What the link tells the session runtime, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    /// An event from agentctl.
    Agent(AgentEvent),
    /// The stream dropped; the link is trying to re-attach.
    Disconnected,
    /// The stream is back; `pending` is agentctl's list of still-open elicitations.
    Reattached {
        /// Elicitations still waiting for an answer.
        pending: Vec<ElicitationRequested>,
    },
    /// agentctl is gone for good (died, or re-attaching failed): nothing pending can be delivered.
    Lost {
        /// Why.
        reason: String,
    },
}

/// Why a request over the link failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The stream is down right now (`AGENT_STREAM_NOT_CONNECTED`); nothing was sent.
    #[error("agent stream is not connected")]
    NotConnected,
    /// agentctl answered with an error frame.
    #[error("agentctl refused: {0}")]
    Remote(ErrorPayload),
    /// No answer within the timeout.
    #[error("agentctl did not answer within {0:?}")]
    Timeout(Duration),
    /// agentctl could not be started or reached.
    #[error("could not start or reach agentctl: {0}")]
    Unreachable(String),
    /// The answer did not decode.
    #[error("unexpected answer from agentctl: {0}")]
    Protocol(String),
}

/// One session's connection to its agentctl. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentLink {
    _private: (),
}

impl AgentLink {
    /// Starts (local) or reaches (remote) an agentctl for `session_id` and opens the
    /// stream. Events arrive on the returned receiver, in order, until `Lost`.
    pub async fn connect(
        executor: &ExecutorConfig,
        session_id: &str,
    ) -> Result<(AgentLink, mpsc::UnboundedReceiver<LinkEvent>), LinkError> {
        todo!("{executor:?} {session_id}")
    }

    /// Sends one request and waits for its response payload.
    pub async fn request<P: Serialize, R: DeserializeOwned>(
        &self,
        action: &str,
        payload: &P,
    ) -> Result<R, LinkError> {
        let _ = serde_json::to_value(payload);
        todo!("{action}")
    }

    /// Whether the stream is up right now.
    pub fn is_connected(&self) -> bool {
        todo!()
    }

    /// Asks agentctl to shut the agent down, closes the stream, and stops a local agentctl.
    pub async fn shutdown(&self) {
        todo!()
    }
}
