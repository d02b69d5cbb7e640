//! Cost of one call of a function wrapped by the timing decorator, in ns (median of
//! repeated runs, each a loop of calls; baseline: the same loop without the wrapper), with
//! peers measured in the same run: cProfile (profiling every call of the program) and
//! line_profiler's `LineProfiler` wrapping the same function.
//!
//!     cargo run --release -p system-profile-instrument --example overhead -- [--python PY] [--calls N] [--runs R]
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::Command;
use system_profile_instrument::{instrument, InstrumentConfig};
use system_profile_model::instrument::{InstrumentFileInput, Measure, Strategy};

const PROG: &str = r#"import os, sys, time


def f(x):
    return x


def loop(n):
    t0 = time.perf_counter_ns()
    for i in range(n):
        f(i)
    return time.perf_counter_ns() - t0


if __name__ == "__main__":
    peer = os.environ.get("SP_BENCH_PEER")
    if peer == "cprofile":
        import cProfile
        p = cProfile.Profile()
        p.enable()
    elif peer == "line_profiler":
        from line_profiler import LineProfiler
        f = LineProfiler()(f)
    print(loop(int(sys.argv[1])))
"#;

/// Sampling of the wrapped variants: (sample_every, sample_rate); `None`: no wrapper.
type Sampled = Option<(u32, Option<f64>)>;

fn root_with(variant: Sampled, python: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("prog.py"), PROG).expect("write");
    if let Some((every, rate)) = variant {
        let config = InstrumentConfig {
            root: dir.path().canonicalize().expect("root"),
            python: python.into(),
        };
        instrument(
            &config,
            &InstrumentFileInput {
                path: "prog.py".into(),
                measure: Measure::Timing,
                function: Some("f".into()),
                lines: None,
                strategy: Strategy::Decorator,
                sample_every: Some(every),
                sample_rate: rate,
                snippet: None,
                dry_run: false,
                python: None,
            },
        )
        .expect("instrument");
    }
    dir
}

fn run(python: &str, dir: &Path, calls: u64, peer: Option<&str>) -> f64 {
    let mut cmd = Command::new(python);
    cmd.arg("prog.py").arg(calls.to_string()).current_dir(dir);
    if let Some(p) = peer {
        cmd.env("SP_BENCH_PEER", p);
    }
    let out = cmd.output().expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse::<f64>()
        .expect("ns")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut python, mut calls, mut runs) = ("python3".to_string(), 1_000_000u64, 9usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--python" => python = args.next().expect("PY"),
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("N"),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("R"),
            other => panic!("unknown argument {other}"),
        }
    }
    let has_lp = Command::new(&python)
        .args(["-c", "import line_profiler"])
        .status()
        .is_ok_and(|s| s.success());
    let variants: Vec<(&str, Sampled, Option<&str>)> = vec![
        ("baseline (no wrapper)", None, None),
        ("ours: timing, every call recorded", Some((1, None)), None),
        ("ours: timing, sample_every 100", Some((100, None)), None),
        (
            "ours: timing, sample_rate 0.01",
            Some((1, Some(0.01))),
            None,
        ),
        ("peer: cProfile (whole program)", None, Some("cprofile")),
        (
            "peer: line_profiler on f",
            None,
            has_lp.then_some("line_profiler"),
        ),
    ];
    let roots: Vec<tempfile::TempDir> = variants
        .iter()
        .map(|(_, v, _)| root_with(*v, &python))
        .collect();
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    // Interleaved: every round runs each variant once, so drift hits all alike.
    for _ in 0..runs {
        for (k, (_, _, peer)) in variants.iter().enumerate() {
            if variants[k].0.starts_with("peer: line_profiler") && !has_lp {
                continue;
            }
            per[k].push(run(&python, roots[k].path(), calls, *peer) / calls as f64);
        }
    }
    let base = median(per[0].clone());
    println!("| variant | ns per call (median of {runs}) | added ns per call | x baseline |");
    println!("|---|---|---|---|");
    for (k, (name, _, _)) in variants.iter().enumerate() {
        if per[k].is_empty() {
            println!("| {name} | not installed | | |");
            continue;
        }
        let m = median(per[k].clone());
        println!("| {name} | {m:.0} | {:.0} | {:.2} |", m - base, m / base);
    }
}
