//! The profilers that run inside the target's interpreter and sample from there: pyinstrument
//! (stacks, no ptrace) and Scalene (CPU, memory and copying per line).

use super::*;
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunStatus;
use system_profile_runner::execute;

/// `grow` allocates 64 MiB on its line 4 and keeps it while `hot` spins through a fixed amount
/// of arithmetic (a fixed count, not a CPU-time deadline: Scalene's own start-up is counted in
/// the process's CPU time).
const GROW_THEN_HOT: &str = r#"import sys

def grow():
    keep = bytearray(64 * 1024 * 1024)
    return len(keep)

def hot():
    t = 0
    for i in range(6_000_000):
        t += i * i
    return t

print(grow(), hot() > 0, file=sys.stderr)
"#;

#[tokio::test]
async fn pyinstrument_ranks_the_hot_function_first_from_inside() {
    let py = python();
    if !module(&py, "pyinstrument") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = script(dir.path(), "grow then hot.py", GROW_THEN_HOT);
    let mut i = input(Method::Pyinstrument, command(&[&py, &prog]));
    i.options.rate_hz = Some(1000.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    let s = e.metrics.stacks.as_ref().expect("stacks");
    assert_eq!(s.by_self[0].function, "hot", "{:?}", &s.by_self[..3]);
    assert!(s.by_self[0].self_percent > 50.0, "{:?}", s.by_self[0]);
    assert!(s.by_self[0]
        .file
        .as_deref()
        .unwrap()
        .ends_with("grow then hot.py"));
    // The samples are microseconds: their sum is the profiled time, within the run's wall.
    let profiled_s = s.total_samples as f64 * s.sample_period_s.unwrap();
    assert!(
        profiled_s > 0.1 && profiled_s <= e.wall_s,
        "{profiled_s} s of {} s",
        e.wall_s
    );
    // pyinstrument's own frames and runpy's are not the program's.
    assert!(
        s.by_total
            .iter()
            .all(|f| !f.file.as_deref().unwrap_or("").contains("pyinstrument")),
        "{:?}",
        s.by_total
    );
    for kind in [
        ArtifactKind::PyinstrumentSession,
        ArtifactKind::Folded,
        ArtifactKind::FlamegraphSvg,
    ] {
        assert!(e.artifacts.iter().any(|a| a.kind == kind), "{kind:?}");
    }
    assert!(
        e.argv.windows(2).any(|w| w == ["-i", "0.001"]),
        "{:?}",
        e.argv
    );

    // A module runs too, and a target that fails is a failed run with its last words.
    let failing = script(dir.path(), "fails.py", "raise SystemExit('bad input')\n");
    let e = execute(
        &input(Method::Pyinstrument, command(&[&py, &failing])),
        &place(&dir.path().join("again")),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Failed, "{e:?}");
    assert!(e.error.as_deref().unwrap().contains("bad input"), "{e:?}");
}

#[tokio::test]
async fn scalene_finds_the_hot_function_and_the_line_that_allocates() {
    let py = python();
    if !module(&py, "scalene") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = script(dir.path(), "grow_then_hot.py", GROW_THEN_HOT);
    let i = input(Method::Scalene, command(&[&py, &prog]));
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e.metrics.stacks.as_ref().expect("stacks");
    assert_eq!(s.by_self[0].function, "hot", "{:?}", s.by_self);
    let a = e.metrics.allocations.as_ref().expect("allocation sites");
    let top = &a.top_by_size[0];
    let mib64 = 64.0 * 1024.0 * 1024.0;
    let size = top.size_bytes.unwrap() as f64;
    assert!(
        top.file.ends_with("grow_then_hot.py") && top.line == Some(4) && top.function == "grow",
        "{top:?}"
    );
    assert!((size - mib64).abs() < mib64 * 0.25, "{size} bytes");
    assert!(a.peak_bytes as f64 >= mib64 * 0.75, "{}", a.peak_bytes);
    let lines = &e.metrics.line_usage.as_ref().unwrap().lines;
    assert!(
        lines
            .iter()
            .any(|l| l.line == 4 && l.code.starts_with("keep = bytearray")),
        "{lines:?}"
    );
    assert!(e
        .artifacts
        .iter()
        .any(|a| a.kind == ArtifactKind::ScaleneJson));

    // CPU only: no allocation sites claimed.
    let mut i = input(Method::Scalene, command(&[&py, &prog]));
    i.options.profile_memory = Some(false);
    let e = execute(&i, &place(&dir.path().join("cpu"))).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.metrics.allocations.is_none(),
        "{:?}",
        e.metrics.allocations
    );
    assert!(e.argv.iter().any(|a| a == "cpu"), "{:?}", e.argv);

    // Scalene runs scripts only: a module is refused with what to do.
    let err = execute(
        &input(Method::Scalene, command(&[&py, "-m", "json.tool"])),
        &place(&dir.path().join("module")),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("pyinstrument"), "{err}");
}

/// An interpreter without the method's module: the run measured nothing, and says why, how to
/// install it, and as what kind of failure (the pipeline's fallback reads it).
#[tokio::test]
async fn a_method_missing_from_the_targets_interpreter_did_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("bare");
    let made = Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let bare = venv.join("bin/python").to_string_lossy().into_owned();
    let script = dir.path().join("hello.py");
    std::fs::write(&script, "print('hello')\n").unwrap();
    let e = execute(
        &input(
            Method::Pyinstrument,
            command(&[&bare, &script.to_string_lossy()]),
        ),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        e.error_kind,
        Some(system_profile_runner::RunErrorKind::ToolUnavailable),
        "{e:?}"
    );
    let why = e.not_started.as_deref().unwrap();
    assert!(why.contains("pyinstrument is not installed"), "{why}");
    assert!(
        e.error
            .as_deref()
            .unwrap()
            .contains("-m pip install pyinstrument"),
        "{e:?}"
    );
    assert!(e.metrics.stacks.is_none());
}
