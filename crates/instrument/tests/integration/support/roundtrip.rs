//! The corpus round trip, shared by `tests/integration/roundtrip.rs` (a sample, in CI) and
//! `examples/roundtrip.rs` (the whole standard library, for BENCHMARKS.md).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use system_profile_instrument::python::Python;
use system_profile_instrument::{instrument, revert_changes, InstrumentConfig, InstrumentError};
use system_profile_model::instrument::{
    InstrumentFileInput, LineRange, Measure, RevertChangesInput, RevertOutcome, Strategy,
};

#[derive(Default, Debug)]
pub struct Tally {
    pub files: u64,
    pub unparsable: u64,
    pub not_compiling: u64,
    pub no_functions: u64,
    pub applied: BTreeMap<String, u64>,
    pub refused: BTreeMap<String, u64>,
    pub failures: Vec<String>,
    pub stacked_compiled: u64,
    pub stacked_not_compiled: u64,
    pub merged_reverts: u64,
    pub identical: u64,
    pub different: u64,
}

pub fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() && e.file_name() != "site-packages" && e.file_name() != "__pycache__" {
            python_files(&p, out);
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "py") {
            out.push(p);
        }
    }
}

fn reason(e: &InstrumentError) -> String {
    let text = e.to_string();
    for key in [
        "can leave early",
        "would not compile",
        "shares the def line",
        "only a docstring",
        "async generator",
        "nowhere to go",
        "docstring",
        "__future__",
    ] {
        if text.contains(key) {
            return key.to_string();
        }
    }
    text.chars().take(80).collect()
}

