//! Which transcripts an operator's socket follows. Every socket gets the board's events
//! (tasks, sessions, questions, notifications, flags); a session's transcript events
//! (`message.created`, `message.updated`, `message.appended`) are many more — each burst
//! of streamed text is one — and a page shows one transcript at a time. So a socket may
//! say which sessions' transcripts it wants, with a `watch` frame:
//!
//! ```json
//! {"type": "watch", "data": {"sessions": ["<session id>", ...]}}
//! ```
//!
//! `"sessions": []` follows none, `"sessions": null` every one, as a socket does until it
//! sends a frame. Each frame replaces the one before and is acknowledged with a
//! `watching` event of the same `data`: from that event on, the socket gets every
//! transcript event of what it watches, so a client that reads a transcript after it
//! misses none of it.
//!
//! A client may also name them when it connects, `GET /api/v1/ws?watch=<id>,<id>`
//! (`?watch=` for none): that watch holds from the socket's first event, which is its
//! `watching` acknowledgement, so not one transcript event of another session reaches it.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Value, json};

use super::hub::OperatorEvent;

/// The most sessions one `watch` frame may name.
pub const MOST_WATCHED: usize = 64;

/// The transcripts a socket follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Watch {
    /// Every session's (a socket that has not said otherwise).
    #[default]
    Every,
    /// These sessions' only.
    Sessions(HashSet<String>),
}

/// What a client may send on the operator socket.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data", deny_unknown_fields)]
enum ClientFrame {
    /// Follow these transcripts (`null`: every one).
    #[serde(rename = "watch")]
    Watch {
        /// The sessions.
        sessions: Option<Vec<String>>,
    },
}

/// A client frame that cannot be applied; the socket stays open and unchanged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// Not a frame this socket reads.
    #[error(
        "not a frame this socket reads ({0}); send {{\"type\": \"watch\", \"data\": {{\"sessions\": [...]}}}}"
    )]
    Unreadable(String),
    /// A watch naming too many sessions.
    #[error("a watch names {0} sessions; at most {MOST_WATCHED}")]
    TooMany(usize),
}

impl FrameError {
    /// The event that tells the client, `{"code", "message"}` as the API's errors.
    pub fn event(&self) -> Value {
        json!({"type": "error", "data": {"code": "INVALID_FRAME", "message": self.to_string()}})
    }
}

impl Watch {
    /// The watch a client's text frame asks for.
    pub fn parse(text: &str) -> Result<Self, FrameError> {
        let frame: ClientFrame =
            serde_json::from_str(text).map_err(|err| FrameError::Unreadable(err.to_string()))?;
        let ClientFrame::Watch { sessions } = frame;
        match sessions {
            None => Ok(Self::Every),
            Some(ids) if ids.len() > MOST_WATCHED => Err(FrameError::TooMany(ids.len())),
            Some(ids) => Ok(Self::Sessions(ids.into_iter().collect())),
        }
    }

    /// The watch of a socket's `watch` query parameter: session ids separated by commas,
    /// none when it is empty.
    pub fn from_query(ids: &str) -> Result<Self, FrameError> {
        let ids: Vec<&str> = ids
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .collect();
        if ids.len() > MOST_WATCHED {
            return Err(FrameError::TooMany(ids.len()));
        }
        Ok(Self::Sessions(ids.into_iter().map(str::to_owned).collect()))
    }

    /// The `watching` event that acknowledges this watch.
    pub fn acknowledgement(&self) -> Value {
        let sessions = match self {
            Self::Every => Value::Null,
            Self::Sessions(ids) => {
                let mut ids: Vec<&String> = ids.iter().collect();
                ids.sort();
                json!(ids)
            }
        };
        json!({"type": "watching", "data": {"sessions": sessions}})
    }

