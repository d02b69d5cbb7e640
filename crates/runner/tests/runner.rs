//! Each method against real programs started here, checked against ground truth: the
//! program's own accounting, a separate /usr/bin/time -v, and /proc after the run.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use system_profile_model::run::{Method, ProfilerOptions, RunProfilerInput, RunStatus, RunTarget};
use system_profile_runner::{execute, RunErrorKind, RunPlace};

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn input(profiler: Method, target: RunTarget) -> RunProfilerInput {
    RunProfilerInput {
        profiler,
        target,
        cwd: None,
        env: BTreeMap::new(),
        duration_s: None,
        timeout_s: None,
        options: ProfilerOptions::default(),
        label: None,
        background: false,
    }
}

fn command(argv: &[&str]) -> RunTarget {
    RunTarget::Command {
        command: argv.iter().map(|s| s.to_string()).collect(),
        shell: false,
    }
}

fn place(dir: &Path) -> RunPlace {
    RunPlace {
        dir: dir.join("run"),
        cwd: dir.to_path_buf(),
        ..Default::default()
    }
}

/// A CPU-bound program that holds 48 MiB and sleeps 50 times (voluntary switches).
const WORK: &str = r#"
import time
hold = bytearray(48 * 1024 * 1024)
for i in range(0, len(hold), 4096):
    hold[i] = 1
t = 0
for i in range(3_000_000):
    t += i * i
for _ in range(50):
    time.sleep(0.005)
print("done", t)
"#;

/// Whether `python` imports `name`; its absence fails the test under CI.
fn module(python: &str, name: &str) -> bool {
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

fn tool(name: &str) -> bool {
    let present = system_profile_exec::which(name).is_some();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required under CI"
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipping: {name} is not installed");
        }
    }
    present
}

#[tokio::test]
async fn measure_agrees_with_a_separate_time_v() {
    if !tool("/usr/bin/time") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let e = execute(
        &input(Method::Measure, command(&[&py, "-c", WORK])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.exit_code, Some(0));
    assert!(e.stdout_tail.starts_with("done"));
    let t = e.metrics.time_v.as_ref().unwrap();
    let p = e.metrics.procfs.as_ref().unwrap();
    // The same program under a separate /usr/bin/time -v.
    let out = Command::new("/usr/bin/time")
        .args(["-v", &py, "-c", WORK])
        .output()
        .unwrap();
    let separate = system_profile_parse::time_v::parse(&String::from_utf8_lossy(&out.stderr)).value;
    let ratio = t.max_rss_bytes as f64 / separate.max_rss_bytes as f64;
    assert!(
        (0.9..1.1).contains(&ratio),
        "max RSS {} vs {}",
        t.max_rss_bytes,
        separate.max_rss_bytes
    );
    // Voluntary switches: 50 sleeps and the interpreter's own; within 20% or 10.
    let (a, b) = (
        t.voluntary_ctx_switches as f64,
        separate.voluntary_ctx_switches as f64,
    );
    assert!((a - b).abs() <= (0.2 * b).max(10.0), "voluntary {a} vs {b}");
    // The sampler saw the python process with its 48 MiB, and most of its CPU time.
    let py_proc = p
        .processes
        .iter()
        .find(|x| x.cmdline.iter().any(|a| a == "-c"))
        .unwrap();
    assert!(py_proc.rss_peak_bytes >= 48 * 1024 * 1024, "{py_proc:?}");
    let cpu = t.user_s + t.sys_s;
    assert!(
        p.cpu_user_s + p.cpu_sys_s >= 0.7 * cpu,
        "sampled {} of {cpu}",
        p.cpu_user_s + p.cpu_sys_s
    );
    let kinds: Vec<&str> = e.artifacts.iter().map(|a| a.kind).collect();
    for k in ["stdout", "stderr", "time_v", "procfs_jsonl"] {
        assert!(kinds.contains(&k), "{kinds:?}");
    }
    assert_eq!(e.argv[0], "/usr/bin/time");
}

#[tokio::test]
async fn a_crashing_target_keeps_what_was_measured() {
    if !tool("/usr/bin/time") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let e = execute(
        &input(
            Method::TimeV,
            command(&[&py, "-c", "import sys; x = bytearray(8 << 20); sys.exit(3)"]),
        ),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Failed);
    assert_eq!(e.exit_code, Some(3));
    assert!(e.error.as_deref().unwrap().contains("status 3"));
    assert!(e.metrics.time_v.as_ref().unwrap().max_rss_bytes > 8 << 20);
    let e = execute(
        &input(
            Method::TimeV,
            command(&[
                &py,
                "-c",
                "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            ]),
        ),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!((e.status, e.signal), (RunStatus::Failed, Some(9)), "{e:?}");
}

/// Live members of process group `pgid`, from /proc.
fn group_members(pgid: u32) -> Vec<u32> {
    system_profile_sample::proc::list_processes()
        .into_iter()
        .filter(|p| p.state != 'Z')
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|x| x.1.split_whitespace().nth(2).map(str::to_string))
                })
                .flatten()
                == Some(pgid.to_string())
        })
        .map(|p| p.pid)
        .collect()
}

