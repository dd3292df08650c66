//! Turns ACP `session/update`s into chat messages: agent text chunks are
//! aggregated into one message until something else happens (a tool call, a
//! clarification, the end of the turn, a new prompt); tool calls become
//! `tool_call` messages updated in place by `tool_call_update`.

use serde_json::{Map, Value, json};

use crate::db::Db;
use crate::events::{EventHub, MESSAGE_CREATED, MESSAGE_UPDATED};
use crate::messages::{self, NewMessage, TYPE_MESSAGE, TYPE_THOUGHT, TYPE_TOOL_CALL, author};

/// The message text chunks are currently appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenText {
    message_id: String,
    message_type: &'static str,
}

/// Aggregation state of one session's transcript.
#[derive(Debug, Default)]
pub struct Transcript {
    open: Option<OpenText>,
}

/// Where the messages go.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The database.
    pub db: &'a Db,
    /// Pushes `message.created` / `message.updated`.
    pub hub: &'a EventHub,
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
    pub async fn apply(&mut self, to: Target<'_>, params: &Value) -> Result<(), sqlx::Error> {
        let update = params.get("update").unwrap_or(params);
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("agent_message_chunk") => self.chunk(to, TYPE_MESSAGE, update).await,
            Some("agent_thought_chunk") => self.chunk(to, TYPE_THOUGHT, update).await,
            Some("tool_call") => {
                self.close();
                tool_call(to, update, true).await
            }
            Some("tool_call_update") => {
                self.close();
                tool_call(to, update, false).await
            }
            // User echoes, plans, mode and command lists are not chat messages.
            _ => Ok(()),
        }
    }

    async fn chunk(
        &mut self,
        to: Target<'_>,
        message_type: &'static str,
        update: &Value,
    ) -> Result<(), sqlx::Error> {
        let content = &update["content"];
        let Some(text) = content
            .get("text")
            .and_then(Value::as_str)
            .filter(|_| content.get("type").and_then(Value::as_str) == Some("text"))
        else {
            return Ok(());
        };
        if let Some(open) = &self.open
            && open.message_type == message_type
        {
            let message = messages::append_content(to.db, &open.message_id, text).await?;
            to.hub.publish(MESSAGE_UPDATED, &message);
            return Ok(());
        }
        let message = messages::insert(
            to.db,
            NewMessage {
                session_id: to.session_id,
                task_id: to.task_id,
                message_type,
                author_type: author::AGENT,
                content: text,
                requests_input: false,
                metadata: json!({}),
            },
        )
        .await?;
        self.open = Some(OpenText {
            message_id: message.id.clone(),
            message_type,
        });
        to.hub.publish(MESSAGE_CREATED, &message);
        Ok(())
    }
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

async fn tool_call(to: Target<'_>, update: &Value, is_new: bool) -> Result<(), sqlx::Error> {
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
        messages::find_tool_call(to.db, to.session_id, tool_call_id).await?
    };
    if let Some(existing) = existing {
        let message = messages::merge_metadata(to.db, &existing.id, &patch, title).await?;
        to.hub.publish(MESSAGE_UPDATED, &message);
        return Ok(());
    }
    if !is_new {
        tracing::debug!(
            tool_call_id,
            "tool_call_update for an unknown tool call; recording it"
        );
    }
    patch.insert("tool_call_id".into(), json!(tool_call_id));
    let message = messages::insert(
        to.db,
        NewMessage {
            session_id: to.session_id,
            task_id: to.task_id,
            message_type: TYPE_TOOL_CALL,
            author_type: author::AGENT,
            content: title.unwrap_or(tool_call_id),
            requests_input: false,
            metadata: Value::Object(patch),
        },
    )
    .await?;
    to.hub.publish(MESSAGE_CREATED, &message);
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
        let (db, task, session) = crate::messages::tests::seeded().await;
        let hub = EventHub::new();
        let mut rx = hub.subscribe();
        let to = Target {
            db: &db,
            hub: &hub,
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

        let all = messages::list(&db, &session).await.expect("list");
        let summary: Vec<(&str, &str)> = all
            .iter()
            .map(|m| (m.message_type.as_str(), m.content.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("message", "Hello"),
                ("tool_call", "Read file"),
                ("message", "Done."),
                ("message", "Next turn")
            ]
        );
        assert_eq!(
            all[1].metadata,
            json!({"tool_call_id": "t1", "title": "Read file", "kind": "read", "status": "completed"})
        );
        let kinds: Vec<&str> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                MESSAGE_CREATED,
                MESSAGE_UPDATED,
                MESSAGE_CREATED,
                MESSAGE_UPDATED,
                MESSAGE_CREATED,
                MESSAGE_CREATED
            ]
        );
    }
}
