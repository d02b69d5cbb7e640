//! Part A's tables from a session's runs: each row from one run (or one stored trace, or the
//! instrumentation log), citing it. Nothing here reads files but the sampler series.

use crate::series::RunSeries;
use crate::session::{RunInstrument, Session};
use std::collections::BTreeMap;
use system_profile_model::metrics::StackProfile;
use system_profile_model::peaks::{gpu_peaks, pcie_gbps_per_direction};
use system_profile_model::report::{
    FlameGraph, GpuRow, Hotspot, HotspotEvidence, HotspotTable, MemoryRow, Source,
};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunRecord;

pub use crate::cpu_table::{cpu_rows, measured};
pub use crate::interconnect::interconnect;

/// A citation of a run and its artifact of this kind.
pub fn cite(run: &RunRecord, kind: ArtifactKind) -> Source {
    Source {
        run_id: run.run_id.clone(),
        artifact: run
            .artifacts
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.path.clone()),
    }
}

/// The artifacts an allocation profile (`metrics.allocations`) is read from: memray's stats,
/// the allocation sampler's records, Scalene's profile.
const ALLOCATION_ARTIFACTS: [ArtifactKind; 3] = [
    ArtifactKind::MemrayStatsJson,
    ArtifactKind::AllocSamples,
    ArtifactKind::ScaleneJson,
];
/// The artifacts sampled stacks (`metrics.stacks`) are read from: folded stacks (py-spy,
/// perf, pyinstrument), Scalene's profile.
const STACK_ARTIFACTS: [ArtifactKind; 2] = [ArtifactKind::Folded, ArtifactKind::ScaleneJson];

/// The artifact a run's stacks were read from.
pub(crate) fn cite_stacks(run: &RunRecord) -> Source {
    cite_first(run, &STACK_ARTIFACTS)
}

/// A citation of the first of `kinds` the run left.
fn cite_first(run: &RunRecord, kinds: &[ArtifactKind]) -> Source {
    kinds
        .iter()
        .map(|kind| cite(run, *kind))
        .find(|s| s.artifact.is_some())
        .unwrap_or_else(|| cite(run, kinds[0]))
}

/// A citation of the artifact a run's allocation profile came from.
pub fn cite_allocations(run: &RunRecord) -> Source {
    cite_first(run, &ALLOCATION_ARTIFACTS)
}

/// The first and last steps of a training an allocation profile tracked, when the run tracked
/// a window of them rather than the whole run.
pub fn tracked_steps(run: &RunRecord) -> Option<[u32; 2]> {
    run.metrics.allocations.as_ref()?;
    let w = run.metrics.step_window.as_ref()?;
    Some([w.first_traced_step, w.last_traced_step])
}

/// The file one of memray's views (`memray_kind`: the short-lived CSV, the leaks CSV) was read
/// from, or the allocation sampler's records, which hold every view in one file.
pub fn cite_allocation_view(run: &RunRecord, memray_kind: ArtifactKind) -> Source {
    match run.profiler {
        system_profile_model::run::Method::AllocSample => cite(run, ArtifactKind::AllocSamples),
        _ => cite(run, memray_kind),
    }
}