    /// Whether a socket with this watch gets `event`.
    pub fn lets_through(&self, event: &OperatorEvent) -> bool {
        match (self, event.transcript()) {
            (Self::Sessions(ids), Some(session)) => ids.contains(session),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EventHub, kind};

    fn event(hub: &EventHub, kind: &'static str, data: Value) -> OperatorEvent {
        let mut rx = hub.subscribe();
        hub.send(kind, data);
        rx.try_recv().expect("the event")
    }

    #[test]
    fn a_watch_narrows_transcript_events_and_never_board_events() {
        let hub = EventHub::new();
        let of_s1 = event(&hub, kind::MESSAGE_APPENDED, json!({"session_id": "s1"}));
        let of_s2 = event(&hub, kind::MESSAGE_CREATED, json!({"session_id": "s2"}));
        let updated_s2 = event(&hub, kind::MESSAGE_UPDATED, json!({"session_id": "s2"}));
        let board = [
            event(
                &hub,
                kind::SESSION_UPDATED,
                json!({"id": "s2", "session_id": "s2"}),
            ),
            event(
                &hub,
                kind::CLARIFICATION_CREATED,
                json!({"session_id": "s2"}),
            ),
            event(&hub, kind::TASK_UPDATED, json!({"id": "t"})),
        ];
        let only_s1 =
            Watch::parse(r#"{"type":"watch","data":{"sessions":["s1"]}}"#).expect("a watch frame");
        assert!(only_s1.lets_through(&of_s1));
        assert!(!only_s1.lets_through(&of_s2));
        assert!(!only_s1.lets_through(&updated_s2));
        let none =
            Watch::parse(r#"{"type":"watch","data":{"sessions":[]}}"#).expect("a watch frame");
        assert!(!none.lets_through(&of_s1));
        for e in &board {
            assert!(
                only_s1.lets_through(e) && none.lets_through(e),
                "{}",
                e.text()
            );
        }
        let every =
            Watch::parse(r#"{"type":"watch","data":{"sessions":null}}"#).expect("a watch frame");
        assert_eq!(every, Watch::default());
        assert!(every.lets_through(&of_s1) && every.lets_through(&of_s2));
    }

    #[test]
    fn the_acknowledgement_names_what_is_watched_in_order() {
        let watch = Watch::parse(r#"{"type":"watch","data":{"sessions":["b","a","b"]}}"#)
            .expect("a watch frame");
        assert_eq!(
            watch.acknowledgement(),
            json!({"type": "watching", "data": {"sessions": ["a", "b"]}})
        );
        assert_eq!(
            Watch::Every.acknowledgement(),
            json!({"type": "watching", "data": {"sessions": null}})
        );
    }

    #[test]
    fn a_query_names_sessions_by_commas_and_an_empty_one_none() {
        let frame = Watch::parse(r#"{"type":"watch","data":{"sessions":["a","b"]}}"#)
            .expect("a watch frame");
        assert_eq!(Watch::from_query("a,b"), Ok(frame.clone()));
        assert_eq!(Watch::from_query(" b , a ,"), Ok(frame));
        assert_eq!(
            Watch::from_query(""),
            Ok(Watch::Sessions(HashSet::new())),
            "an empty watch follows no transcript, not every one"
        );
        let ids: Vec<String> = (0..=MOST_WATCHED).map(|i| format!("s{i}")).collect();
        assert_eq!(
            Watch::from_query(&ids.join(",")),
            Err(FrameError::TooMany(MOST_WATCHED + 1))
        );
        assert!(Watch::from_query(&ids[1..].join(",")).is_ok());
    }

    #[test]
    fn a_frame_it_cannot_apply_is_an_error_event_naming_why() {
        for bad in [
            "not json",
            r#"{"type":"subscribe","data":{}}"#,
            r#"{"type":"watch","data":{"session":["s1"]}}"#,
            r#"{"type":"watch","data":{"sessions":"s1"}}"#,
            r#"{"type":"watch"}"#,
        ] {
            let err = Watch::parse(bad).expect_err(bad);
            assert!(matches!(err, FrameError::Unreadable(_)), "{bad}: {err:?}");
            let event = err.event();
            assert_eq!(event["type"], "error");
            assert_eq!(event["data"]["code"], "INVALID_FRAME");
        }
        let ids: Vec<String> = (0..=MOST_WATCHED).map(|i| format!("s{i}")).collect();
        let text = json!({"type": "watch", "data": {"sessions": ids}}).to_string();
        assert_eq!(
            Watch::parse(&text),
            Err(FrameError::TooMany(MOST_WATCHED + 1))
        );
    }
}
