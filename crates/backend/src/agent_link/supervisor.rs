//! The one task per link that owns the WebSocket: it writes queued request frames,
//! reads every frame (answers go to their waiters, `agent.event` notifications go to
//! the events channel in arrival order), and after a drop reconnects with backoff and
//! re-attaches the session before the stream is usable again.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kandev_agent_stream::request::{ElicitationsList, QuestionsList, SessionAttach};
use kandev_agent_stream::response::SessionAttached;
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ElicitationRequested, Envelope, ErrorCode, ErrorPayload,
    FrameType, StreamRequest, action,
};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::LinkEvent;
use super::dial::{self, DialError, Endpoint, WsStream};
use super::shared::{Outgoing, Shared};

/// First delay between reconnect attempts.
const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
/// Longest delay between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why the reading loop of one connection ended.
enum PumpEnd {
    /// `close` was called.
    Shutdown,
    /// The connection closed or failed.
    Dropped(String),
    /// agentctl closed this stream because another one attached to the session.
    /// Re-attaching would take the session back and start a tug of war.
    Replaced,
}

/// What a re-attach learned: agentctl's snapshots and the events it flushed meanwhile.
#[derive(Default)]
struct Attached {
    /// `agent.elicitations.list` (or the attach's own list when that was refused).
    pending: Vec<ElicitationRequested>,
    /// `agent.questions.list`; `None` when agentctl did not answer it usably.
    questions: Option<Vec<AskUserQuestionRequested>>,
    /// Notifications that arrived during the exchanges, in order.
    flushed: Vec<Envelope>,
    /// How many of `flushed` arrived before the elicitation snapshot: those go before
    /// `Reattached`, the rest (newer than that snapshot) after it.
    snapshot_at: usize,
}

/// How agentctl answered one request of a re-attach.
enum Exchanged<T> {
    /// Its response, decoded.
    Answer(T),
    /// A response that is not `T`.
    Undecodable(serde_json::Error),
    /// An error frame.
    Refused(ErrorPayload),
}

/// The close reason agentctl gives a stream that a newer one replaced.
pub(crate) const REPLACED_REASON: &str = "replaced by a newer agent stream";

/// Silent heartbeats after which the peer counts as gone.
const HEARTBEATS_MISSED: u32 = 3;

/// How reconnecting ended.
enum Reconnect {
    /// A new, re-attached connection.
    Up(Box<WsStream>, Outgoing),
    /// `close` was called meanwhile.
    Shutdown,
    /// Give up: report `Lost` with this reason.
    Lost(String),
}

/// Why one reconnect attempt failed.
enum AttemptError {
    /// Try again after the backoff.
    Retry(String),
    /// Retrying cannot help.
    Fatal(String),
    /// `close` was called meanwhile.
    Shutdown,
}

/// See the module docs.
pub(crate) struct Supervisor {
    shared: Arc<Shared>,
    endpoint: Endpoint,
    events: mpsc::UnboundedSender<LinkEvent>,
}

/// The signals the supervisor waits on besides the socket.
struct Signals {
    /// Becomes true on `close`.
    shutdown: watch::Receiver<bool>,
    /// A local agentctl's exit status, once it exited.
    exit: Option<watch::Receiver<Option<String>>>,
}

impl Supervisor {
    pub fn new(
        shared: Arc<Shared>,
        endpoint: Endpoint,
        events: mpsc::UnboundedSender<LinkEvent>,
    ) -> Self {
        Self {
            shared,
            endpoint,
            events,
        }
    }

