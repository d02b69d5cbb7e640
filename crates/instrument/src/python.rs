//! The target's interpreter, asked about a file's syntax: where each function and block is
//! (from `ast`), which lines begin inside a string literal (from `tokenize`), and whether
//! bytes compile. One interpreter process answers any number of questions, a JSON line each.

use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const SCRIPT: &str = include_str!("../python/sp_source.py");

/// A function as `ast` sees it.
#[derive(Debug, Clone, Deserialize)]
pub struct Function {
    pub qualname: String,
    /// The first decorator's line, or the `def` line.
    pub first_line: usize,
    pub def_line: usize,
    pub end_line: usize,
    pub is_async: bool,
    pub is_generator: bool,
    /// The first statement of the body (a docstring counts).
    pub body_line: usize,
    /// The body after its docstring; absent when the docstring is all there is.
    pub code_start: Option<usize>,
    pub code_end: Option<usize>,
    /// `return`, `break`, `continue` that leave the body before its end.
    pub body_escapes: Vec<String>,
    /// `def f(): return 1` — the body shares the `def` line.
    pub one_line: bool,
}

/// What `analyze` says of a file.
#[derive(Debug, Clone, Deserialize)]
pub struct Analysis {
    pub functions: Vec<Function>,
    /// The line the helper import goes before (after the docstring and `__future__`
    /// imports); `None`: the module has nothing else, append after `import_after`; `-1`: the
    /// next statement shares that line.
    pub import_line: Option<i64>,
    pub import_after: usize,
    pub main_guard: bool,
}

/// A line range snapped to whole statements of one body.
#[derive(Debug, Clone, Deserialize)]
pub struct Block {
    pub start: usize,
    pub end: usize,
    /// The function (qualified) or class the statements are in, or `<module>`.
    pub scope: String,
    pub escapes: Vec<String>,
    /// Lines of the block that begin inside a string literal.
    pub string_lines: Vec<usize>,
}

/// Why the interpreter gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("could not start {python}: {source}")]
    Start {
        python: String,
        source: std::io::Error,
    },
    #[error("{python} stopped answering: {detail}")]
    Gone { python: String, detail: String },
    /// The question had an answer, and it is an error about the file (a syntax error).
    #[error("{0}")]
    Refused(String),
}

/// One interpreter process.
pub struct Python {
    python: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Python {
    /// Start `python -I` running the helper. `-I`: no user site, no PYTHONPATH, no cwd on
    /// sys.path; the helper needs only the standard library and nothing may print into the
    /// answers.
    pub fn start(python: &str) -> Result<Python, PythonError> {
        let mut child = Command::new(python)
            .args(["-I", "-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| PythonError::Start {
                python: python.to_string(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(PythonError::Gone {
                python: python.into(),
                detail: "no pipes".into(),
            });
        };
        Ok(Python {
            python: python.to_string(),
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    fn ask(&mut self, request: Value) -> Result<Value, PythonError> {
        let gone = |detail: String| PythonError::Gone {
            python: self.python.clone(),
            detail,
        };
        let mut line = request.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| gone(e.to_string()))?;
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) => return Err(gone("it exited (is it Python 3.8 or newer?)".into())),
            Ok(_) => {}
            Err(e) => return Err(gone(e.to_string())),
        }
        let value: Value =
            serde_json::from_str(&answer).map_err(|e| gone(format!("unreadable answer: {e}")))?;
        if value.get("ok") == Some(&Value::Bool(true)) {
            Ok(value)
        } else {
            Err(PythonError::Refused(
                value
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
                    .to_string(),
            ))
        }
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, v: Value) -> Result<T, PythonError> {
        serde_json::from_value(v).map_err(|e| PythonError::Gone {
            python: self.python.clone(),
            detail: format!("unexpected answer: {e}"),
        })
    }

    pub fn analyze(&mut self, path: &Path) -> Result<Analysis, PythonError> {
        let v = self.ask(json!({"op": "analyze", "path": path}))?;
        self.decode(v)
    }

    /// The statements covering `start..=end`, snapped outwards to whole statements.
    pub fn block(&mut self, path: &Path, start: usize, end: usize) -> Result<Block, PythonError> {
        let v = self.ask(json!({"op": "block", "path": path, "start": start, "end": end}))?;
        self.decode(v)
    }

    /// Whether `source` compiles as the file at `path` would (errors name that path).
    pub fn compile(&mut self, path: &Path, source: &[u8]) -> Result<(), PythonError> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(source);
        self.ask(json!({"op": "compile", "path": path, "source_b64": b64}))
            .map(|_| ())
    }
}

impl Python {
    /// `source` with change `id`'s marked lines taken out and its `with` body dedented.
    pub fn unmark(&mut self, source: &[u8], id: &str) -> Result<Vec<u8>, PythonError> {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        let v = self.ask(json!({"op": "unmark", "id": id, "source_b64": engine.encode(source)}))?;
        let text = v
            .get("source_b64")
            .and_then(Value::as_str)
            .unwrap_or_default();
        engine.decode(text).map_err(|e| PythonError::Gone {
            python: self.python.clone(),
            detail: format!("unreadable answer: {e}"),
        })
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