/// The CPU row and one row per GPU of each run that measured memory, then the
/// instrumentation's readings (torch's allocator per device, the duplicated tensors).
pub fn memory_rows(session: &Session, series: &BTreeMap<String, RunSeries>) -> Vec<MemoryRow> {
    let mut rows = Vec::new();
    for run in session.runs.iter().filter(|r| measured(r)) {
        let m = &run.metrics;
        let mut cpu = MemoryRow {
            run_id: run.run_id.clone(),
            place: "cpu".into(),
            ..MemoryRow::default()
        };
        if let Some(s) = &m.procfs {
            // The tree's sum at one tick: what the machine really held for the target.
            cpu.sources.push(cite(run, ArtifactKind::ProcfsJsonl));
            cpu.rss_peak_bytes = Some(s.rss_peak_bytes);
            cpu.processes = Some(s.processes.len() as u32);
            cpu.pss_peak_bytes = s.pss_peak_bytes;
            cpu.largest_process_rss_peak_bytes = s.processes.iter().map(|p| p.rss_peak_bytes).max();
            if matches!(run.target, system_profile_model::run::RunTarget::Pid { .. }) {
                cpu.rss_last_bytes = series
                    .get(&run.run_id)
                    .and_then(|s| s.tree.as_ref())
                    .and_then(|t| t.rss_last_bytes());
            }
        }
        if let Some(t) = &m.time_v {
            if cpu.rss_peak_bytes.is_none() {
                cpu.sources.push(cite(run, ArtifactKind::TimeV));
                cpu.rss_peak_bytes = Some(t.max_rss_bytes);
            }
        }
        if let Some(p) = &m.python_memory {
            cpu.sources.push(cite(run, ArtifactKind::TracemallocJson));
            cpu.heap_peak_bytes = Some(p.peak_bytes);
            cpu.heap_last_bytes = Some(p.current_bytes);
        }
        if let Some(a) = &m.allocations {
            cpu.sources.push(cite_allocations(run));
            cpu.heap_peak_bytes = Some(a.peak_bytes);
        }
        if !cpu.sources.is_empty() {
            rows.push(cpu);
        }
        if let Some(g) = &m.gpu {
            let peaks: Vec<u64> = g
                .devices
                .iter()
                .filter_map(|d| d.series.get("mem_used_bytes").map(|s| s.max as u64))
                .collect();
            let all: u64 = peaks.iter().sum();
            let kind = if g.source == "nvml" {
                ArtifactKind::NvmlJsonl
            } else {
                ArtifactKind::Dmon
            };
            for d in &g.devices {
                let used = d.series.get("mem_used_bytes").map(|s| s.max as u64);
                if used.is_none() {
                    // dmon without its `m` columns: no memory to show.
                    continue;
                }
                rows.push(MemoryRow {
                    run_id: run.run_id.clone(),
                    place: format!("cuda:{}", d.gpu),
                    sources: vec![cite(run, kind)],
                    gpu_used_peak_bytes: used,
                    gpu_total_bytes: d.mem_total_bytes,
                    share_of_gpus_percent: match used {
                        Some(u) if peaks.len() > 1 && all > 0 => {
                            Some(u as f64 / all as f64 * 100.0)
                        }
                        _ => None,
                    },
                    ..MemoryRow::default()
                });
            }
        }
    }
    for RunInstrument { run_id, summary: s } in &session.instrument {
        let source = instrument_source(run_id);
        let label = instrument_label(run_id);
        let cross: Vec<_> = s
            .duplicates
            .iter()
            .flat_map(|d| d.groups.iter())
            .filter(|g| g.cross_device)
            .collect();
        let dup_on = |place: &str| -> Option<u64> {
            s.duplicates.as_ref()?;
            Some(
                cross
                    .iter()
                    .map(|g| g.bytes_each * g.devices.iter().filter(|d| *d == place).count() as u64)
                    .sum(),
            )
        };
        // Copies beyond the first on one place: `clone()` kept, the same batch loaded twice.
        let same_place = |place: &str| -> Option<u64> {
            let d = s.duplicates.as_ref()?;
            Some(
                d.groups
                    .iter()
                    .map(|g| {
                        let here = g.devices.iter().filter(|d| *d == place).count() as u64;
                        g.bytes_each * here.saturating_sub(1)
                    })
                    .sum(),
            )
        };
        if let Some(mem) = &s.memory {
            rows.push(MemoryRow {
                run_id: label.clone(),
                place: "cpu".into(),
                sources: vec![source.clone()],
                rss_peak_bytes: Some(mem.rss_bytes_max),
                duplicated_bytes: dup_on("cpu"),
                duplicated_same_place_bytes: same_place("cpu"),
                ..MemoryRow::default()
            });
            let all: u64 = mem.devices.iter().map(|d| d.peak_allocated_bytes).sum();
            for d in &mem.devices {
                let place = format!("cuda:{}", d.device);
                rows.push(MemoryRow {
                    run_id: label.clone(),
                    sources: vec![source.clone()],
                    gpu_allocated_bytes: Some(d.allocated_bytes),
                    gpu_reserved_bytes: Some(d.reserved_bytes),
                    gpu_peak_allocated_bytes: Some(d.peak_allocated_bytes),
                    duplicated_bytes: dup_on(&place),
                    duplicated_same_place_bytes: same_place(&place),
                    share_of_gpus_percent: (mem.devices.len() > 1 && all > 0)
                        .then(|| d.peak_allocated_bytes as f64 / all as f64 * 100.0),
                    place,
                    ..MemoryRow::default()
                });
            }
        } else if s.duplicates.is_some() {
            rows.push(MemoryRow {
                run_id: label.clone(),
                place: "cpu".into(),
                sources: vec![source],
                duplicated_bytes: dup_on("cpu"),
                duplicated_same_place_bytes: same_place("cpu"),
                ..MemoryRow::default()
            });
        }
    }
    rows
}

