use super::*;
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunStatus;
use system_profile_runner::execute;

#[tokio::test]
async fn strace_counts_the_syscalls_of_a_command_and_of_a_pid() {
    if !tool("strace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let e = execute(
        &input(
            Method::StraceC,
            command(&[
                &py,
                "-c",
                "import time\nfor _ in range(20):\n    time.sleep(0.001)\n",
            ]),
        ),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e.metrics.syscalls.as_ref().unwrap();
    let sleeps = s
        .rows
        .iter()
        .find(|r| r.syscall == "clock_nanosleep")
        .expect("clock_nanosleep");
    assert!(sleeps.calls >= 20, "{sleeps:?}");
    // Attach to a process that sleeps in a loop, for one second.
    let mut child = Command::new(&py)
        .args(["-c", "import time\nwhile True:\n    time.sleep(0.01)\n"])
        .spawn()
        .unwrap();
    let mut i = input(Method::StraceC, RunTarget::Pid { pid: child.id() });
    i.duration_s = Some(1.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    if e.status == RunStatus::Failed {
        // ptrace refused (a container without SYS_PTRACE): the error says what to do.
        assert!(
            e.error.as_deref().unwrap().contains("ptrace_scope"),
            "{e:?}"
        );
        return;
    }
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let sleeps = e
        .metrics
        .syscalls
        .as_ref()
        .unwrap()
        .rows
        .iter()
        .find(|r| r.syscall == "clock_nanosleep")
        .map(|r| r.calls)
        .unwrap_or(0);
    assert!(
        (40..=110).contains(&sleeps),
        "{sleeps} sleeps in 1 s of a 10 ms loop"
    );
}

#[tokio::test]
async fn perf_stat_reports_counters_and_says_which_are_missing() {
    if !tool("perf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let e = execute(
        &input(Method::PerfStat, command(&[&py, "-c", WORK])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    if e.status == RunStatus::Failed && e.stderr_tail.contains("perf_event_paranoid") {
        return;
    }
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let p = e.metrics.perf_stat.as_ref().unwrap();
    let task = p.counters.iter().find(|c| c.event == "task-clock").unwrap();
    assert!(task.value.unwrap() > 50.0, "{task:?}");
    // CPUs utilised is task-clock over the run's wall time: how much of a CPU the program got,
    // which CPU hogs beside it can push far below one. Checked against its own definition.
    let cpus = p.cpus_utilized.expect("CPUs utilized");
    let task_s = task.value.unwrap() / 1e3;
    // perf's elapsed time is within our wall (which adds perf's own start), and one thread
    // uses at most one CPU.
    assert!(
        cpus >= 0.95 * task_s / e.wall_s && cpus <= 1.1,
        "expected from task-clock {task_s:.3} s over at most the run's {:.3} s wall up to one CPU, came {cpus:.3} CPUs",
        e.wall_s
    );
    if !p.unsupported.is_empty() {
        assert!(
            e.warnings
                .iter()
                .any(|w| w.contains("cycles and IPC omitted")),
            "{:?}",
            e.warnings
        );
    } else {
        assert!(p.ipc.is_some());
    }
}

#[tokio::test]
async fn the_sampler_attaches_for_a_window_and_notices_an_early_end() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let mut child = Command::new(&py)
        .args([
            "-c",
            "import time\nx = bytearray(32 << 20)\ntime.sleep(0.6)\n",
        ])
        .spawn()
        .unwrap();
    let mut i = input(Method::ProcfsSampler, RunTarget::Pid { pid: child.id() });
    // A window far longer than the process lives: ending with it is the behaviour, however
    // slow a busy machine makes the start.
    i.duration_s = Some(60.0);
    let here = place(dir.path());
    let run = execute(&i, &here);
    let reaper = tokio::task::spawn_blocking(move || child.wait());
    let e = run.await.unwrap();
    reaper.await.unwrap().unwrap();
    assert_eq!(e.status, RunStatus::Completed);
    assert!(
        e.wall_s < 45.0,
        "the run ends with the process, not the 60 s window: {}",
        e.wall_s
    );
    assert!(
        e.warnings.iter().any(|w| w.contains("ended after")),
        "{:?}",
        e.warnings
    );
    assert!(e.metrics.procfs.as_ref().unwrap().rss_peak_bytes >= 32 << 20);
}

#[tokio::test]
async fn sysstat_tools_observe_the_machine_and_a_process() {
    if !tool("vmstat") || !tool("pidstat") || !tool("mpstat") || !tool("iostat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (method, entity) in [
        (Method::Vmstat, "machine"),
        (Method::Mpstat, "all"),
        (Method::Iostat, ""),
    ] {
        let mut i = input(method, RunTarget::System { system: true });
        i.duration_s = Some(2.0);
        let e = execute(&i, &place(dir.path())).await.unwrap();
        assert_eq!(e.status, RunStatus::Completed, "{method:?}: {e:?}");
        let r = e.metrics.sysstat.as_ref().unwrap();
        assert!(e.warnings.is_empty(), "{method:?}: {:?}", e.warnings);
        if !entity.is_empty() {
            let s = r.series.iter().find(|s| s.entity == entity).unwrap();
            assert!(s.samples >= 1, "{method:?}: {s:?}");
        }
    }
    // pidstat on a process that sleeps 1 ms in a loop: hundreds of voluntary switches a second.
    let py = python();
    let mut child = Command::new(&py)
        .args(["-c", "import time\nwhile True:\n    time.sleep(0.001)\n"])
        .spawn()
        .unwrap();
    let mut i = input(Method::Pidstat, RunTarget::Pid { pid: child.id() });
    i.duration_s = Some(2.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let r = e.metrics.sysstat.as_ref().unwrap();
    let s = &r.series[0];
    assert!(
        s.entity.starts_with(&format!("pid {}", child.id())),
        "{s:?}"
    );
    assert!(
        s.columns["cswch/s"].mean > 100.0,
        "{:?}",
        s.columns["cswch/s"]
    );
    let err = execute(
        &input(Method::Vmstat, command(&["true"])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("alongside"));
}

/// perf sees the interpreter: a pure-Python loop runs in its evaluation loop.
#[tokio::test]
async fn perf_record_folds_native_stacks_into_hotspots_and_a_flame_graph() {
    if !tool("perf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", &hot_for_a_cpu_second());
    let e = execute(
        &input(Method::PerfRecord, command(&[&py, &hot])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    if e.status == RunStatus::Failed
        && e.error
            .as_deref()
            .is_some_and(|m| m.contains("perf_event_paranoid"))
    {
        return;
    }
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e.metrics.stacks.as_ref().expect("stacks");
    assert!(s.total_samples > 20, "{s:?}");
    // The interpreter's evaluation loop is where a pure-Python loop spends its cycles.
    assert!(
        s.by_total
            .iter()
            .take(10)
            .any(|h| h.function.contains("_PyEval_EvalFrame")),
        "{:?}",
        &s.by_total[..s.by_total.len().min(10)]
    );
    for kind in [
        ArtifactKind::PerfData,
        ArtifactKind::PerfScript,
        ArtifactKind::Folded,
        ArtifactKind::FlamegraphSvg,
    ] {
        assert!(
            e.artifacts.iter().any(|a| a.kind == kind),
            "{kind:?} missing: {:?}",
            e.artifacts
        );
    }
    assert!(e.argv.windows(2).any(|w| w == ["-e", "cpu-clock"]));
}