    /// Runs until `close`, or until the link is lost.
    pub async fn run(self, ws: WsStream, mut outgoing: Outgoing) {
        let mut signals = Signals {
            shutdown: self.shared.shutdown_signal(),
            exit: self
                .shared
                .process
                .as_ref()
                .map(|process| process.exit_watch()),
        };
        let mut ws = ws;
        loop {
            // The connection is consumed: a dropped one is closed before reconnecting.
            let end = self.pump(ws, &mut outgoing, &mut signals.shutdown).await;
            self.shared.disconnect();
            match end {
                PumpEnd::Shutdown => {
                    tracing::debug!("agent stream closed");
                    return;
                }
                PumpEnd::Replaced => {
                    let reason = "another agent stream took over the session".to_owned();
                    tracing::error!(reason = %reason, "agent stream lost");
                    crate::metrics::agent_stream_lost();
                    self.emit(LinkEvent::Lost { reason });
                    return;
                }
                PumpEnd::Dropped(why) => {
                    if self.shared.is_closed() {
                        return;
                    }
                    tracing::warn!(reason = %why, "agent stream dropped; reconnecting");
                    self.emit(LinkEvent::Disconnected);
                }
            }
            match self.reconnect(&mut signals).await {
                Reconnect::Up(new_ws, new_outgoing) => {
                    crate::metrics::agent_stream_reconnected();
                    ws = *new_ws;
                    outgoing = new_outgoing;
                }
                Reconnect::Shutdown => return,
                Reconnect::Lost(reason) => {
                    tracing::error!(reason = %reason, "agent stream lost");
                    crate::metrics::agent_stream_lost();
                    if let Some(process) = &self.shared.process {
                        // An unreachable agentctl is of no further use to this session.
                        process.kill();
                    }
                    self.emit(LinkEvent::Lost { reason });
                    return;
                }
            }
        }
    }

    fn emit(&self, event: LinkEvent) {
        // A dropped receiver only means nobody listens; requests still work.
        let _ = self.events.send(event);
    }

    /// Serves one connection until it ends.
    async fn pump(
        &self,
        mut ws: WsStream,
        outgoing: &mut Outgoing,
        shutdown: &mut watch::Receiver<bool>,
    ) -> PumpEnd {
        let period = self.shared.options.heartbeat_interval;
        let mut heartbeat = tokio::time::interval_at(Instant::now() + period, period);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_seen = Instant::now();
        loop {
            tokio::select! {
                biased;
                () = closed(shutdown) => {
                    // Best effort: a dead peer must not hold up shutdown.
                    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
                    return PumpEnd::Shutdown;
                }
                frame = ws.next() => {
                    last_seen = Instant::now();
                    match frame {
                        Some(Ok(Message::Text(text))) => self.dispatch(text.as_str()),
                        Some(Ok(Message::Close(close))) => {
                            let why = close.map(|c| c.reason.to_string()).unwrap_or_default();
                            if why == REPLACED_REASON {
                                return PumpEnd::Replaced;
                            }
                            return PumpEnd::Dropped(format!("agentctl closed the stream ({why})"));
                        }
                        Some(Ok(_)) => {} // ping/pong/binary: proof of life only
                        Some(Err(err)) => return PumpEnd::Dropped(err.to_string()),
                        None => return PumpEnd::Dropped("the stream ended".into()),
                    }
                }
                _ = heartbeat.tick() => {
                    // A half-open TCP connection never errors on its own: ping, and give up
                    // on a peer that has sent nothing (not even a pong) for a while.
                    let silent = last_seen.elapsed();
                    if silent > period * HEARTBEATS_MISSED {
                        return PumpEnd::Dropped(format!("no frame from agentctl for {silent:?}"));
                    }
                    if let Err(err) = ws.send(Message::Ping(Default::default())).await {
                        return PumpEnd::Dropped(format!("ping failed: {err}"));
                    }
                }
                frame = outgoing.recv() => match frame {
                    Some(frame) => {
                        if let Err(err) = ws.send(frame).await {
                            return PumpEnd::Dropped(format!("write failed: {err}"));
                        }
                    }
                    // Only `disconnect`/`close` drop the sender.
                    None => return PumpEnd::Shutdown,
                },
            }
        }
    }

    /// Routes one text frame. Payloads are never logged: they can carry question text.
    fn dispatch(&self, text: &str) {
        let envelope: Envelope = match serde_json::from_str(text) {
            Ok(envelope) => envelope,
            Err(err) => {
                // The category only: serde's message can quote the frame's content.
                tracing::warn!(category = ?err.classify(), "undecodable frame from agentctl ignored");
                return;
            }
        };
        match envelope.frame_type {
            FrameType::Response | FrameType::Error => {
                let id = envelope.id.clone();
                if !self.shared.resolve(envelope) {
                    tracing::debug!(request_id = %id, "answer for a request nobody waits for");
                }
            }
            FrameType::Notification => self.deliver(&envelope),
            FrameType::Request => {
                tracing::warn!(action = %envelope.action, "agentctl sent a request; ignored");
            }
        }
    }