#[tokio::test]
async fn a_timeout_kills_a_tree_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; (trap '' TERM; sleep 60) & sleep 60",
        pidfile.display()
    );
    let mut i = input(Method::Custom, command(&["/bin/sh", "-c", &script]));
    i.timeout_s = Some(0.5);
    let started = Instant::now();
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::TimedOut);
    assert!(e.error.as_deref().unwrap().contains("timeout_s"));
    assert!(started.elapsed() < Duration::from_secs(10));
    let pgid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(group_members(pgid), Vec::<u32>::new());
}

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
    assert!(p.cpus_utilized.unwrap() > 0.3);
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
async fn targets_that_do_not_fit_and_methods_not_built_are_errors_that_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let err = execute(
        &input(Method::TimeV, RunTarget::Pid { pid: 1 }),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), &RunErrorKind::BadTarget);
    assert!(err.to_string().contains("give target.command"));
    let err = execute(
        &input(Method::ProcfsSampler, RunTarget::Pid { pid: 4_194_000 }),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no process 4194000"));
    let err = execute(
        &input(Method::Custom, command(&["/no/such/program"])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), &RunErrorKind::ToolUnavailable);
    // Every method of the catalog runs; a Python-only one says what command it needs.
    assert_eq!(system_profile_runner::IMPLEMENTED.len(), Method::ALL.len());
    assert!(Method::ALL
        .iter()
        .all(|m| system_profile_runner::IMPLEMENTED.contains(m)));
    let err = execute(
        &input(Method::TorchProfiler, command(&["true"])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), &RunErrorKind::BadTarget);
    assert!(err.to_string().contains("runs Python code"), "{err}");
}

/// On a machine with a GPU the NVML sampler reads every GPU over the window and `measure` adds
/// the GPU series; without one both say why, and `measure` still measures the CPU side.
#[tokio::test]
async fn nvml_sampler_reads_the_gpus_or_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = input(Method::NvmlSampler, RunTarget::System { system: true });
    machine.duration_s = Some(1.0);
    let sampled = execute(&machine, &place(&dir.path().join("nvml"))).await;
    let mut measure = input(Method::Measure, command(&["sleep", "0.3"]));
    measure.options.gpu = Some(true);
    let measured = execute(&measure, &place(&dir.path().join("measure")))
        .await
        .unwrap();
    assert_eq!(measured.status, RunStatus::Completed);
    assert!(measured.metrics.procfs.is_some());
    match system_profile_sample::nvml::nvml() {
        Ok(nvml) => {
            let count = nvml.device_count().unwrap();
            let e = sampled.unwrap();
            let gpu = e.metrics.gpu.as_ref().unwrap();
            assert_eq!(gpu.source, "nvml");
            assert_eq!(gpu.devices.len() as u32, count);
            // 10 Hz for a second: about ten ticks per GPU.
            assert!(gpu.samples >= 5 * u64::from(count), "{gpu:?}");
            for d in &gpu.devices {
                let mem = d.series["mem_used_bytes"];
                assert!(mem.max <= d.mem_total_bytes.unwrap() as f64, "{d:?}");
                assert!(d.series["sm_util_percent"].max <= 100.0);
            }
            let lines = std::fs::read_to_string(dir.path().join("nvml/nvml.jsonl")).unwrap();
            assert_eq!(lines.lines().count() as u64, gpu.samples);
            assert!(measured.metrics.gpu.is_some(), "{measured:?}");
        }
        Err(reason) => {
            let err = sampled.unwrap_err();
            assert_eq!(err.kind(), &RunErrorKind::ToolUnavailable);
            assert!(
                err.to_string().contains("NVML could not be loaded"),
                "{err}"
            );
            assert!(reason.contains("--gpus all"));
            assert!(measured.metrics.gpu.is_none());
            assert!(
                measured
                    .warnings
                    .iter()
                    .any(|w| w.starts_with("no GPU series in this run: NVML could not be loaded")),
                "{:?}",
                measured.warnings
            );
        }
    }
}