/// Where an instrumentation figure comes from: the run whose processes wrote it, in the log.
pub(crate) fn instrument_source(run_id: &str) -> Source {
    Source {
        run_id: run_id.into(),
        artifact: Some(system_profile_instrument::LOG_FILE.into()),
    }
}

/// A memory row read from the instrumentation log rather than measured by the run itself.
pub(crate) fn from_instrument(row: &MemoryRow) -> bool {
    row.sources
        .iter()
        .any(|s| s.artifact.as_deref() == Some(system_profile_instrument::LOG_FILE))
}

/// A table row of what the instrumentation measured in a run, beside the run's own rows.
pub(crate) fn instrument_label(run_id: &str) -> String {
    format!("{run_id} (instrument)")
}

/// `HtoD` → `H2D`, as the report names directions.
pub(crate) fn direction(d: &str) -> String {
    match d.to_ascii_lowercase().as_str() {
        "htod" | "h2d" => "H2D".into(),
        "dtoh" | "d2h" => "D2H".into(),
        "dtod" | "d2d" => "D2D".into(),
        "ptop" | "p2p" => "P2P".into(),
        "htoh" | "h2h" => "H2H".into(),
        other => other.to_uppercase(),
    }
}

/// The GPU model named anywhere in the session (NVML / nvidia-smi, a trace's device).
fn gpu_model(session: &Session) -> Option<String> {
    let from_runs = session.runs.iter().find_map(|r| {
        r.metrics
            .gpu
            .as_ref()
            .and_then(|g| g.devices.iter().find_map(|d| d.name.clone()))
    });
    from_runs.or_else(|| {
        session.traces.iter().find_map(|t| {
            t.report
                .traces
                .iter()
                .find_map(|f| f.analysis.devices.iter().find_map(|d| d.name.clone()))
        })
    })
}

/// How the GPUs are linked, from a topology run: `NVLink between all 8 GPUs`, ...
pub(crate) fn topology_line(session: &Session) -> Option<(String, bool)> {
    let topo = session
        .runs
        .iter()
        .find_map(|r| r.metrics.topology.as_ref())?;
    let gpus = topo
        .devices
        .iter()
        .filter(|d| d.kind == system_profile_model::topology::TopoDeviceKind::Gpu)
        .count();
    let pcie = topo.pcie_gpu_pairs.len();
    let nvlink = topo.nvlink_gpu_pairs;
    let line = if pcie == 0 && nvlink > 0 {
        format!("NVLink between every pair of the {gpus} GPUs")
    } else if nvlink == 0 && pcie > 0 {
        let worst = topo.pcie_gpu_pairs.iter().map(|p| p.link).max();
        format!("PCIe only between the {gpus} GPUs (worst path {worst:?})")
    } else if gpus < 2 {
        "one GPU".to_string()
    } else {
        format!("{nvlink} GPU pairs on NVLink, {pcie} on PCIe")
    };
    Some((line, nvlink > 0 && pcie == 0))
}

pub(crate) struct Links {
    /// `PCIe Gen5 x16` and its peak per direction, GB/s.
    pub(crate) pcie: Option<(String, f64)>,
    pub(crate) nvlink: Option<(String, f64)>,
    pub(crate) memory_gbps: Option<f64>,
    pub(crate) all_nvlink: bool,
}

pub(crate) fn links(session: &Session) -> Links {
    let model = gpu_model(session);
    let peaks = model.as_deref().and_then(gpu_peaks);
    let pcie = peaks.and_then(|p| {
        pcie_gbps_per_direction(p.pcie_gen, p.pcie_width)
            .map(|g| (format!("PCIe Gen{} x{}", p.pcie_gen, p.pcie_width), g))
    });
    let topo = topology_line(session);
    Links {
        pcie,
        nvlink: peaks.and_then(|p| p.nvlink_gbps_per_direction.map(|g| ("NVLink".into(), g))),
        memory_gbps: peaks.map(|p| p.memory_bandwidth_gbps),
        all_nvlink: topo.is_some_and(|t| t.1),
    }
}