    /// Hands one notification to the session runtime, unless it is an agent event
    /// already delivered (agentctl replays from `after_seq`, which may be older).
    fn deliver(&self, envelope: &Envelope) {
        let event = decode_event(envelope);
        if envelope.action != action::AGENT_EVENT {
            return;
        }
        if let Some(AgentEvent::ElicitationRequested(request)) = &event {
            // A point hop (kandev_log::hops): the span opens and closes here.
            let _received = tracing::debug_span!(target: "kandev::timing", "backend.received", pending_id = %request.pending_id);
        }
        let fresh = self.shared.deliver_if_new(&envelope.id, || {
            if let Some(event) = event {
                self.emit(LinkEvent::Agent(event));
            }
        });
        if !fresh {
            tracing::debug!(seq = %envelope.id, "replayed agent event already delivered; skipped");
        }
    }

    /// Reconnects with backoff within the reconnect window.
    async fn reconnect(&self, signals: &mut Signals) -> Reconnect {
        let window = self.shared.options.reconnect_window;
        let started = Instant::now();
        let mut delay = INITIAL_BACKOFF;
        loop {
            if let Some(status) = exited(signals.exit.as_ref()) {
                return Reconnect::Lost(format!("agentctl exited ({status})"));
            }
            let attempt = tokio::select! {
                biased;
                () = closed(&mut signals.shutdown) => return Reconnect::Shutdown,
                attempt = self.attempt() => attempt,
            };
            let last_error = match attempt {
                Ok(up) => return up,
                Err(AttemptError::Shutdown) => return Reconnect::Shutdown,
                Err(AttemptError::Fatal(reason)) => return Reconnect::Lost(reason),
                Err(AttemptError::Retry(error)) => error,
            };
            tracing::debug!(error = %last_error, "reconnect attempt failed");
            if started.elapsed() + delay > window {
                return Reconnect::Lost(format!(
                    "could not re-attach to agentctl within {window:?}: {last_error}"
                ));
            }
            tokio::select! {
                biased;
                () = closed(&mut signals.shutdown) => return Reconnect::Shutdown,
                // A local agentctl that died will never come back: stop waiting at once.
                () = wait_exit(signals.exit.as_mut()) => {}
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_BACKOFF);
        }
    }

    /// One reconnect attempt: connect, re-attach the bound session, publish.
    async fn attempt(&self) -> Result<Reconnect, AttemptError> {
        let timeout = self.shared.options.connect_timeout;
        let mut ws = match tokio::time::timeout(timeout, dial::open(&self.endpoint)).await {
            Ok(Ok(ws)) => ws,
            Ok(Err(DialError::Rejected(reason))) => return Err(AttemptError::Fatal(reason)),
            Ok(Err(DialError::Failed(reason))) => return Err(AttemptError::Retry(reason)),
            Err(_) => {
                return Err(AttemptError::Retry(format!(
                    "connect took over {timeout:?}"
                )));
            }
        };
        let attached = match self.shared.bound_session() {
            Some(session_id) => self.attach(&mut ws, session_id).await?,
            // No session was started on the old stream: nothing to re-attach.
            None => Attached::default(),
        };
        let outgoing = self.go_live(attached)?;
        Ok(Reconnect::Up(Box::new(ws), outgoing))
    }

    /// Publishes a freshly attached stream, then delivers the kept events and, after
    /// them, the pending snapshots that are newer than all of them; the events that
    /// arrived between the two list answers follow `Reattached` (they are newer than the
    /// elicitation snapshot, so they must not be reconciled against it).
    fn go_live(&self, attached: Attached) -> Result<Outgoing, AttemptError> {
        let Some(outgoing) = self.shared.publish() else {
            return Err(AttemptError::Shutdown);
        };
        let Attached {
            pending,
            questions,
            flushed,
            snapshot_at,
        } = attached;
        let (before, after) = flushed.split_at(snapshot_at.min(flushed.len()));
        for envelope in before {
            self.deliver(envelope);
        }
        tracing::info!(
            pending = pending.len(),
            questions = questions.as_ref().map(Vec::len),
            "agent stream re-attached"
        );
        self.emit(LinkEvent::Reattached { pending, questions });
        for envelope in after {
            self.deliver(envelope);
        }
        Ok(outgoing)
    }

