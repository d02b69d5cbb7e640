//! Observer effect of the /proc sampler on a CPU-bound target, side by side with py-spy at the
//! same rate.
//!
//! `cargo run --release -p system-profile-sample --example sampler_overhead -- [SECONDS] [WINDOW_MS]`
//!
//! This VM's speed swings by ±25% between identical runs and by 2x within a second (the
//! host's frequency and load), far more than the effect to measure, so separate runs with and
//! without the observer cannot resolve 1%. Instead one target process runs for SECONDS
//! (default 40) doing fixed chunks of work (about 2 ms each) and records when each ended and
//! how long it took; the observer runs beside it in its own process and is switched off and on
//! (SIGSTOP, SIGCONT) every WINDOW_MS (default 50). Each "on" window's mean chunk time is
//! compared with the "off" window just before it (a paired design: both see the same
//! machine), and the mean change is given with its 95% confidence interval. The same is done
//! with no observer at all (the null: what the method reads when nothing changes), with our
//! sampler at 100 Hz, and with `py-spy record --rate 100 --pid`. Then it samples a 10-process
//! CPU-bound tree at 100 Hz and prints the sampler's own CPU time over the wall time, beside
//! the floor: a thread that only wakes up 100 times a second and reads each process's statm.
#![allow(clippy::print_stdout)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use system_profile_sample::sampler::{Sampler, SamplerConfig};

/// The target: chunks of pure-Python work until the deadline, then one line per chunk
/// (end on CLOCK_MONOTONIC in ns, its wall ns, its thread CPU ns) into the file argv[2].
const TARGET: &str = r#"
import sys, time
from array import array
deadline = time.monotonic() + float(sys.argv[1])
ends, walls, cpus = array("q"), array("q"), array("q")
while time.monotonic() < deadline:
    w0, c0 = time.monotonic_ns(), time.thread_time_ns()
    t = 0
    for i in range(20_000):
        t += i * i
    w1 = time.monotonic_ns()
    ends.append(w1); walls.append(w1 - w0); cpus.append(time.thread_time_ns() - c0)
with open(sys.argv[2], "w") as f:
    for e, w, c in zip(ends, walls, cpus):
        f.write(f"{e} {w} {c}\n")
"#;