/// One row per GPU and source: utilisation from the samplers, kernels and launches from the
/// traces.
pub fn gpu_rows(session: &Session) -> Vec<GpuRow> {
    let links = links(session);
    let mut rows = Vec::new();
    for run in &session.runs {
        if let Some(g) = &run.metrics.gpu {
            let kind = if g.source == "nvml" {
                ArtifactKind::NvmlJsonl
            } else {
                ArtifactKind::Dmon
            };
            for d in &g.devices {
                let sm = d.series.get("sm_util_percent");
                rows.push(GpuRow {
                    device: format!("cuda:{}", d.gpu),
                    name: d.name.clone(),
                    sources: vec![cite(run, kind)],
                    sm_util_mean_percent: sm.map(|s| s.mean),
                    sm_util_p95_percent: sm.map(|s| s.p95),
                    mem_util_mean_percent: d.series.get("mem_util_percent").map(|s| s.mean),
                    ..GpuRow::default()
                });
            }
        }
    }
    let mut traced = |analysis: &system_profile_model::metrics::TraceAnalysis, source: Source| {
        let single = analysis.devices.len() == 1;
        let d2d = analysis
            .copies
            .iter()
            .find(|c| c.direction == "DtoD")
            .map(|c| c.bandwidth_gbps);
        for d in &analysis.devices {
            rows.push(GpuRow {
                device: match analysis.rank {
                    Some(r) => format!("rank {r} cuda:{}", d.device),
                    None => format!("cuda:{}", d.device),
                },
                name: d.name.clone(),
                sources: vec![source.clone()],
                kernels: single.then_some(analysis.launches.kernels),
                kernel_time_s: Some(d.kernel_us * 1e-6),
                busy_percent: (d.span_us > 0.0).then(|| d.busy_us / d.span_us * 100.0),
                idle_percent: Some(d.idle_percent),
                launch_mean_us: single.then_some(analysis.launches.launch_api_mean_us),
                launch_to_start_p50_us: analysis.launches.launch_to_start_p50_us,
                short_kernels_percent: single.then_some(analysis.launches.short_kernels_percent),
                memory_bandwidth_percent_of_peak: match (d2d, links.memory_gbps) {
                    // A device-to-device copy reads and writes: twice its bytes cross memory.
                    (Some(bw), Some(peak)) => Some(2.0 * bw / peak * 100.0),
                    _ => None,
                },
                memory_bandwidth_peak_gbps: d2d.and(links.memory_gbps),
                ..GpuRow::default()
            });
        }
    };
    for run in &session.runs {
        if let Some(t) = &run.metrics.trace {
            traced(t, cite(run, ArtifactKind::KinetoTrace));
        }
    }
    for stored in &session.traces {
        for f in &stored.report.traces {
            traced(
                &f.analysis,
                Source {
                    run_id: stored.id.clone(),
                    artifact: Some(f.path.clone()),
                },
            );
        }
    }
    for run in &session.runs {
        if let Some(n) = &run.metrics.nsys {
            rows.push(GpuRow {
                device: "all".into(),
                sources: vec![cite(run, ArtifactKind::NsysStats)],
                kernels: Some(n.launches.kernels),
                kernel_time_s: Some(n.launches.kernel_us * 1e-6),
                launch_mean_us: Some(n.launches.launch_api_mean_us),
                short_kernels_percent: None,
                ..GpuRow::default()
            });
        }
    }
    rows
}

/// A file as the report shows it: relative to the root when under it.
pub(crate) fn shown_file(root: &std::path::Path, file: &str) -> String {
    let p = std::path::Path::new(file);
    p.strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| file.to_string())
}

/// What one tool said of one function.
struct Seen {
    function: String,
    file: Option<String>,
    line: Option<u32>,
    kind: &'static str,
    evidence: HotspotEvidence,
    /// The hottest line and its share, from a line-level tool.
    hot_line: Option<u32>,
}

const HOTSPOT_ROWS: usize = 15;
const MIN_SELF_PERCENT: f64 = 1.0;
const KERNEL_ROWS: usize = 5;
const NATIVE_ROWS_BESIDE_PYTHON: usize = 5;

/// Samples per second of a run's stacks: as the runner recorded it, else (a record written
/// before it was kept) the rate its argv asked for (`--rate N` for py-spy, `-F N` for perf).
pub(crate) fn sampling_hz(run: &RunRecord, s: &StackProfile) -> Option<f64> {
    if let Some(period_s) = s.sample_period_s.filter(|p| *p > 0.0) {
        return Some(1.0 / period_s);
    }
    run.argv
        .windows(2)
        .find(|w| w[0] == "--rate" || w[0] == "-F")
        .and_then(|w| w[1].parse::<f64>().ok())
        .filter(|hz| *hz > 0.0)
}

