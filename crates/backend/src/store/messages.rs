//! [`MessageStore`]: chat messages.

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::model::{Message, NewMessage};
use crate::store::StoreError;

/// Where messages are kept.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Stores a message at the end of its session (the next `seq`, unique per session).
    async fn insert_message(&self, message: &NewMessage) -> Result<Message, StoreError>;

    /// One message.
    async fn message(&self, id: &str) -> Result<Option<Message>, StoreError>;

    /// A session's messages in order.
    async fn messages(&self, session_id: &str) -> Result<Vec<Message>, StoreError>;

    /// Appends text to a message (agent chunks of one message). With `position`, the
    /// message's session records that its events are applied up to it in the same commit,
    /// so replaying its stream after a restart never appends the text twice.
    async fn append_content(
        &self,
        id: &str,
        text: &str,
        position: Option<u64>,
    ) -> Result<Message, StoreError>;

    /// Merges `patch`'s keys into a message's metadata (and replaces its content when
    /// given), in the database: concurrent merges of different keys both survive.
    async fn merge_metadata(
        &self,
        id: &str,
        patch: &Map<String, Value>,
        content: Option<&str>,
    ) -> Result<Message, StoreError>;

    /// The newest `tool_call` message of `tool_call_id` in a session.
    async fn latest_tool_call(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Message>, StoreError>;
}
