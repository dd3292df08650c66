//! Logs captured in memory, for tests that assert what a process writes, or never writes.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;
use tracing_subscriber::fmt::format::JsonFields;

use crate::FlatJson;

/// An in-memory log: clones share the bytes.
#[derive(Clone, Default)]
pub(crate) struct Buffer(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every event logged on this thread while it lives, at every level down to `TRACE`, in the
/// JSON line format with span fields flattened (what `log_format = "json"` writes). For a
/// test on a current-thread runtime, that includes the tasks it spawns.
pub struct LogCapture {
    buffer: Buffer,
    _guard: DefaultGuard,
}

impl LogCapture {
    /// Starts capturing on this thread (replacing its default subscriber until dropped).
    pub fn start() -> Self {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .finish();
        Self {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        self.buffer.text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_every_level_with_span_fields() {
        let logs = LogCapture::start();
        let span = tracing::info_span!("session", session_id = "s-1");
        span.in_scope(|| tracing::trace!(pending_id = "p-1", "deep detail"));
        let text = logs.text();
        assert!(text.contains("deep detail"), "{text}");
        assert!(text.contains("\"session_id\":\"s-1\""), "{text}");
        assert!(text.contains("\"pending_id\":\"p-1\""), "{text}");
    }
}
