//! One agent subprocess and the ACP client connection to it.
//!
//! agentctl spawns the agent itself (command, cwd from the session's `AgentSpec`; its
//! environment chosen by [`agent_environment`]),
//! speaks ACP over its stdin/stdout with the `agent-client-protocol` SDK's client side,
//! turns its stderr into lines and its exit into a callback. Incoming agent requests are
//! handled from their **raw** params (an untyped handler), so a malformed
//! `elicitation/create` can still be answered `decline` rather than a JSON-RPC error.
//!
//! Handlers run inside the SDK's dispatch loop, so [`AgentHandler`] methods must return
//! quickly: park responders, emit events, spawn timers; never wait for the operator.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::{Agent, Client, Handled, Lines, UntypedMessage};
use futures::{SinkExt, StreamExt};
use kandev_agent_stream::DoorDecline;
use kandev_agent_stream::agent_env::agent_environment;
use kandev_agent_stream::request::AgentSpec;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};

/// The responder of one incoming agent request (JSON result).
pub type AcpResponder = agent_client_protocol::Responder<Value, agent_client_protocol::V1>;
/// The ACP connection to the agent.
pub type AcpConnection = agent_client_protocol::v1::ConnectionTo<Agent>;

/// ACP method of a form elicitation.
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// ACP method of a permission request.
pub const REQUEST_PERMISSION: &str = "session/request_permission";
/// ACP notification carrying session updates.
pub const SESSION_UPDATE: &str = "session/update";

/// What the connection reports to the session that owns it.
pub trait AgentHandler: Send + Sync + 'static {
    /// Any frame arrived from the agent (drives the idle timeout).
    fn activity(&self);
    /// A `session/update` notification, params verbatim.
    fn session_update(&self, params: Value);
    /// An `elicitation/create` request; `responder` must be answered exactly once.
    fn elicitation(&self, params: Value, responder: AcpResponder);
    /// A `session/request_permission` request.
    fn permission(&self, params: Value, responder: AcpResponder);
    /// An `elicitation/create` was answered `decline` before reaching
    /// [`AgentHandler::elicitation`] (its params were not an object).
    fn declined(&self, reason: DoorDecline);
    /// One line of the agent's stderr, without its newline.
    fn stderr_line(&self, line: String);
    /// The agent process ended (`None`: killed by a signal).
    fn exited(&self, code: Option<i32>);
}

/// Why the agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `command` was empty.
    #[error("agent command is empty")]
    EmptyCommand,
    /// The OS refused to start it.
    #[error("cannot start agent `{program}`: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A pipe was missing (cannot happen with piped stdio; reported rather than unwrapped).
    #[error("agent `{0}` started without the {1} pipe")]
    MissingPipe(String, &'static str),
    /// The SDK connection ended before it was usable.
    #[error("ACP connection to the agent closed before it started")]
    ConnectionClosed,
}

/// A request to the agent failed.
#[derive(Debug, thiserror::Error)]
#[error("ACP `{method}` failed: {message}")]
pub struct RequestError {
    /// The method sent.
    pub method: String,
    /// What came back (the agent's JSON-RPC error, or a transport failure).
    pub message: String,
}

/// A running agent: its ACP connection and the controls of its process.
pub struct AgentLink {
    cx: AcpConnection,
    pid: Option<u32>,
    stop: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
    exit: watch::Receiver<Option<Option<i32>>>,
}

impl AgentLink {
    /// Spawns `spec` and connects the SDK's client side to its stdio.
    pub async fn spawn(
        spec: &AgentSpec,
        handler: Arc<dyn AgentHandler>,
    ) -> Result<Self, SpawnError> {
        let (program, args) = spec.command.split_first().ok_or(SpawnError::EmptyCommand)?;
        // Chosen, not inherited (docs/architecture.md §10): the agent runs model-driven code, so it
        // never sees the stream token (it could answer its own elicitations), kandev's
        // settings or credentials it was not deliberately given.
        let (env, dropped) = agent_environment(std::env::vars(), spec);
        if !dropped.is_empty() {
            tracing::warn!(agent = %spec.id, ?dropped, "withheld variables not passed to the agent");
        }
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(&env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|source| SpawnError::Io {
            program: program.clone(),
            source,
        })?;
        let pid = child.id();
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| SpawnError::MissingPipe(program.clone(), "stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| SpawnError::MissingPipe(program.clone(), "stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| SpawnError::MissingPipe(program.clone(), "stderr"))?;
        tracing::info!(program = %program, pid, "agent started");

        spawn_stderr_reader(stderr, Arc::clone(&handler));

        let (stop_tx, stop_rx) = oneshot::channel();
        let stop = Arc::new(Mutex::new(Some(stop_tx)));
        let (kill_tx, kill_rx) = oneshot::channel();
        let (exit_tx, exit_rx) = watch::channel(None);
        spawn_exit_watcher(
            child,
            kill_rx,
            exit_tx,
            Arc::clone(&stop),
            Arc::clone(&handler),
        );

        let (cx_tx, cx_rx) = oneshot::channel();
        let transport = guarded_lines(stdin, stdout, Arc::clone(&handler));
        tokio::spawn(run_connection(transport, handler, cx_tx, stop_rx));
        let cx = cx_rx.await.map_err(|_| SpawnError::ConnectionClosed)?;

        Ok(Self {
            cx,
            pid,
            stop,
            kill: Mutex::new(Some(kill_tx)),
            exit: exit_rx,
        })
    }

