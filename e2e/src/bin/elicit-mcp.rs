//! `elicit-mcp`: a stdio MCP server with one tool, `confirm_deploy {service}`, that asks
//! its client for a form (`elicitation/create`: a `target` choice of `staging`/`prod` and
//! a free-text `note`) and returns what came back as its text result,
//! `elicitation <action>: <content JSON>`. The form's message names `$DEPLOY_STAGE`, so a
//! test can see the server's env arrived.
//!
//! It speaks MCP 2025-11-25 (server-to-client requests allowed) by hand, on purpose: the
//! CLI first probes `server/discover` for the 2026-07-28 draft, in which a server may not
//! send requests; this server answers that probe "method not found" so the CLI falls back
//! to `initialize`, which an SDK server would not let a test pin.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// The protocol version this server speaks.
const PROTOCOL: &str = "2025-11-25";
/// The id of the elicitation request it sends (one at a time).
const ELICITATION_ID: &str = "elicit-1";

fn send(out: &mut impl Write, message: &Value) -> std::io::Result<()> {
    writeln!(out, "{message}")?;
    out.flush()
}

fn main() -> std::io::Result<()> {
    let stage = std::env::var("DEPLOY_STAGE").unwrap_or_else(|_| "an unnamed stage".to_owned());
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    // The tools/call waiting for the form: its id.
    let mut waiting: Option<Value> = None;
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned();
        match (message["method"].as_str(), id) {
            (Some("initialize"), Some(id)) => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "kandev-e2e-deploy", "version": "1.0.0"}}}),
            )?,
            (Some("tools/list"), Some(id)) => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                    "name": "confirm_deploy",
                    "description": "Asks the operator where to deploy a service.",
                    "inputSchema": {"type": "object",
                        "properties": {"service": {"type": "string"}},
                        "required": ["service"]}}]}}),
            )?,
            (Some("tools/call"), Some(id)) => {
                let service = message
                    .pointer("/params/arguments/service")
                    .and_then(Value::as_str)
                    .unwrap_or("the service");
                waiting = Some(id);
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "id": ELICITATION_ID, "method": "elicitation/create",
                        "params": {"mode": "form",
                            "message": format!("Deploy {service} to {stage}: which target?"),
                            "requestedSchema": {"type": "object", "properties": {
                                "target": {"type": "string", "title": "Target", "enum": ["staging", "prod"]},
                                "note": {"type": "string", "title": "Note"}},
                                "required": ["target"]}}}),
                )?;
            }
            (Some("ping"), Some(id)) => {
                send(&mut out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}))?;
            }
            // Notifications (initialized, cancelled, …) need no answer.
            (Some(_), None) => {}
            (Some(method), Some(id)) => send(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601, "message": format!("method not found: {method}")}}),
            )?,
            // The client's answer to our form.
            (None, Some(id)) if id == ELICITATION_ID => {
                let Some(call) = waiting.take() else { continue };
                let outcome = match (message.get("result"), message.get("error")) {
                    (Some(result), _) => format!(
                        "elicitation {}: {}",
                        result["action"].as_str().unwrap_or("?"),
                        result.get("content").cloned().unwrap_or(Value::Null)
                    ),
                    (None, error) => format!(
                        "elicitation failed: {}",
                        error.cloned().unwrap_or(Value::Null)
                    ),
                };
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "id": call, "result": {
                        "content": [{"type": "text", "text": outcome}]}}),
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}
