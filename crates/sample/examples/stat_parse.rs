//! What the two hand parsers the sampler keeps cost against `procfs`'s, on this process's own
//! text: /proc/<pid>/stat (`proc::parse_stat`, every tick, on kept-open files) against
//! `Stat::from_read`, the context switches of /proc/<pid>/status against `Status::from_read`, and the
//! whole read of a process (`proc::read_process`, through procfs) for scale.
//!
//!     cargo run --release -p system-profile-sample --example stat_parse

#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::Instant;

fn per_call_ns(n: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    use procfs::FromRead;
    let text = std::fs::read_to_string(format!("/proc/{}/stat", std::process::id())).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{}/status", std::process::id())).unwrap();
    let n = 200_000;
    for round in 1..=3 {
        let hand = per_call_ns(n, || {
            black_box(system_profile_sample::proc::parse_stat(black_box(&text)));
        });
        let crate_ns = per_call_ns(n, || {
            black_box(procfs::process::Stat::from_read(black_box(text.as_bytes())).ok());
        });
        let status_hand = per_call_ns(n / 10, || {
            black_box(system_profile_sample::sampler::parse_ctx_switches(
                black_box(&status),
            ));
        });
        let status_crate = per_call_ns(n / 10, || {
            black_box(procfs::process::Status::from_read(black_box(status.as_bytes())).ok());
        });
        let whole = per_call_ns(2_000, || {
            black_box(system_profile_sample::proc::read_process(std::process::id()));
        });
        println!(
            "round {round}: parse_stat {hand:.0} ns, procfs Stat::from_read {crate_ns:.0} ns ({:.1}x); status (context switches) {status_hand:.0} ns, procfs Status::from_read {status_crate:.0} ns ({:.1}x); read_process {whole:.0} ns",
            crate_ns / hand,
            status_crate / status_hand
        );
    }
}
