//! The sampler against real process trees started here, checked against what the processes
//! say of themselves (getrusage, their own counts).

use std::process::Command;
use std::time::Duration;
use system_profile_sample::sampler::{Sampler, SamplerConfig};

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A parent that holds 64 MiB and two children that spin for 1.5 s each, all writing their
/// own CPU time (os.times) to `report` when done.
const TREE: &str = r#"
import os, sys, time, json
report = sys.argv[1]
def spin(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x += 1
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        spin(1.5)
        t = os.times()
        with open(f"{report}.{os.getpid()}", "w") as f:
            json.dump({"cpu": t.user + t.system}, f)
        os._exit(0)
    kids.append(pid)
hold = bytearray(64 * 1024 * 1024)
for i in range(0, len(hold), 4096):
    hold[i] = 1
for k in kids:
    os.waitpid(k, 0)
t = os.times()
with open(f"{report}.{os.getpid()}", "w") as f:
    json.dump({"cpu": t.user + t.system}, f)
"#;

#[test]
fn follows_a_forking_tree_and_agrees_with_its_own_accounting() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("cpu");
    let jsonl = dir.path().join("procfs.jsonl");
    let mut child = Command::new(python())
        .args(["-c", TREE])
        .arg(&report)
        .spawn()
        .unwrap();
    let sampler = Sampler::start(
        child.id(),
        SamplerConfig {
            jsonl: Some(jsonl.clone()),
            ..Default::default()
        },
    );
    child.wait().unwrap();
    let s = sampler.stop();
    // Every process wrote its own CPU time (os.times: its own, not its children's).
    let mut own_cpu = 0.0;
    let mut pids = Vec::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.as_ref().unwrap().file_name().into_string().unwrap();
        if let Some(pid) = name.strip_prefix("cpu.") {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap();
            own_cpu += v["cpu"].as_f64().unwrap();
            pids.push(pid.parse::<u32>().unwrap());
        }
    }
    assert_eq!(pids.len(), 3);
    for pid in &pids {
        assert!(
            s.processes.iter().any(|p| p.pid == *pid),
            "{pid} not seen: {:?}",
            s.processes
        );
    }
    let sampled = s.cpu_user_s + s.cpu_sys_s;
    // The last 10 ms of each process may fall after its last sample; the first before the
    // first one. Within 15%, or 0.15 s on a short run.
    let tolerance = (own_cpu * 0.15).max(0.15);
    assert!(
        (sampled - own_cpu).abs() <= tolerance,
        "sampled {sampled:.3} s of CPU, the processes counted {own_cpu:.3} s"
    );
    assert!(
        s.rss_peak_bytes >= 64 * 1024 * 1024,
        "peak {}",
        s.rss_peak_bytes
    );
    assert!(s.samples > 50, "{} samples", s.samples);
    assert!(s.rate_hz_achieved > 50.0, "{} Hz", s.rate_hz_achieved);
    let lines = std::fs::read_to_string(&jsonl).unwrap();
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["pid"], child.id());
    assert!(lines.lines().count() as u64 >= s.samples);
    // The resident set on every line; CPU time and threads on one tick in ten.
    let rows: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(rows.iter().all(|r| r["rss_bytes"].as_u64().is_some()));
    let with_cpu = rows.iter().filter(|r| r["cpu_user_s"].is_number()).count();
    assert!(
        with_cpu * 6 < rows.len() && with_cpu * 20 > rows.len(),
        "{with_cpu} of {} lines carry CPU time",
        rows.len()
    );
}

#[test]
fn counts_voluntary_context_switches_of_a_sleeper() {
    let mut child = Command::new(python())
        .args([
            "-c",
            "import time\nfor _ in range(100):\n    time.sleep(0.01)\n",
        ])
        .spawn()
        .unwrap();
    let sampler = Sampler::start(child.id(), SamplerConfig::default());
    child.wait().unwrap();
    let s = sampler.stop();
    let p = &s.processes[0];
    // 100 sleeps are 100 voluntary switches at least; the sampler's first detail read comes
    // after the interpreter started, its last up to 100 ms before the end.
    assert!(p.voluntary_ctx_switches.unwrap() >= 80, "{p:?}");
    assert!(p.exited);
}

#[test]
fn a_sampler_on_a_dead_pid_ends_at_once() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let sampler = Sampler::start(pid, SamplerConfig::default());
    std::thread::sleep(Duration::from_millis(100));
    assert!(sampler.finished());
    let s = sampler.stop();
    assert!(s.processes.is_empty());
}

