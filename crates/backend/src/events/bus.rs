//! Operator events across replicas (docs/architecture.md §12): every change this replica's feed
//! delivers locally is also sent as a [`Note`] on the database's [`ChangeBus`]
//! (PostgreSQL `NOTIFY`) — ids and kind only, well under the 8000-byte limit — and every
//! replica's listener turns the notes of *other* replicas back into the same
//! [`Change`](crate::events::Change), reading what it names from the stores, and hands it
//! to its own feed.
//!
//! No duplicates: a replica ignores its own notes (its operators had the event from its
//! feed), and each note is delivered once. Per-session order: one task per replica sends
//! its notes in the order its feed took the changes, PostgreSQL delivers them in commit
//! order, and one task per replica applies them in that order. A note names the current
//! row, so a burst of updates to one message may arrive as several events showing its
//! latest text. When the listening connection breaks, notes sent meanwhile are lost (an
//! operator's page reloads state over REST on reconnect); the listener says so, tells
//! the feed to read its board again, and listens again.

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::events::feed::FromPeers;
use crate::events::named::Named;
use crate::flags::Flags;
use crate::store::Stores;

/// One note: who sent it, what kind of change, the ids to read it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// The sending replica.
    pub replica: String,
    /// The change, by kind, with its ids.
    #[serde(flatten)]
    pub what: Named,
}

/// The most notes one `NOTIFY` round trip carries.
const BATCH: usize = 256;

/// Sends this replica's notes, in the order they are queued: whatever queued while the
/// previous batch was on its way goes in the next one round trip. Ends with the queue.
pub async fn send(stores: Stores, replica: String, mut notes: mpsc::UnboundedReceiver<Named>) {
    let mut batch = Vec::with_capacity(BATCH);
    while notes.recv_many(&mut batch, BATCH).await > 0 {
        let texts: Vec<String> = batch
            .drain(..)
            .map(|what| {
                let note = Note {
                    replica: replica.clone(),
                    what,
                };
                serde_json::to_string(&note).unwrap_or_default()
            })
            .collect();
        if let Err(err) = stores.bus.notify(&texts).await {
            tracing::warn!(error = %err, notes = texts.len(), "cannot tell the other replicas about changes");
        }
    }
}

/// Hands the other replicas' notes to this replica's feed (`heard`), for as long as the
/// process runs.
pub async fn listen(
    stores: Stores,
    flags: Arc<Flags>,
    heard: mpsc::UnboundedSender<FromPeers>,
    replica: String,
) {
    loop {
        let notes = match stores.bus.listen().await {
            Ok(Some(notes)) => notes,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for the other replicas' changes; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        tracing::info!("listening for the other replicas' changes");
        // Whatever was sent before this listen began was missed.
        if heard.send(FromPeers::Missed).is_err() {
            return;
        }
        let mut notes = notes;
        while let Some(note) = notes.next().await {
            let delivered = match note {
                Ok(text) => apply(&stores, &flags, &heard, &replica, &text).await,
                Err(err) => {
                    tracing::warn!(error = %err, "the other replicas' changes may have been missed");
                    heard.send(FromPeers::Missed).is_ok()
                }
            };
            if !delivered {
                return;
            }
        }
    }
}

/// Reads the change one note names and hands it on; false once the feed is gone.
async fn apply(
    stores: &Stores,
    flags: &Flags,
    heard: &mpsc::UnboundedSender<FromPeers>,
    me: &str,
    text: &str,
) -> bool {
    let note: Note = match serde_json::from_str(text) {
        Ok(note) => note,
        Err(err) => {
            tracing::warn!(error = %err, "a note from another replica does not decode");
            return true;
        }
    };
    if note.replica == me {
        return true;
    }
    match note.what.read(stores, flags).await {
        Ok(Some(change)) => heard.send(FromPeers::Change(Box::new(change))).is_ok(),
        Ok(None) => true,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read a change another replica made");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Change;

    #[test]
    fn a_note_is_ids_and_kind_only_and_reads_back() {
        let note = Note {
            replica: "a".into(),
            what: Named::SessionChanged {
                session: "s1".into(),
                task: "t1".into(),
            },
        };
        let text = serde_json::to_string(&note).expect("json");
        assert_eq!(
            text,
            r#"{"replica":"a","kind":"session_changed","session":"s1","task":"t1"}"#
        );
        assert_eq!(serde_json::from_str::<Note>(&text).expect("back"), note);
        let flag = Change::FlagChanged(serde_json::json!({"key": "features.x", "value": true}));
        assert_eq!(
            Named::of(&flag),
            Named::FlagChanged {
                key: "features.x".into()
            }
        );
    }
}
