//! The feed: drains the [`Publisher`](crate::events::Publisher)'s queue in order and sends
//! each change to the [`EventHub`] as operator events, building the views a session
//! change shows from its [`Board`]: from the session as its write returned it when the
//! change carries it, else read back. One task per process, so per-session order is
//! publication order (a session change repeated later in the queue is sent once, at its
//! later place), and the board has one writer.

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use serde_json::{Value, json};

use crate::events::board::Board;
use crate::events::named::Named;
use crate::events::{Change, EventHub, kind};
use crate::model::{Message, SessionRecord};
use crate::store::{StoreError, Stores};

/// How many queued changes the feed takes at once.
const BATCH: usize = 256;

/// What the change bus's listener hands the feed.
#[derive(Debug)]
pub enum FromPeers {
    /// A change another replica made, read back.
    Change(Box<Change>),
    /// Notes may have been lost (the listening connection broke or started over), so
    /// the board may be stale: it is read again.
    Missed,
}

/// The change bus, as the feed sees it when replicas share the database.
#[derive(Debug)]
pub struct Peers {
    /// Where this replica's changes go, by their ids, for the others.
    pub tell: UnboundedSender<Named>,
    /// The other replicas' changes.
    pub heard: UnboundedReceiver<FromPeers>,
}

/// Runs until every publisher is gone. With `peers`, each change is also told to the
/// other replicas, and theirs are sent to this replica's operators.
pub async fn run(
    stores: Stores,
    mut changes: UnboundedReceiver<Change>,
    hub: EventHub,
    peers: Option<Peers>,
) {
    let (tell, mut heard) = match peers {
        Some(peers) => (Some(peers.tell), Some(peers.heard)),
        None => (None, None),
    };
    let mut board = Board::default();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            taken = changes.recv_many(&mut batch, BATCH) => {
                if taken == 0 {
                    return;
                }
                for change in coalesce(std::mem::take(&mut batch)) {
                    if let Some(tell) = &tell {
                        let _ = tell.send(Named::of(&change));
                    }
                    forward(&stores, &hub, &mut board, change).await;
                }
            }
            Some(heard) = next(&mut heard) => match heard {
                FromPeers::Change(change) => forward(&stores, &hub, &mut board, *change).await,
                FromPeers::Missed => board.forget(),
            },
        }
    }
}

/// The next of the other replicas' changes; never, without replicas.
async fn next(heard: &mut Option<UnboundedReceiver<FromPeers>>) -> Option<FromPeers> {
    match heard {
        Some(heard) => heard.recv().await,
        None => std::future::pending().await,
    }
}

/// Drops each `SessionChanged` that a later one of the same session repeats in `batch`:
/// the later one carries the latest view of them all (or none, to be read back, when any
/// of them had none), so it shows every change, and it keeps its place after everything
/// published between them. Under load this spares the feed (which every operator event
/// waits behind) most of its work.
fn coalesce(batch: Vec<Change>) -> Vec<Change> {
    let mut last = std::collections::HashMap::new();
    for (i, change) in batch.iter().enumerate() {
        if let Change::SessionChanged { session_id, .. } = change {
            last.insert(session_id.clone(), i);
        }
    }
    // The views of the changes dropped so far, by session.
    let mut dropped: std::collections::HashMap<String, Option<Box<SessionRecord>>> =
        std::collections::HashMap::new();
    let mut kept = Vec::with_capacity(batch.len());
    for (i, change) in batch.into_iter().enumerate() {
        let Change::SessionChanged {
            session_id,
            task_id,
            written,
        } = change
        else {
            kept.push(change);
            continue;
        };
        let written = match dropped.remove(&session_id) {
            Some(earlier) => later(earlier, written),
            None => written,
        };
        if last.get(&session_id) == Some(&i) {
            kept.push(Change::SessionChanged {
                session_id,
                task_id,
                written,
            });
        } else {
            dropped.insert(session_id, written);
        }
    }
    kept
}

/// The later of two views of one session; none (read back, which is later than both)
/// when either is none.
fn later(
    a: Option<Box<SessionRecord>>,
    b: Option<Box<SessionRecord>>,
) -> Option<Box<SessionRecord>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.view_seq >= a.view_seq { b } else { a }),
        _ => None,
    }
}

/// Sends the operator events of one change (a view that cannot be read is logged: the
/// operators' pages read state again when they reconnect).
async fn forward(stores: &Stores, hub: &EventHub, board: &mut Board, change: Change) {
    if let Err(err) = send(stores, hub, board, change).await {
        tracing::warn!(error = %err, "cannot read a changed resource for the operator feed");
    }
}

