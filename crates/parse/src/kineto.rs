//! A Kineto trace (PyTorch profiler, vLLM's, the user's own: Chrome trace JSON) analysed as
//! it streams: events are read one at a time from `traceEvents` and folded into running
//! totals, so a multi-GB trace needs memory for its kernels' intervals and launch ids, not for
//! its text. Read: `X` events of category `kernel`, `gpu_memcpy`, `gpu_memset` (device,
//! stream, ts and dur in µs, bytes) and `cuda_runtime` launch calls (with their correlation
//! id, joined to the kernel they launched); `deviceProperties` for names;
//! `distributedInfo.rank`. Everything else is skipped unread.

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read;
use system_profile_model::metrics::{
    TraceAnalysis, TraceCategory, TraceCopies, TraceDeviceTime, TraceKernel, TraceLaunches,
    TraceWindow,
};
use system_profile_model::peaks::{gpu_peaks, pcie_gbps_per_direction, GpuModelPeaks, PeakUse};
use system_profile_model::trace::SyncPoint;
use system_profile_model::{Diag, Parsed};

mod align;
mod collectives;
mod cpu_ops;
mod merge;
mod ranks;
mod scanner;
pub use align::align_clocks;
use collectives::{CommAcc, CommArgs};
pub use merge::{merge_inputs, write_merged, write_merged_gzip, MergeInput, MergeStats};
pub use ranks::rank_balance;
use scanner::{ScanError, Scanner};

/// Kernels listed by name; the rest are summed into `other_kernels`.
const TOP_KERNELS: usize = 50;

#[derive(Deserialize, Default)]
struct Args<'a> {
    #[serde(default, deserialize_with = "lenient_number")]
    device: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    correlation: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    bytes: Option<u64>,
    // What a collective carries (NCCL kernels and record_param_comms; shapes with
    // record_shapes); read as text and decoded only for the events that are collectives.
    #[serde(rename = "Collective name", default, borrow)]
    collective: Option<Cow<'a, str>>,
    #[serde(rename = "In msg nelems", default, deserialize_with = "lenient_number")]
    in_nelems: Option<u64>,
    #[serde(default, borrow)]
    dtype: Option<Cow<'a, str>>,
    #[serde(rename = "Group size", default, deserialize_with = "lenient_number")]
    group_size: Option<u64>,
    #[serde(rename = "Input Dims", default, borrow)]
    input_dims: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "Input type", default, borrow)]
    input_type: Option<&'a serde_json::value::RawValue>,
}

/// A non-negative whole number in whatever JSON form it came (integer, float); anything else
/// (a string, null) is `None` rather than an error that would end the stream.
fn lenient_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number")
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(u64::try_from(v).ok())
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok((v >= 0.0 && v.is_finite()).then_some(v as u64))
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    ph: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    tid: Option<u64>,
    #[serde(default, borrow)]
    args: Option<Args<'a>>,
}
// Unknown fields (pid, tid, id, bp, ...) are skipped: serde's default.

#[derive(Deserialize)]
struct DeviceProperty {
    id: u32,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct DistributedInfo {
    #[serde(default)]
    rank: Option<u32>,
}

/// Kernel category from its name.
pub fn category(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| n.contains(w));
    if has(&["nccl"]) {
        "nccl"
    } else if has(&["flash", "fmha", "attention", "attn", "mha_"]) {
        "attention"
    } else if has(&["gemm", "cutlass", "xmma", "cublas", "matmul", "gemv"]) {
        "gemm"
    } else if has(&["norm", "bn_fw", "bn_bw"]) {
        "normalization"
    } else if has(&["conv", "cudnn::", "implicit_convolve", "winograd"]) {
        "convolution"
    } else if has(&["reduce", "softmax"]) {
        "reduction"
    } else if has(&["elementwise", "vectorized", "unrolled", "distribution_"]) {
        "elementwise"
    } else {
        "other"
    }
}

fn copy_direction(name: &str) -> &'static str {
    for d in ["HtoD", "DtoH", "DtoD", "PtoP", "HtoH"] {
        if name.contains(d) {
            return d;
        }
    }
    "other"
}

#[derive(Default)]
struct KernelAcc {
    count: u64,
    total: f64,
    min: f64,
    max: f64,
}

