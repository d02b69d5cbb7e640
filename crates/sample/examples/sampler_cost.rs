//! The sampler's own CPU on an idle target (processes asleep for 3 s), by configuration: what
//! a wake-up costs and what each process adds to it. Measured with CLOCK_THREAD_CPUTIME_ID.
//!
//! `cargo run --release -p system-profile-sample --example sampler_cost`
#![allow(clippy::print_stdout)]

use std::process::Command;
use system_profile_sample::sampler::{Sampler, SamplerConfig};

/// The real interpreter behind `python3` (pyenv's shim is a shell script).
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn main() {
    let py = python();
    for (rate, detail, kids) in [
        (100.0, 10, 0),
        (100.0, 10, 0),
        (100.0, 10, 9),
        (100.0, 10, 9),
        (100.0, 1000, 9),
        (100.0, 1, 9),
        (50.0, 10, 9),
        (10.0, 10, 9),
    ] {
        let script = format!(
            "import os, time\nfor _ in range({kids}):\n    if os.fork() == 0:\n        time.sleep(3)\n        os._exit(0)\ntime.sleep(3)\n"
        );
        let mut child = Command::new(&py).args(["-c", &script]).spawn().unwrap();
        // The tree is in place before the first discovery.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let s = Sampler::start(
            child.id(),
            SamplerConfig {
                rate_hz: rate,
                detail_every: detail,
                ..Default::default()
            },
        );
        child.wait().unwrap();
        let r = s.stop();
        println!(
            "rate {rate:>5} Hz, detail every {detail:>7}, {:>2} processes: sampler CPU {:.2}% of a core ({} samples)",
            r.processes.len(),
            r.sampler_cpu_s / r.wall_s * 100.0,
            r.samples
        );
    }
}
