//! Response bodies a guest reads a piece at a time (`open`, contract 0.1.3). An open body holds
//! at most one network chunk and one unfinished line, never the whole body: the socket's own
//! flow control holds the API back while the guest is busy, so a report of any size costs the
//! host the same memory. The response cap bounds each piece handed to the guest (and so the
//! longest line), not the body.

use crate::bindings::BodyError;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bodies one instance (one partition) may hold open at once: each holds a connection.
pub const MAX_OPEN_BODIES: usize = 4;

/// Where an open body's bytes come from.
pub enum BodySource {
    /// The network, read as the guest asks.
    Network(super::client::NetworkBody),
    /// Read whole already: when hooks (a recording, an offline replay) had to see the body.
    Memory(Option<Bytes>),
    /// Chunks as a network might cut them.
    #[cfg(test)]
    Chunks(std::collections::VecDeque<Bytes>),
}

impl BodySource {
    async fn next_chunk(&mut self, bytes_in: &AtomicU64) -> Result<Option<Bytes>, String> {
        match self {
            BodySource::Network(body) => {
                let chunk = body.chunk().await.map_err(|e| e.to_string())?;
                if let Some(c) = &chunk {
                    bytes_in.fetch_add(c.len() as u64, Ordering::Relaxed);
                }
                Ok(chunk)
            }
            BodySource::Memory(bytes) => Ok(bytes.take()),
            #[cfg(test)]
            BodySource::Chunks(chunks) => Ok(chunks.pop_front()),
        }
    }
}

/// One open body: its source and the bytes received but not yet handed out.
pub struct OpenBody {
    source: BodySource,
    /// `pending[start..]` is received and not yet handed out.
    pending: Vec<u8>,
    start: usize,
    ended: bool,
    /// For messages.
    url: String,
    /// Bytes scanned for line ends, in all (what the linear bound is checked against).
    scanned: usize,
}

/// What a read gave: `count` complete lines in one text, each with its line ending.
pub struct Lines {
    pub text: String,
    pub count: u32,
    /// Nothing more: the body can be closed.
    pub end: bool,
}

impl OpenBody {
    pub fn new(source: BodySource, url: String) -> Self {
        OpenBody { source, pending: Vec::new(), start: 0, ended: false, url, scanned: 0 }
    }

    fn unread(&self) -> &[u8] {
        &self.pending[self.start..]
    }

    /// Receives the next chunk (or the end), keeping only what is not handed out yet (callers
    /// refuse an unfinished line past the cap before asking for more).
    async fn fill(&mut self, bytes_in: &AtomicU64) -> Result<(), BodyError> {
        self.pending.drain(..self.start);
        self.start = 0;
        match self.source.next_chunk(bytes_in).await {
            Ok(Some(chunk)) => {
                self.pending.extend_from_slice(&chunk);
                Ok(())
            }
            Ok(None) => {
                self.ended = true;
                Ok(())
            }
            Err(e) => Err(BodyError::Connection(format!("reading the body of {}: {e}", self.url))),
        }
    }

    fn too_long(&self, cap: usize) -> BodyError {
        BodyError::TooLarge(format!("{} sent a line longer than {cap} bytes", self.url))
    }

    /// Up to `max_lines` complete lines (the body's last line needs no line ending), in at most
    /// `cap` bytes, so a call hands out at least one line unless the body is done. Each byte is
    /// looked at once however the body is cut into chunks: what was scanned before a chunk came
    /// is not scanned again (a line sent a byte at a time used to be rescanned after every byte,
    /// quadratic in its length).
    pub async fn read_lines(&mut self, max_lines: u32, cap: usize, bytes_in: &AtomicU64) -> Result<Lines, BodyError> {
        let max_lines = max_lines.max(1);
        // The end of the last complete line that fits, how many lines that is, and how much of
        // the unread bytes was scanned (offsets into `unread()`, which `fill` keeps in place).
        let (mut end, mut count, mut scanned) = (0, 0, 0);
        loop {
            let unread = self.unread().len();
            let mut looked = unread;
            for newline in memchr::memchr_iter(b'\n', &self.unread()[scanned..]).map(|i| scanned + i) {
                if newline + 1 > cap {
                    looked = newline + 1;
                    break;
                }
                (end, count) = (newline + 1, count + 1);
                if count == max_lines {
                    looked = newline + 1;
                    break;
                }
            }
            self.scanned += looked - scanned;
            scanned = looked;
            if count == max_lines {
                return self.hand_out(end, count, self.ended && end == unread);
            }
            if self.ended && unread <= cap {
                return self.hand_out(unread, count + u32::from(unread > end), true);
            }
            if self.ended || unread > cap {
                // More than a piece may hold: the complete lines that fit, or a line too long.
                return if count > 0 { self.hand_out(end, count, false) } else { Err(self.too_long(cap)) };
            }
            self.fill(bytes_in).await?;
        }
    }

    /// The next `len` bytes as text.
    fn hand_out(&mut self, len: usize, count: u32, end: bool) -> Result<Lines, BodyError> {
        let raw = &self.unread()[..len];
        let text = std::str::from_utf8(raw)
            .map_err(|e| BodyError::NotText(format!("the body of {} is not UTF-8: {e}", self.url)))?
            .to_string();
        self.start += len;
        Ok(Lines { text, count, end })
    }

    /// Up to `max` more bytes (at most `cap`); empty only at the end.
    pub async fn read_bytes(&mut self, max: u32, cap: usize, bytes_in: &AtomicU64) -> Result<Vec<u8>, BodyError> {
        let max = (max.max(1) as usize).min(cap.max(1));
        while self.unread().is_empty() && !self.ended {
            self.fill(bytes_in).await?;
        }
        let take = self.unread().len().min(max);
        let out = self.unread()[..take].to_vec();
        self.start += take;
        Ok(out)
    }