#[derive(Default)]
struct CopyAcc {
    count: u64,
    bytes: u64,
    total: f64,
    buckets: [u64; 5],
    /// Each copy's bytes and duration, for the percentiles.
    sizes: Vec<u64>,
    durations: Vec<f64>,
    pageable: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum GpuKind {
    Kernel,
    Memcpy,
    Memset,
}

/// One GPU event, kept compact until the end: which ones count depends on the profiler steps,
/// which may come anywhere in the file.
struct GpuEvent {
    device: u32,
    kind: GpuKind,
    /// Index into `Acc::names`.
    name: u32,
    ts: f64,
    dur: f64,
    correlation: Option<u64>,
    bytes: u64,
}

/// Per device: intervals of every GPU event, of NCCL kernels, of other kernels; and the
/// summed durations of kernels, copies and sets.
type DeviceIntervals = (Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>, [f64; 3]);

#[derive(Default)]
struct Acc {
    events: u64,
    gpu: Vec<GpuEvent>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    device_names: BTreeMap<u32, String>,
    rank: Option<u32>,
    /// CPU-side runtime calls by correlation id: start, and whether it launched a kernel.
    runtime: HashMap<u64, (f64, bool)>,
    /// Launch calls (start, duration) in file order, so their sums come out the same every run.
    launch_calls: Vec<(f64, f64)>,
    /// Start and duration of the `ProfilerStep#N` annotations.
    steps: Vec<(f64, f64)>,
    /// Their numbers with the same start and duration, where the name has one.
    step_numbers: Vec<(u64, f64, f64)>,
    skipped: u64,
    comms: CommAcc,
    cpu_ops: cpu_ops::CpuOpAcc,
}

/// Mean and longest `ProfilerStep#N`, µs, over the steps that ran whole: all but the last,
/// which the profiler's stop cuts short. A step annotation that appears twice (a CPU op and a
/// user annotation of the same step) counts once, the longer.
fn step_times(steps: &[(f64, f64)]) -> (Option<f64>, Option<f64>) {
    let mut ordered = steps.to_vec();
    ordered.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    // The longest of each start comes first: keep it.
    ordered.dedup_by(|later, kept| later.0 == kept.0);
    ordered.pop();
    if ordered.is_empty() {
        return (None, None);
    }
    let durs: Vec<f64> = ordered.iter().map(|s| s.1).collect();
    let mean = durs.iter().sum::<f64>() / durs.len() as f64;
    (Some(mean), durs.iter().copied().reduce(f64::max))
}

impl Acc {
    /// The collectives in start order, each given the profiler step it was issued in: a
    /// kernel's by its launch on the CPU (the step annotations are CPU spans; the kernel may
    /// run after its step's span ended).
    fn sync_points(&mut self) -> Vec<SyncPoint> {
        let mut steps = std::mem::take(&mut self.step_numbers);
        steps.sort_by(|a, b| a.1.total_cmp(&b.1));
        let step_at = |t: f64| {
            let i = steps.partition_point(|s| s.1 <= t);
            i.checked_sub(1)
                .map(|i| steps[i])
                .filter(|s| t <= s.1 + s.2)
                .map(|s| s.0)
        };
        let mut points: Vec<SyncPoint> = std::mem::take(&mut self.comms.sync)
            .into_iter()
            .map(|(mut p, correlation)| {
                let issued = correlation
                    .and_then(|c| self.runtime.get(&c))
                    .map_or(p.start_us, |(ts, _)| *ts);
                p.step = step_at(issued);
                p
            })
            .collect();
        points.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        points
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.name_ids.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.name_ids.insert(name.to_string(), id);
        id
    }