async fn send(
    stores: &Stores,
    hub: &EventHub,
    board: &mut Board,
    change: Change,
) -> Result<(), StoreError> {
    match change {
        Change::TaskCreated { task_id } => {
            if let Some(view) = stores.task_view(&task_id).await? {
                hub.send(kind::TASK_CREATED, view);
            }
        }
        Change::SessionChanged {
            session_id,
            task_id,
            written,
        } => {
            // Both built before either is sent: the sockets wake and write once for the
            // pair (with many sockets, a wake-up and a write each is most of what an
            // event costs).
            let written = written.map(|w| *w);
            let (session, task) = board
                .session_changed(stores, &session_id, &task_id, written)
                .await?;
            if let Some(view) = session {
                hub.send(kind::SESSION_UPDATED, view);
            }
            if let Some(view) = task {
                hub.send(kind::TASK_UPDATED, view);
            }
        }
        Change::MessageCreated(message) => hub.send(kind::MESSAGE_CREATED, message),
        Change::MessageUpdated(message) => hub.send(kind::MESSAGE_UPDATED, message),
        Change::MessageAppended { message, appended } => {
            hub.send(kind::MESSAGE_APPENDED, self::appended(&message, &appended));
        }
        Change::ClarificationCreated(record) => {
            hub.send(kind::CLARIFICATION_CREATED, &record);
            // Hop span (kandev_log::hops): the broadcast is out.
            let _pushed = tracing::debug_span!(target: "kandev::timing", "backend.pushed", pending_id = %record.pending_id);
        }
        Change::ClarificationSettled(record) => hub.send(kind::CLARIFICATION_SETTLED, record),
        Change::Notification(n) => hub.send(kind::NOTIFICATION, n),
        Change::FlagChanged(flag) => hub.send(kind::RUNTIME_FLAGS_UPDATED, flag),
    }
    Ok(())
}

/// The data of a `message.appended` event: what a client needs to place `text` (the
/// message's ids, `type`, `author_type`, `seq`, `updated_at`) and `length`, the content's
/// length after the append in UTF-16 code units (a JavaScript string's `length`), so a
/// client whose copy is not `length - text.length` long knows it missed text. Never the
/// whole content: that is what appends spare.
pub fn appended(message: &Message, text: &str) -> Value {
    json!({
        "id": message.id,
        "session_id": message.session_id,
        "task_id": message.task_id,
        "seq": message.seq,
        "type": message.kind,
        "author_type": message.author_type,
        "updated_at": message.updated_at,
        "text": text,
        "length": message.content.encode_utf16().count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> Change {
        Change::SessionChanged {
            session_id: id.into(),
            task_id: "t".into(),
            written: None,
        }
    }

    /// A change of session `id` carrying its view number `view_seq`.
    fn written(id: &str, view_seq: u64) -> Change {
        static AT: std::sync::LazyLock<crate::model::Timestamp> =
            std::sync::LazyLock::new(crate::model::Timestamp::now);
        let state = crate::model::SessionState::Running;
        Change::SessionChanged {
            session_id: id.into(),
            task_id: "t".into(),
            written: Some(Box::new(SessionRecord::sample(id, state, *AT, view_seq))),
        }
    }

    #[test]
    fn a_repeated_session_change_keeps_only_its_last_place() {
        let created = Change::TaskCreated {
            task_id: "t".into(),
        };
        let batch = vec![
            session("a"),
            created.clone(),
            session("b"),
            session("a"),
            session("c"),
        ];
        assert_eq!(
            coalesce(batch),
            vec![created, session("b"), session("a"), session("c")]
        );
        assert_eq!(coalesce(vec![session("a")]), vec![session("a")]);
    }

    #[test]
    fn the_change_kept_carries_the_latest_view_or_none_when_one_must_be_read_back() {
        let kept = |batch| match coalesce(batch).as_slice() {
            [Change::SessionChanged { written, .. }] => written.as_ref().map(|w| w.view_seq),
            other => panic!("one change kept, not {other:?}"),
        };
        // Published out of order: the later view is kept, at the last place.
        assert_eq!(kept(vec![written("a", 5), written("a", 3)]), Some(5));
        assert_eq!(kept(vec![written("a", 3), written("a", 5)]), Some(5));
        // One to be read back: the kept one is read back too (what is read is latest).
        assert_eq!(
            kept(vec![written("a", 5), session("a"), written("a", 7)]),
            None
        );
        assert_eq!(kept(vec![session("a"), written("a", 7)]), None);
        // Another session's views stay apart.
        assert_eq!(
            coalesce(vec![written("a", 5), written("b", 1), written("a", 2)]),
            vec![written("b", 1), written("a", 5)]
        );
    }
}
