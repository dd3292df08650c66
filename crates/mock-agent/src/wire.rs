//! The stdio transport, tapped at the line level.
//!
//! The SDK is given a [`Lines`] transport whose two halves pass through here, so:
//! - `MOCK_AGENT_LOG` records exactly the lines that crossed stdin/stdout,
//!   including frames the SDK generates itself (`$/cancel_request`, errors);
//! - the `clientCapabilities` of `initialize` are kept as received, byte for byte
//!   in key order, for `if_capability`;
//! - params the SDK refuses to send (JSON-RPC says params are an object or an
//!   array; `elicit_raw` must be able to send a string) travel through the SDK
//!   as a placeholder object that the outgoing half swaps for the real value, so
//!   the request still gets the SDK's id, response routing and cancellation;
//! - a drain barrier lets `exit` wait until every frame queued before it is out.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::Lines;
use futures::{Sink, Stream, StreamExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::frame_log::{Direction, FrameLog};

/// Key of the placeholder object standing in for params the SDK cannot send.
pub const RAW_PARAMS_SLOT: &str = "mock-agent/raw-params-slot";
/// Method of the notification that marks a drain barrier; never written out.
pub const BARRIER_METHOD: &str = "mock-agent/drain-barrier";

type OutgoingSink = Pin<Box<dyn Sink<String, Error = io::Error> + Send>>;
type IncomingStream = Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>;

/// The process's stdin/stdout, shared by the SDK transport and the scenario runner.
#[derive(Debug)]
pub struct Wire {
    stdout: tokio::sync::Mutex<tokio::io::Stdout>,
    log: Option<FrameLog>,
    client_capabilities: Mutex<Value>,
    raw_params: Mutex<HashMap<u64, Value>>,
    barriers: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    next_slot: AtomicU64,
}

impl Wire {
    /// A wire over the process's stdio, logging frames to `log` when given.
    pub fn new(log: Option<FrameLog>) -> Arc<Self> {
        Arc::new(Self {
            stdout: tokio::sync::Mutex::new(tokio::io::stdout()),
            log,
            client_capabilities: Mutex::new(Value::Null),
            raw_params: Mutex::new(HashMap::new()),
            barriers: Mutex::new(HashMap::new()),
            next_slot: AtomicU64::new(1),
        })
    }

    /// The SDK transport: stdin lines in, stdout lines out, both through this tap.
    pub fn transport(self: &Arc<Self>) -> Lines<OutgoingSink, IncomingStream> {
        let reader = BufReader::new(tokio::io::stdin());
        let lines = futures::stream::unfold(reader, |mut reader| async move {
            let mut line = String::new();
            match reader.read_line(&mut line).await {
                Ok(0) => None,
                Ok(_) => {
                    let trimmed = line.trim_end_matches(['\n', '\r']).len();
                    line.truncate(trimmed);
                    Some((Ok(line), reader))
                }
                Err(error) => Some((Err(error), reader)),
            }
        });
        let wire = Arc::clone(self);
        let incoming = lines.filter(move |item| {
            let forward = match item {
                Ok(line) => wire.observe_incoming(line),
                Err(_) => true,
            };
            futures::future::ready(forward)
        });
        let outgoing = futures::sink::unfold(Arc::clone(self), |wire, line: String| async move {
            wire.write_outgoing(line).await?;
            Ok::<_, io::Error>(wire)
        });
        Lines::new(Box::pin(outgoing), Box::pin(incoming))
    }

    /// The `clientCapabilities` of the latest `initialize`, as received (null before it).
    pub fn client_capabilities(&self) -> Value {
        lock(&self.client_capabilities).clone()
    }

    /// Reserve a placeholder for `params`; send the returned object through the
    /// SDK and the outgoing half writes `params` in its place.
    pub fn raw_params_placeholder(&self, params: Value) -> Value {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        lock(&self.raw_params).insert(slot, params);
        json!({ RAW_PARAMS_SLOT: slot })
    }

    /// Register a drain barrier; send `(BARRIER_METHOD, params)` as a notification
    /// through the SDK, and the receiver fires once every earlier frame is written.
    pub fn barrier(&self) -> (Value, oneshot::Receiver<()>) {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let (done, wait) = oneshot::channel();
        lock(&self.barriers).insert(slot, done);
        (json!({ BARRIER_METHOD: slot }), wait)
    }

    /// Exit the process with `code` once no frame is half-written (waiting at
    /// most a second, so a client that stopped reading cannot keep us alive).
    pub async fn exit(&self, code: i32) -> ! {
        if let Ok(mut stdout) =
            tokio::time::timeout(Duration::from_secs(1), self.stdout.lock()).await
        {
            let _ = tokio::time::timeout(Duration::from_secs(1), stdout.flush()).await;
        }
        std::process::exit(code)
    }

    /// Log an incoming line and decide whether the SDK sees it.
    fn observe_incoming(&self, line: &str) -> bool {
        if line.trim().is_empty() {
            return false;
        }
        if let Some(log) = &self.log {
            log.record(Direction::Recv, line);
        }
        if let Ok(Value::Object(frame)) = serde_json::from_str::<Value>(line)
            && frame.get("method").and_then(Value::as_str) == Some("initialize")
        {
            let capabilities = frame
                .get("params")
                .and_then(|params| params.get("clientCapabilities"))
                .cloned()
                .unwrap_or(Value::Null);
            *lock(&self.client_capabilities) = capabilities;
        }
        true
    }

    /// Write one SDK line, swapping placeholders and swallowing barriers.
    async fn write_outgoing(&self, line: String) -> io::Result<()> {
        let line = match self.intercept(&line) {
            Intercept::Pass => line,
            Intercept::Rewritten(line) => line,
            Intercept::Barrier(done) => {
                // Everything queued before the barrier has been written by now,
                // because the SDK hands lines over one at a time, in order.
                let _ = done.send(());
                return Ok(());
            }
        };
        let mut stdout = self.stdout.lock().await;
        let mut bytes = line.clone().into_bytes();
        bytes.push(b'\n');
        stdout.write_all(&bytes).await?;
        stdout.flush().await?;
        // Logged under the stdout lock so the log's order is the wire's order.
        if let Some(log) = &self.log {
            log.record(Direction::Send, &line);
        }
        Ok(())
    }

    fn intercept(&self, line: &str) -> Intercept {
        // Cheap test first: almost every line is neither kind.
        if !line.contains(RAW_PARAMS_SLOT) && !line.contains(BARRIER_METHOD) {
            return Intercept::Pass;
        }
        let Ok(Value::Object(mut frame)) = serde_json::from_str::<Value>(line) else {
            return Intercept::Pass;
        };
        if frame.get("method").and_then(Value::as_str) == Some(BARRIER_METHOD) {
            let slot = slot_of(&frame, BARRIER_METHOD);
            return match slot.and_then(|slot| lock(&self.barriers).remove(&slot)) {
                Some(done) => Intercept::Barrier(done),
                None => Intercept::Pass,
            };
        }
        let Some(slot) = slot_of(&frame, RAW_PARAMS_SLOT) else {
            return Intercept::Pass;
        };
        let Some(params) = lock(&self.raw_params).remove(&slot) else {
            return Intercept::Pass;
        };
        frame.insert("params".into(), params);
        Intercept::Rewritten(Value::Object(frame).to_string())
    }
}

enum Intercept {
    Pass,
    Rewritten(String),
    Barrier(oneshot::Sender<()>),
}

/// The slot number of a placeholder `params` object `{key: n}` and nothing else.
fn slot_of(frame: &Map<String, Value>, key: &str) -> Option<u64> {
    let params = frame.get("params")?.as_object()?;
    if params.len() != 1 {
        return None;
    }
    params.get(key)?.as_u64()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded maps stay consistent even if a holder panicked.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_is_swapped_for_any_json_and_other_members_keep_their_order() {
        let wire = Wire::new(None);
        for raw in [
            json!("just a string"),
            json!(42),
            json!(null),
            json!([1, "two"]),
        ] {
            let placeholder = wire.raw_params_placeholder(raw.clone());
            let line = json!({"jsonrpc": "2.0", "id": "abc", "method": "elicitation/create", "params": placeholder}).to_string();
            let Intercept::Rewritten(out) = wire.intercept(&line) else {
                panic!("placeholder not rewritten: {line}");
            };
            let expected = json!({"jsonrpc": "2.0", "id": "abc", "method": "elicitation/create", "params": raw});
            assert_eq!(out, expected.to_string());
            // A slot is used once.
            assert!(matches!(wire.intercept(&line), Intercept::Pass));
        }
    }

    #[test]
    fn ordinary_lines_pass_untouched() {
        let wire = Wire::new(None);
        let line = r#"{"jsonrpc":"2.0","method":"session/update","params":{"text":"mock-agent/raw-params-slot"}}"#;
        assert!(matches!(wire.intercept(line), Intercept::Pass));
    }

    #[test]
    fn barrier_is_swallowed_and_fires() {
        let wire = Wire::new(None);
        let (params, mut wait) = wire.barrier();
        let line =
            json!({"jsonrpc": "2.0", "method": BARRIER_METHOD, "params": params}).to_string();
        let Intercept::Barrier(done) = wire.intercept(&line) else {
            panic!("barrier not recognised");
        };
        assert!(wait.try_recv().is_err());
        done.send(()).expect("receiver alive");
        assert!(wait.try_recv().is_ok());
    }

    #[test]
    fn initialize_capabilities_are_kept_as_received() {
        let wire = Wire::new(None);
        assert_eq!(wire.client_capabilities(), Value::Null);
        let line = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"terminal_output":true},"elicitation":{"form":{}}}}}"#;
        assert!(wire.observe_incoming(line));
        assert_eq!(
            wire.client_capabilities().to_string(),
            r#"{"_meta":{"terminal_output":true},"elicitation":{"form":{}}}"#
        );
        assert!(!wire.observe_incoming("   "));
    }
}
