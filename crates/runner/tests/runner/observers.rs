//! One run, several observers: `measure` with py-spy attached by PID and perf stat counting
//! the tree, against the same program run by each method alone.

use super::*;
use system_profile_model::run::{ArtifactKind, RunStatus};
use system_profile_runner::execute;

#[tokio::test]
async fn measure_with_observers_gets_each_ones_figures_from_one_run() {
    if !tool("py-spy") || !tool("perf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", &hot_for_a_cpu_second());
    let mut i = input(Method::Measure, command(&[&py, &hot]));
    i.options.observers = vec![Method::PySpyRecord, Method::PerfStat];
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    // One program start: perf stat around time -v around the program.
    assert_eq!(&e.argv[..2], ["perf", "stat"], "{:?}", e.argv);
    assert!(e.argv.iter().any(|a| a == "/usr/bin/time"), "{:?}", e.argv);
    let m = &e.metrics;
    let t = m.time_v.as_ref().expect("time -v's figures");
    assert!(t.user_s > 0.5, "{t:?}");
    assert!(m.procfs.as_ref().is_some_and(|p| p.samples > 5), "{m:?}");
    if !e.warnings.iter().any(|w| w.contains("perf_event_paranoid")) {
        let p = m.perf_stat.as_ref().expect("perf stat's counters");
        assert!(!p.counters.is_empty(), "{p:?}");
    }
    // py-spy saw the hot function from outside, and the record says it paused the program.
    let s = m
        .stacks
        .as_ref()
        .unwrap_or_else(|| panic!("{:?}", e.warnings));
    assert!(s.total_samples > 20, "{s:?}");
    assert_eq!(s.by_self[0].function, "hot", "{:?}", &s.by_self[..3]);
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("py-spy paused the program")),
        "{:?}",
        e.warnings
    );
    for kind in [
        ArtifactKind::TimeV,
        ArtifactKind::ProcfsJsonl,
        ArtifactKind::PerfStatCsv,
        ArtifactKind::Folded,
        ArtifactKind::FlamegraphSvg,
    ] {
        assert!(e.artifacts.iter().any(|a| a.kind == kind), "{kind:?}");
    }
    // The sampler's processes are the program's: neither py-spy nor perf and time around it.
    let p = m.procfs.as_ref().unwrap();
    assert!(
        p.processes
            .iter()
            .all(|q| !matches!(q.name.as_str(), "py-spy" | "perf" | "time")),
        "{:?}",
        p.processes
    );
    assert!(
        p.processes.iter().any(|q| q.name.starts_with("python")),
        "{:?}",
        p.processes
    );
}

#[tokio::test]
async fn only_py_spy_and_perf_stat_observe_and_only_a_measure_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut i = input(Method::Measure, command(&["true"]));
    i.options.observers = vec![Method::Memray];
    let err = execute(&i, &place(dir.path())).await.unwrap_err();
    assert!(err.to_string().contains("memray cannot observe"), "{err}");
    let mut i = input(Method::TimeV, command(&["true"]));
    i.options.observers = vec![Method::PerfStat];
    let err = execute(&i, &place(dir.path())).await.unwrap_err();
    assert!(err.to_string().contains("use profiler measure"), "{err}");
}

/// py-spy attaches by PID, after its own start-up: the program waits at its gate until py-spy
/// runs, so its first moments are in the samples (attached to a running program on a busy
/// machine, py-spy lost `json.tool`'s first 18%).
#[tokio::test]
async fn py_spy_as_an_observer_sees_the_programs_first_moments() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    // A third of the wall time in `opening`, the rest in `rest`, by the clock.
    let program = script(
        dir.path(),
        "phases.py",
        "import time\n\
         def spin(s):\n    t = time.perf_counter()\n    while time.perf_counter() - t < s:\n        pass\n\
         def opening():\n    spin(0.6)\n\
         def rest():\n    spin(1.2)\n\
         opening()\nrest()\n",
    );
    let mut i = input(Method::Measure, command(&[&py, &program]));
    i.options.observers = vec![Method::PySpyRecord];
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e
        .metrics
        .stacks
        .as_ref()
        .unwrap_or_else(|| panic!("{:?}", e.warnings));
    let total = |f: &str| {
        s.by_total
            .iter()
            .find(|r| r.function == f)
            .map_or(0, |r| r.total_samples)
    };
    let (opening, rest) = (total("opening"), total("rest"));
    let share = opening as f64 / (opening + rest).max(1) as f64;
    assert!(
        (0.2..0.5).contains(&share),
        "opening {opening} and rest {rest} samples: {share:.2} of them, a third by the clock"
    );
    // time -v counts the program from its start, not from the wait at its gate: its 1.8 s of
    // spinning, less the clocks' granularity (1.798 s was read once against 1.8).
    let t = e.metrics.time_v.as_ref().unwrap();
    assert!(t.wall_s >= 1.79, "{t:?}");
    assert!(
        t.wall_s < e.wall_s + 0.05,
        "{t:?} against the run's {}",
        e.wall_s
    );
}
