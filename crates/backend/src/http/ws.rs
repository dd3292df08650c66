//! `GET /api/v1/ws`: the operator event stream, `{"type", "data"}` JSON text frames,
//! so a UI never polls. The guard has checked the upgrade's `Host` and `Origin` and, with
//! auth on, its Bearer token or session cookie before this handler runs.

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::response::Response;
use axum::routing::get;
use futures::SinkExt;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::auth::Operator;
use crate::state::AppState;

/// The socket's read buffer. An operator sends next to nothing here, and tungstenite
/// zeroes up to this much (128 KiB by default) each time the socket is polled for input,
/// which [`forward`] does once per event it sends.
const READ_BUFFER_BYTES: usize = 4 * 1024;
/// The most events one write carries.
const BATCH: usize = 64;

/// The frame that tells a client it fell behind and `missed` events: re-read the resources.
fn resync(missed: u64) -> Utf8Bytes {
    serde_json::json!({"type": "resync", "data": {"missed": missed}})
        .to_string()
        .into()
}

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/ws", get(upgrade))
}

async fn upgrade(
    State(state): State<AppState>,
    operator: Operator,
    ws: WebSocketUpgrade,
) -> Response {
    tracing::debug!(operator = %operator.name, "operator event stream opened");
    // Subscribe before the upgrade completes, so nothing published after the
    // handshake response can be missed.
    let events = state.hub.subscribe();
    let drain = state.drain.clone();
    ws.read_buffer_size(READ_BUFFER_BYTES)
        .on_upgrade(move |socket| forward(socket, events, drain))
}

async fn forward(
    mut socket: WebSocket,
    mut events: tokio::sync::broadcast::Receiver<crate::events::OperatorEvent>,
    drain: crate::drain::Drain,
) {
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
                let text = match event {
                    Ok(event) => event.frame(),
                    Err(RecvError::Lagged(missed)) => resync(missed),
                    Err(RecvError::Closed) => return,
                };
                // What else is queued already goes out in the same write: under load one
                // send carries many events instead of a system call each.
                let mut batch = vec![text];
                while batch.len() < BATCH {
                    match events.try_recv() {
                        Ok(event) => batch.push(event.frame()),
                        Err(TryRecvError::Lagged(missed)) => batch.push(resync(missed)),
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
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
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
