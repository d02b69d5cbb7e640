//! Parser throughput on large inputs shaped like the real fixtures.
//!
//! `cargo run --release -p system-profile-parse --example throughput -- [MB]`
//!
//! Each parser gets MB megabytes (default 256) made by repeating the data rows of its real
//! fixture (`tests/data/<format>/`), keeping the header where the format has one; prints MB/s.
#![allow(clippy::print_stdout)]

use std::time::Instant;
use system_profile_parse::{folded, perf_stat, strace_c, sysstat};

fn fixture(format: &str, case: &str) -> String {
    let path = format!(
        "{}/tests/data/{format}/{case}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `head` once, then `rows` repeated until the text is `bytes` long.
fn grow(head: &str, rows: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + rows.len());
    out.push_str(head);
    while out.len() < bytes {
        out.push_str(rows);
    }
    out
}

fn measure<T>(name: &str, input: &str, parse: impl Fn(&str) -> T) {
    let t = Instant::now();
    let value = parse(input);
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(&value);
    let mb = input.len() as f64 / 1e6;
    println!(
        "{name:<12} {mb:>7.0} MB in {secs:>6.3} s  = {:>7.0} MB/s",
        mb / secs
    );
}

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(256);
    let bytes = mb * 1_000_000;

    let f = fixture("folded", "py-spy-raw-python-hot-loop");
    measure("folded", &grow("", &f, bytes), |s| {
        folded::parse(s).value.total_samples
    });

    let s = fixture("strace_c", "python-startup-f");
    let lines: Vec<&str> = s.lines().collect();
    let head = lines[..2].join("\n") + "\n";
    let rows = lines[2..lines.len() - 2].join("\n") + "\n";
    measure("strace_c", &grow(&head, &rows, bytes), |s| {
        strace_c::parse(s).value.rows.len()
    });

    let p = fixture("perf_stat", "vm-software-counters-only");
    measure("perf_stat", &grow("", &p, bytes), |s| {
        perf_stat::parse(s).value.counters.len()
    });

    let p = fixture("pidstat", "python-sleep-loop");
    let lines: Vec<&str> = p.lines().collect();
    let head = lines[..3].join("\n") + "\n";
    let rows = lines[3].to_string() + "\n";
    measure("pidstat", &grow(&head, &rows, bytes), |s| {
        sysstat::pidstat(s).value.series.len()
    });

    let v = fixture("vmstat", "idle-vm-3s");
    let lines: Vec<&str> = v.lines().collect();
    let head = lines[..3].join("\n") + "\n";
    let rows = lines[3..].join("\n") + "\n";
    measure("vmstat", &grow(&head, &rows, bytes), |s| {
        sysstat::vmstat(s).value.series.len()
    });

    let d = fixture("nvidia_smi_dmon", "v100-pcie-8gpu-default-cols");
    let lines: Vec<&str> = d.lines().collect();
    let head = lines[..2].join("\n") + "\n";
    let rows = lines[2..].join("\n") + "\n";
    measure("nvidia_smi_dmon", &grow(&head, &rows, bytes), |s| {
        system_profile_parse::nvidia_smi_dmon::parse(s, 1.0)
            .value
            .samples
            .len()
    });
    let q = fixture("nvidia_smi_query", "h200-drv590-load-query-gpu-allfields");
    let lines: Vec<&str> = q.lines().collect();
    let head = lines[0].to_string() + "\n";
    let rows = lines[1].to_string() + "\n";
    measure(
        "nvidia_smi_query (212 fields)",
        &grow(&head, &rows, bytes),
        |s| {
            let mut r = system_profile_model::metrics::GpuReadings::default();
            system_profile_parse::nvidia_smi_query::add(&mut r, s);
            r.samples.len()
        },
    );
    let n = fixture("nccl_debug", "a100-pcie-2gpu-nccltests-coll-subsys");
    measure("nccl_debug", &grow("", &n, bytes), |s| {
        system_profile_parse::nccl_debug::parse(s)
            .value
            .collectives
            .len()
    });
}
