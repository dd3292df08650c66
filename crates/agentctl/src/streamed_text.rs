//! Streamed agent text held back briefly so a burst crosses the agent stream as one event.
//!
//! An agent streams its reply as many small `agent_message_chunk` (or
//! `agent_thought_chunk`) updates; forwarded one by one, each is a frame, a wake-up of
//! the backend and a write of the transcript. The session's outbox holds the
//! chunks of one run as a [`HeldText`] and emits them as one `session_update` whose text
//! is theirs, concatenated, when any of these comes first: [`WINDOW`] after the run's
//! first chunk, [`MAX_BYTES`] of text, a chunk that does not join, or any other event
//! (a question, a tool call, the turn's end). Nothing else waits: an event that is not
//! text goes out at once, right behind the text before it.
//!
//! Only plain chunks join: `{"sessionId", "update": {"sessionUpdate", "content":
//! {"type": "text", "text"}}}` and nothing more. A chunk with anything else (`_meta`,
//! annotations, a message id) is forwarded as it came, so no field is ever dropped or
//! blended into another chunk's.

use std::time::Duration;

use serde_json::Value;

/// How long a run of chunks is held after its first one.
pub const WINDOW: Duration = Duration::from_millis(50);
/// The most text held: a run that reaches it goes out at once.
pub const MAX_BYTES: usize = 4096;

/// What a run's chunks must share to join: the ACP session and the update kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RunKey {
    session_id: Option<String>,
    kind: String,
}

/// A plain text chunk: the `session/update` params, and its key and text taken apart.
#[derive(Debug)]
pub struct TextChunk {
    params: Value,
    key: RunKey,
    text: String,
}

impl TextChunk {
    /// `params` as a plain text chunk, or back unchanged when it is anything else.
    pub fn from_params(mut params: Value) -> Result<Self, Value> {
        let Some(key) = plain_chunk_key(&params) else {
            return Err(params);
        };
        let text = match params["update"]["content"]["text"].take() {
            Value::String(text) => text,
            _ => return Err(params),
        };
        Ok(Self { params, key, text })
    }
}

/// The key of `params` when it is a plain text chunk, with exactly the fields above.
fn plain_chunk_key(params: &Value) -> Option<RunKey> {
    let params = params.as_object()?;
    if params.keys().any(|k| k != "sessionId" && k != "update") {
        return None;
    }
    let update = params.get("update")?.as_object()?;
    let kind = update.get("sessionUpdate")?.as_str()?;
    if !matches!(kind, "agent_message_chunk" | "agent_thought_chunk") || update.len() != 2 {
        return None;
    }
    let content = update.get("content")?.as_object()?;
    let plain = content.len() == 2
        && content.get("type").and_then(Value::as_str) == Some("text")
        && content.get("text").is_some_and(Value::is_string);
    let session_id = match params.get("sessionId") {
        None => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return None,
    };
    plain.then(|| RunKey {
        session_id,
        kind: kind.to_owned(),
    })
}

/// A run of plain chunks held back, numbered so a late timer cannot flush a later run.
#[derive(Debug)]
pub struct HeldText {
    first: TextChunk,
    /// The run's number: the timer armed for it names it.
    pub run: u64,
}

impl HeldText {
    /// A run that starts with `chunk`.
    pub fn new(chunk: TextChunk, run: u64) -> Self {
        Self { first: chunk, run }
    }

    /// Whether `chunk` joins the run: same session and kind, within [`MAX_BYTES`].
    pub fn joins(&self, chunk: &TextChunk) -> bool {
        chunk.key == self.first.key && self.first.text.len() + chunk.text.len() <= MAX_BYTES
    }

    /// Adds `chunk`'s text to the run; the caller checked that it [`joins`](Self::joins).
    pub fn join(&mut self, chunk: &TextChunk) {
        self.first.text.push_str(&chunk.text);
    }

    /// Whether the run holds [`MAX_BYTES`] or more and should go out now.
    pub fn is_full(&self) -> bool {
        self.first.text.len() >= MAX_BYTES
    }

    /// The run as one `session/update` params: the first chunk's, with every chunk's text.
    pub fn into_params(self) -> Value {
        let TextChunk {
            mut params, text, ..
        } = self.first;
        params["update"]["content"]["text"] = Value::String(text);
        params
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunk(kind: &str, text: &str) -> Value {
        json!({"sessionId": "acp-1", "update": {"sessionUpdate": kind,
            "content": {"type": "text", "text": text}}})
    }

    fn text(params: Value) -> TextChunk {
        TextChunk::from_params(params).expect("a plain chunk")
    }

    #[test]
    fn only_plain_text_chunks_join_and_anything_else_comes_back_unchanged() {
        assert!(TextChunk::from_params(chunk("agent_message_chunk", "a")).is_ok());
        assert!(TextChunk::from_params(chunk("agent_thought_chunk", "a")).is_ok());
        let not_plain = [
            chunk("tool_call", "a"),
            json!({"sessionId": "acp-1", "_meta": {}, "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "a"}}}),
            json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
                "messageId": "m1", "content": {"type": "text", "text": "a"}}}),
            json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "a", "annotations": {}}}}),
            json!({"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "image", "data": "x", "mimeType": "image/png"}}}),
            json!({"sessionId": 7, "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "a"}}}),
            json!("text"),
        ];
        for params in not_plain {
            assert_eq!(
                TextChunk::from_params(params.clone()).expect_err("not plain"),
                params
            );
        }
    }

    #[test]
    fn a_run_concatenates_its_chunks_in_the_first_ones_shape() {
        let mut held = HeldText::new(text(chunk("agent_message_chunk", "Hel")), 1);
        for more in ["lo, ", "world"] {
            let more = text(chunk("agent_message_chunk", more));
            assert!(held.joins(&more));
            held.join(&more);
        }
        assert_eq!(
            held.into_params(),
            chunk("agent_message_chunk", "Hello, world")
        );
    }

    #[test]
    fn another_kind_another_session_or_too_much_text_does_not_join() {
        let mut held = HeldText::new(text(chunk("agent_message_chunk", "a")), 1);
        assert!(!held.joins(&text(chunk("agent_thought_chunk", "b"))));
        let elsewhere = json!({"sessionId": "acp-2", "update": {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "b"}}});
        assert!(!held.joins(&text(elsewhere)));
        let big = "x".repeat(MAX_BYTES);
        assert!(!held.joins(&text(chunk("agent_message_chunk", &big))));
        assert!(!held.is_full());
        let rest = text(chunk("agent_message_chunk", &big[1..]));
        assert!(held.joins(&rest), "exactly MAX_BYTES joins");
        held.join(&rest);
        assert!(held.is_full());
    }
}
