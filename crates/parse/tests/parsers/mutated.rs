//! Every parser over mutated real fixtures: bytes flipped, lines cut, doubled and dropped,
//! numbers made huge or negative, control characters and ANSI escapes inserted, the file cut
//! anywhere. No parse may panic, take more than a bounded time, or grow memory without bound.
//! Deterministic (a seeded xorshift), so a failure names a case that reproduces.

use super::data_dir;
use std::time::{Duration, Instant};
use system_profile_parse::Format;
use system_profile_parse::{
    alloc_samples, cprofile_json, folded, instrument_log, kineto, line_profile, memory_profile,
    memray_peak, memray_stats, nccl_debug, nccl_tests, nsys_stats, nvidia_smi_dmon,
    nvidia_smi_nvlink, nvidia_smi_query, nvidia_smi_topo, perf_stat, prometheus, py_spy_dump,
    pyinstrument_session, scalene_json, serving, slurm, strace_c, sysstat, time_v, torch_table,
    tracemalloc_json,
};

/// Mutated inputs per fixture (fewer for the large Kineto traces, whose parse is heavier).
const MUTATIONS: usize = 200;
const MUTATIONS_LARGE: usize = 12;
/// No single parse of an input of this size may take longer (debug build, shared machine).
const PARSE_LIMIT: Duration = Duration::from_secs(10);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const NASTY: &[&str] = &[
    "99999999999999999999999999",
    "-1",
    "NaN",
    "1e308",
    "-0",
    "\u{0}",
    "\u{1b}[4m",
    "\r",
    "\"",
    ",,,,",
    "{",
    "]",
    "%",
    "ß∂ƒ",
    "\t\t",
    "<not supported>",
    "N/A",
];

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(4) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let i = rng.below(lines.len());
        match rng.below(7) {
            // A byte flipped (kept on a char boundary).
            0 => {
                let l = &mut lines[i];
                if !l.is_empty() {
                    let at = rng.below(l.len());
                    if l.is_char_boundary(at) && l.is_char_boundary(at + 1) {
                        let c = (rng.below(95) as u8 + 32) as char;
                        l.replace_range(at..at + 1, &c.to_string());
                    }
                }
            }
            1 => {
                let n = 1 + rng.below(3);
                let copy: Vec<String> = lines[i..(i + n).min(lines.len())].to_vec();
                for (k, c) in copy.into_iter().enumerate() {
                    lines.insert(i + k, c);
                }
            }
            2 => {
                lines.remove(i);
            }
            // A number replaced by something a parser may choke on.
            3 => {
                let l = &lines[i];
                if let Some(start) = l.find(|c: char| c.is_ascii_digit()) {
                    let end = l[start..]
                        .find(|c: char| !c.is_ascii_digit() && c != '.')
                        .map_or(l.len(), |e| start + e);
                    let nasty = NASTY[rng.below(NASTY.len())];
                    lines[i].replace_range(start..end, nasty);
                }
            }
            4 => {
                let at = rng.below(lines[i].len() + 1);
                if lines[i].is_char_boundary(at) {
                    let nasty = NASTY[rng.below(NASTY.len())];
                    lines[i].insert_str(at, nasty);
                }
            }
            5 => {
                lines.truncate(i);
            }
            _ => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
        }
    }
    let mut out = lines.join("\n");
    if rng.below(4) == 0 {
        // Cut anywhere, even inside a line or a JSON string.
        let mut at = rng.below(out.len() + 1);
        while !out.is_char_boundary(at) {
            at -= 1;
        }
        out.truncate(at);
    }
    out
}