/// `hot` does ~85% of the work, `cold` the rest.
const HOT: &str = r#"
def hot(n):
    t = 0
    for i in range(n):
        t += i * i
    return t

def cold(n):
    t = 0
    for i in range(n):
        t += i
    return t

for _ in range(30):
    hot(100_000)
    cold(15_000)
"#;

fn script(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[tokio::test]
async fn py_spy_ranks_the_hot_function_first_and_draws_it() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", HOT);
    let mut i = input(Method::PySpyRecord, command(&[&py, &hot]));
    i.options.rate_hz = Some(250.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e.metrics.stacks.as_ref().unwrap();
    assert!(s.total_samples > 20, "{s:?}");
    assert_eq!(s.by_self[0].function, "hot", "{:?}", &s.by_self[..3]);
    assert!(s.by_self[0].file.as_deref().unwrap().ends_with("hot.py"));
    let svg = e
        .artifacts
        .iter()
        .find(|a| a.kind == "flamegraph_svg")
        .expect("a flame graph");
    let text = std::fs::read_to_string(&svg.path).unwrap();
    assert!(
        text.contains("<svg") && text.contains("hot"),
        "not a flame graph of hot()"
    );

    // Attach to a running process for one second.
    let spin = script(
        dir.path(),
        "spin.py",
        "def spin():\n    x = 0\n    while True:\n        x += 1\n\nspin()\n",
    );
    let mut child = Command::new(&py).arg(&spin).spawn().unwrap();
    let mut i = input(Method::PySpyRecord, RunTarget::Pid { pid: child.id() });
    i.duration_s = Some(1.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    if e.status == RunStatus::Failed {
        assert!(
            e.error.as_deref().unwrap().contains("ptrace_scope"),
            "{e:?}"
        );
        return;
    }
    let s = e.metrics.stacks.as_ref().unwrap();
    assert_eq!(s.by_self[0].function, "spin", "{:?}", s.by_self);
    assert!(e.argv.contains(&"--pid".to_string()));
}

#[tokio::test]
async fn py_spy_dump_shows_where_each_thread_is() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let waiter = script(
        dir.path(),
        "wait.py",
        "import time\n\ndef waiting():\n    time.sleep(60)\n\nwaiting()\n",
    );
    let mut child = Command::new(&py).arg(&waiter).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let e = execute(
        &input(Method::PySpyDump, RunTarget::Pid { pid: child.id() }),
        &place(dir.path()),
    )
    .await
    .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    if e.status == RunStatus::Failed {
        assert!(e.error.is_some(), "{e:?}");
        return;
    }
    let threads = e.metrics.threads.as_ref().unwrap();
    assert_eq!(threads[0].pid, child.id());
    assert_eq!(threads[0].frames[0].function, "waiting", "{threads:?}");
    assert!(!threads[0].active, "a sleeping thread is idle");
}

#[tokio::test]
async fn cprofile_counts_every_call_and_ranks_by_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", HOT);
    let e = execute(
        &input(Method::Cprofile, command(&[&py, "-u", &hot])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.argv[1..5], ["-u", "-m", "cProfile", "-o"]);
    let c = e.metrics.calls.as_ref().unwrap();
    let top = &c.by_tottime[0];
    assert_eq!(top.function, "hot", "{:?}", &c.by_tottime[..3]);
    assert_eq!(top.calls, 30);
    let cold = c.by_tottime.iter().find(|f| f.function == "cold").unwrap();
    assert_eq!(cold.calls, 30);
    assert!(top.tottime_s > cold.tottime_s);
    let err = execute(
        &input(Method::Cprofile, command(&["/bin/true"])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("must start with the interpreter"));
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
    let hot = script(dir.path(), "hot.py", HOT);
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
    for kind in ["perf_data", "perf_script", "folded", "flamegraph_svg"] {
        assert!(
            e.artifacts.iter().any(|a| a.kind == kind),
            "{kind} missing: {:?}",
            e.artifacts
        );
    }
    assert!(e.argv.windows(2).any(|w| w == ["-e", "cpu-clock"]));
}

#[tokio::test]
async fn line_profiler_times_each_line_of_the_named_function() {
    let py = python();
    if !module(&py, "line_profiler") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hot = script(dir.path(), "hot.py", HOT);
    let mut i = input(Method::LineProfiler, command(&[&py, &hot]));
    i.options.function = Some(format!("{hot}:hot"));
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let p = e.metrics.line_profile.as_ref().expect("a line profile");
    assert_eq!(p.function, "hot");
    // `t += i * i` (line 5) runs 30 x 100000 times and takes most of the time.
    let body = p.lines.iter().find(|l| l.line == 5).unwrap();
    assert_eq!(body.hits, 3_000_000, "{p:?}");
    assert!(body.source.contains("t += i * i"));
    assert!(body.percent > 40.0, "{body:?}");
    let first = p.lines.iter().find(|l| l.line == 3).unwrap();
    assert_eq!(first.hits, 30);
    let err = execute(
        &input(Method::LineProfiler, command(&[&py, &hot])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("options.function"));
}

/// Holds 40 MB from line 4 for 0.3 s at its peak, frees it, then keeps 5 MB from line 9 to
/// the end.
const ALLOC: &str = r#"import sys, time

def build():
    big = [bytes(1000) for _ in range(40_000)]
    time.sleep(0.3)
    return sum(len(b) for b in big)

def keep():
    return [bytes(500) for _ in range(10_000)]

total = build()
kept = keep()
print(total, len(kept), file=sys.stderr)
"#;

#[tokio::test]
async fn tracemalloc_finds_the_site_of_the_peak_and_what_stays() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let alloc = script(dir.path(), "alloc.py", ALLOC);
    let mut i = input(Method::Tracemalloc, command(&[&py, &alloc]));
    i.options.interval_s = Some(0.01);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.stderr_tail.starts_with("40000000 10000"),
        "the target ran as itself: {}",
        e.stderr_tail
    );
    let m = e.metrics.python_memory.as_ref().unwrap();
    // 40,000 bytes objects of 1000 bytes (+33 bytes header each) and the list: the program's
    // own count is 40 MB of payload; the peak is that within 10% plus what else lived then.
    let payload = 40_000_000.0;
    assert!(
        (m.peak_bytes as f64) > payload && (m.peak_bytes as f64) < payload * 1.15,
        "peak {}",
        m.peak_bytes
    );
    let at_peak = &m.peak_sites_by_size[0];
    assert!(
        at_peak.file.ends_with("alloc.py") && at_peak.line == 4,
        "{at_peak:?}"
    );
    assert!(
        (at_peak.size_bytes as f64 - payload).abs() < payload * 0.1,
        "{at_peak:?}"
    );
    let at_exit = &m.exit_sites_by_size[0];
    assert!(
        at_exit.file.ends_with("alloc.py") && at_exit.line == 9,
        "{at_exit:?}"
    );
    assert!(
        m.peak_sites_at_bytes as f64 > payload,
        "{}",
        m.peak_sites_at_bytes
    );
    // 10,000 bytes objects, their list and the comprehension's own blocks.
    assert!((10_000..10_010).contains(&at_exit.count), "{at_exit:?}");
    assert!(!m.timeline.is_empty());
    assert!(e.argv.contains(&"<tracemalloc runner>".to_string()));
}

/// Leading imports (one in a `try`), then code, then a later import that must stay where it is.
const IMPORTS: &str = r#""""Leading imports, then code."""
import sys
import csv
try:
    import xml.dom.minidom
except ImportError:
    xml = None
from email import message
print("decimal" in sys.modules, file=sys.stderr)
import decimal
held = [bytes(100) for _ in range(100_000)]
"#;

#[tokio::test]
async fn tracemalloc_imports_the_leading_imports_untraced_and_weighs_each() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let script_path = script(dir.path(), "imports.py", IMPORTS);
    let e = execute(
        &input(Method::Tracemalloc, command(&[&py, &script_path])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    // The import after the first statement ran where the program put it, not ahead.
    assert!(e.stderr_tail.starts_with("False"), "{}", e.stderr_tail);
    let m = e.metrics.python_memory.as_ref().unwrap();
    let names: Vec<&str> = m.imports.iter().map(|i| i.module.as_str()).collect();
    assert_eq!(names, ["sys", "csv", "xml.dom.minidom", "email"], "{m:?}");
    let before = m
        .rss_before_imports_bytes
        .expect("the interpreter's resident set");
    assert!(before > 1 << 20, "{before}");
    let mut last = before;
    for i in &m.imports {
        assert!(i.error.is_none(), "{i:?}");
        assert!(i.rss_after_bytes >= last / 2, "{i:?} after {last}");
        last = i.rss_after_bytes;
    }
    // What the imports allocated is not the program's: no stdlib module's line among the
    // sites, and the program's list is the first.
    let top = &m.peak_sites_by_size[0];
    assert!(
        top.file.ends_with("imports.py") && top.line == 11,
        "{top:?}"
    );
    for s in &m.peak_sites_by_size {
        assert!(
            !s.file.contains("/xml/") && !s.file.contains("/email/") && !s.file.contains("/csv"),
            "an import's allocation was traced: {s:?}"
        );
    }
}

#[tokio::test]
async fn every_program_a_run_starts_knows_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let mut at = place(dir.path());
    at.run_id = "r042-custom".into();
    let e = execute(
        &input(
            Method::Custom,
            command(&[
                &py,
                "-c",
                "import os, sys; print(os.environ.get('SP_RUN_ID'), file=sys.stderr)",
            ]),
        ),
        &at,
    )
    .await
    .unwrap();
    assert_eq!(e.stderr_tail.trim(), "r042-custom", "{e:?}");
}

#[tokio::test]
async fn memray_finds_where_the_bytes_go_and_the_peak() {
    let py = python();
    if !module(&py, "memray") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let alloc = script(dir.path(), "alloc.py", ALLOC);
    let e = execute(
        &input(Method::Memray, command(&[&py, &alloc])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    let m = e.metrics.allocations.as_ref().expect("memray stats");
    let payload = 40_000_000.0;
    assert!(
        (m.peak_bytes as f64 - payload).abs() < payload * 0.1,
        "peak {}",
        m.peak_bytes
    );
    let top = &m.top_by_size[0];
    assert!(
        top.file.ends_with("alloc.py") && top.line == Some(4),
        "{top:?}"
    );
    assert!(m.top_by_count[0].count.unwrap() >= 40_000);
    assert!(m.total_allocations >= 50_000);
    for kind in ["memray_bin", "memray_stats_json", "memray_flamegraph_html"] {
        assert!(
            e.artifacts.iter().any(|a| a.kind == kind),
            "{kind}: {:?}",
            e.artifacts
        );
    }
}

/// A stand-in `nvidia-smi` that prints what a real one printed on an H200 under load
/// (tests/data of the parse crate) and records its arguments; `dmon -c` ends by itself, the
/// query loop runs until stopped, like the real ones.
fn fake_nvidia_smi(dir: &Path) -> String {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../parse/tests/data");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {argv}\ncase \"$1\" in\n  dmon) cat {data}/nvidia_smi_dmon/h200-drv590-load.txt\n        case \"$*\" in *-c*) exit 0;; esac;;\n  topo) cat {data}/nvidia_smi_topo/aws-g6e-4gpu-pcie-node.txt; exit 0;;\n  nvlink) case \"$2\" in\n      -s) cat {data}/nvidia_smi_nvlink/h100-status-i0.txt;;\n      *) if [ -f {seen} ]; then cat {data}/nvidia_smi_nvlink/h800-gpu0-gt-d-during-training.txt; else touch {seen}; cat {data}/nvidia_smi_nvlink/h800-gpu0-gt-d-idle.txt; fi;;\n    esac\n    exit 0;;\n  *) cat {data}/nvidia_smi_query/h200-drv590-load-query-gpu-allfields.txt;;\nesac\nexec sleep 30\n",
        argv = dir.join("argv.txt").display(),
        seen = dir.join("counters-read-once").display(),
    );
    let path = bin.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

#[tokio::test]
async fn nvidia_smi_dmon_and_query_beside_the_machine_and_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_nvidia_smi(dir.path());
    let mut dmon = input(Method::NvidiaSmiDmon, RunTarget::System { system: true });
    dmon.duration_s = Some(2.0);
    dmon.env.insert("PATH".into(), path.clone());
    let e = execute(&dmon, &place(&dir.path().join("dmon")))
        .await
        .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let g = e.metrics.gpu.as_ref().unwrap();
    assert_eq!(g.source, "nvidia-smi dmon");
    assert_eq!(g.samples, 5);
    let d = &g.devices[0];
    assert_eq!(d.series["sm_util_percent"].p50, 100.0);
    assert!((d.series["power_w"].mean - 629.8).abs() < 1e-9, "{d:?}");
    assert_eq!(d.series["power_w"].max, 632.0);
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    assert_eq!(argv.lines().next(), Some("dmon -s pucmt -d 1 -o T -c 2"));

    // The query beside a command: it runs as long as the command does, then is stopped.
    let mut query = input(Method::NvidiaSmiQuery, command(&["sleep", "0.5"]));
    query.env.insert("PATH".into(), path);
    let started = Instant::now();
    let e = execute(&query, &place(&dir.path().join("query")))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the query loop was stopped"
    );
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let g = e.metrics.gpu.as_ref().unwrap();
    assert_eq!(g.source, "nvidia-smi query");
    let d = &g.devices[0];
    assert_eq!(d.name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(
        d.series["mem_used_bytes"].max,
        (32362u64 * 1024 * 1024) as f64
    );
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    assert!(
        argv.lines()
            .nth(1)
            .unwrap()
            .starts_with("--query-gpu=timestamp,index,"),
        "{argv}"
    );
    let kinds: Vec<&str> = e.artifacts.iter().map(|a| a.kind).collect();
    assert!(kinds.contains(&"nvidia_smi_query_csv"), "{kinds:?}");
    // No nvidia-smi at all: an error that says so.
    let mut none = input(Method::NvidiaSmiDmon, RunTarget::System { system: true });
    none.env.insert("PATH".into(), "/nonexistent".into());
    let err = execute(&none, &place(&dir.path().join("none")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), &RunErrorKind::ToolUnavailable, "{err}");
}

/// NCCL cannot run here (no GPU), so the program stands in for a job's ranks: two processes
/// that each write, where NCCL_DEBUG_FILE says, half of the lines NCCL wrote on a real
/// 4-GPU p4d (parse's tests/data). What is checked is the plumbing: the variables set, one
/// file per process found and parsed together, and a program without NCCL said to be one.
#[tokio::test]
async fn nccl_debug_sets_the_variables_and_reads_every_process_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nccl_debug/aws-p4d-a100-4rank-p2p-cumem.txt"
    );
    let program = format!(
        r#"import os, socket
assert os.environ["NCCL_DEBUG"] == "INFO", os.environ.get("NCCL_DEBUG")
assert "COLL" in os.environ["NCCL_DEBUG_SUBSYS"]
lines = open({log:?}).read().splitlines(True)
half = 1 if os.fork() == 0 else 0
path = os.environ["NCCL_DEBUG_FILE"].replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
open(path, "w").writelines(lines[half::2])
if half == 0:
    os.wait()
"#
    );
    let py = python();
    let e = execute(
        &input(Method::NcclDebug, command(&[&py, "-c", &program])),
        &place(&dir.path().join("two")),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(
        e.artifacts.iter().filter(|a| a.kind == "nccl_log").count(),
        2
    );
    let n = e.metrics.nccl.as_ref().unwrap();
    // Split between two files, the lines still add up to the whole log's numbers.
    assert_eq!(n.transports[0].transport, "P2P/CUMEM/read");
    assert_eq!(n.transports[0].connections, 192);
    assert_eq!(n.communicators.len(), 2);
    assert!(n.communicators.iter().all(|c| c.ranks.len() == 4));
    assert!(
        e.metrics.nccl_tests.is_none(),
        "no nccl-tests table was printed"
    );

    // An nccl-tests program: its table, as a real all_reduce_perf printed it, is read too.
    let table = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nccl_tests/h100-2node-16rank-all_reduce_perf-8B-8G.txt"
    );
    let e = execute(
        &input(Method::NcclDebug, command(&["cat", table])),
        &place(&dir.path().join("table")),
    )
    .await
    .unwrap();
    let t = e.metrics.nccl_tests.as_ref().expect("the nccl-tests table");
    assert_eq!(
        (t.ranks, t.rows.len(), t.peak_busbw_gbps),
        (16, 31, Some(338.82))
    );

    let e = execute(
        &input(
            Method::NcclDebug,
            command(&[&py, "-c", "print('no collectives here')"]),
        ),
        &place(&dir.path().join("none")),
    )
    .await
    .unwrap();
    assert!(
        e.warnings
            .iter()
            .any(|w| w.starts_with("NCCL said nothing")),
        "{:?}",
        e.warnings
    );
}

