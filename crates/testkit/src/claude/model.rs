//! The scripted model behind the fake Anthropic API: what a Messages request offers and
//! carries ([`ModelRequest`]), what the model answers ([`Script`] → [`Reply`]), and the
//! answer as the SSE stream the CLI reads.
//!
//! The model is a pure function of the request, so a retried request gets the same
//! answer. It behaves like a compliant model: when the prompt names a scripted trigger it
//! calls that step's tool — directly when the tool is in `tools`, through `ToolSearch`
//! first when the CLI lists it as deferred (0.101.0 defers MCP tools), and in prose when
//! it is not offered at all (the §K control). A tool result is echoed back as text.

use serde_json::{Value, json};

/// The tool the CLI offers for loading deferred tools' schemas (0.101.0).
pub const TOOL_SEARCH: &str = "ToolSearch";
/// The prefix of every echo of a tool result.
pub const ECHO_PREFIX: &str = "ECHO ";

/// One `POST /v1/messages` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The request path with its query (`/v1/messages?beta=true`).
    pub path: String,
    /// The JSON body.
    pub body: Value,
}

/// How a request offers a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// In `tools`, callable now.
    Direct,
    /// Listed by name for `ToolSearch` ("deferred"): callable once its schema is loaded.
    Deferred,
    /// Not offered.
    Absent,
}

/// One `tool_result` block of the last user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The `tool_use` it answers.
    pub tool_use_id: String,
    /// The tool's name, from the assistant message that called it.
    pub tool: String,
    /// Its text (text blocks joined).
    pub text: String,
    /// `is_error`.
    pub is_error: bool,
}

impl ModelRequest {
    /// Every message.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The names in `tools`.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A request the CLI makes on its own behalf (the session title of 0.101.0, with a
    /// JSON-schema output format), not a turn of the conversation.
    pub fn is_side_request(&self) -> bool {
        self.body.pointer("/output_config/format").is_some() || self.tool_names().is_empty()
    }

    /// How `tool` is offered.
    pub fn offer(&self, tool: &str) -> Offer {
        let names = self.tool_names();
        if names.iter().any(|n| n == tool) {
            return Offer::Direct;
        }
        if names.iter().any(|n| n == TOOL_SEARCH)
            && all_text(&self.body)
                .iter()
                .any(|text| text.lines().any(|line| line.trim() == tool))
        {
            return Offer::Deferred;
        }
        Offer::Absent
    }

    /// The text of the newest user message that is a prompt (not tool results).
    pub fn prompt(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .find(|m| blocks(m).iter().all(|b| b["type"] != "tool_result"))
            .map(|m| {
                blocks(m)
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// The `tool_result` blocks of the last conversation message, when it is the user's.
    /// Messages with role `system` (0.99.0 appends a token count after the result) are
    /// not part of the conversation.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let messages = self.messages();
        let last = messages.iter().rev().find(|m| m["role"] != "system");
        let Some(last) = last.filter(|m| m["role"] == "user") else {
            return Vec::new();
        };
        blocks(last)
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                let id = b["tool_use_id"].as_str().unwrap_or_default().to_owned();
                ToolResult {
                    tool: tool_use_name(messages, &id).unwrap_or_default(),
                    tool_use_id: id,
                    text: content_text(&b["content"]),
                    is_error: b["is_error"].as_bool().unwrap_or(false),
                }
            })
            .collect()
    }
}

/// A message's content as blocks (a plain string becomes one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// A tool result's content as text: a string, or its text blocks joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Every text of the system prompt and the messages.
fn all_text(body: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    match &body["system"] {
        Value::String(text) => texts.push(text.clone()),
        Value::Array(parts) => texts.extend(
            parts
                .iter()
                .filter_map(|p| p["text"].as_str().map(str::to_owned)),
        ),
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        texts.extend(
            blocks(message)
                .iter()
                .filter_map(|b| b["text"].as_str().map(str::to_owned)),
        );
    }
    texts
}

/// The name of the assistant's `tool_use` with `id`.
fn tool_use_name(messages: &[Value], id: &str) -> Option<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(blocks)
        .find(|b| b["type"] == "tool_use" && b["id"] == id)
        .and_then(|b| b["name"].as_str().map(str::to_owned))
}

