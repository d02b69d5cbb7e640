//! Slowdown of a real program with its top 10 functions instrumented (timing decorator,
//! 1 call in 100 recorded), against the same program untouched, with peers in the same run:
//! cProfile and py-spy record (100 Hz).
//!
//! The program: the standard library's 2to3 (lib2to3) converting 40 standard-library
//! modules (printing the diffs; a few use syntax it cannot parse and are reported as such), copied under a scratch root so the tool may edit it. "Top 10" is what an agent
//! would take from a profile: cProfile's functions of lib2to3 ranked by cumulative time.
//! Two selections are measured: the top 10 outright, and the top 10 of those whose calls
//! take 50 us or more on average (the seed's rule: do not instrument a tight inner loop,
//! sample it instead).
//!
//!     cargo run --release -p system-profile-instrument --example slowdown -- [--python PY] [--rounds R]
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use system_profile_instrument::python::Python;
use system_profile_instrument::{instrument, InstrumentConfig};
use system_profile_model::instrument::{InstrumentFileInput, Measure, Strategy};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("ls").flatten() {
        let p = e.path();
        if p.is_dir() {
            if e.file_name() != "__pycache__" && e.file_name() != "tests" {
                copy_dir(&p, &to.join(e.file_name()));
            }
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

/// A scratch root with lib2to3 and the modules to convert.
fn scratch(stdlib: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    copy_dir(&stdlib.join("lib2to3"), &root.join("lib2to3"));
    std::fs::create_dir(root.join("work")).expect("mkdir");
    let mut names: Vec<_> = std::fs::read_dir(stdlib)
        .expect("ls")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    names.sort();
    for p in names.iter().step_by(5).take(40) {
        std::fs::copy(p, root.join("work").join(p.file_name().expect("name"))).expect("copy");
    }
    (dir, root)
}

const ARGS: &[&str] = &["-m", "lib2to3", "-p", "work"];

/// User + system CPU seconds of the waited-for children so far (RUSAGE_CHILDREN).
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we hand it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Wall seconds and CPU seconds (the child and its children) of one run.
fn timed(mut cmd: Command) -> (f64, f64) {
    let cpu0 = children_cpu_s();
    let start = Instant::now();
    let out = cmd.output().expect("run");
    // 2to3 exits 1 when a module uses syntax it cannot parse (the walrus): the same work every
    // time, so it counts; anything else is a failure.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (start.elapsed().as_secs_f64(), children_cpu_s() - cpu0)
}

/// (relative file, def line, cumulative s, calls, own s) of lib2to3's functions under cProfile.
type Row = (String, usize, f64, u64, f64);

fn profile(python: &str, root: &Path) -> Vec<Row> {
    let script = r#"
import cProfile, pstats, sys, os, runpy, io
sys.argv = ["lib2to3", "-p", "work"]
p = cProfile.Profile()
p.enable()
try:
    runpy.run_module("lib2to3", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
p.disable()
st = pstats.Stats(p)
root = os.getcwd() + "/"
for (file, line, name), (cc, nc, tt, ct, callers) in st.stats.items():
    if file.startswith(root + "lib2to3/") and not name.startswith("<"):
        print("%s\t%d\t%r\t%d\t%r" % (file[len(root):], line, ct, nc, tt))
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .current_dir(root)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<Row> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
                f.get(4)?.parse().ok()?,
            ))
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// Instrument the chosen functions in a fresh scratch root; returns the root and the names.
fn instrumented(
    python: &str,
    stdlib: &Path,
    chosen: &[Row],
) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let (dir, root) = scratch(stdlib);
    let mut py = Python::start(python).expect("python");
    let config = InstrumentConfig {
        root: root.clone(),
        python: python.into(),
    };
    // Names first, from the files as they are: each change shifts the lines after it.
    let mut targets = Vec::new();
    for (file, line, _, _, _) in chosen {
        let analysis = py.analyze(&root.join(file)).expect("analyze");
        if let Some(f) = analysis
            .functions
            .iter()
            .find(|f| f.first_line == *line || f.def_line == *line)
        {
            targets.push((file.clone(), f.qualname.clone()));
        }
    }
    let mut names = Vec::new();
    for (file, qualname) in targets {
        let input = InstrumentFileInput {
            path: file.clone(),
            measure: Measure::Timing,
            function: Some(qualname.clone()),
            lines: None,
            strategy: Strategy::Decorator,
            sample_every: Some(100),
            sample_rate: None,
            snippet: None,
            dry_run: false,
            python: None,
        };
        instrument(&config, &input).expect("instrument");
        names.push(format!("{file}:{qualname}"));
    }
    (dir, root, names)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut python, mut rounds) = ("python3".to_string(), 7usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--python" => python = args.next().expect("PY"),
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).expect("R"),
            other => panic!("unknown argument {other}"),
        }
    }
    let out = Command::new(&python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python");
    let stdlib = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let (_plain_dir, plain) = scratch(&stdlib);
    let rows = profile(&python, &plain);
    let functions =
        |rows: &[Row]| -> Vec<Row> { rows.iter().filter(|r| r.1 > 0).take(10).cloned().collect() };
    let top = functions(&rows);
    // What ignoring the seed's rule looks like: the functions with the most time of their own
    // are the tight inner ones.
    let mut by_own = rows.clone();
    by_own.sort_by(|a, b| b.4.total_cmp(&a.4));
    let top_own = functions(&by_own);
    let not_tight: Vec<_> = rows
        .iter()
        .filter(|r| r.3 > 0 && r.2 / r.3 as f64 >= 50e-6)
        .cloned()
        .collect();
    let top_not_tight = functions(&not_tight);
    let (_a, top_root, top_names) = instrumented(&python, &stdlib, &top);
    let (_b, nt_root, nt_names) = instrumented(&python, &stdlib, &top_not_tight);
    let (_c, own_root, own_names) = instrumented(&python, &stdlib, &top_own);
    let calls = |sel: &[Row]| sel.iter().map(|r| r.3).sum::<u64>();
    println!(
        "top 10 by cumulative time: {} calls in all: {top_names:?}",
        calls(&top)
    );
    println!(
        "top 10 of >= 50 us per call: {} calls in all: {nt_names:?}",
        calls(&top_not_tight)
    );
    println!(
        "top 10 by own time: {} calls in all: {own_names:?}",
        calls(&top_own)
    );
    let has_pyspy = Command::new("py-spy").arg("--version").output().is_ok();
    type MakeCommand<'a> = Box<dyn Fn() -> Command + 'a>;
    let variants: Vec<(&str, MakeCommand)> = vec![
        (
            "untouched",
            Box::new(|| {
                let mut c = Command::new(&python);
                c.args(ARGS).current_dir(&plain);
                c
            }),
        ),
        (
            "ours: top 10 of >= 50 us/call, 1 in 100 recorded",
            Box::new(|| {
                let mut c = Command::new(&python);
                c.args(ARGS).current_dir(&nt_root);
                c
            }),
        ),
        (
            "ours: top 10 outright, 1 in 100 recorded",
            Box::new(|| {
                let mut c = Command::new(&python);
                c.args(ARGS).current_dir(&top_root);
                c
            }),
        ),
        (
            "ours: top 10 by own time (the tight ones, against the rule), 1 in 100",
            Box::new(|| {
                let mut c = Command::new(&python);
                c.args(ARGS).current_dir(&own_root);
                c
            }),
        ),
        (
            "peer: cProfile",
            Box::new(|| {
                let mut c = Command::new(&python);
                c.args(["-m", "cProfile", "-o", "/dev/null"])
                    .args(ARGS)
                    .current_dir(&plain);
                c
            }),
        ),
        (
            "peer: py-spy record 100 Hz",
            Box::new(|| {
                let mut c = Command::new("py-spy");
                c.args([
                    "record",
                    "-r",
                    "100",
                    "-o",
                    "/dev/null",
                    "-f",
                    "raw",
                    "--",
                    &python,
                ])
                .args(ARGS)
                .current_dir(&plain);
                c
            }),
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (k, (name, make)) in variants.iter().enumerate() {
            if name.contains("py-spy") && !has_pyspy {
                continue;
            }
            // The log of the instrumented runs grows; start each run without it.
            for r in [&nt_root, &top_root, &own_root] {
                let _ = std::fs::remove_file(r.join("profile_output/instrument/measure.jsonl"));
            }
            let (wall, cpu) = timed(make());
            times[k].push(wall);
            cpus[k].push(cpu);
        }
    }
    let base = times[0].clone();
    // Wall time (medians and minimums: on a shared machine the minimum is the run least
    // disturbed) and CPU time, which preemption by other tenants does not inflate.
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!("| variant | wall s, median of {rounds} | wall s, min | CPU s, median | slowdown, wall medians | slowdown, wall minimums | slowdown, CPU medians | CPU slowdown, mean of paired rounds, 95% CI |");
    println!("|---|---|---|---|---|---|---|---|");
    let (base_med, base_min, base_cpu) =
        (median(base.clone()), min(&base), median(cpus[0].clone()));
    for (k, (name, _)) in variants.iter().enumerate() {
        if times[k].is_empty() {
            println!("| {name} | not installed | | | | | |");
            continue;
        }
        let (med, mn, cpu) = (
            median(times[k].clone()),
            min(&times[k]),
            median(cpus[k].clone()),
        );
        // Each round ran every variant back to back: the per-round ratio cancels slow drifts.
        let paired: Vec<f64> = cpus[k]
            .iter()
            .zip(&cpus[0])
            .map(|(c, b)| c / b - 1.0)
            .collect();
        let n = paired.len() as f64;
        let mean = paired.iter().sum::<f64>() / n;
        let sd =
            (paired.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
        let half = 2.1 * sd / n.sqrt();
        println!(
            "| {name} | {med:.3} | {mn:.3} | {cpu:.3} | {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% [{:+.1}, {:+.1}] |",
            (med / base_med - 1.0) * 100.0,
            (mn / base_min - 1.0) * 100.0,
            (cpu / base_cpu - 1.0) * 100.0,
            mean * 100.0,
            (mean - half) * 100.0,
            (mean + half) * 100.0
        );
    }
}