/// nsys cannot run here (no GPU driver), so a stand-in `nsys` writes an empty report, runs
/// the command, and for `stats` prints what a real nsys 2024.6 printed for a PyTorch model
/// (parse's tests/data): the plumbing, report file and parsed tables are what is checked.
#[tokio::test]
async fn nsys_profiles_the_command_then_reads_its_stats() {
    let dir = tempfile::tempdir().unwrap();
    let stats = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nsys_stats/pytorch-lm-2.7B-nsys2024.6-processing-format.txt"
    );
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {argv}\nif [ \"$1\" = profile ]; then\n  touch \"$7.nsys-rep\"\n  shift 7\n  exec \"$@\"\nfi\ncat {stats}\n",
        argv = dir.path().join("argv.txt").display()
    );
    let path = bin.join("nsys");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut run = input(
        Method::Nsys,
        command(&["sh", "-c", "echo ran > marker.txt"]),
    );
    run.env.insert(
        "PATH".into(),
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let e = execute(&run, &place(&dir.path().join("nsys")))
        .await
        .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        dir.path().join("nsys/marker.txt").exists(),
        "the command ran in its cwd"
    );
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    let mut lines = argv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("profile --trace cuda,nvtx,osrt --force-overwrite true -o "));
    assert!(lines
        .next()
        .unwrap()
        .starts_with("stats --report cuda_gpu_kern_sum,"));
    let n = e.metrics.nsys.as_ref().unwrap();
    assert_eq!(n.kernels.len(), 23);
    assert_eq!(n.launches.launches, 7328);
    let kinds: Vec<&str> = e.artifacts.iter().map(|a| a.kind).collect();
    assert!(
        kinds.contains(&"nsys_rep") && kinds.contains(&"nsys_stats"),
        "{kinds:?}"
    );
}