pub fn one_file(src: &Path, python: &str, py: &mut Python, t: &Mutex<Tally>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    let name = "target.py";
    let path = root.join(name);
    fs::copy(src, &path).expect("copy");
    let original = fs::read(&path).expect("read");
    let mode = fs::metadata(&path).expect("meta").permissions().mode();
    let bump = |f: &dyn Fn(&mut Tally)| f(&mut t.lock().expect("tally"));
    bump(&|t| t.files += 1);
    let analysis = match py.analyze(&path) {
        Ok(a) => a,
        Err(_) => {
            bump(&|t| t.unparsable += 1);
            return;
        }
    };
    // Some test files are meant not to compile (bad __future__ use): nothing to keep compiling.
    if py.compile(&path, &original).is_err() {
        bump(&|t| t.not_compiling += 1);
        return;
    }
    let usable: Vec<_> = analysis
        .functions
        .iter()
        .filter(|f| f.code_start.is_some() && !f.one_line)
        .collect();
    if analysis.functions.is_empty() {
        bump(&|t| t.no_functions += 1);
        return;
    }
    // Functions whose body shares the def line (`def f(): ...`) take wrappers only.
    let wrap_only = usable.is_empty();
    let usable = if wrap_only {
        analysis.functions.iter().collect()
    } else {
        usable
    };
    let pick = |k: usize| usable[(k * usable.len()) / 4 % usable.len()];
    let config = InstrumentConfig {
        root: root.clone(),
        python: python.to_string(),
    };
    let base = |function: Option<String>,
                lines: Option<LineRange>,
                strategy: Strategy,
                measure: Measure| InstrumentFileInput {
        path: name.into(),
        measure,
        function,
        lines,
        strategy,
        sample_every: Some(2),
        sample_rate: None,
        snippet: (measure == Measure::Custom).then(|| "x_sp = 1\nif x_sp:\n    pass".to_string()),
        dry_run: false,
        python: None,
    };
    let f1 = pick(0);
    let f2 = pick(1);
    let f3 = pick(2);
    let f4 = pick(3);
    // Lines are found again in the file as the earlier changes left it.
    let f4_start = |py: &mut Python| -> u32 {
        py.analyze(&path)
            .ok()
            .and_then(|a| {
                a.functions
                    .iter()
                    .find(|f| f.qualname == f4.qualname)
                    .and_then(|f| f.code_start)
            })
            .unwrap_or(1) as u32
    };
    type MakeInput<'a> = Box<dyn Fn(&mut Python) -> InstrumentFileInput + 'a>;
    // A function by name, or lines found again in the file as the earlier changes left it.
    let named = |name: String, strategy, measure| -> MakeInput {
        Box::new(move |_: &mut Python| base(Some(name.clone()), None, strategy, measure))
    };
    let lines = |len: u32, strategy, measure| -> MakeInput {
        Box::new(move |py: &mut Python| {
            let start = f4_start(py);
            let end = start + len - 1;
            base(None, Some(LineRange { start, end }), strategy, measure)
        })
    };
    let attempts: Vec<(&str, MakeInput)> = vec![
        (
            "decorator",
            named(f1.qualname.clone(), Strategy::Decorator, Measure::Timing),
        ),
        (
            "context",
            named(f2.qualname.clone(), Strategy::Context, Measure::Memory),
        ),
        (
            "inline",
            named(f3.qualname.clone(), Strategy::Inline, Measure::Timing),
        ),
        (
            "context_lines",
            lines(2, Strategy::Context, Measure::Timing),
        ),
        ("inline_custom", lines(1, Strategy::Inline, Measure::Custom)),
        (
            "runner",
            named(
                format!("{}, {}", f1.qualname, f4.qualname),
                Strategy::Runner,
                Measure::Timing,
            ),
        ),
    ];
    let mut ids = Vec::new();
    for (label, make) in attempts {
        if wrap_only && !matches!(label, "decorator" | "runner") {
            continue;
        }
        let input = make(py);
        match instrument(&config, &input) {
            Ok(r) => {
                bump(&|t| *t.applied.entry(label.into()).or_default() += 1);
                if input.strategy != Strategy::Runner {
                    ids.push(r.change_ids.last().cloned().unwrap_or_default());
                }
            }
            Err(InstrumentError::Refused { message, field })
                if !message.contains("would not compile") =>
            {
                let r = reason(&InstrumentError::Refused { field, message });
                bump(&|t| *t.refused.entry(format!("{label}: {r}")).or_default() += 1);
            }
            Err(e) => {
                let msg = format!(
                    "{}: {label} {:?}: {e}",
                    src.display(),
                    input.function.as_deref().or(Some("lines"))
                );
                bump(&|t| t.failures.push(msg.clone()));
            }
        }
    }
    let stacked = fs::read(&path).expect("read");
    match py.compile(&path, &stacked) {
        Ok(()) => bump(&|t| t.stacked_compiled += 1),
        Err(e) => {
            let msg = format!("{}: stacked result does not compile: {e}", src.display());
            bump(&|t| {
                t.stacked_not_compiled += 1;
                t.failures.push(msg.clone())
            });
        }
    }
    // Undo an older change first while newer ones stay: the three-way path and the rebase.
    if ids.len() >= 2 {
        let r = revert_changes(
            &config,
            &RevertChangesInput {
                all: false,
                ids: vec![ids[0].clone()],
                force: false,
            },
        );
        match r {
            Ok(r)
                if r.reverted.iter().all(|c| {
                    matches!(c.outcome, RevertOutcome::Merged | RevertOutcome::Restored)
                }) =>
            {
                bump(&|t| t.merged_reverts += 1);
                let now = fs::read(&path).expect("read");
                if let Err(e) = py.compile(&path, &now) {
                    let msg = format!("{}: after undoing {} alone: {e}", src.display(), ids[0]);
                    bump(&|t| t.failures.push(msg.clone()));
                }
            }
            other => {
                let msg = format!("{}: undo {} alone: {other:?}", src.display(), ids[0]);
                bump(&|t| t.failures.push(msg.clone()));
            }
        }
    }
    match revert_changes(
        &config,
        &RevertChangesInput {
            all: true,
            ids: Vec::new(),
            force: false,
        },
    ) {
        Ok(r) if r.complete && r.active == 0 => {}
        other => {
            let msg = format!("{}: revert all: {other:?}", src.display());
            bump(&|t| t.failures.push(msg.clone()));
        }
    }
    let back = fs::read(&path).expect("read");
    let back_mode = fs::metadata(&path).expect("meta").permissions().mode();
    let leftovers: Vec<String> = fs::read_dir(&root)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != name && n != "profile_output")
        .collect();
    let instrument_dir: Vec<String> = fs::read_dir(root.join("profile_output/instrument"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if back == original && back_mode == mode && leftovers.is_empty() && instrument_dir.is_empty() {
        bump(&|t| t.identical += 1);
    } else {
        let msg = format!(
            "{}: after revert: bytes {}, mode {:o}->{:o}, stray files {leftovers:?}, left in instrument/ {instrument_dir:?}",
            src.display(),
            if back == original { "identical" } else { "DIFFERENT" },
            mode,
            back_mode
        );
        bump(&|t| {
            t.different += 1;
            t.failures.push(msg.clone())
        });
    }
}

/// Run the round trip over `files` with `jobs` threads.
pub fn run(files: &[PathBuf], python: &str, jobs: usize) -> Tally {
    let tally = Mutex::new(Tally::default());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                let mut py = Python::start(python).expect("python");
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    one_file(f, python, &mut py, &tally);
                }
            });
        }
    });
    tally.into_inner().expect("tally")
}

/// The interpreter's standard library folder.
pub fn stdlib(python: &str) -> PathBuf {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