    /// Binds a brand-new link to a session that is already running on agentctl (the
    /// backend restarted under it): attaches on `ws`, then publishes it like a
    /// re-attach, so the kept events and then `Reattached` are the first events.
    pub async fn resume(
        &self,
        ws: &mut WsStream,
        session_id: &str,
    ) -> Result<Outgoing, super::LinkError> {
        let attached = match self.attach(ws, session_id.to_owned()).await {
            Ok(attached) => attached,
            Err(AttemptError::Retry(reason) | AttemptError::Fatal(reason)) => {
                return Err(super::LinkError::Unreachable(reason));
            }
            Err(AttemptError::Shutdown) => return Err(super::LinkError::NotConnected),
        };
        self.shared.mark_bound(session_id.to_owned());
        self.go_live(attached)
            .map_err(|_| super::LinkError::NotConnected)
    }

    /// Re-attaches the session on a fresh stream. Returns agentctl's pending list and
    /// the events that arrived meanwhile, in order.
    ///
    /// agentctl answers the attach first and then flushes the events it kept while
    /// detached, so the attach's own pending list is older than those events. The link
    /// therefore asks `agent.elicitations.list` next: its answer queues behind every
    /// flushed event, and the snapshot reported in `Reattached` is newer than every event
    /// delivered before it (a pending that settled while detached is neither listed nor
    /// mistaken for lost). `agent.questions.list` is asked right after it, under the
    /// same rule; events arriving between the two answers are delivered after
    /// `Reattached` (see [`Attached::snapshot_at`]).
    async fn attach(
        &self,
        ws: &mut WsStream,
        session_id: String,
    ) -> Result<Attached, AttemptError> {
        let deadline = Instant::now() + self.shared.options.request_timeout;
        let mut flushed = Vec::new();
        // Everything after the last event delivered, again: frames handed to the dying
        // stream never arrived. Replays of delivered ones are dropped by `deliver`.
        let attach = SessionAttach {
            session_id,
            after_seq: self.shared.after_seq(),
        };
        match self.exchange(ws, &attach, deadline, &mut flushed).await? {
            Exchanged::Answer(SessionAttached { .. }) => {}
            Exchanged::Undecodable(err) => {
                return Err(AttemptError::Fatal(format!(
                    "agent.session.attach answer does not decode: {err}"
                )));
            }
            Exchanged::Refused(error) => {
                return Err(AttemptError::Fatal(format!(
                    "agentctl refused to re-attach the session: {:?}: {}",
                    error.code, error.message
                )));
            }
        }
        // The attach's own list is older than the flushed events: a record they opened is
        // missing from it though agentctl holds it. Reconciling against it would settle
        // such a record while its request still waits, so without a usable list this
        // attempt fails and the link attaches again.
        let pending = match self
            .exchange(ws, &ElicitationsList {}, deadline, &mut flushed)
            .await?
        {
            Exchanged::Answer(list) => list.pending,
            Exchanged::Undecodable(err) => {
                tracing::warn!(category = ?err.classify(), "pending list undecodable; attaching again");
                return Err(AttemptError::Retry(
                    "the pending list does not decode".into(),
                ));
            }
            Exchanged::Refused(error) => {
                tracing::warn!(code = ?error.code, "pending list refused; attaching again");
                return Err(AttemptError::Retry(format!(
                    "agentctl refused the pending list: {:?}",
                    error.code
                )));
            }
        };
        let snapshot_at = flushed.len();
        // No list (refused, undecodable) means "unknown": the runtime then leaves every
        // ask_user_question record as it is rather than withdraw ones agentctl may hold.
        let questions = match self
            .exchange(ws, &QuestionsList {}, deadline, &mut flushed)
            .await?
        {
            Exchanged::Answer(list) => Some(list.pending),
            Exchanged::Undecodable(err) => {
                tracing::warn!(category = ?err.classify(), "question list undecodable; not reconciling calls");
                None
            }
            Exchanged::Refused(error) => {
                tracing::warn!(code = ?error.code, "question list refused; not reconciling calls");
                None
            }
        };
        Ok(Attached {
            pending,
            questions,
            flushed,
            snapshot_at,
        })
    }