/// `grow` holds 64 MiB from its line 5 for as long as it runs and frees it on line 7; the
/// rest of the program is not traced.
const GROW: &str = r#"import sys

def grow(n):
    keep = []
    keep.append(bytearray(64 * 1024 * 1024))
    total = sum(len(b) for b in keep)
    del keep
    return total

class Box:
    def small(self):
        return [0] * 10

print(grow(1), Box().small()[0])
"#;

#[tokio::test]
async fn memory_profiler_finds_the_line_that_grows_memory() {
    let py = python();
    if !module(&py, "memory_profiler") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let grow = script(dir.path(), "grow.py", GROW);
    let mut i = input(Method::MemoryProfiler, command(&[&py, &grow]));
    i.options.function = Some("grow.py:grow".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.stdout_tail.starts_with("67108864 0"),
        "the program ran as usual: {e:?}"
    );
    let m = e.metrics.memory_lines.as_ref().expect("a memory profile");
    assert_eq!(m.function, "grow");
    assert_eq!(m.top_increment_line, Some(5), "{m:?}");
    let alloc = m.lines.iter().find(|l| l.line == 5).unwrap();
    assert!(alloc.source.contains("bytearray(64 * 1024 * 1024)"));
    assert_eq!(alloc.occurrences, 1);
    // 64 MiB resident, give or take what the interpreter does around it.
    let inc = alloc.increment_mib.unwrap();
    assert!((60.0..70.0).contains(&inc), "{alloc:?}");
    let freed = m.lines.iter().find(|l| l.line == 7).unwrap();
    assert!(freed.increment_mib.unwrap() < -60.0, "{freed:?}");
    // A method by its qualified name.
    let mut i = input(Method::MemoryProfiler, command(&[&py, &grow]));
    i.options.function = Some("grow.py:Box.small".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    let m = e.metrics.memory_lines.as_ref().unwrap();
    assert_eq!(
        m.lines.iter().find(|l| l.line == 12).unwrap().occurrences,
        1,
        "{m:?}"
    );
}

/// Topology and NVLink through the same stand-in nvidia-smi: a 4-GPU PCIe node's matrix (every
/// pair over PCIe, flagged) and an H100's 18 links, with counters read at both ends of the
/// window (an H800's idle and busy counters: the difference is what the links carried).
#[tokio::test]
async fn topology_and_nvlink_status_read_the_interconnect() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_nvidia_smi(dir.path());
    let mut topo = input(Method::NvidiaSmiTopo, RunTarget::System { system: true });
    topo.env.insert("PATH".into(), path.clone());
    let e = execute(&topo, &place(&dir.path().join("topo")))
        .await
        .unwrap();
    let t = e.metrics.topology.as_ref().unwrap();
    assert_eq!(t.nvlink_gpu_pairs, 0);
    assert_eq!(t.pcie_gpu_pairs.len(), 6, "4 GPUs, 6 pairs, all over PCIe");
    assert!(
        e.warnings.iter().any(|w| w.contains("6 GPU pair(s)")),
        "{:?}",
        e.warnings
    );

    let mut nv = input(Method::NvlinkStatus, RunTarget::System { system: true });
    nv.duration_s = Some(0.2);
    nv.env.insert("PATH".into(), path);
    let e = execute(&nv, &place(&dir.path().join("nvlink")))
        .await
        .unwrap();
    let g = &e.metrics.nvlink.as_ref().unwrap().gpus[0];
    assert_eq!(g.active_links, 18);
    // Link 0 carried 1,390,774,681 - 5,863,784 KiB of data out over the window.
    assert_eq!(g.links[0].data_tx_kib, Some(1_390_774_681 - 5_863_784));
    assert_eq!(
        g.links[17].data_tx_kib, None,
        "the H800 fixture has 8 links"
    );
}

