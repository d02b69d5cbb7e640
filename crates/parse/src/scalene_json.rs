//! Scalene's JSON profile (`scalene run -o profile.json`, Scalene 2): per file of the program,
//! its lines and functions with CPU shares (Python, native, system), memory allocated and
//! peaking there, and copy volume. From it: the line-by-line view, the hotspots (`stacks`)
//! and, when memory was profiled, the allocation sites (`allocations`), so Scalene's figures
//! reach the same report tables as py-spy's and memray's.

use crate::Format;
use serde::Deserialize;
use std::collections::BTreeMap;
use system_profile_model::metrics::{
    AllocationProfile, AllocationTotal, FunctionHotspot, LineHotspot, LineUsage, LineUsageProfile,
    StackProfile,
};
use system_profile_model::{Diag, Parsed};

pub struct ScaleneJson;

impl Format for ScaleneJson {
    const NAME: &'static str = "scalene_json";
    type Output = LineUsageProfile;
    fn parse(input: &str) -> Parsed<LineUsageProfile> {
        parse(input)
    }
}

const MB: f64 = 1024.0 * 1024.0;
const KEPT: usize = 100;
/// The share units a Scalene percentage is split into as `StackProfile` samples (0.01 %).
const UNITS: f64 = 10_000.0;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Raw {
    elapsed_time_sec: f64,
    memory: bool,
    max_footprint_mb: Option<f64>,
    max_footprint_fname: Option<String>,
    max_footprint_lineno: Option<u32>,
    files: BTreeMap<String, RawFile>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawFile {
    functions: Vec<RawLine>,
    lines: Vec<RawLine>,
}

/// A line or a function: Scalene writes both with the same fields (a function's `line` is
/// its qualified name, a line's is its source text).
#[derive(Deserialize, Default)]
#[serde(default)]
struct RawLine {
    line: String,
    lineno: u32,
    start_function_line: Option<u32>,
    n_cpu_percent_python: f64,
    n_cpu_percent_c: f64,
    n_sys_percent: f64,
    n_malloc_mb: f64,
    n_peak_mb: f64,
    n_mallocs: f64,
    n_copy_mb_s: f64,
}

fn bytes(mb: f64) -> u64 {
    if mb.is_finite() && mb > 0.0 {
        (mb * MB).round() as u64
    } else {
        0
    }
}

fn share(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

fn usage(file: &str, r: &RawLine, function: Option<String>, code: String) -> LineUsage {
    LineUsage {
        file: file.to_string(),
        line: r.lineno,
        function,
        code,
        cpu_python_percent: share(r.n_cpu_percent_python),
        cpu_native_percent: share(r.n_cpu_percent_c),
        cpu_system_percent: share(r.n_sys_percent),
        malloc_bytes: bytes(r.n_malloc_mb),
        peak_bytes: bytes(r.n_peak_mb),
        malloc_samples: share(r.n_mallocs).round() as u64,
        copy_mb_per_s: share(r.n_copy_mb_s),
    }
}

fn busy(u: &LineUsage) -> bool {
    u.cpu_percent() > 0.0 || u.malloc_bytes > 0 || u.copy_mb_per_s > 0.0
}

fn by_cpu_then_bytes(a: &LineUsage, b: &LineUsage) -> std::cmp::Ordering {
    b.cpu_percent()
        .total_cmp(&a.cpu_percent())
        .then(b.malloc_bytes.cmp(&a.malloc_bytes))
        .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
}

pub fn parse(input: &str) -> Parsed<LineUsageProfile> {
    let mut diagnostics = Vec::new();
    let raw: Raw = match serde_json::from_str(input) {
        Ok(r) => r,
        Err(e) => {
            diagnostics.push(Diag::general(format!("not a Scalene JSON profile: {e}")));
            return Parsed {
                value: LineUsageProfile::default(),
                diagnostics,
            };
        }
    };
    if raw.files.is_empty() {
        diagnostics.push(Diag::general(
            "Scalene profiled no file of the program (it ran too briefly, or under 1% of its CPU time was in the program's own files)",
        ));
    }
    let mut functions = Vec::new();
    let mut lines = Vec::new();
    for (file, f) in &raw.files {
        let name_at: BTreeMap<u32, &str> = f
            .functions
            .iter()
            .map(|r| (r.lineno, r.line.as_str()))
            .collect();
        functions.extend(
            f.functions
                .iter()
                .map(|r| usage(file, r, Some(r.line.clone()), String::new())),
        );
        lines.extend(f.lines.iter().map(|r| {
            let function = r
                .start_function_line
                .and_then(|at| name_at.get(&at))
                .map(|n| n.to_string());
            let code: String = r.line.trim().chars().take(120).collect();
            usage(file, r, function, code)
        }));
    }
    functions.retain(busy);
    lines.retain(busy);
    functions.sort_by(by_cpu_then_bytes);
    lines.sort_by(by_cpu_then_bytes);
    functions.truncate(KEPT);
    lines.truncate(KEPT);
    Parsed {
        value: LineUsageProfile {
            elapsed_s: share(raw.elapsed_time_sec),
            memory_profiled: raw.memory,
            max_footprint_bytes: raw.max_footprint_mb.map(bytes).filter(|b| *b > 0),
            max_footprint_file: raw.max_footprint_fname,
            max_footprint_line: raw.max_footprint_lineno,
            functions,
            lines,
        },
        diagnostics,
    }
}

/// The functions and lines as hotspots. Scalene counts the time of code it does not profile
/// (libraries) at the program's line that called it, so a function's share is its own lines'
/// plus the libraries they call: `total_percent` is that same share (callees that are the
/// program's own are at their own lines).
pub fn stacks(p: &LineUsageProfile) -> StackProfile {
    let units = |percent: f64| (percent / 100.0 * UNITS).round() as u64;
    let by_self: Vec<FunctionHotspot> = p
        .functions
        .iter()
        .filter(|f| f.cpu_percent() > 0.0)
        .map(|f| FunctionHotspot {
            function: f.function.clone().unwrap_or_default(),
            file: Some(f.file.clone()),
            line: Some(f.line),
            self_samples: units(f.cpu_percent()),
            total_samples: units(f.cpu_percent()),
            self_percent: f.cpu_percent(),
            total_percent: f.cpu_percent(),
        })
        .collect();
    let lines = p
        .lines
        .iter()
        .filter(|l| l.cpu_percent() > 0.0)
        .take(50)
        .map(|l| LineHotspot {
            function: l.function.clone().unwrap_or_default(),
            file: l.file.clone(),
            line: l.line,
            self_samples: units(l.cpu_percent()),
            self_percent: l.cpu_percent(),
        })
        .collect();
    StackProfile {
        total_samples: UNITS as u64,
        stacks: by_self.len() as u64,
        by_total: by_self.clone(),
        by_self,
        lines,
        sample_period_s: (p.elapsed_s > 0.0).then(|| p.elapsed_s / UNITS),
        call_sites: Vec::new(),
        native_calls: Vec::new(),
        threads: Vec::new(),
        gil_holders_only: false,
    }
}

/// Scalene samples net allocation about once per MB: a line seen once with about that much
/// is one sample landing there, not a measure of the line (on pyperformance's nqueens, go and
/// raytrace the `import pyperf` line got one such sample, ahead of the lines that allocate;
/// BENCHMARKS.md, "Scalene's per-line memory against memray"). Such lines are not sites.
pub const ONE_SAMPLE_BYTES: u64 = 2 * 1024 * 1024;

/// Whether a line's allocation figure rests on more than one sample's worth.
pub fn is_allocation_site(l: &LineUsage) -> bool {
    l.malloc_bytes > 0 && (l.malloc_samples >= 2 || l.malloc_bytes >= ONE_SAMPLE_BYTES)
}

/// The lines that allocated, as allocation sites (a line with a single ~1 MB sample is left
/// out: [`is_allocation_site`]); `None` when memory was not profiled.
pub fn allocations(p: &LineUsageProfile) -> Option<AllocationProfile> {
    if !p.memory_profiled {
        return None;
    }
    let site = |l: &LineUsage| AllocationTotal {
        function: l.function.clone().unwrap_or_else(|| l.code.clone()),
        file: l.file.clone(),
        line: Some(l.line),
        size_bytes: Some(l.malloc_bytes),
        count: Some(l.malloc_samples),
    };
    let mut allocating: Vec<&LineUsage> =
        p.lines.iter().filter(|l| is_allocation_site(l)).collect();
    allocating.sort_by(|a, b| {
        b.malloc_bytes
            .cmp(&a.malloc_bytes)
            .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
    });
    let top_by_size = allocating.iter().take(20).map(|l| site(l)).collect();
    allocating.sort_by(|a, b| {
        b.malloc_samples
            .cmp(&a.malloc_samples)
            .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
    });
    let top_by_count = allocating.iter().take(20).map(|l| site(l)).collect();
    Some(AllocationProfile {
        peak_bytes: p.max_footprint_bytes.unwrap_or(0),
        total_allocations: p.lines.iter().map(|l| l.malloc_samples).sum(),
        total_bytes_allocated: p.lines.iter().map(|l| l.malloc_bytes).sum(),
        top_by_size,
        top_by_count,
        allocator_distribution: Default::default(),
        python_allocator: None,
        native_traces: true,
        // Sampled net growth (one sample about every MB): on six pyperformance bodies its top
        // line never was the top line of every allocation counted (BENCHMARKS.md).
        traces_python_allocators: false,
        sampled_every_bytes: None,
        // Scalene's per-line peak is the footprint reached while the line ran, not what the
        // line holds (float: two lines each "peak" at the whole 15.3 MiB; BENCHMARKS.md).
        at_peak: Vec::new(),
        // Scalene samples net growth, not allocations and their frees.
        short_lived_large: Vec::new(),
        not_freed: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_their_function_and_feed_hotspots_and_sites() {
        let input = r#"{"elapsed_time_sec": 2.0, "memory": true, "max_footprint_mb": 200.0,
          "files": {"/p/app.py": {
            "functions": [{"line": "App.load", "lineno": 3, "n_cpu_percent_python": 10.0,
                           "n_cpu_percent_c": 50.0, "n_sys_percent": 5.0, "n_malloc_mb": 150.0,
                           "n_peak_mb": 150.0, "n_mallocs": 3}],
            "lines": [{"line": "    a = np.ones(n)\n", "lineno": 4, "start_function_line": 3,
                       "n_cpu_percent_python": 10.0, "n_cpu_percent_c": 50.0, "n_sys_percent": 5.0,
                       "n_malloc_mb": 150.0, "n_peak_mb": 150.0, "n_mallocs": 3, "n_copy_mb_s": 1.5},
                      {"line": "pass", "lineno": 9}]}}}"#;
        let p = parse(input);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let u = p.value;
        assert_eq!(u.lines.len(), 1, "an idle line is left out");
        assert_eq!(u.lines[0].function.as_deref(), Some("App.load"));
        assert_eq!(u.lines[0].code, "a = np.ones(n)");
        assert_eq!(u.lines[0].malloc_bytes, 150 * 1024 * 1024);
        let s = stacks(&u);
        assert_eq!(s.by_self[0].function, "App.load");
        assert!((s.by_self[0].self_percent - 65.0).abs() < 1e-9);
        // 65 % of 2 s.
        let self_s = s.by_self[0].self_samples as f64 * s.sample_period_s.unwrap();
        assert!((self_s - 1.3).abs() < 1e-6, "{self_s}");
        let a = allocations(&u).unwrap();
        assert_eq!(a.peak_bytes, 200 * 1024 * 1024);
        assert_eq!(a.top_by_size[0].line, Some(4));
        assert_eq!(a.top_by_size[0].function, "App.load");
    }

    /// The shape of nqueens' profile (pyperformance, 20 loops): two lines seen once at about
    /// 1 MB each, one of them `import pyperf`; a 64 MiB buffer is one sample too, and a site.
    #[test]
    fn a_line_seen_once_at_about_a_megabyte_is_not_a_site() {
        let input = r#"{"elapsed_time_sec": 2.7, "memory": true, "files": {"/t/nq.py": {
            "functions": [], "lines": [
              {"line": "import pyperf", "lineno": 3, "n_malloc_mb": 1.015, "n_mallocs": 1},
              {"line": "    if q == len(set(v)):", "lineno": 48, "start_function_line": 46,
               "n_malloc_mb": 1.00003, "n_mallocs": 1},
              {"line": "    keep = bytearray(64 << 20)", "lineno": 12, "start_function_line": 11,
               "n_malloc_mb": 64.0, "n_mallocs": 1},
              {"line": "    rows.append(x)", "lineno": 20, "start_function_line": 19,
               "n_malloc_mb": 1.5, "n_mallocs": 2}]}}}"#;
        let u = parse(input).value;
        let a = allocations(&u).unwrap();
        let lines: Vec<Option<u32>> = a.top_by_size.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![Some(12), Some(20)]);
        assert_eq!(u.lines.len(), 4, "the line view keeps every line");
    }

    #[test]
    fn cpu_only_has_no_sites_and_garbage_is_a_diagnostic() {
        let u = parse(r#"{"memory": false, "files": {}}"#);
        assert!(allocations(&u.value).is_none());
        assert_eq!(u.diagnostics.len(), 1);
        assert_eq!(parse("[").diagnostics.len(), 1);
    }
}
