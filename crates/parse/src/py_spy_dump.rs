//! `py-spy dump --json`: an array of threads, each with its frames innermost first.

use crate::Format;
use serde::Deserialize;
use system_profile_model::metrics::{StackFrame, ThreadStack};
use system_profile_model::{Diag, Parsed};

pub struct PySpyDump;

impl Format for PySpyDump {
    const NAME: &'static str = "py_spy_dump";
    type Output = Vec<ThreadStack>;
    fn parse(input: &str) -> Parsed<Vec<ThreadStack>> {
        parse(input)
    }
}

#[derive(Deserialize)]
struct RawThread {
    pid: u32,
    #[serde(default)]
    thread_name: Option<String>,
    #[serde(default)]
    os_thread_id: Option<u64>,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    owns_gil: bool,
    #[serde(default)]
    frames: Vec<RawFrame>,
}

#[derive(Deserialize)]
struct RawFrame {
    name: String,
    filename: String,
    #[serde(default)]
    line: u32,
}

pub fn parse(input: &str) -> Parsed<Vec<ThreadStack>> {
    match serde_json::from_str::<Vec<RawThread>>(input.trim()) {
        Ok(threads) => Parsed {
            value: threads
                .into_iter()
                .map(|t| ThreadStack {
                    pid: t.pid,
                    thread_name: t.thread_name,
                    os_thread_id: t.os_thread_id,
                    active: t.active,
                    owns_gil: t.owns_gil,
                    frames: t
                        .frames
                        .into_iter()
                        .map(|f| StackFrame {
                            function: f.name,
                            file: f.filename,
                            line: f.line,
                        })
                        .collect(),
                })
                .collect(),
            diagnostics: Vec::new(),
        },
        Err(e) => Parsed {
            value: Vec::new(),
            diagnostics: vec![Diag::general(format!("not py-spy dump JSON: {e}"))],
        },
    }
}
