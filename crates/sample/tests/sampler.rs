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