const TREE: &str = "import os\nkids = []\nfor _ in range(9):\n    pid = os.fork()\n    if pid == 0:\n        t = 0\n        for i in range(4_000_000):\n            t += i\n        os._exit(0)\n    kids.append(pid)\nt = 0\nfor i in range(4_000_000):\n    t += i\nfor k in kids:\n    os.waitpid(k, 0)\n";

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn monotonic_ns() -> i64 {
    // SAFETY: clock_gettime writes the zeroed timespec it is given and has no other effect.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Mean of the log ratios as a percentage change, with its 95% confidence interval.
fn paired_change(pairs: &[(f64, f64)]) -> (f64, f64, f64) {
    let logs: Vec<f64> = pairs.iter().map(|(on, off)| (on / off).ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let half = 1.96 * (var / n).sqrt();
    let pct = |l: f64| (l.exp() - 1.0) * 100.0;
    (pct(mean), pct(mean - half), pct(mean + half))
}

enum Observer {
    Nothing,
    OurSampler,
    PySpy(String),
}

struct Arm {
    /// (on window, off window just before it) mean chunk wall and CPU times.
    wall_pairs: Vec<(f64, f64)>,
    cpu_pairs: Vec<(f64, f64)>,
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill has no memory effects; the PID is our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn run_arm(py: &str, observer: &Observer, seconds: f64, window: Duration) -> Arm {
    let dir = tempfile::tempdir().unwrap();
    let chunks = dir.path().join("chunks.txt");
    let mut target = Command::new(py)
        .args(["-c", TARGET, &seconds.to_string()])
        .arg(&chunks)
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let mut watcher = match observer {
        Observer::Nothing => None,
        Observer::OurSampler => Some(
            Command::new(std::env::current_exe().unwrap())
                .args(["--sample-pid", &pid])
                .spawn()
                .unwrap(),
        ),
        Observer::PySpy(path) => Some(
            Command::new(path)
                .args([
                    "record",
                    "--rate",
                    "100",
                    "--format",
                    "raw",
                    "-o",
                    "/dev/null",
                ])
                .args(["--pid", &pid])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ),
    };
    // Let the interpreter and the observer settle (py-spy's attach takes a while).
    std::thread::sleep(Duration::from_millis(1500));
    // (start ns, end ns, observer on)
    let mut windows: Vec<(i64, i64, bool)> = Vec::new();
    let mut on = true;
    let stop_at = monotonic_ns() + ((seconds - 2.5) * 1e9) as i64;
    while monotonic_ns() < stop_at {
        on = !on;
        if let Some(w) = &watcher {
            signal(w, if on { libc::SIGCONT } else { libc::SIGSTOP });
        }
        let start = monotonic_ns();
        std::thread::sleep(window);
        windows.push((start, monotonic_ns(), on));
    }
    if let Some(w) = &mut watcher {
        signal(w, libc::SIGCONT);
        signal(w, libc::SIGINT);
        let _ = w.wait();
    }
    target.wait().unwrap();
    let rows: Vec<(i64, f64, f64)> = std::fs::read_to_string(&chunks)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ').map(|x| x.parse::<i64>().ok());
            Some((f.next()??, f.next()?? as f64, f.next()?? as f64))
        })
        .collect();
    // Chunks wholly inside a window, leaving 2 ms after the switch for the signal to land.
    let margin = 2_000_000;
    let mean_in = |(start, end, _): (i64, i64, bool)| {
        let inside: Vec<&(i64, f64, f64)> = rows
            .iter()
            .filter(|(e, w, _)| *e - *w as i64 >= start + margin && *e <= end)
            .collect();
        if inside.is_empty() {
            return None;
        }
        let n = inside.len() as f64;
        Some((
            inside.iter().map(|c| c.1).sum::<f64>() / n,
            inside.iter().map(|c| c.2).sum::<f64>() / n,
        ))
    };
    let mut arm = Arm {
        wall_pairs: Vec::new(),
        cpu_pairs: Vec::new(),
    };
    for pair in windows.windows(2) {
        let (off, on) = (pair[0], pair[1]);
        if off.2 || !on.2 {
            continue;
        }
        if let (Some(a), Some(b)) = (mean_in(on), mean_in(off)) {
            arm.wall_pairs.push((a.0, b.0));
            arm.cpu_pairs.push((a.1, b.1));
        }
    }
    arm
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--sample-pid") {
        // The observer process: our sampler on the target until it ends.
        let pid: u32 = args[2].parse().unwrap();
        let sampler = Sampler::start(pid, SamplerConfig::default());
        while !sampler.finished() {
            std::thread::sleep(Duration::from_millis(50));
        }
        return;
    }
    let seconds: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(40.0);
    let window_ms: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let py = python();
    let mut observers = vec![
        ("nothing (the null)    ", Observer::Nothing),
        ("procfs sampler 100 Hz ", Observer::OurSampler),
    ];
    match system_profile_exec::which("py-spy") {
        Some(p) => observers.push((
            "py-spy record 100 Hz  ",
            Observer::PySpy(p.to_string_lossy().into_owned()),
        )),
        None => println!("py-spy not on PATH: not compared"),
    }
    println!(
        "CPU-bound target, {seconds} s per observer, observer switched off and on every {window_ms} ms;"
    );
    println!("mean chunk time with the observer on against off just before: change and 95% CI");
    for (name, observer) in &observers {
        let arm = run_arm(&py, observer, seconds, Duration::from_millis(window_ms));
        let (w, w_lo, w_hi) = paired_change(&arm.wall_pairs);
        let (c, c_lo, c_hi) = paired_change(&arm.cpu_pairs);
        println!(
            "  {name} run time {w:+.2}% [{w_lo:+.2}, {w_hi:+.2}]  CPU time {c:+.2}% [{c_lo:+.2}, {c_hi:+.2}]  ({} pairs)",
            arm.wall_pairs.len()
        );
    }

    let mut shares = Vec::new();
    let mut floors = Vec::new();
    let mut procs = 0;
    for _ in 0..5 {
        let mut child = Command::new(&py).args(["-c", TREE]).spawn().unwrap();
        let sampler = Sampler::start(child.id(), SamplerConfig::default());
        child.wait().unwrap();
        let s = sampler.stop();
        procs = procs.max(s.processes.len());
        shares.push(s.sampler_cpu_s / s.wall_s);
        // The floor: the same tree, read by the least a /proc sampler can do.
        let child = Command::new(&py).args(["-c", TREE]).spawn().unwrap();
        floors.push(floor_share(child));
    }
    println!(
        "10-process CPU-bound tree at 100 Hz: {procs} processes seen, sampler CPU {:.2}% of a core; the floor {:.2}% (medians of 5)",
        median(shares) * 100.0,
        median(floors) * 100.0
    );
}

/// The least any /proc sampler can do at 100 Hz: wake up, and pread each process's statm
/// (already open), nothing else. Its CPU share of a core while `child`'s tree runs.
fn floor_share(mut child: Child) -> f64 {
    use std::os::unix::fs::FileExt;
    std::thread::sleep(Duration::from_millis(100));
    let root = child.id();
    let kids =
        std::fs::read_to_string(format!("/proc/{root}/task/{root}/children")).unwrap_or_default();
    let files: Vec<std::fs::File> = std::iter::once(root)
        .chain(kids.split_whitespace().filter_map(|k| k.parse().ok()))
        .filter_map(|pid| std::fs::File::open(format!("/proc/{pid}/statm")).ok())
        .collect();
    let cpu = || {
        // SAFETY: clock_gettime writes the zeroed timespec it is given.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    };
    let (cpu0, t0) = (cpu(), std::time::Instant::now());
    let mut buf = [0u8; 256];
    let mut next = t0;
    while child.try_wait().unwrap().is_none() {
        for f in &files {
            let _ = f.read_at(&mut buf, 0);
        }
        next += Duration::from_millis(10);
        if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(d);
        }
    }
    (cpu() - cpu0) / t0.elapsed().as_secs_f64()
}