    /// True when everything was handed out.
    pub fn done(&self) -> bool {
        self.ended && self.unread().is_empty()
    }
}

/// The open bodies of one instance, by handle. Handles are never reused, so a stale one cannot
/// reach another body.
#[derive(Default)]
pub struct Bodies {
    open: Vec<(u32, OpenBody)>,
    last: u32,
}

impl Bodies {
    /// Keeps a body; `None` when as many as allowed are open.
    pub fn insert(&mut self, body: OpenBody) -> Option<u32> {
        if self.open.len() >= MAX_OPEN_BODIES {
            return None;
        }
        self.last = self.last.wrapping_add(1).max(1);
        self.open.push((self.last, body));
        Some(self.last)
    }

    pub fn is_full(&self) -> bool {
        self.open.len() >= MAX_OPEN_BODIES
    }

    pub fn get(&mut self, handle: u32) -> Result<&mut OpenBody, BodyError> {
        self.open.iter_mut().find(|(h, _)| *h == handle).map(|(_, b)| b).ok_or(BodyError::UnknownBody)
    }

    pub fn close(&mut self, handle: u32) {
        self.open.retain(|(h, _)| *h != handle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(text: &str) -> OpenBody {
        OpenBody::new(BodySource::Memory(Some(Bytes::from(text.to_string()))), "http://api/x".into())
    }

    #[tokio::test]
    async fn lines_come_in_pieces_of_the_size_asked() {
        let received = AtomicU64::default();
        let mut body = memory("a\r\nb\n\nc");
        let first = body.read_lines(2, 100, &received).await.unwrap();
        assert_eq!((first.text.as_str(), first.count, first.end), ("a\r\nb\n", 2, false));
        let rest = body.read_lines(10, 100, &received).await.unwrap();
        assert_eq!((rest.text.as_str(), rest.count, rest.end), ("\nc", 2, true));
        assert!(body.done());
        let mut terminated = memory("x\ny\n");
        let all = terminated.read_lines(10, 100, &received).await.unwrap();
        assert_eq!((all.text.as_str(), all.count, all.end), ("x\ny\n", 2, true));
    }

    #[tokio::test]
    async fn a_piece_stays_under_the_cap_and_a_longer_line_is_refused() {
        let received = AtomicU64::default();
        let mut body = memory("aaaa\nbbbb\ncccc\n");
        let piece = body.read_lines(10, 11, &received).await.unwrap();
        assert_eq!((piece.text.as_str(), piece.count), ("aaaa\nbbbb\n", 2));
        let mut long = memory("0123456789\n");
        assert!(matches!(long.read_lines(10, 5, &received).await, Err(BodyError::TooLarge(_))));
        let mut unterminated = memory("0123456789");
        assert!(matches!(unterminated.read_lines(10, 5, &received).await, Err(BodyError::TooLarge(_))));
    }

    #[tokio::test]
    async fn bytes_and_text_errors() {
        let received = AtomicU64::default();
        let mut body = memory("abcdef");
        assert_eq!(body.read_bytes(4, 100, &received).await.unwrap(), b"abcd");
        assert_eq!(body.read_bytes(4, 100, &received).await.unwrap(), b"ef");
        assert!(body.read_bytes(4, 100, &received).await.unwrap().is_empty());
        let mut binary = OpenBody::new(BodySource::Memory(Some(Bytes::from_static(b"ok\n\xff\n"))), "u".into());
        assert!(
            matches!(binary.read_lines(10, 100, &received).await, Err(BodyError::NotText(m)) if m.contains("not UTF-8"))
        );
    }

    /// One line sent a byte at a time (chunked framing) was rescanned after every byte: 21 s of
    /// host CPU for 1 MiB. Now each byte is scanned once.
    #[tokio::test]
    async fn a_line_in_one_byte_chunks_is_scanned_once() {
        let received = AtomicU64::default();
        let len = 256 << 10;
        let chunks = |text: Vec<u8>| text.into_iter().map(|b| Bytes::from(vec![b])).collect();
        let mut line = vec![b'x'; len];
        line.extend(b"\nnext\n");
        let mut body = OpenBody::new(BodySource::Chunks(chunks(line)), "http://api/x".into());
        let first = body.read_lines(1, len + 1, &received).await.unwrap();
        assert_eq!((first.text.len(), first.count), (len + 1, 1));
        let rest = body.read_lines(10, len + 1, &received).await.unwrap();
        assert_eq!((rest.text.as_str(), rest.count, rest.end), ("next\n", 1, true));
        assert!(body.scanned <= len + 8, "{} bytes scanned for a body of {}", body.scanned, len + 6);
        // A line past the cap is still refused as soon as it is longer than the cap.
        let mut long = OpenBody::new(BodySource::Chunks(chunks(vec![b'y'; 4096])), "http://api/x".into());
        assert!(matches!(long.read_lines(1, 1000, &received).await, Err(BodyError::TooLarge(_))));
        assert!(long.scanned <= 1001, "{}", long.scanned);
    }

    #[test]
    fn handles_are_bounded_and_never_reused() {
        let mut bodies = Bodies::default();
        let handles: Vec<u32> = (0..MAX_OPEN_BODIES).map(|_| bodies.insert(memory("")).unwrap()).collect();
        assert!(bodies.insert(memory("")).is_none());
        bodies.close(handles[0]);
        let next = bodies.insert(memory("")).unwrap();
        assert!(!handles.contains(&next));
        assert!(matches!(bodies.get(handles[0]), Err(BodyError::UnknownBody)));
    }
}
