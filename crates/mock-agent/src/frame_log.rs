//! `MOCK_AGENT_LOG`: every JSON-RPC frame that crossed stdin/stdout, one JSON
//! object per line, so tests can assert the wire itself.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Read from stdin (client → agent).
    Recv,
    /// Written to stdout (agent → client).
    Send,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Self::Recv => "recv",
            Self::Send => "send",
        }
    }
}

/// An append-only frame log.
#[derive(Debug)]
pub struct FrameLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl FrameLog {
    /// Open (creating if needed) `path` for appending.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Append one wire line: `{"dir": ..., "frame": <the JSON>}`. A line that is
    /// not JSON is kept as `{"dir": ..., "raw": "<line>"}` so nothing that crossed
    /// the wire is lost.
    pub fn record(&self, direction: Direction, line: &str) {
        let mut entry = Map::new();
        entry.insert("dir".into(), Value::from(direction.as_str()));
        match serde_json::from_str::<Value>(line) {
            Ok(frame) => entry.insert("frame".into(), frame),
            Err(_) => entry.insert("raw".into(), Value::from(line)),
        };
        let mut text = Value::Object(entry).to_string();
        text.push('\n');
        // A poisoned lock only means another writer panicked mid-line; keep logging.
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // One write per line: with O_APPEND the line lands whole, and the file is
        // unbuffered, so a polling reader sees it as soon as this returns.
        if let Err(error) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
            tracing::warn!(path = %self.path.display(), %error, "cannot append to MOCK_AGENT_LOG");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn appends_one_object_per_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("frames.jsonl");
        let log = FrameLog::open(&path).expect("opens");
        log.record(
            Direction::Recv,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
        );
        log.record(Direction::Send, "not json");
        let reopened = FrameLog::open(&path).expect("reopens for append");
        reopened.record(Direction::Send, r#"{"b":1,"a":2}"#);

        let text = std::fs::read_to_string(&path).expect("reads");
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("each line is JSON"))
            .collect();
        assert_eq!(
            lines,
            vec![
                json!({"dir": "recv", "frame": {"jsonrpc": "2.0", "id": 1, "method": "initialize"}}),
                json!({"dir": "send", "raw": "not json"}),
                json!({"dir": "send", "frame": {"b": 1, "a": 2}}),
            ]
        );
        // Key order of the frame is the wire's.
        assert!(
            text.lines()
                .nth(2)
                .expect("third line")
                .contains(r#"{"b":1,"a":2}"#)
        );
    }
}
