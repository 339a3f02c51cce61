//! [`SharedBuffer`]: a writer whose output a test can read back.

use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

use parking_lot::Mutex;

/// An in-memory `Write` whose clones share one buffer: hand a clone to a
/// listener (which moves it onto its own thread) and read the output back
/// from another.
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use pikuri::testing::SharedBuffer;
/// let buf = SharedBuffer::new();
/// let mut writer = buf.clone();
/// write!(writer, "hello")?;
/// assert_eq!(buf.text(), "hello");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct SharedBuffer {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl SharedBuffer {
    /// An empty buffer.
    pub fn new() -> SharedBuffer {
        SharedBuffer::default()
    }

    /// Everything written so far, as UTF-8 (invalid bytes replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock()).into_owned()
    }

    /// Everything written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }

    /// Everything written so far, as UTF-8, leaving the buffer empty.
    pub fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.bytes.lock())).into_owned()
    }

    /// Forget what was written.
    pub fn clear(&self) {
        self.bytes.lock().clear();
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBuffer")
            .field("len", &self.bytes.lock().len())
            .finish()
    }
}