/// One scripted behaviour: a prompt containing `trigger` makes the model call `tool`
/// with `input`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// A substring of the prompt.
    pub trigger: String,
    /// The tool's name as the CLI offers it (`AskUserQuestion`,
    /// `mcp__<server>__<tool>`).
    pub tool: String,
    /// Its input.
    pub input: Value,
}

/// What the model does, step by step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    steps: Vec<Step>,
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Text, then `end_turn`.
    Text(String),
    /// A `tool_use` block, then `tool_use`.
    ToolUse {
        /// The tool.
        name: String,
        /// Its input.
        input: Value,
    },
}

impl Script {
    /// No steps: every prompt gets prose.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a step: a prompt containing `trigger` calls `tool` with `input`.
    pub fn on(mut self, trigger: &str, tool: &str, input: Value) -> Self {
        self.steps.push(Step {
            trigger: trigger.to_owned(),
            tool: tool.to_owned(),
            input,
        });
        self
    }

    /// The step a request's prompt triggers.
    pub fn step_for(&self, request: &ModelRequest) -> Option<&Step> {
        let prompt = request.prompt();
        self.steps.iter().find(|s| prompt.contains(&s.trigger))
    }

    /// The model's answer to `request`.
    pub fn reply(&self, request: &ModelRequest) -> Reply {
        if request.body.pointer("/output_config/format").is_some() {
            // The session title of 0.101.0: JSON matching the requested schema.
            return Reply::Text(json!({"title": "kandev e2e"}).to_string());
        }
        let results = request.tool_results();
        // After a ToolSearch result the schema is loaded: go on with the step that asked.
        if let Some(result) = results.first().filter(|r| r.tool != TOOL_SEARCH) {
            let error = if result.is_error { "(error) " } else { "" };
            return Reply::Text(format!(
                "{ECHO_PREFIX}{}: {error}{}",
                result.tool, result.text
            ));
        }
        let Some(step) = self.step_for(request) else {
            return Reply::Text("Nothing is scripted for this prompt.".to_owned());
        };
        match request.offer(&step.tool) {
            Offer::Direct => Reply::ToolUse {
                name: step.tool.clone(),
                input: step.input.clone(),
            },
            Offer::Deferred if results.is_empty() => Reply::ToolUse {
                name: TOOL_SEARCH.to_owned(),
                input: json!({"query": format!("select:{}", step.tool), "max_results": 1}),
            },
            _ => Reply::Text(format!(
                "I don't have the {} tool available in this session, so I can't use it. \
                 Instead, plainly: {}",
                step.tool,
                prose_question(&step.input)
            )),
        }
    }
}

