//! A Python file as bytes with a line index that counts lines the way CPython's tokenizer
//! does (`\n`, `\r\n` and a lone `\r` each end a line), so line numbers from `ast` address
//! the same bytes here. Edits insert whole lines or indent lines; nothing else is touched,
//! so the bytes outside them (encoding, BOM, line endings, a missing final newline) stay.

const BOM: &[u8] = b"\xef\xbb\xbf";

/// The bytes of a file and where each line starts.
#[derive(Debug, Clone)]
pub struct Source {
    bytes: Vec<u8>,
    /// Byte offset of each line's first byte; line N (1-based) is `starts[N - 1]`.
    starts: Vec<usize>,
    /// The file's first line ending, used for the lines we add.
    eol: &'static [u8],
}

/// One line insertion or indentation, addressed by line of the original file.
#[derive(Debug, Clone)]
enum Edit {
    /// Insert these lines before original line `before` (`lines() + 1`: at the end).
    Insert { before: usize, lines: Vec<String> },
    /// Prefix original line `line` with this indentation.
    Indent { line: usize, prefix: String },
}

/// Edits to apply at once, all addressed in the original's lines.
#[derive(Debug, Clone, Default)]
pub struct Edits(Vec<Edit>);

impl Edits {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn insert(&mut self, before: usize, lines: Vec<String>) {
        self.0.push(Edit::Insert { before, lines });
    }

    pub fn indent(&mut self, line: usize, prefix: &str) {
        self.0.push(Edit::Indent {
            line,
            prefix: prefix.to_string(),
        });
    }
}

impl Source {
    pub fn new(bytes: Vec<u8>) -> Self {
        let first = if bytes.starts_with(BOM) { BOM.len() } else { 0 };
        let mut starts = vec![first];
        let mut eol: Option<&'static [u8]> = None;
        let mut i = first;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => {
                    eol.get_or_insert(b"\n");
                    starts.push(i + 1);
                }
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                    eol.get_or_insert(b"\r\n");
                    i += 1;
                    starts.push(i + 1);
                }
                b'\r' => {
                    eol.get_or_insert(b"\r");
                    starts.push(i + 1);
                }
                _ => {}
            }
            i += 1;
        }
        // A final newline does not begin another line.
        if starts.len() > 1 && *starts.last().unwrap_or(&0) == bytes.len() {
            starts.pop();
        }
        Source {
            bytes,
            starts,
            eol: eol.unwrap_or(b"\n"),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Lines in the file (an empty file has one, empty).
    pub fn lines(&self) -> usize {
        self.starts.len()
    }

    /// Line `n` (1-based) without its ending.
    pub fn line(&self, n: usize) -> &[u8] {
        let start = self.starts[n - 1];
        let mut end = self.starts.get(n).copied().unwrap_or(self.bytes.len());
        while end > start && matches!(self.bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        &self.bytes[start..end]
    }

    /// The leading blanks of line `n` (spaces, tabs, form feeds).
    pub fn indentation(&self, n: usize) -> String {
        let line = self.line(n);
        let len = line
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\x0c'))
            .count();
        String::from_utf8_lossy(&line[..len]).into_owned()
    }

    /// One more level below line `n`'s indentation: a tab where the file indents with tabs,
    /// else four spaces.
    pub fn indent_unit(&self, n: usize) -> &'static str {
        if self.indentation(n).contains('\t') {
            "\t"
        } else {
            "    "
        }
    }

    /// Whether line `n` holds only blanks.
    pub fn is_blank(&self, n: usize) -> bool {
        self.line(n)
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\x0c'))
    }

    /// Apply `edits`; returns the new source and, for each insertion in the order given, the
    /// 1-based line range it occupies in the result.
    pub fn apply(&self, edits: &Edits) -> (Source, Vec<(usize, usize)>) {
        let n = self.lines();
        let mut before: Vec<Vec<(usize, &Vec<String>)>> = vec![Vec::new(); n + 2];
        let mut prefix: Vec<Option<&str>> = vec![None; n + 1];
        for (k, e) in edits.0.iter().enumerate() {
            match e {
                Edit::Insert { before: at, lines } => {
                    before[(*at).clamp(1, n + 1)].push((k, lines))
                }
                Edit::Indent { line, prefix: p } => {
                    if (1..=n).contains(line) {
                        prefix[*line] = Some(p);
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(self.bytes.len() + 256);
        out.extend_from_slice(&self.bytes[..self.starts[0]]);
        let mut ranges = vec![(0usize, 0usize); edits.0.len()];
        let mut out_line = 1usize;
        let last_has_eol = {
            let end = self.bytes.len();
            end > self.starts[n - 1] && matches!(self.bytes[end - 1], b'\n' | b'\r')
        };
        for line in 1..=n + 1 {
            for (k, lines) in &before[line] {
                if line == n + 1 && !last_has_eol && !lines.is_empty() {
                    // The file ends without a newline: end its last line first, and leave ours
                    // without one, as the file was.
                    out.extend_from_slice(self.eol);
                    for (i, l) in lines.iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(self.eol);
                        }
                        out.extend_from_slice(l.as_bytes());
                    }
                } else {
                    for l in lines.iter() {
                        out.extend_from_slice(l.as_bytes());
                        out.extend_from_slice(self.eol);
                    }
                }
                ranges[*k] = (out_line, out_line + lines.len().saturating_sub(1));
                out_line += lines.len();
            }
            if line <= n {
                let start = self.starts[line - 1];
                let end = self.starts.get(line).copied().unwrap_or(self.bytes.len());
                if let Some(p) = prefix[line] {
                    if !self.is_blank(line) {
                        out.extend_from_slice(p.as_bytes());
                    }
                }
                out.extend_from_slice(&self.bytes[start..end]);
                out_line += 1;
            }
        }
        (Source::new(out), ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines_as_the_tokenizer_does() {
        let s = Source::new(b"a\r\nb\rc\nd".to_vec());
        assert_eq!(s.lines(), 4);
        assert_eq!(s.line(2), b"b");
        assert_eq!(s.line(4), b"d");
        assert_eq!(Source::new(b"a\n".to_vec()).lines(), 1);
        assert_eq!(Source::new(Vec::new()).lines(), 1);
    }

    #[test]
    fn inserts_with_the_files_line_ending_and_keeps_a_missing_final_newline() {
        let s = Source::new(b"x = 1\r\ny = 2".to_vec());
        let mut e = Edits::default();
        e.insert(2, vec!["# a".into()]);
        e.insert(3, vec!["# b".into(), "# c".into()]);
        let (out, ranges) = s.apply(&e);
        assert_eq!(out.bytes(), b"x = 1\r\n# a\r\ny = 2\r\n# b\r\n# c");
        assert_eq!(ranges, vec![(2, 2), (4, 5)]);
    }

    #[test]
    fn indents_all_but_blank_lines_and_keeps_the_bom() {
        let s = Source::new(b"\xef\xbb\xbfa\n\nb\n".to_vec());
        let mut e = Edits::default();
        e.insert(1, vec!["with x:".into()]);
        for l in 1..=3 {
            e.indent(l, "    ");
        }
        let (out, _) = s.apply(&e);
        assert_eq!(out.bytes(), b"\xef\xbb\xbfwith x:\n    a\n\n    b\n");
    }
}
