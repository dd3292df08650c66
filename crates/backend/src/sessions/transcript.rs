//! Turns ACP `session/update`s into chat messages: agent text chunks are
//! aggregated into one message until something else happens (a tool call, a
//! clarification, the end of the turn, a new prompt); tool calls become
//! `tool_call` messages updated in place by `tool_call_update`.

use serde_json::{Map, Value, json};

use crate::events::{Change, Publisher};
use crate::model::{MessageKind, NewMessage, author};
use crate::store::{MessageStore, StoreError};

/// The message text chunks are currently appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenText {
    message_id: String,
    kind: MessageKind,
}

/// Aggregation state of one session's transcript, owned by its event consumer.
#[derive(Debug, Default)]
pub struct Transcript {
    open: Option<OpenText>,
}

/// Where the messages go.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// The message store.
    pub messages: &'a dyn MessageStore,
    /// Pushes `message.created` / `message.appended` / `message.updated`.
    pub publisher: &'a Publisher,
    /// The session.
    pub session_id: &'a str,
    /// Its task.
    pub task_id: &'a str,
}

impl Transcript {
    /// Ends the current text message: the next chunk starts a new one.
    pub fn close(&mut self) {
        self.open = None;
    }

    /// Applies one `session/update` (its params, or the inner `update` object).
    pub async fn apply(&mut self, to: Target<'_>, params: &Value) -> Result<(), StoreError> {
        if let Some((kind, text)) = text_chunk(params) {
            return self.text(to, kind, text, None).await.map(drop);
        }
        let update = params.get("update").unwrap_or(params);
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("tool_call") => {
                self.close();
                tool_call(to, update, true).await
            }
            Some("tool_call_update") => {
                self.close();
                tool_call(to, update, false).await
            }
            // Chunks of other content (images, …), user echoes, plans, mode and command
            // lists are not chat messages.
            _ => Ok(()),
        }
    }

    /// Applies agent text of `kind` (one chunk's, or several merged): appended to the
    /// open message of that kind, else the first text of a new one. An append also
    /// stores `position`, the session's stream position once this text is applied, in
    /// its commit; whether it did is returned (a new message leaves it to the caller).
    pub async fn text(
        &mut self,
        to: Target<'_>,
        kind: MessageKind,
        text: &str,
        position: Option<u64>,
    ) -> Result<bool, StoreError> {
        if let Some(open) = &self.open
            && open.kind == kind
        {
            let message = to
                .messages
                .append_content(&open.message_id, text, position)
                .await?;
            to.publisher.publish(Change::MessageAppended {
                message,
                appended: text.to_owned(),
            });
            return Ok(position.is_some());
        }
        let new = NewMessage::new(to.session_id, to.task_id, kind, author::AGENT, text);
        let message = to.messages.insert_message(&new).await?;
        self.open = Some(OpenText {
            message_id: message.id.clone(),
            kind,
        });
        to.publisher.publish(Change::MessageCreated(message));
        Ok(false)
    }
}

/// The kind and text of a `session/update` that is an agent text chunk (message or
/// thought, `content.type` `text`); `None` for anything else.
pub fn text_chunk(params: &Value) -> Option<(MessageKind, &str)> {
    let update = params.get("update").unwrap_or(params);
    let kind = match update.get("sessionUpdate").and_then(Value::as_str)? {
        "agent_message_chunk" => MessageKind::Message,
        "agent_thought_chunk" => MessageKind::Thought,
        _ => return None,
    };
    let content = update.get("content")?;
    if content.get("type").and_then(Value::as_str) != Some("text") {
        return None;
    }
    Some((kind, content.get("text")?.as_str()?))
}

