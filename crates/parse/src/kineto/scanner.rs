//! The Kineto scanner: a JSON document read in chunks, one complete value handed out at a
//! time, with a fixed bound on what it holds whatever the input (a gzip bomb of white space
//! or of one endless string).

use std::io::Read;

/// The largest single JSON value the scanner holds (an event, a key, `deviceProperties`);
/// the buffer's capacity stays under twice this whatever the input.
const MAX_VALUE_BYTES: usize = 32 << 20;

/// Reads a JSON document in chunks and hands out the bytes of one complete value at a time,
/// so each event is parsed from a slice (fast, borrowing its strings) and nothing but the
/// current event and the unread chunk is held.
pub(super) struct Scanner<R> {
    reader: R,
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    /// Bytes dropped from the front of `buf` so far (for error offsets).
    dropped: u64,
    eof: bool,
}

#[derive(Debug)]
pub(super) struct ScanError {
    pub(super) offset: u64,
    pub(super) message: String,
}

impl<R: Read> Scanner<R> {
    pub(super) fn new(reader: R) -> Self {
        Scanner {
            reader,
            buf: Vec::with_capacity(1 << 20),
            pos: 0,
            dropped: 0,
            eof: false,
        }
    }

    pub(super) fn error(&self, at: usize, message: impl Into<String>) -> ScanError {
        ScanError {
            offset: self.dropped + at as u64,
            message: message.into(),
        }
    }

    /// Read up to 1 MiB more; false at the end of the input. The buffer never holds more
    /// than `MAX_VALUE_BYTES` of one value (plus one read): a longer value (a gzip bomb of
    /// one endless string) is an error, never an allocation.
    fn fill(&mut self) -> Result<bool, ScanError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos == self.buf.len() {
            // Everything read was consumed (white space skipped): keep none of it.
            self.dropped += self.pos as u64;
            self.buf.clear();
            self.pos = 0;
        }
        if self.buf.len() - self.pos > MAX_VALUE_BYTES {
            return Err(self.error(
                self.pos,
                format!("one value is over {MAX_VALUE_BYTES} bytes: no trace event is that large"),
            ));
        }
        let len = self.buf.len();
        self.buf.resize(len + (1 << 20), 0);
        let n = loop {
            match self.reader.read(&mut self.buf[len..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(len);
                    return Err(self.error(len, format!("read error: {e}")));
                }
            }
        };
        self.buf.truncate(len + n);
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// Forget what was read before `pos` (only between values, so no slice is held).
    pub(super) fn compact(&mut self) {
        if self.pos > (1 << 20) {
            self.buf.drain(..self.pos);
            self.dropped += self.pos as u64;
            self.pos = 0;
        }
    }

    /// The next byte that is not white space, without taking it.
    pub(super) fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            while self.pos < self.buf.len() {
                let b = self.buf[self.pos];
                if !b.is_ascii_whitespace() {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    pub(super) fn expect(&mut self, want: u8) -> Result<(), ScanError> {
        match self.peek()? {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(self.error(
                self.pos,
                format!("expected `{}`, found `{}`", want as char, b as char),
            )),
            None => Err(self.error(
                self.pos,
                format!("the input ends where `{}` was expected", want as char),
            )),
        }
    }

    /// The end (exclusive) of the object starting at `pos`: only `"`, `{` and `}` matter
    /// outside strings (brackets inside an object balance by themselves), and only `"` and
    /// `\\` inside them, so memchr jumps between them.
    fn object_end(&mut self) -> Result<usize, ScanError> {
        let start = self.pos;
        let mut i = start;
        let mut depth = 0usize;
        let mut in_string = false;
        loop {
            let hay = &self.buf[i..];
            let found = if in_string {
                memchr::memchr2(b'"', b'\\', hay)
            } else {
                memchr::memchr3(b'"', b'{', b'}', hay)
            };
            match found {
                Some(k) => {
                    i += k;
                    match (in_string, self.buf[i]) {
                        (true, b'\\') => {
                            // Skip the escaped byte, which may be past what is read yet.
                            while i + 1 >= self.buf.len() {
                                if !self.fill()? {
                                    return Err(self.error(start, "the input ends inside a string"));
                                }
                            }
                            i += 2;
                            continue;
                        }
                        (true, _) => in_string = false,
                        (false, b'"') => in_string = true,
                        (false, b'{') => depth += 1,
                        (false, _) => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                return Ok(i + 1);
                            }
                        }
                    }
                    i += 1;
                }
                None => {
                    i = self.buf.len();
                    if !self.fill()? {
                        return Err(self.error(start, "the input ends inside an object"));
                    }
                }
            }
        }
    }