    /// The agent's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Sends a request with raw params and waits for its result. Call it outside the
    /// dispatch loop (from a request task), never from an [`AgentHandler`] method.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RequestError> {
        let error = |message: String| RequestError {
            method: method.to_owned(),
            message,
        };
        let message = UntypedMessage::new(method, params).map_err(|err| error(err.to_string()))?;
        self.cx
            .send_request(message)
            .block_task()
            .await
            .map_err(|err| error(err.to_string()))
    }

    /// Sends a notification with raw params.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), RequestError> {
        let error = |message: String| RequestError {
            method: method.to_owned(),
            message,
        };
        let message = UntypedMessage::new(method, params).map_err(|err| error(err.to_string()))?;
        self.cx
            .send_notification(message)
            .map_err(|err| error(err.to_string()))
    }

    /// Whether the process has exited.
    pub fn has_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    /// Waits for the process to exit; returns its code.
    pub async fn wait_exit(&self) -> Option<i32> {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(code) => code.flatten(),
            // The watcher is gone, which only happens after it published the exit.
            Err(_) => None,
        }
    }

    /// Stops the agent: closes the ACP connection (and with it the agent's stdin), waits
    /// up to `grace` for it to exit, then kills it. Returns its exit code.
    pub async fn stop(&self, grace: Duration) -> Option<i32> {
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        if let Ok(code) = tokio::time::timeout(grace, self.wait_exit()).await {
            return code;
        }
        tracing::warn!(
            pid = self.pid,
            ?grace,
            "agent did not exit after its stdin closed; killing it"
        );
        if let Some(kill) = lock(&self.kill).take() {
            let _ = kill.send(());
        }
        self.wait_exit().await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn run_connection<T>(
    transport: T,
    handler: Arc<dyn AgentHandler>,
    cx_tx: oneshot::Sender<AcpConnection>,
    stop_rx: oneshot::Receiver<()>,
) where
    T: agent_client_protocol::ConnectTo<Client> + 'static,
{
    let requests = Arc::clone(&handler);
    let notifications = handler;
    let result = Client
        .v1()
        .name("kandev-agentctl")
        .on_receive_request(
            async move |message: UntypedMessage, responder: AcpResponder, _cx: AcpConnection| {
                crate::metrics::acp_request(message.method());
                let handled: Handled<(UntypedMessage, AcpResponder)> = match message.method() {
                    ELICITATION_CREATE => {
                        requests.elicitation(message.params, responder);
                        Handled::Yes
                    }
                    REQUEST_PERMISSION => {
                        requests.permission(message.params, responder);
                        Handled::Yes
                    }
                    // Not advertised (fs, terminal, …): the SDK answers "method not found".
                    _ => Handled::No {
                        message: (message, responder),
                        retry: false,
                    },
                };
                Ok(handled)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |message: UntypedMessage, _cx: AcpConnection| {
                if message.method() == SESSION_UPDATE {
                    notifications.session_update(message.params);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: AcpConnection| {
            let _ = cx_tx.send(cx.clone());
            tokio::select! {
                _ = stop_rx => {}
                _ = cx.incoming_closed() => {}
            }
            Ok(())
        })
        .await;
    match result {
        Ok(()) => tracing::debug!("ACP connection closed"),
        Err(err) => tracing::warn!(error = %err, "ACP connection ended with an error"),
    }
}

/// The newline-delimited JSON-RPC transport over the agent's stdio, with one guard.
///
/// JSON-RPC requires structured params, so the SDK rejects an `elicitation/create` whose
/// params are a string or a number as an invalid request, answered with `id: null` —
/// which leaves the agent's request without any response. The guard answers such a
/// request `{"action":"decline"}` under its own id before the SDK sees it, so every
/// `elicitation/create` gets exactly one response. Every line read also counts as agent
/// activity for the idle timeout.
fn guarded_lines(
    mut stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    handler: Arc<dyn AgentHandler>,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let (sdk_tx, mut sdk_rx) = futures::channel::mpsc::unbounded::<String>();
    let (guard_tx, mut guard_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                line = sdk_rx.next() => match line {
                    Some(line) => line,
                    // The SDK closed its side: close the agent's stdin.
                    None => break,
                },
                Some(line) = guard_rx.recv() => line,
            };
            let written = async {
                stdin.write_all(line.as_bytes()).await?;
                stdin.write_all(b"\n").await?;
                stdin.flush().await
            };
            if let Err(err) = written.await {
                tracing::debug!(error = %err, "agent stdin closed");
                break;
            }
        }
    });
    let outgoing = sdk_tx.sink_map_err(std::io::Error::other);
    let lines = tokio::io::BufReader::new(stdout).lines();
    let incoming = futures::stream::unfold(
        (lines, guard_tx, handler),
        |(mut lines, guard_tx, handler)| async move {
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        handler.activity();
                        if let Some(reply) = decline_unstructured_elicitation(&line) {
                            tracing::info!("elicitation/create with unstructured params declined");
                            crate::metrics::acp_request(ELICITATION_CREATE);
                            handler.declined(DoorDecline::Malformed);
                            let _ = guard_tx.send(reply);
                            continue;
                        }
                        return Some((Ok(line), (lines, guard_tx, handler)));
                    }
                    Ok(None) => return None,
                    Err(err) => return Some((Err(err), (lines, guard_tx, handler))),
                }
            }
        },
    );
    Lines::new(outgoing, Box::pin(incoming))
}

