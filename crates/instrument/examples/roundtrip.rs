#![allow(clippy::print_stdout)]
//! Round trip over a corpus of real Python files nobody here wrote (by default the standard
//! library of the interpreter): for each file, instrument several functions with each
//! strategy, check the stacked result compiles, undo one change from the middle (three-way),
//! then the rest, and compare bytes and permissions with the original.
//!
//!     cargo run --release -p system-profile-instrument --example roundtrip -- \
//!         [--python PY] [--corpus DIR] [--every N] [--jobs J]
//!
//! Prints one line per failure and a JSON summary last.

#[path = "../tests/integration/support/roundtrip.rs"]
mod roundtrip;

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut python = "python3".to_string();
    let mut corpus: Option<PathBuf> = None;
    let mut every = 1usize;
    let mut jobs = 2usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--python" => python = args.next().expect("--python PY"),
            "--corpus" => corpus = args.next().map(PathBuf::from),
            "--every" => every = args.next().and_then(|v| v.parse().ok()).expect("--every N"),
            "--jobs" => jobs = args.next().and_then(|v| v.parse().ok()).expect("--jobs J"),
            other => panic!("unknown argument {other}"),
        }
    }
    let corpus = corpus.unwrap_or_else(|| roundtrip::stdlib(&python));
    let mut files = Vec::new();
    roundtrip::python_files(&corpus, &mut files);
    let files: Vec<PathBuf> = files.into_iter().step_by(every.max(1)).collect();
    let started = std::time::Instant::now();
    let t = roundtrip::run(&files, &python, jobs);
    for f in &t.failures {
        println!("FAIL {f}");
    }
    let summary = serde_json::json!({
        "corpus": corpus, "files": t.files, "unparsable": t.unparsable, "not_compiling_as_shipped": t.not_compiling, "no_functions": t.no_functions,
        "applied": t.applied, "refused": t.refused, "failures": t.failures.len(),
        "stacked_compiled": t.stacked_compiled, "stacked_not_compiled": t.stacked_not_compiled,
        "single_undo_ok": t.merged_reverts,
        "byte_identical_after_revert": t.identical, "different_after_revert": t.different,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
}
