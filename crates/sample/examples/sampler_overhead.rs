//! Observer effect of the /proc sampler, side by side with py-spy at the same rate.
//!
//! `cargo run --release -p system-profile-sample --example sampler_overhead -- [ROUNDS]`
//!
//! Runs a CPU-bound Python program (one process, ~1.5 s) ROUNDS times each way, interleaved:
//! alone, under our sampler at 100 Hz, under `py-spy record --rate 100`. This VM's wall times
//! swing by ±20% between identical runs (frequency, steal), so the figure compared is the
//! target's own CPU time (user + sys from wait4), which only the observer's interference
//! raises; wall medians are printed too. Then samples a 10-process CPU-bound tree at 100 Hz
//! and prints the sampler's own CPU time over the wall time (its share of one core).
#![allow(clippy::print_stdout)]

use std::process::{Child, Command, Stdio};
use std::time::Instant;
use system_profile_sample::sampler::{Sampler, SamplerConfig};

const SPIN: &str = "t = 0\nfor i in range(12_000_000):\n    t += i * i\n";
const TREE: &str = "import os\nkids = []\nfor _ in range(9):\n    pid = os.fork()\n    if pid == 0:\n        t = 0\n        for i in range(4_000_000):\n            t += i\n        os._exit(0)\n    kids.append(pid)\nt = 0\nfor i in range(4_000_000):\n    t += i\nfor k in kids:\n    os.waitpid(k, 0)\n";

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// 100 Hz unless SAMPLER_RATE says otherwise; SAMPLER_DETAIL sets detail_every.
fn config() -> SamplerConfig {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    SamplerConfig {
        rate_hz: env("SAMPLER_RATE").unwrap_or(100.0),
        detail_every: env("SAMPLER_DETAIL").map(|v| v as u32).unwrap_or(10),
        jsonl: None,
        samples_taken: None,
    }
}

/// Wait for `child` and return (wall since `t`, its user + sys CPU seconds).
fn reap(child: Child, t: Instant) -> (f64, f64) {
    let mut status = 0;
    // SAFETY: wait4 writes the zeroed rusage it is given; the PID is our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let wall = t.elapsed().as_secs_f64();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (wall, tv(ru.ru_utime) + tv(ru.ru_stime))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    let py = python();
    let py_spy = system_profile_exec::which("py-spy");
    // (wall, cpu) per round and mode.
    let (mut alone, mut ours, mut spy) = (Vec::new(), Vec::new(), Vec::new());
    let mut own_cpu = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let child = Command::new(&py).args(["-c", SPIN]).spawn().unwrap();
        alone.push(reap(child, t));

        let t = Instant::now();
        let child = Command::new(&py).args(["-c", SPIN]).spawn().unwrap();
        let sampler = Sampler::start(child.id(), config());
        ours.push(reap(child, t));
        let s = sampler.stop();
        own_cpu.push(s.sampler_cpu_s / s.wall_s);

        if let Some(p) = &py_spy {
            // py-spy starts the target itself: its CPU is py-spy's child's, read the same way.
            let t = Instant::now();
            let child = Command::new(p)
                .args([
                    "record",
                    "--rate",
                    "100",
                    "--format",
                    "raw",
                    "-o",
                    "/dev/null",
                    "--",
                ])
                .args([&py, "-c", SPIN])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            spy.push(reap(child, t));
        }
    }
    let split = |v: &[(f64, f64)]| {
        (
            median(v.iter().map(|x| x.0).collect()),
            median(v.iter().map(|x| x.1).collect()),
        )
    };
    let (base_wall, base_cpu) = split(&alone);
    let (our_wall, our_cpu) = split(&ours);
    println!("CPU-bound target, {rounds} rounds each, medians (target CPU time, wall):");
    println!("  alone                 cpu {base_cpu:.3} s  wall {base_wall:.3} s");
    println!(
        "  procfs sampler 100 Hz cpu {our_cpu:.3} s ({:+.2}%)  wall {our_wall:.3} s ({:+.2}%)  sampler CPU {:.2}% of a core",
        (our_cpu / base_cpu - 1.0) * 100.0,
        (our_wall / base_wall - 1.0) * 100.0,
        median(own_cpu) * 100.0
    );
    if spy.is_empty() {
        println!("  py-spy not on PATH: not compared");
    } else {
        let (spy_wall, spy_cpu) = split(&spy);
        println!(
            "  py-spy record 100 Hz  cpu {spy_cpu:.3} s ({:+.2}%, py-spy's own CPU included: it is the child waited for)  wall {spy_wall:.3} s ({:+.2}%)",
            (spy_cpu / base_cpu - 1.0) * 100.0,
            (spy_wall / base_wall - 1.0) * 100.0
        );
    }

    let mut shares = Vec::new();
    let mut procs = 0;
    for _ in 0..3 {
        let mut child = Command::new(&py).args(["-c", TREE]).spawn().unwrap();
        let sampler = Sampler::start(child.id(), SamplerConfig::default());
        child.wait().unwrap();
        let s = sampler.stop();
        procs = procs.max(s.processes.len());
        shares.push(s.sampler_cpu_s / s.wall_s);
    }
    println!(
        "10-process tree at 100 Hz: {procs} processes seen, sampler CPU {:.2}% of a core (median of 3)",
        median(shares) * 100.0
    );
}
