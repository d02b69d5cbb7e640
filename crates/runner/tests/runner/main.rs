//! Each method against real programs started here, checked against ground truth: the
//! program's own accounting, a separate /usr/bin/time -v, and /proc after the run. One
//! module per kind of method.

mod alloc_sample;
mod distributed;
mod gpu;
mod in_process;
mod memray_window;
mod observers;
mod python;
mod supervise;
mod system;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use system_profile_model::run::{Method, ProfilerOptions, RunProfilerInput, RunTarget};
use system_profile_runner::RunPlace;

pub fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn input(profiler: Method, target: RunTarget) -> RunProfilerInput {
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

pub fn command(argv: &[&str]) -> RunTarget {
    RunTarget::Command {
        command: argv.iter().map(|s| s.to_string()).collect(),
        shell: false,
    }
}

pub fn place(dir: &Path) -> RunPlace {
    RunPlace {
        dir: dir.join("run"),
        cwd: dir.to_path_buf(),
        ..Default::default()
    }
}

/// A CPU-bound program that holds 48 MiB and sleeps 50 times (voluntary switches).
pub const WORK: &str = r#"
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
pub fn module(python: &str, name: &str) -> bool {
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

pub fn tool(name: &str) -> bool {
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

pub fn script(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// `hot` does ~85% of the work, `cold` the rest.
pub const HOT: &str = r#"
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

/// `HOT`'s work repeated until the process has had a second of CPU: a sampler needs the target
/// to live while it attaches, and 30 rounds end in a tenth of a second on a fast machine (and
/// wall time would be a busy machine's, not the program's).
pub fn hot_for_a_cpu_second() -> String {
    HOT.replace(
        "for _ in range(30):",
        "import time\nwhile time.process_time() < 1.0:",
    )
}