/// A small training loop: six optimizer steps of a linear model on the CPU.
const TRAIN: &str = r#"import torch
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(32, 64)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"#;

#[tokio::test]
async fn torch_profiler_traces_a_training_loop_on_its_schedule() {
    let py = python();
    if !module(&py, "torch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let train = script(dir.path(), "train.py", TRAIN);
    let mut i = input(Method::TorchProfiler, command(&[&py, &train]));
    i.options.schedule = Some(system_profile_model::run::TorchSchedule {
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 1,
    });
    i.options.record_shapes = Some(true);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.stdout_tail.contains("trained"));
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("run/torch-profiler.json")).unwrap(),
    )
    .unwrap();
    // Every optimizer step was seen; one active cycle of two steps was exported.
    assert_eq!(state["steps"], 6, "{state}");
    assert_eq!(state["traces"].as_array().unwrap().len(), 1, "{state}");
    let t = e.metrics.trace.as_ref().expect("the trace analysed");
    assert!(t.events > 50, "{t:?}");
    // Two ProfilerStep annotations in the active cycle.
    assert_eq!(t.window.profiler_steps, 2, "{:?}", t.window);
    if state["cuda"] == false {
        assert!(
            e.warnings.iter().any(|w| w.contains("no GPU")),
            "{:?}",
            e.warnings
        );
    }
    assert!(e.artifacts.iter().any(|a| a.kind == "kineto_trace"));

    // Without a schedule the whole run is one trace.
    let e = execute(
        &input(Method::TorchProfiler, command(&[&py, &train])),
        &place(&dir.path().join("whole")),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.metrics.trace.as_ref().unwrap().events > 100);

    // A hand-written update steps no optimizer: the schedule never starts, nothing is traced,
    // and the run says so instead of passing for a profile.
    let manual = script(
        dir.path(),
        "manual.py",
        &TRAIN
            .replace("opt = torch.optim.SGD(model.parameters(), lr=0.01)\n", "")
            .replace("    opt.zero_grad()\n", "")
            .replace(
                "    opt.step()\n",
                "    with torch.no_grad():\n        for p in model.parameters():\n            p -= 0.01 * p.grad\n            p.grad = None\n",
            ),
    );
    let mut i = input(Method::TorchProfiler, command(&[&py, &manual]));
    i.options.schedule = Some(system_profile_model::run::TorchSchedule {
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 1,
    });
    let e = execute(&i, &place(&dir.path().join("manual")))
        .await
        .unwrap();
    assert!(e.stdout_tail.contains("trained"), "{e:?}");
    assert_eq!(e.status, RunStatus::Failed, "{e:?}");
    assert!(
        e.error
            .as_deref()
            .unwrap_or("")
            .contains("no optimizer step"),
        "{:?}",
        e.error
    );
    assert!(e.metrics.trace.is_none());
}