/// The metadata a tool-call update carries: every field but the discriminator and id.
fn tool_fields(update: &Value) -> Map<String, Value> {
    update
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .filter(|(k, _)| k.as_str() != "sessionUpdate" && k.as_str() != "toolCallId")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn tool_call(to: Target<'_>, update: &Value, is_new: bool) -> Result<(), StoreError> {
    let Some(tool_call_id) = update.get("toolCallId").and_then(Value::as_str) else {
        return Ok(());
    };
    let mut patch = tool_fields(update);
    let title = update.get("title").and_then(Value::as_str);
    // A `tool_call` always starts a message (ids may repeat across turns); an update
    // goes to the newest message of its id.
    let existing = if is_new {
        None
    } else {
        to.messages
            .latest_tool_call(to.session_id, tool_call_id)
            .await?
    };
    if let Some(existing) = existing {
        let message = to
            .messages
            .merge_metadata(&existing.id, &patch, title)
            .await?;
        to.publisher.publish(Change::MessageUpdated(message));
        return Ok(());
    }
    if !is_new {
        tracing::debug!(
            tool_call_id,
            "tool_call_update for an unknown tool call; recording it"
        );
    }
    patch.insert("tool_call_id".into(), json!(tool_call_id));
    let new = NewMessage::new(
        to.session_id,
        to.task_id,
        MessageKind::ToolCall,
        author::AGENT,
        title.unwrap_or(tool_call_id),
    )
    .with_metadata(patch);
    let message = to.messages.insert_message(&new).await?;
    to.publisher.publish(Change::MessageCreated(message));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str) -> Value {
        json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text}}})
    }

    #[tokio::test]
    async fn chunks_aggregate_until_a_tool_call_and_tool_calls_update_in_place() {
        let stores = crate::testing::memory_stores().await;
        let task = crate::model::Task::new("T", "");
        stores.tasks.create_task(&task).await.expect("task");
        let session = stores
            .sessions
            .insert_session(&task.id, "mock")
            .await
            .expect("session")
            .id;
        let task = task.id;
        let db = &*stores.messages;
        let (publisher, mut changes) = Publisher::new();
        let to = Target {
            messages: db,
            publisher: &publisher,
            session_id: &session,
            task_id: &task,
        };
        let mut t = Transcript::default();
        t.apply(to, &chunk("Hel")).await.expect("chunk");
        t.apply(to, &chunk("lo")).await.expect("chunk");
        t.apply(
            to,
            &json!({"sessionId": "acp-1", "update": {"sessionUpdate": "tool_call",
            "toolCallId": "t1", "title": "Read file", "kind": "read", "status": "pending"}}),
        )
        .await
        .expect("tool");
        t.apply(
            to,
            &json!({"sessionId": "acp-1", "update": {"sessionUpdate": "tool_call_update",
            "toolCallId": "t1", "status": "completed"}}),
        )
        .await
        .expect("update");
        t.apply(to, &chunk("Done.")).await.expect("chunk");
        t.apply(
            to,
            &json!({"update": {"sessionUpdate": "plan", "entries": []}}),
        )
        .await
        .expect("ignored");
        t.close();
        t.apply(to, &chunk("Next turn")).await.expect("chunk");

        let all = db.messages(&session).await.expect("list");
        let summary: Vec<(MessageKind, &str)> =
            all.iter().map(|m| (m.kind, m.content.as_str())).collect();
        assert_eq!(
            summary,
            [
                (MessageKind::Message, "Hello"),
                (MessageKind::ToolCall, "Read file"),
                (MessageKind::Message, "Done."),
                (MessageKind::Message, "Next turn")
            ]
        );
        assert_eq!(
            all[1].metadata,
            json!({"title": "Read file", "kind": "read", "status": "completed", "tool_call_id": "t1"})
        );
        let kinds: Vec<&str> = std::iter::from_fn(|| changes.try_recv().ok())
            .map(|c| match c {
                Change::MessageCreated(_) => "created",
                Change::MessageUpdated(_) => "updated",
                Change::MessageAppended { appended, .. } => {
                    assert_eq!(appended, "lo", "only the new text");
                    "appended"
                }
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "created", "appended", "created", "updated", "created", "created"
            ]
        );
    }
}