fn from_stacks(
    root: &std::path::Path,
    tool: &str,
    source: &Source,
    s: &StackProfile,
    hz: Option<f64>,
) -> Vec<Seen> {
    let mut out: Vec<Seen> = Vec::new();
    for f in s
        .by_self
        .iter()
        .filter(|f| f.self_percent >= MIN_SELF_PERCENT)
        .take(HOTSPOT_ROWS)
    {
        let file = f.file.as_deref().map(|x| shown_file(root, x));
        let hot_line = s
            .lines
            .iter()
            .find(|l| l.function == f.function && Some(&l.file) == f.file.as_ref())
            .map(|l| l.line);
        out.push(Seen {
            kind: if file.as_deref().is_some_and(|x| x.ends_with(".py")) {
                "python"
            } else {
                "native"
            },
            function: f.function.clone(),
            file,
            line: f.line,
            evidence: HotspotEvidence {
                tool: tool.into(),
                source: source.clone(),
                self_percent: Some(f.self_percent),
                total_percent: Some(f.total_percent),
                hot_line: None,
                hot_line_percent: None,
                self_s: hz.map(|hz| f.self_samples as f64 / hz),
                calls: None,
            },
            hot_line,
        });
    }
    out
}

/// The same function as two tools name it: equal, or one the other's qualified form.
pub(crate) fn same_function(a: &str, b: &str) -> bool {
    a == b || a.ends_with(&format!(".{b}")) || b.ends_with(&format!(".{a}"))
}