/// The first question of an AskUserQuestion-like input, asked in words.
fn prose_question(input: &Value) -> String {
    let question = &input["questions"][0];
    let options: Vec<&str> = question["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["label"].as_str())
        .collect();
    match question["question"].as_str() {
        Some(q) if !options.is_empty() => format!("{q} — {}?", options.join(" or ")),
        Some(q) => q.to_owned(),
        None => "what should I do?".to_owned(),
    }
}

impl Reply {
    /// The Messages API response: `(content type, body)`; SSE when `stream`.
    pub fn encode(
        &self,
        model: &str,
        message_id: &str,
        tool_use_id: &str,
        stream: bool,
    ) -> (&'static str, String) {
        let (block, stop) = match self {
            Self::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
            Self::ToolUse { name, input } => (
                json!({"type": "tool_use", "id": tool_use_id, "name": name, "input": input}),
                "tool_use",
            ),
        };
        let usage = json!({"input_tokens": 1, "output_tokens": 1});
        if !stream {
            let message = json!({"id": message_id, "type": "message", "role": "assistant",
                "model": model, "content": [block], "stop_reason": stop,
                "stop_sequence": null, "usage": usage});
            return ("application/json", message.to_string());
        }
        let (start, delta) = match self {
            Self::Text(text) => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": text}),
            ),
            Self::ToolUse { name, input } => (
                json!({"type": "tool_use", "id": tool_use_id, "name": name, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
        };
        let events = [
            json!({"type": "message_start", "message": {"id": message_id, "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ];
        let body = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect();
        ("text/event-stream", body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> ModelRequest {
        ModelRequest {
            path: "/v1/messages?beta=true".into(),
            body,
        }
    }

    fn ask_input() -> Value {
        json!({"questions": [{"question": "Pick a colour", "header": "Colour",
            "options": [{"label": "Red"}, {"label": "Blue"}], "multiSelect": false}]})
    }

    fn script() -> Script {
        Script::new().on("colour", "AskUserQuestion", ask_input())
    }

    fn turn(tools: &[&str], system: &str, messages: Value) -> ModelRequest {
        let tools: Vec<Value> = tools.iter().map(|t| json!({"name": t})).collect();
        request(
            json!({"model": "m", "system": [{"type": "text", "text": system}],
            "tools": tools, "messages": messages, "stream": true}),
        )
    }

    #[test]
    fn an_offered_tool_is_called_and_its_result_echoed() {
        let first = turn(
            &["Bash", "AskUserQuestion"],
            "",
            json!([{"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                                 {"type": "text", "text": "pick a colour"}]}]),
        );
        assert_eq!(first.offer("AskUserQuestion"), Offer::Direct);
        assert_eq!(
            script().reply(&first),
            Reply::ToolUse {
                name: "AskUserQuestion".into(),
                input: ask_input()
            }
        );
        let second = turn(
            &["Bash", "AskUserQuestion"],
            "",
            json!([
                {"role": "user", "content": "pick a colour"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "AskUserQuestion", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "answered Red"}]},
            ]),
        );
        assert_eq!(
            second.tool_results(),
            vec![ToolResult {
                tool_use_id: "toolu_1".into(),
                tool: "AskUserQuestion".into(),
                text: "answered Red".into(),
                is_error: false
            }]
        );
        assert_eq!(
            script().reply(&second),
            Reply::Text("ECHO AskUserQuestion: answered Red".into())
        );
        // A trailing `system` message (0.99.0) does not hide the result.
        let mut with_system = second.clone();
        with_system.body["messages"]
            .as_array_mut()
            .expect("messages")
            .push(json!({"role": "system", "content": [{"type": "text", "text": "<total_tokens>9 tokens left</total_tokens>"}]}));
        assert_eq!(with_system.tool_results(), second.tool_results());
    }

    #[test]
    fn a_missing_tool_means_prose_and_a_deferred_one_a_tool_search_first() {
        let absent = turn(
            &["Bash"],
            "",
            json!([{"role": "user", "content": "pick a colour"}]),
        );
        assert_eq!(absent.offer("AskUserQuestion"), Offer::Absent);
        let Reply::Text(prose) = script().reply(&absent) else {
            panic!("prose expected")
        };
        assert!(
            prose.contains("I don't have the AskUserQuestion tool")
                && prose.contains("Pick a colour — Red or Blue?"),
            "{prose}"
        );

        let deferred = turn(
            &["Bash", TOOL_SEARCH],
            "The following deferred tools are now available via ToolSearch:\nWebFetch\nAskUserQuestion\n",
            json!([{"role": "user", "content": "pick a colour"}]),
        );
        assert_eq!(deferred.offer("AskUserQuestion"), Offer::Deferred);
        assert_eq!(
            script().reply(&deferred),
            Reply::ToolUse {
                name: TOOL_SEARCH.into(),
                input: json!({"query": "select:AskUserQuestion", "max_results": 1})
            }
        );
        let loaded = turn(
            &["Bash", TOOL_SEARCH, "AskUserQuestion"],
            "",
            json!([
                {"role": "user", "content": "pick a colour"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": TOOL_SEARCH, "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "<functions>…</functions>"}]}]},
            ]),
        );
        assert_eq!(loaded.prompt(), "pick a colour");
        assert!(
            matches!(script().reply(&loaded), Reply::ToolUse { name, .. } if name == "AskUserQuestion")
        );
    }

    #[test]
    fn the_title_request_gets_json_and_streams_are_well_formed() {
        let title = request(json!({"output_config": {"format": {"type": "json_schema"}},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(title.is_side_request());
        assert_eq!(
            script().reply(&title),
            Reply::Text(r#"{"title":"kandev e2e"}"#.into())
        );
        let (kind, body) = Reply::ToolUse {
            name: "T".into(),
            input: json!({"a": 1}),
        }
        .encode("m", "msg_1", "toolu_1", true);
        assert_eq!(kind, "text/event-stream");
        let events: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            events,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(body.contains(r#""partial_json":"{\"a\":1}""#), "{body}");
        let (kind, body) = Reply::Text("hi".into()).encode("m", "msg_2", "toolu_2", false);
        assert_eq!(kind, "application/json");
        let message: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(message["content"][0]["text"], "hi");
        assert_eq!(message["stop_reason"], "end_turn");
    }
}