/// The decline for an `elicitation/create` request whose params are not an object.
fn decline_unstructured_elicitation(line: &str) -> Option<String> {
    // Most lines are streamed text: skip parsing any that cannot name the method. Its
    // letters can only be hidden from `contains` by a `\u` escape.
    if !line.contains("elicitation") && !line.contains("\\u") {
        return None;
    }
    let frame: Value = serde_json::from_str(line).ok()?;
    let id = frame
        .get("id")
        .filter(|id| id.is_string() || id.is_number())?;
    if frame.get("method").and_then(Value::as_str) != Some(ELICITATION_CREATE) {
        return None;
    }
    if frame.get("params").is_some_and(Value::is_object) {
        return None;
    }
    Some(
        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"action": "decline"}})
            .to_string(),
    )
}

fn spawn_stderr_reader(stderr: tokio::process::ChildStderr, handler: Arc<dyn AgentHandler>) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => handler.stderr_line(line),
                Ok(None) => break,
                Err(err) => {
                    tracing::debug!(error = %err, "agent stderr unreadable");
                    break;
                }
            }
        }
    });
}

fn spawn_exit_watcher(
    mut child: Child,
    kill_rx: oneshot::Receiver<()>,
    exit_tx: watch::Sender<Option<Option<i32>>>,
    stop: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    handler: Arc<dyn AgentHandler>,
) {
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            _ = kill_rx => {
                let _ = child.start_kill();
                child.wait().await
            }
        };
        let code = match status {
            Ok(status) => status.code(),
            Err(err) => {
                tracing::warn!(error = %err, "cannot wait for the agent process");
                None
            }
        };
        tracing::info!(code, "agent exited");
        crate::metrics::agent_exited(code);
        // The connection cannot outlive the process it talks to.
        if let Some(stop) = lock(&stop).take() {
            let _ = stop.send(());
        }
        handler.exited(code);
        let _ = exit_tx.send(Some(code));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unstructured_elicitation_params_are_declined_under_their_own_id() {
        for params in [json!("text"), json!(42), json!(null), json!([1, 2])] {
            let line = json!({"jsonrpc": "2.0", "id": "e-7", "method": "elicitation/create", "params": params}).to_string();
            let reply: Value =
                serde_json::from_str(&decline_unstructured_elicitation(&line).expect("declined"))
                    .expect("JSON");
            assert_eq!(
                reply,
                json!({"jsonrpc": "2.0", "id": "e-7", "result": {"action": "decline"}})
            );
        }
        let absent = json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create"}).to_string();
        assert!(decline_unstructured_elicitation(&absent).is_some());
        // The method's letters escaped: still found, though `contains` cannot see them.
        let escaped = r#"{"jsonrpc":"2.0","id":4,"method":"\u0065licitation\/create","params":7}"#;
        assert!(decline_unstructured_elicitation(escaped).is_some());
    }

    #[test]
    fn everything_else_passes_to_the_sdk() {
        let object =
            json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}})
                .to_string();
        let other = json!({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": "x"}).to_string();
        let notification =
            json!({"jsonrpc": "2.0", "method": "elicitation/create", "params": "x"}).to_string();
        for line in [object, other, notification, "not json".to_owned()] {
            assert_eq!(decline_unstructured_elicitation(&line), None, "{line}");
        }
    }
}
