//! A writer the tests log into and read back.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// An in-memory log: clones share the bytes.
#[derive(Clone, Default)]
pub(crate) struct Buffer(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