/// Hotspots merged across the profilers: one row per (file, function), sampling tools'
/// shares first, the agreeing tools listed; then the heaviest GPU kernels.
pub fn hotspots(root: &std::path::Path, session: &Session) -> Option<HotspotTable> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut flame_graphs = Vec::new();
    for run in &session.runs {
        let m = &run.metrics;
        let tool = run.profiler.id();
        if let Some(s) = &m.stacks {
            seen.extend(from_stacks(
                root,
                &run.stacks_method().id(),
                &cite_stacks(run),
                s,
                sampling_hz(run, s),
            ));
        }
        if let Some(c) = &m.calls {
            let total = c.total_time_s;
            for f in c.by_tottime.iter().take(HOTSPOT_ROWS) {
                let self_percent = if total > 0.0 {
                    f.tottime_s / total * 100.0
                } else {
                    0.0
                };
                if self_percent < MIN_SELF_PERCENT {
                    continue;
                }
                let file = shown_file(root, &f.file);
                seen.push(Seen {
                    kind: if file.ends_with(".py") {
                        "python"
                    } else {
                        "native"
                    },
                    function: f.function.clone(),
                    file: Some(file),
                    line: Some(f.line),
                    evidence: HotspotEvidence {
                        tool: tool.clone(),
                        source: cite(run, ArtifactKind::CprofileJson),
                        self_percent: Some(self_percent),
                        total_percent: Some(if total > 0.0 {
                            (f.cumtime_s / total * 100.0).min(100.0)
                        } else {
                            0.0
                        }),
                        hot_line: None,
                        hot_line_percent: None,
                        self_s: Some(f.tottime_s),
                        calls: Some(f.calls),
                    },
                    hot_line: None,
                });
            }
        }
        if let Some(lp) = &m.line_profile {
            let hottest = lp
                .lines
                .iter()
                .max_by(|a, b| a.percent.total_cmp(&b.percent));
            let name = lp.function.rsplit('.').next().unwrap_or(&lp.function);
            seen.push(Seen {
                kind: "python",
                function: name.to_string(),
                file: Some(shown_file(root, &lp.file)),
                line: lp.lines.first().map(|l| l.line),
                evidence: HotspotEvidence {
                    tool: tool.clone(),
                    source: cite(run, ArtifactKind::LineProfilerJson),
                    self_percent: None,
                    total_percent: None,
                    hot_line: hottest.map(|l| l.line),
                    hot_line_percent: hottest.map(|l| l.percent),
                    self_s: None,
                    calls: None,
                },
                hot_line: hottest.map(|l| l.line),
            });
        }
        for a in run
            .artifacts
            .iter()
            .filter(|a| a.kind == ArtifactKind::FlamegraphSvg)
        {
            flame_graphs.push(FlameGraph {
                run_id: run.run_id.clone(),
                path: a.path.clone(),
            });
        }
    }
    // Merge by (file, function), keeping the order of first sight for ties.
    let mut merged: Vec<Hotspot> = Vec::new();
    let mut hot_lines: Vec<Option<u32>> = Vec::new();
    for s in seen {
        let at = merged
            .iter()
            .position(|h| h.file == s.file && same_function(&h.function, &s.function));
        match at {
            Some(i) => {
                // Keep the qualified name (py-spy's `f.<locals>.<listcomp>` over cProfile's
                // `<listcomp>`).
                if s.function.len() > merged[i].function.len() {
                    merged[i].function = s.function.clone();
                }
                merged[i].evidence.push(s.evidence);
                hot_lines[i] = hot_lines[i].or(s.hot_line);
            }
            None => {
                merged.push(Hotspot {
                    waits_in: None,
                    function: s.function,
                    file: s.file,
                    line: s.line,
                    kind: s.kind.into(),
                    self_percent: 0.0,
                    total_percent: 0.0,
                    self_s: None,
                    self_s_run: None,
                    called_from: None,
                    evidence: vec![s.evidence],
                });
                hot_lines.push(s.hot_line);
            }
        }
    }
    for (h, hot) in merged.iter_mut().zip(hot_lines) {
        let rank = crate::call_paths::tool_rank;
        let best = h
            .evidence
            .iter()
            .filter(|e| e.self_percent.is_some())
            .min_by_key(|e| rank(&e.tool));
        if let Some(b) = best {
            h.self_percent = b.self_percent.unwrap_or(0.0);
            h.total_percent = b.total_percent.unwrap_or(0.0);
            h.self_s = b.self_s;
            h.self_s_run = b.self_s.map(|_| b.source.run_id.clone());
        }
        h.line = hot.or(h.line);
    }
    // A function only a line-level tool saw has no share to rank by; it stays if named.
    merged.sort_by(|a, b| b.self_percent.total_cmp(&a.self_percent));
    // Beside Python functions, perf's native frames are mostly the interpreter running them:
    // the heaviest few say whether it is allocation or arithmetic; more would bury the code.
    if merged.iter().any(|h| h.kind == "python") {
        let mut native = 0;
        merged.retain(|h| {
            native += usize::from(h.kind == "native");
            h.kind != "native" || native <= NATIVE_ROWS_BESIDE_PYTHON
        });
    }
    merged.truncate(HOTSPOT_ROWS);
    let stack_runs = crate::call_paths::stack_runs(session);
    for h in merged.iter_mut().filter(|h| h.kind != "waiting") {
        h.called_from = crate::call_paths::called_from(root, &stack_runs, h);
    }
    let mut kernels: Vec<Hotspot> = Vec::new();
    let mut add_kernels = |analysis: &system_profile_model::metrics::TraceAnalysis,
                           source: Source| {
        for k in analysis
            .kernels
            .iter()
            .filter(|k| k.category != "nccl")
            .take(KERNEL_ROWS)
        {
            if k.percent < 5.0 {
                break;
            }
            kernels.push(Hotspot {
                waits_in: None,
                function: k.name.chars().take(100).collect(),
                file: None,
                line: None,
                kind: "gpu_kernel".into(),
                self_percent: k.percent,
                total_percent: k.percent,
                self_s: Some(k.total_us * 1e-6),
                self_s_run: Some(source.run_id.clone()),
                called_from: None,
                evidence: vec![HotspotEvidence {
                    tool: "torch_profiler".into(),
                    source: source.clone(),
                    self_percent: Some(k.percent),
                    total_percent: None,
                    hot_line: None,
                    hot_line_percent: None,
                    self_s: None,
                    calls: None,
                }],
            });
        }
    };
    for run in &session.runs {
        if let Some(t) = &run.metrics.trace {
            add_kernels(t, cite(run, ArtifactKind::KinetoTrace));
        }
    }
    for stored in &session.traces {
        // One rank's kernels speak for the job; every rank's would repeat them.
        if let Some(f) = stored.report.traces.first() {
            add_kernels(
                &f.analysis,
                Source {
                    run_id: stored.id.clone(),
                    artifact: Some(f.path.clone()),
                },
            );
        }
    }
    merged.extend(kernels);
    (!merged.is_empty()).then_some(HotspotTable {
        rows: merged,
        inclusive: crate::call_paths::inclusive(root, &stack_runs),
        native_calls: crate::call_paths::native_calls(root, &stack_runs),
        flame_graphs,
    })
}