fn parse_as(format: &str, text: &str) -> usize {
    match format {
        "alloc_samples" => alloc_samples::parse(text.as_bytes(), |f| !f.contains("/lib/"))
            .diagnostics
            .len(),
        "cprofile_json" => cprofile_json::parse(text).diagnostics.len(),
        "folded" => folded::parse(text).diagnostics.len(),
        "instrument_log" => instrument_log::parse(text).diagnostics.len(),
        "kineto" => kineto::analyze(text).diagnostics.len(),
        "line_profile" => line_profile::parse(text).diagnostics.len(),
        "memory_profile" => memory_profile::parse(text).diagnostics.len(),
        "memray_peak" => memray_peak::parse(text, |f| f.ends_with("load.py"))
            .diagnostics
            .len(),
        "memray_stats" => memray_stats::parse(text).diagnostics.len(),
        "slurm_job" => slurm::parse_job(text).diagnostics.len(),
        "nccl_debug" => nccl_debug::parse(text).diagnostics.len(),
        "nccl_tests" => nccl_tests::parse(text).diagnostics.len(),
        "nsys_stats" => nsys_stats::parse(text).diagnostics.len(),
        "nvidia_smi_dmon" => nvidia_smi_dmon::NvidiaSmiDmon::parse(text)
            .diagnostics
            .len(),
        "nvidia_smi_nvlink" => nvidia_smi_nvlink::parse(text).diagnostics.len(),
        "nvidia_smi_query" => nvidia_smi_query::NvidiaSmiQuery::parse(text)
            .diagnostics
            .len(),
        "nvidia_smi_topo" => nvidia_smi_topo::parse(text).diagnostics.len(),
        "perf_stat" => perf_stat::parse(text).diagnostics.len(),
        "py_spy_dump" => py_spy_dump::parse(text).diagnostics.len(),
        "pyinstrument_session" => pyinstrument_session::parse(text).diagnostics.len(),
        "scalene_json" => scalene_json::parse(text).diagnostics.len(),
        "strace_c" => strace_c::parse(text).diagnostics.len(),
        "time_v" => time_v::parse(text).diagnostics.len(),
        "tracemalloc_json" => tracemalloc_json::parse(text).diagnostics.len(),
        "iostat" => sysstat::iostat(text).diagnostics.len(),
        "mpstat" => sysstat::mpstat(text).diagnostics.len(),
        "pidstat" => sysstat::pidstat(text).diagnostics.len(),
        "vmstat" => sysstat::vmstat(text).diagnostics.len(),
        // Its files are the scrapes (Prometheus text), the window's account and requests (JSON)
        // and vLLM's operator table: each read by its own parser.
        "serving" => {
            prometheus::parse(text).diagnostics.len()
                + torch_table::parse(text).diagnostics.len()
                + serving::window(text, &Default::default(), Some(text))
                    .diagnostics
                    .len()
        }
        other => panic!("no parser for the fixture folder {other}: add it here"),
    }
}

fn read_fixture(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Peak resident memory of this process so far (`VmHWM` of /proc/self/status, kB → bytes).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn every_parser_survives_mutated_fixtures() {
    let root = data_dir("");
    let mut formats: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    formats.sort();
    let mut inputs = 0usize;
    let mut slowest = (Duration::ZERO, String::new());
    let mut largest_bytes = 0usize;
    let rss_before = peak_rss_bytes();
    for format in &formats {
        let mut files: Vec<_> = std::fs::read_dir(root.join(format))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".txt") || n.ends_with(".json.gz")
            })
            .collect();
        files.sort();
        for (f, path) in files.iter().enumerate() {
            let text = read_fixture(path);
            largest_bytes = largest_bytes.max(text.len());
            let n = if text.len() > 1 << 20 {
                MUTATIONS_LARGE
            } else {
                MUTATIONS
            };
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((f as u64 + 1) << 32) ^ format.len() as u64);
            for case in 0..n {
                let input = mutate(&text, &mut rng);
                let started = Instant::now();
                parse_as(format, &input);
                let took = started.elapsed();
                inputs += 1;
                let name = format!("{} case {case}", path.display());
                assert!(took < PARSE_LIMIT, "{name}: {took:?}");
                if took > slowest.0 {
                    slowest = (took, name);
                }
            }
        }
    }
    let grew = peak_rss_bytes().saturating_sub(rss_before);
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "parser fuzz: {inputs} mutated inputs over {} formats, 0 panics; slowest {:?} ({}); peak RSS grew {} MiB (largest fixture {} MiB)",
            formats.len(),
            slowest.0,
            slowest.1,
            grew >> 20,
            largest_bytes >> 20
        );
    }
    assert!(formats.len() >= 22, "{formats:?}");
    // Memory: a parse holds at most a few copies of its input; the large trace's text is
    // held here too, so the bound is a multiple of it.
    assert!(
        grew < 8 * largest_bytes as u64 + (256 << 20),
        "peak RSS grew {grew} bytes"
    );
}
