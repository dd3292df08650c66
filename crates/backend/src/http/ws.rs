//! `GET /api/v1/ws`: the operator event stream, `{"type", "data"}` JSON text frames,
//! so a UI never polls. A client says which sessions' transcripts it follows
//! ([`Watch`]) with `?watch=` when it connects or with a `watch` frame, the one kind of
//! frame it may send. The guard has checked the upgrade's `Host` and `Origin` and, with
//! auth on, its Bearer token or session cookie before this handler runs.

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::SinkExt;
use serde::Deserialize;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::auth::Operator;
use crate::events::watch::{FrameError, Watch};
use crate::http::error::AppError;
use crate::state::AppState;

/// The socket's read buffer. An operator sends next to nothing here, and tungstenite
/// zeroes up to this much (128 KiB by default) each time the socket is polled for input,
/// which [`forward`] does once per event it sends.
const READ_BUFFER_BYTES: usize = 4 * 1024;
/// The most events one write carries.
const BATCH: usize = 64;
/// The largest message a client may send (a `watch` of its most sessions is far under
/// it); a larger one ends the socket.
const MOST_CLIENT_MESSAGE_BYTES: usize = 16 * 1024;

/// The frame that tells a client it fell behind and `missed` events: re-read the resources.
fn resync(missed: u64) -> Utf8Bytes {
    serde_json::json!({"type": "resync", "data": {"missed": missed}})
        .to_string()
        .into()
}

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/ws", get(upgrade))
}

/// The query of the upgrade: `watch`, the transcripts to follow from the first event.
#[derive(Debug, Deserialize)]
struct Connect {
    watch: Option<String>,
}

async fn upgrade(
    State(state): State<AppState>,
    operator: Operator,
    query: Result<Query<Connect>, QueryRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    // The watch first: its error says more than a missing upgrade header would.
    let Query(connect) = query?;
    let watch = connect
        .watch
        .as_deref()
        .map(Watch::from_query)
        .transpose()
        .map_err(|err| AppError::BadRequest(err.to_string()))?;
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    tracing::debug!(operator = %operator.name, "operator event stream opened");
    // Subscribe before the upgrade completes, so nothing published after the
    // handshake response can be missed.
    let events = state.hub.subscribe();
    let drain = state.drain.clone();
    Ok(ws
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(MOST_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| forward(socket, events, drain, watch)))
}

/// Sends the socket its events through its watch, `asked` when it connected (and then
/// acknowledged first) or every transcript, until the client goes or kandev drains.
async fn forward(
    mut socket: WebSocket,
    mut events: tokio::sync::broadcast::Receiver<crate::events::OperatorEvent>,
    drain: crate::drain::Drain,
    asked: Option<Watch>,
) {
    if let Some(asked) = &asked {
        let ack = asked.acknowledgement().to_string();
        if socket.send(Message::Text(ack.into())).await.is_err() {
            return;
        }
    }
    let mut watch = asked.unwrap_or_default();
    loop {
        tokio::select! {
            () = drain.closing() => {
                // 1001: the UI reconnects, to another replica or after the restart.
                let close = CloseFrame {
                    code: close_code::AWAY,
                    reason: "kandev is shutting down".into(),
                };
                let _ = socket.send(Message::Close(Some(close))).await;
                return;
            }
            event = events.recv() => {
                let mut batch = Vec::new();
                match event {
                    Ok(event) => batch.extend(watch.lets_through(&event).then(|| event.frame())),
                    Err(RecvError::Lagged(missed)) => batch.push(resync(missed)),
                    Err(RecvError::Closed) => return,
                }
                // What else is queued already goes out in the same write: under load one
                // send carries many events instead of a system call each.
                for _ in 1..BATCH {
                    match events.try_recv() {
                        Ok(event) if watch.lets_through(&event) => batch.push(event.frame()),
                        Ok(_) => {}
                        Err(TryRecvError::Lagged(missed)) => batch.push(resync(missed)),
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
                if batch.is_empty() {
                    continue;
                }
                for text in batch {
                    if socket.feed(Message::Text(text)).await.is_err() {
                        return;
                    }
                }
                if socket.flush().await.is_err() {
                    return;
                }
            }
            incoming = socket.recv() => {
                let reply = match incoming {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(Message::Text(text))) => reply(&text, &mut watch),
                    Some(Ok(Message::Binary(_))) => {
                        FrameError::Unreadable("a binary frame; frames are JSON text".into()).event()
                    }
                    Some(Ok(_)) => continue,
                };
                if socket.send(Message::Text(reply.to_string().into())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Applies a client's frame to `watch`: the `watching` acknowledgement, or the `error`
/// event of a frame that cannot be applied (the watch stays as it was).
fn reply(text: &str, watch: &mut Watch) -> serde_json::Value {
    match Watch::parse(text) {
        Ok(asked) => {
            *watch = asked;
            watch.acknowledgement()
        }
        Err(err) => {
            tracing::debug!(error = %err, "an operator socket sent a frame it cannot apply");
            err.event()
        }
    }
}
