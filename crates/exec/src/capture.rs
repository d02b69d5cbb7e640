//! Bounded capture of a child's stream: the last `limit` bytes stay in memory, the total is
//! counted, and the whole stream can be copied to a file as it arrives.

use std::collections::VecDeque;

/// The end of a stream, at most `limit` bytes, and how much there was in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    bytes: VecDeque<u8>,
    limit: usize,
    total_bytes: u64,
    /// Bytes copied to the stream's file, when it has one (at most its cap).
    file_bytes: u64,
}

impl Tail {
    pub fn new(limit: usize) -> Self {
        Tail {
            bytes: VecDeque::with_capacity(limit.min(64 * 1024)),
            limit,
            total_bytes: 0,
            file_bytes: 0,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        if self.limit == 0 {
            return;
        }
        let chunk = if chunk.len() > self.limit {
            &chunk[chunk.len() - self.limit..]
        } else {
            chunk
        };
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.limit);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    /// Bytes the stream produced in all.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Bytes the stream's file holds (the first ones, up to its cap).
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    pub(crate) fn wrote_to_file(&mut self, n: u64) {
        self.file_bytes += n;
    }

    /// True when the start of the stream was dropped.
    pub fn truncated(&self) -> bool {
        self.total_bytes > self.bytes.len() as u64
    }

    /// The kept bytes as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut v = Vec::with_capacity(a.len() + b.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_bytes() {
        let mut t = Tail::new(5);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.text(), "cdefg");
        assert_eq!(t.total_bytes(), 7);
        assert!(t.truncated());
        t.push(b"0123456789");
        assert_eq!(t.text(), "56789");
    }

    #[test]
    fn zero_limit_counts_only() {
        let mut t = Tail::new(0);
        t.push(b"abc");
        assert_eq!(t.text(), "");
        assert_eq!(t.total_bytes(), 3);
    }
}