    /// One request/answer on a stream that is not published yet; notifications that
    /// arrive meanwhile are kept in `flushed`, in order, for `go_live` to deliver. An
    /// answer that does not decode as `Q`'s response is returned as such: each caller
    /// treats a bad one its own way.
    async fn exchange<Q: StreamRequest>(
        &self,
        ws: &mut WsStream,
        request: &Q,
        deadline: Instant,
        flushed: &mut Vec<Envelope>,
    ) -> Result<Exchanged<Q::Response>, AttemptError> {
        let action = Q::ACTION;
        let id = self.shared.next_id();
        let frame = Envelope::request(id.clone(), action, request);
        ws.send(Message::text(frame.to_text()))
            .await
            .map_err(|err| AttemptError::Retry(format!("sending {action}: {err}")))?;
        loop {
            let frame = tokio::time::timeout_at(deadline, ws.next())
                .await
                .map_err(|_| AttemptError::Retry(format!("{action} unanswered in time")))?;
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) | None => {
                    return Err(AttemptError::Retry(format!(
                        "the stream closed during {action}"
                    )));
                }
                Some(Ok(_)) => continue,
                Some(Err(err)) => {
                    return Err(AttemptError::Retry(format!("during {action}: {err}")));
                }
            };
            let Ok(envelope) = serde_json::from_str::<Envelope>(text.as_str()) else {
                tracing::warn!("undecodable frame from agentctl ignored");
                continue;
            };
            match envelope.frame_type {
                FrameType::Notification => flushed.push(envelope),
                FrameType::Response if envelope.id == id => {
                    return Ok(
                        match serde_json::from_value::<Q::Response>(envelope.payload) {
                            Ok(answer) => Exchanged::Answer(answer),
                            Err(err) => Exchanged::Undecodable(err),
                        },
                    );
                }
                FrameType::Error if envelope.id == id => {
                    let error = envelope
                        .decode_payload::<ErrorPayload>()
                        .unwrap_or_else(|_| {
                            ErrorPayload::new(ErrorCode::Internal, "undecodable error frame")
                        });
                    return Ok(Exchanged::Refused(error));
                }
                // A stale answer to a request of the old connection: its waiter already failed.
                _ => {}
            }
        }
    }
}

/// Decodes an `agent.event` notification; anything else is logged and skipped.
fn decode_event(envelope: &Envelope) -> Option<AgentEvent> {
    if envelope.action != action::AGENT_EVENT {
        tracing::debug!(action = %envelope.action, "unknown notification ignored");
        return None;
    }
    match serde_json::from_value::<AgentEvent>(envelope.payload.clone()) {
        Ok(event) => Some(event),
        Err(err) => {
            // The event name is safe to log; the rest may carry question text.
            let name = envelope
                .payload
                .get("event")
                .and_then(|e| e.as_str())
                .unwrap_or("?");
            tracing::warn!(
                seq = %envelope.id,
                event = name,
                category = ?err.classify(),
                "undecodable agent event skipped"
            );
            None
        }
    }
}

/// Resolves once the link is closed. (A helper so no watch guard lives across an await.)
async fn closed(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|closed| *closed).await.is_err() {
        // The sender lives in `Shared`, which this task holds: cannot happen, but never spin.
        std::future::pending::<()>().await;
    }
}

/// How a local agentctl exited, if it has.
fn exited(exit: Option<&watch::Receiver<Option<String>>>) -> Option<String> {
    exit.and_then(|exit| exit.borrow().clone())
}

/// Resolves when a local agentctl has exited; never for a remote one.
async fn wait_exit(exit: Option<&mut watch::Receiver<Option<String>>>) {
    match exit {
        Some(exit) => {
            let exited = exit.wait_for(Option::is_some).await.is_ok();
            if !exited {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}