    fn add(&mut self, e: Event<'_>) {
        self.events += 1;
        if e.ph.as_deref() != Some("X") {
            return;
        }
        let (Some(cat), Some(ts), Some(dur)) = (e.cat.as_deref(), e.ts, e.dur) else {
            return;
        };
        let args = e.args.unwrap_or_default();
        let name = e.name.as_deref().unwrap_or("");
        self.cpu_ops
            .add(cat, name, ts, dur, e.tid, args.input_dims.map(|r| r.get()));
        self.comms.add(
            cat,
            name,
            ts,
            dur,
            e.tid,
            &CommArgs {
                collective: args.collective.as_deref(),
                in_nelems: args.in_nelems,
                dtype: args.dtype.as_deref(),
                group_size: args.group_size,
                input_dims: args.input_dims.map(|r| r.get()),
                input_type: args.input_type.map(|r| r.get()),
                correlation: args.correlation,
            },
        );
        match cat {
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let Some(device) = args.device.and_then(|d| u32::try_from(d).ok()) else {
                    self.skipped += 1;
                    return;
                };
                let kind = match cat {
                    "kernel" => GpuKind::Kernel,
                    "gpu_memcpy" => GpuKind::Memcpy,
                    _ => GpuKind::Memset,
                };
                let name = self.intern(e.name.as_deref().unwrap_or(""));
                self.gpu.push(GpuEvent {
                    device,
                    kind,
                    name,
                    ts,
                    dur,
                    correlation: args.correlation,
                    bytes: args.bytes.unwrap_or(0),
                });
            }
            "cuda_runtime" | "cuda_driver" => {
                let name = e.name.as_deref().unwrap_or("");
                let launch = name.starts_with("cudaLaunchKernel")
                    || name.starts_with("cuLaunchKernel")
                    || name == "cudaLaunchCooperativeKernel";
                if launch {
                    self.launch_calls.push((ts, dur));
                }
                if let Some(c) = args.correlation {
                    self.runtime.insert(c, (ts, launch));
                }
            }
            "cpu_op" | "user_annotation"
                if e.name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("ProfilerStep#")) =>
            {
                self.steps.push((ts, dur));
                if let Some(n) = name
                    .strip_prefix("ProfilerStep#")
                    .and_then(|n| n.parse().ok())
                {
                    self.step_numbers.push((n, ts, dur));
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> TraceAnalysis {
        let sync_points = self.sync_points();
        let cpu_ops = std::mem::take(&mut self.cpu_ops).finish();
        let pct = |x: f64, of: f64| if of > 0.0 { x / of * 100.0 } else { 0.0 };
        // With two profiler steps or more, the window HTA uses: GPU work launched before the
        // last step began (the last one is cut short by the profiler's own stop).
        let mut distinct_steps: Vec<f64> = self.steps.iter().map(|s| s.0).collect();
        distinct_steps.sort_by(f64::total_cmp);
        distinct_steps.dedup();
        let (step_mean_us, step_max_us) = step_times(&self.steps);
        let cutoff = (distinct_steps.len() >= 2).then(|| distinct_steps[distinct_steps.len() - 1]);
        let runtime = &self.runtime;
        let kept = |g: &GpuEvent| match cutoff {
            None => true,
            Some(c) => g
                .correlation
                .and_then(|id| runtime.get(&id))
                .is_some_and(|(ts, _)| *ts < c),
        };
        let (mut launch_calls, mut launch_api) = (0u64, 0.0);
        for (ts, dur) in &self.launch_calls {
            if cutoff.is_none_or(|c| *ts < c) {
                launch_calls += 1;
                launch_api += dur;
            }
        }
        let mut devices_acc: BTreeMap<u32, DeviceIntervals> = BTreeMap::new();
        let mut kernels: HashMap<u32, KernelAcc> = HashMap::new();
        let mut copies: BTreeMap<&'static str, CopyAcc> = BTreeMap::new();
        let (mut kernel_count, mut kernel_total, mut short_kernels, mut dropped) =
            (0u64, 0.0, 0u64, 0u64);
        let mut delays = Vec::new();
        for g in &self.gpu {
            if !kept(g) {
                dropped += 1;
                continue;
            }
            let d = devices_acc.entry(g.device).or_default();
            let iv = (g.ts, g.ts + g.dur);
            d.0.push(iv);
            let name = &self.names[g.name as usize];
            match g.kind {
                GpuKind::Kernel => {
                    d.3[0] += g.dur;
                    if category(name) == "nccl" {
                        d.1.push(iv);
                    } else {
                        d.2.push(iv);
                    }
                    kernel_count += 1;
                    kernel_total += g.dur;
                    if g.dur < 10.0 {
                        short_kernels += 1;
                    }
                    if let Some((ts, true)) = g.correlation.and_then(|c| runtime.get(&c)) {
                        delays.push(g.ts - ts);
                    }
                    let k = kernels.entry(g.name).or_insert(KernelAcc {
                        min: f64::INFINITY,
                        ..Default::default()
                    });
                    k.count += 1;
                    k.total += g.dur;
                    k.min = k.min.min(g.dur);
                    k.max = k.max.max(g.dur);
                }
                GpuKind::Memcpy => {
                    d.3[1] += g.dur;
                    let c = copies.entry(copy_direction(name)).or_default();
                    c.count += 1;
                    c.total += g.dur;
                    c.bytes += g.bytes;
                    c.sizes.push(g.bytes);
                    c.durations.push(g.dur);
                    c.pageable += u64::from(name.contains("Pageable"));
                    let bucket = match g.bytes {
                        0..1024 => 0,
                        1024..65536 => 1,
                        65536..1048576 => 2,
                        1048576..16777216 => 3,
                        _ => 4,
                    };
                    c.buckets[bucket] += 1;
                }
                GpuKind::Memset => d.3[2] += g.dur,
            }
        }
        let mut devices = Vec::new();
        for (device, (mut all, mut comm, mut compute, sums)) in devices_acc {
            let all = merge(&mut all);
            let comm = merge(&mut comm);
            let compute = merge(&mut compute);
            let span = match (all.first(), all.last()) {
                (Some(a), Some(b)) => b.1 - a.0,
                _ => 0.0,
            };
            let busy = length(&all);
            let comm_us = length(&comm);
            let overlap = intersection(&comm, &compute);
            devices.push(TraceDeviceTime {
                device,
                name: self.device_names.get(&device).cloned(),
                span_us: span,
                busy_us: busy,
                idle_us: span - busy,
                idle_percent: pct(span - busy, span),
                kernel_us: sums[0],
                memcpy_us: sums[1],
                memset_us: sums[2],
                comm_us,
                compute_us: length(&compute),
                comm_compute_overlap_us: overlap,
                comm_overlapped_percent: pct(overlap, comm_us),
            });
        }
        let mut kernels: Vec<TraceKernel> = kernels
            .into_iter()
            .map(|(id, k)| {
                let name = self.names[id as usize].clone();
                TraceKernel {
                    category: category(&name).to_string(),
                    name,
                    count: k.count,
                    total_us: k.total,
                    mean_us: k.total / k.count as f64,
                    min_us: k.min,
                    max_us: k.max,
                    percent: pct(k.total, kernel_total),
                }
            })
            .collect();
        kernels.sort_by(|a, b| {
            b.total_us
                .total_cmp(&a.total_us)
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut categories: BTreeMap<String, (u64, f64)> = BTreeMap::new();
        for k in &kernels {
            let c = categories.entry(k.category.clone()).or_default();
            c.0 += k.count;
            c.1 += k.total_us;
        }
        let mut categories: Vec<TraceCategory> = categories
            .into_iter()
            .map(|(category, (count, total_us))| TraceCategory {
                category,
                count,
                total_us,
                percent: pct(total_us, kernel_total),
            })
            .collect();
        categories.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        let other_kernels = (kernels.len() > TOP_KERNELS).then(|| {
            let rest = kernels.split_off(TOP_KERNELS);
            let total_us: f64 = rest.iter().map(|k| k.total_us).sum();
            TraceCategory {
                category: format!("{} other kernels", rest.len()),
                count: rest.iter().map(|k| k.count).sum(),
                total_us,
                percent: pct(total_us, kernel_total),
            }
        });
        let model = self.device_names.values().next().and_then(|n| gpu_peaks(n));
        let copies = copies
            .into_iter()
            .map(|(direction, mut c)| {
                c.sizes.sort_unstable();
                c.durations.sort_by(f64::total_cmp);
                let bandwidth_gbps = if c.total > 0.0 {
                    c.bytes as f64 / (c.total * 1e-6) / 1e9
                } else {
                    0.0
                };
                TraceCopies {
                    vs_peak: model.and_then(|m| copy_peak(direction, bandwidth_gbps, m)),
                    direction: direction.to_string(),
                    count: c.count,
                    bytes: c.bytes,
                    total_us: c.total,
                    bandwidth_gbps,
                    size_buckets: c.buckets.to_vec(),
                    bytes_p50: nearest_rank(&c.sizes, 0.5),
                    bytes_p95: nearest_rank(&c.sizes, 0.95),
                    duration_us_p50: nearest_rank(&c.durations, 0.5),
                    duration_us_p95: nearest_rank(&c.durations, 0.95),
                    pageable_count: Some(c.pageable),
                }
            })
            .collect();
        delays.sort_by(f64::total_cmp);
        let rank_of = |q: f64| nearest_rank(&delays, q);
        TraceAnalysis {
            rank: self.rank,
            events: self.events,
            window: TraceWindow {
                profiler_steps: distinct_steps.len() as u64,
                last_step_excluded: cutoff.is_some(),
                step_mean_us,
                step_max_us,
                gpu_events_kept: self.gpu.len() as u64 - dropped,
                gpu_events_excluded: dropped,
            },
            devices,
            categories,
            kernels,
            other_kernels,
            copies,
            launches: TraceLaunches {
                launches: launch_calls,
                launch_api_us: launch_api,
                launch_api_mean_us: if launch_calls > 0 {
                    launch_api / launch_calls as f64
                } else {
                    0.0
                },
                kernels: kernel_count,
                kernel_us: kernel_total,
                launch_to_start_p50_us: rank_of(0.5),
                launch_to_start_p95_us: rank_of(0.95),
                short_kernels,
                short_kernels_percent: pct(short_kernels as f64, kernel_count as f64),
            },
            collectives: self.comms.finish(cutoff),
            cpu_ops,
            sync_points,
        }
    }
}

/// A copy direction's bandwidth against the link it crossed, from the datasheet of the
/// trace's GPU model.
pub fn copy_peak(direction: &str, gbps: f64, m: &GpuModelPeaks) -> Option<PeakUse> {
    let (peak, what) = match direction {
        "HtoD" | "DtoH" => (
            pcie_gbps_per_direction(m.pcie_gen, m.pcie_width)?,
            format!("PCIe gen {} x{}", m.pcie_gen, m.pcie_width),
        ),
        "DtoD" => (m.memory_bandwidth_gbps, "device memory".to_string()),
        "PtoP" => (
            m.nvlink_gbps_per_direction?,
            "NVLink per direction".to_string(),
        ),
        _ => return None,
    };
    Some(PeakUse::new(
        format!("{direction} copies"),
        gbps,
        peak,
        "GB/s",
        format!("datasheet: {} {what}", m.name_contains),
    ))
}

/// Sort and merge overlapping intervals.
fn merge(v: &mut [(f64, f64)]) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(v.len());
    for &(s, e) in v.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn length(v: &[(f64, f64)]) -> f64 {
    // fold from +0.0: an empty f64 sum is -0.0, which would print as such.
    v.iter().fold(0.0, |acc, (s, e)| acc + (e - s))
}

/// Total length of the intersection of two merged interval lists.
fn intersection(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let (mut i, mut j, mut total) = (0, 0, 0.0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The nearest-rank quantile of sorted values.
fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    (!sorted.is_empty())
        .then(|| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1])
}

/// The top-level object: `traceEvents` element by element into `acc`, the device names and
/// the rank from their keys, everything else skipped.
fn scan<R: Read>(sc: &mut Scanner<R>, acc: &mut Acc) -> Result<(), ScanError> {
    let mut device_names = BTreeMap::new();
    let mut rank = None;
    let walked = scanner::walk(
        sc,
        |bytes| match serde_json::from_slice::<Event>(bytes) {
            Ok(e) => acc.add(e),
            Err(_) => {
                acc.events += 1;
                acc.skipped += 1;
            }
        },
        |key, bytes| match key {
            "deviceProperties" => {
                if let Ok(props) = serde_json::from_slice::<Vec<DeviceProperty>>(bytes) {
                    for p in props {
                        if let Some(n) = p.name {
                            device_names.insert(p.id, n);
                        }
                    }
                }
            }
            "distributedInfo" => {
                if let Ok(info) = serde_json::from_slice::<DistributedInfo>(bytes) {
                    rank = info.rank;
                }
            }
            _ => {}
        },
    );
    acc.device_names.extend(device_names);
    acc.rank = acc.rank.or(rank);
    walked
}

/// `reader`'s bytes, gunzipped when its first two bytes are gzip's magic (`1f 8b`), whatever
/// the file is named. Only reading those bytes can fail.
pub(crate) fn decompressed<'r, R: Read + 'r>(mut reader: R) -> std::io::Result<Box<dyn Read + 'r>> {
    let mut magic = [0u8; 2];
    let mut n = 0;
    while n < magic.len() {
        match reader.read(&mut magic[n..])? {
            0 => break,
            k => n += k,
        }
    }
    let gzip = magic[..n] == [0x1f, 0x8b];
    let whole = std::io::Cursor::new(magic[..n].to_vec()).chain(reader);
    Ok(if gzip {
        Box::new(flate2::read::GzDecoder::new(whole))
    } else {
        Box::new(whole)
    })
}

/// Analyse a trace from `reader`, gzip-compressed or plain JSON as its first two bytes say
/// (gzip's magic, `1f 8b`), whatever the file is named. Only reading those bytes can fail.
pub fn analyze_compressed_or_not<R: Read>(reader: R) -> std::io::Result<Parsed<TraceAnalysis>> {
    Ok(analyze_reader(decompressed(reader)?))
}

/// Analyse a trace read from `reader` (decompress `.gz` before).
pub fn analyze_reader<R: Read>(reader: R) -> Parsed<TraceAnalysis> {
    let mut acc = Acc::default();
    let mut diagnostics = Vec::new();
    let mut scanner = Scanner::new(reader);
    if let Err(e) = scan(&mut scanner, &mut acc) {
        diagnostics.push(Diag::general(format!(
            "the trace stops being JSON at byte {} ({}): what came before is analysed",
            e.offset, e.message
        )));
    }
    if acc.skipped > 0 {
        diagnostics.push(Diag::general(format!(
            "{} events without a device or of an unexpected shape were skipped",
            acc.skipped
        )));
    }
    if acc.events == 0 {
        diagnostics.push(Diag::general("no traceEvents: not a Kineto / Chrome trace"));
    } else if !acc.gpu.iter().any(|g| g.kind == GpuKind::Kernel) {
        diagnostics.push(Diag::general(
            "no GPU kernels in the trace: it was recorded without CUDA activity (ProfilerActivity.CUDA)",
        ));
    }
    Parsed {
        value: acc.finish(),
        diagnostics,
    }
}

pub fn analyze(text: &str) -> Parsed<TraceAnalysis> {
    analyze_reader(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_idle_and_overlap_from_intervals() {
        let trace = r#"{"traceEvents":[
          {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":0,"dur":5,"args":{"correlation":1}},
          {"ph":"X","cat":"kernel","name":"ampere_sgemm_128x64","ts":10,"dur":20,"args":{"device":0,"correlation":1}},
          {"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce","ts":20,"dur":20,"args":{"device":0}},
          {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","ts":50,"dur":10,"args":{"device":0,"bytes":1000000}},
          {"ph":"X","cat":"kernel","name":"bad"},
          "not an event"
        ],"deviceProperties":[{"id":0,"name":"NVIDIA H200"}],"distributedInfo":{"rank":3}}"#;
        let p = analyze(trace);
        let a = p.value;
        assert_eq!(a.rank, Some(3));
        let d = &a.devices[0];
        assert_eq!(d.name.as_deref(), Some("NVIDIA H200"));
        assert_eq!((d.span_us, d.busy_us, d.idle_us), (50.0, 40.0, 10.0));
        assert_eq!(
            (d.comm_us, d.compute_us, d.comm_compute_overlap_us),
            (20.0, 20.0, 10.0)
        );
        assert_eq!(d.comm_overlapped_percent, 50.0);
        assert_eq!(a.launches.launch_to_start_p50_us, Some(10.0));
        assert_eq!(a.copies[0].direction, "HtoD");
        assert!((a.copies[0].bandwidth_gbps - 100.0).abs() < 1e-9);
        assert_eq!(a.categories[0].total_us, 20.0);
        assert_eq!(
            p.diagnostics.len(),
            1,
            "the shapeless event: {:?}",
            p.diagnostics
        );
    }

    #[test]
    fn a_cut_trace_keeps_what_came_before() {
        let p = analyze(
            r#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":4,"args":{"device":1}},{"ph":"X","#,
        );
        assert_eq!(p.value.devices[0].busy_us, 4.0);
        assert!(p
            .diagnostics
            .iter()
            .any(|d| d.message.contains("stops being JSON")));
        assert_eq!(category("sm90_xmma_gemm_bf16"), "gemm");
        assert_eq!(category("flash_fwd_kernel"), "attention");
    }

    /// Found by the mutation test: a stray `}` among the events (a line of the trace lost)
    /// made the scanner take an empty value and stay where it was, forever.
    #[test]
    fn a_stray_brace_among_the_events_is_skipped_not_looped_on() {
        let k = r#"{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":4,"args":{"device":1}}"#;
        let p = analyze(&format!(r#"{{"traceEvents":[{k},}},{k}]}}"#));
        assert_eq!(p.value.events, 3, "{:?}", p.diagnostics);
        assert_eq!(p.value.kernels.iter().map(|k| k.count).sum::<u64>(), 2);
    }
}
