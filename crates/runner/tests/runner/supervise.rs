use super::*;
use std::time::{Duration, Instant};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunStatus;
use system_profile_runner::{execute, RunErrorKind};

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
        // `time`'s own argv holds the `-c` it passes on: the interpreter is the other one.
        .find(|x| x.name != "time" && x.cmdline.iter().any(|a| a == "-c"))
        .unwrap();
    assert!(py_proc.rss_peak_bytes >= 48 * 1024 * 1024, "{py_proc:?}");
    let cpu = t.user_s + t.sys_s;
    assert!(
        p.cpu_user_s + p.cpu_sys_s >= 0.7 * cpu,
        "sampled {} of {cpu}",
        p.cpu_user_s + p.cpu_sys_s
    );
    let kinds: Vec<ArtifactKind> = e.artifacts.iter().map(|a| a.kind).collect();
    for k in [
        ArtifactKind::Stdout,
        ArtifactKind::Stderr,
        ArtifactKind::TimeV,
        ArtifactKind::ProcfsJsonl,
    ] {
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
async fn targets_that_do_not_fit_and_methods_not_built_are_errors_that_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let err = execute(
        &input(Method::TimeV, RunTarget::Pid { pid: 1 }),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), RunErrorKind::BadTarget);
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
    assert_eq!(err.kind(), RunErrorKind::ToolUnavailable);
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
    assert_eq!(err.kind(), RunErrorKind::BadTarget);
    assert!(err.to_string().contains("runs Python code"), "{err}");
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