    /// The end (exclusive) of the complete JSON value starting at `pos`.
    fn value_end(&mut self) -> Result<usize, ScanError> {
        let start = self.pos;
        let first = self.buf[start];
        if first == b'{' {
            return self.object_end();
        }
        let mut i = start;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        loop {
            while i < self.buf.len() {
                let b = self.buf[i];
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                } else if scalar {
                    if matches!(b, b',' | b']' | b'}') || b.is_ascii_whitespace() {
                        // A stray `}` where a value should be is a value of one byte: taking
                        // none would leave the scanner where it was, forever.
                        return Ok(i.max(start + 1));
                    }
                } else {
                    match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                return Ok(i + 1);
                            }
                        }
                        _ => {}
                    }
                }
                i += 1;
            }
            if !self.fill()? {
                return if scalar && i > start {
                    Ok(i)
                } else {
                    Err(self.error(start, "the input ends inside a value"))
                };
            }
        }
    }

    /// The next complete value's bytes; `pos` moves past it.
    pub(super) fn next_value(&mut self) -> Result<std::ops::Range<usize>, ScanError> {
        if self.peek()?.is_none() {
            return Err(self.error(self.pos, "the input ends where a value was expected"));
        }
        let start = self.pos;
        let end = self.value_end()?;
        self.pos = end;
        Ok(start..end)
    }
}

/// Walk a trace's top-level object: each element of `traceEvents` to `on_event`, the value of
/// every other key to `on_key`, one value at a time.
pub(super) fn walk<R: Read>(
    sc: &mut Scanner<R>,
    mut on_event: impl FnMut(&[u8]),
    mut on_key: impl FnMut(&str, &[u8]),
) -> Result<(), ScanError> {
    sc.expect(b'{')?;
    loop {
        match sc.peek()? {
            Some(b'}') => return Ok(()),
            Some(b',') => {
                sc.pos += 1;
                continue;
            }
            Some(b'"') => {}
            Some(b) => {
                return Err(sc.error(sc.pos, format!("expected a key, found `{}`", b as char)))
            }
            None => return Err(sc.error(sc.pos, "the input ends inside the top-level object")),
        }
        let key_range = sc.next_value()?;
        let key: String = serde_json::from_slice(&sc.buf[key_range.clone()])
            .map_err(|e| sc.error(key_range.start, format!("bad key: {e}")))?;
        sc.expect(b':')?;
        if key == "traceEvents" {
            sc.expect(b'[')?;
            loop {
                match sc.peek()? {
                    Some(b']') => {
                        sc.pos += 1;
                        break;
                    }
                    Some(b',') => {
                        sc.pos += 1;
                        continue;
                    }
                    Some(_) => {}
                    None => return Err(sc.error(sc.pos, "the input ends inside traceEvents")),
                }
                sc.compact();
                let r = sc.next_value()?;
                on_event(&sc.buf[r]);
            }
        } else {
            sc.compact();
            let r = sc.next_value()?;
            on_key(&key, &sc.buf[r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{scan, Acc};
    use super::*;

    /// `head`, then `n` bytes of `fill`, then `tail`, made as read (nothing held).
    struct Bomb {
        parts: Vec<(Vec<u8>, u64)>,
    }

    impl Read for Bomb {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            while let Some((pattern, left)) = self.parts.first_mut() {
                if *left == 0 {
                    self.parts.remove(0);
                    continue;
                }
                let n = (out.len() as u64).min(*left) as usize;
                for (i, b) in out[..n].iter_mut().enumerate() {
                    *b = pattern[i % pattern.len()];
                }
                *left -= n as u64;
                return Ok(n);
            }
            Ok(0)
        }
    }

    fn bomb(head: &str, fill: u8, n: u64, tail: &str) -> Bomb {
        Bomb {
            parts: vec![
                (head.as_bytes().to_vec(), head.len() as u64),
                (vec![fill], n),
                (tail.as_bytes().to_vec(), tail.len() as u64),
            ],
        }
    }

    #[test]
    fn a_bomb_never_grows_the_buffer() {
        // 256 MiB of white space between events: skipped with a buffer of about one read.
        let mut sc = Scanner::new(bomb(
            r#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1},"#,
            b' ',
            256 << 20,
            r#"{"ph":"X","name":"b","ts":2,"dur":1}]}"#,
        ));
        let mut acc = Acc::default();
        scan(&mut sc, &mut acc).unwrap();
        assert_eq!(acc.events, 2);
        assert!(sc.buf.capacity() <= 4 << 20, "{}", sc.buf.capacity());
        // One endless string: an error at the bound, not an allocation of its size.
        let mut sc = Scanner::new(bomb(
            r#"{"traceEvents":[{"name":""#,
            b'x',
            128 << 20,
            "\"}]}",
        ));
        let mut acc = Acc::default();
        let e = scan(&mut sc, &mut acc).unwrap_err();
        assert!(e.message.contains("over"), "{}", e.message);
        // Vec doubles: the bound is twice the largest value.
        assert!(
            sc.buf.capacity() <= 2 * MAX_VALUE_BYTES + (4 << 20),
            "{}",
            sc.buf.capacity()
        );
    }
}
