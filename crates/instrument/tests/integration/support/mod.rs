//! Helpers: the real interpreter, a root with files, instrument calls, the log read strictly.
#![allow(dead_code)]

pub mod roundtrip;

use std::path::{Path, PathBuf};
use std::process::Command;
use system_profile_instrument::{instrument, InstrumentConfig, LOG_FILE};
use system_profile_model::instrument::{
    InstrumentFileInput, InstrumentRecord, InstrumentResult, Measure, Strategy,
};

/// `sys.executable` of `python3` on PATH (not the pyenv shim).
pub fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether `python` imports `name`; its absence fails the test under CI.
pub fn module(python: &str, name: &str) -> bool {
    let present = Command::new(python)
        .args(["-c", &format!("import {name}")])
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required under CI"
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipping: {name} is not importable by {python}");
        }
    }
    present
}

pub struct Root {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub python: String,
}

impl Root {
    pub fn new(files: &[(&str, &str)]) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        for (name, text) in files {
            std::fs::write(path.join(name), text).unwrap();
        }
        Root {
            _dir: dir,
            path,
            python: python(),
        }
    }

    pub fn config(&self) -> InstrumentConfig {
        InstrumentConfig {
            root: self.path.clone(),
            python: self.python.clone(),
        }
    }

    pub fn instrument(
        &self,
        path: &str,
        measure: Measure,
        strategy: Strategy,
        function: &str,
        every: Option<u32>,
    ) -> InstrumentResult {
        let input = InstrumentFileInput {
            path: path.into(),
            measure,
            function: Some(function.into()),
            lines: None,
            strategy,
            sample_every: every,
            sample_rate: None,
            snippet: None,
            dry_run: false,
            python: None,
        };
        instrument(&self.config(), &input).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn with(&self, input: InstrumentFileInput) -> InstrumentResult {
        instrument(&self.config(), &input).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Run `args` with the interpreter in the root; panics with its output when it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.python)
            .args(args)
            .current_dir(&self.path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{args:?} failed:\n{text}");
        text
    }

    /// Every line of the log, each valid against `schemas/instrument_record.json` and read
    /// into its Rust type (unknown fields refused).
    pub fn records(&self) -> Vec<InstrumentRecord> {
        let schema: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../../schemas/instrument_record.json"
        ))
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let text = std::fs::read_to_string(self.path.join(LOG_FILE)).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                if let Err(e) = validator.validate(&v) {
                    panic!("{l}\ndoes not match schemas/instrument_record.json: {e}");
                }
                serde_json::from_str::<InstrumentRecord>(l).unwrap_or_else(|e| panic!("{e}: {l}"))
            })
            .collect()
    }

    /// `revert_changes {"all": true}`.
    pub fn revert_all(&self) -> system_profile_model::instrument::RevertResult {
        let all = system_profile_model::instrument::RevertChangesInput {
            all: true,
            ids: Vec::new(),
            force: false,
        };
        system_profile_instrument::revert_changes(&self.config(), &all).unwrap()
    }

    /// The 1-based line of `name` that holds `needle` (the first).
    pub fn line_of(&self, name: &str, needle: &str) -> u32 {
        let text = String::from_utf8_lossy(&std::fs::read(self.file(name)).unwrap()).into_owned();
        1 + text
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not in {name}")) as u32
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

pub fn input(path: &str, measure: Measure, strategy: Strategy) -> InstrumentFileInput {
    InstrumentFileInput {
        path: path.into(),
        measure,
        function: None,
        lines: None,
        strategy,
        sample_every: None,
        sample_rate: None,
        snippet: None,
        dry_run: false,
        python: None,
    }
}