#[test]
fn context_switches_are_summed_over_every_thread() {
    // Four threads sleep 150 times each while the main thread waits in join: the main
    // thread's own counters (/proc/<pid>/status) hold a handful; every thread's, hundreds.
    let mut child = Command::new(python())
        .args([
            "-c",
            "import threading, time\n\
             def work():\n    for _ in range(150):\n        time.sleep(0.01)\n\
             ts = [threading.Thread(target=work) for _ in range(4)]\n\
             [t.start() for t in ts]\n[t.join() for t in ts]\n",
        ])
        .spawn()
        .unwrap();
    let sampler = Sampler::start(child.id(), SamplerConfig::default());
    child.wait().unwrap();
    let s = sampler.stop();
    let p = &s.processes[0];
    // Threads are looked for once a second and these live 1.5 s or more (150 sleeps of at
    // least 10 ms): every one is seen, for at least its last half second (25 sleeps).
    assert!(p.threads_seen >= 5, "{p:?}");
    assert!(p.voluntary_ctx_switches.unwrap() >= 4 * 25, "{p:?}");
    // Its main thread spent the run in join: blocked for most of what the sampler saw of it.
    let blocked = p.main_thread_blocked_s.expect("schedstat on Linux");
    assert!(
        blocked >= 0.5 * s.wall_s,
        "{blocked} s of {} s: {p:?}",
        s.wall_s
    );
}

#[test]
fn a_program_sharing_its_cpu_shows_run_queue_time_not_waiting() {
    // Two spinners pinned to one CPU: each is runnable all the time and runs about half of
    // it. The sampled one's run-queue time is a large share of its wall time, its voluntary
    // switches few: it never waited, it was not scheduled.
    let spin = "import os, time\nos.sched_setaffinity(0, {0})\nend = time.time() + 3\nx = 0\nwhile time.time() < end:\n    x += 1\n";
    let mut hog = Command::new(python()).args(["-c", spin]).spawn().unwrap();
    let mut child = Command::new(python()).args(["-c", spin]).spawn().unwrap();
    let sampler = Sampler::start(child.id(), SamplerConfig::default());
    child.wait().unwrap();
    let s = sampler.stop();
    hog.wait().unwrap();
    let queued = s.run_queue_s.expect("schedstat on Linux");
    let cpu = s.cpu_user_s + s.cpu_sys_s;
    assert!(
        queued >= 0.25 * s.wall_s,
        "run queue {queued} s of {} s",
        s.wall_s
    );
    assert!(
        cpu + queued >= 0.8 * s.wall_s,
        "cpu {cpu} + queue {queued} of {}",
        s.wall_s
    );
    let p = &s.processes[0];
    // Runnable all along, so its main thread was hardly ever blocked.
    let blocked = p.main_thread_blocked_s.expect("schedstat on Linux");
    assert!(blocked <= 0.25 * s.wall_s, "{blocked} s of {} s", s.wall_s);
    assert!(
        p.involuntary_ctx_switches.unwrap() > p.voluntary_ctx_switches.unwrap(),
        "{p:?}"
    );
}

#[test]
fn a_forked_tree_sharing_its_pages_has_a_pss_below_its_rss_sum() {
    // A parent touches 128 MiB, then forks three children that keep the pages shared: the
    // RSS sum counts them four times, the PSS sum once.
    let code = "import os, time\nb = bytearray(128 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n\
                kids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    kids.append(pid)\n\
                [os.waitpid(k, 0) for k in kids]\n";
    let mut child = Command::new(python()).args(["-c", code]).spawn().unwrap();
    let sampler = Sampler::start(child.id(), SamplerConfig::default());
    child.wait().unwrap();
    let s = sampler.stop();
    let pss = s
        .pss_peak_bytes
        .expect("smaps_rollup readable for our own children");
    assert!(s.rss_peak_bytes >= 4 * (120 << 20), "{}", s.rss_peak_bytes);
    assert!(pss >= 120 << 20, "pss {pss}");
    assert!(
        pss * 2 < s.rss_peak_bytes,
        "pss {pss} rss sum {}",
        s.rss_peak_bytes
    );
}

/// A launcher and the ranks it starts, as torchrun does: each rank's `RANK`, `LOCAL_RANK` and
/// `GROUP_RANK` come from its environment; the launcher, which has none, is no rank.
#[test]
fn a_rank_is_known_by_its_environment() {
    const LAUNCHER: &str = r#"
import os, subprocess, sys
ranks = []
for local in range(2):
    env = dict(os.environ, RANK=str(2 + local), LOCAL_RANK=str(local), GROUP_RANK="1")
    ranks.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"], env=env))
for r in ranks:
    r.wait()
"#;
    let mut child = Command::new(python())
        .args(["-c", LAUNCHER])
        .env_remove("RANK")
        .spawn()
        .unwrap();
    let sampler = Sampler::start(child.id(), SamplerConfig::default());
    child.wait().unwrap();
    let s = sampler.stop();
    let mut seen: Vec<_> = s
        .processes
        .iter()
        .map(|p| {
            (
                p.pid == child.id(),
                p.ids.rank,
                p.ids.local_rank,
                p.ids.node_rank,
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (false, Some(2), Some(0), Some(1)),
            (false, Some(3), Some(1), Some(1)),
            (true, None, None, None),
        ],
        "{:#?}",
        s.processes
    );
}
