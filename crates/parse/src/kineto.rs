//! A Kineto trace (PyTorch profiler, vLLM's, the user's own: Chrome trace JSON) analysed as
//! it streams: events are read one at a time from `traceEvents` and folded into running
//! totals, so a multi-GB trace needs memory for its kernels' intervals and launch ids, not for
//! its text. Read: `X` events of category `kernel`, `gpu_memcpy`, `gpu_memset` (device,
//! stream, ts and dur in µs, bytes) and `cuda_runtime` launch calls (with their correlation
//! id, joined to the kernel they launched); `deviceProperties` for names;
//! `distributedInfo.rank`. Everything else is skipped unread.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read;
use system_profile_model::metrics::{
    TraceAnalysis, TraceCategory, TraceCopies, TraceDeviceTime, TraceKernel, TraceLaunches,
};
use system_profile_model::{Diag, Parsed};

/// Kernels listed by name; the rest are summed into `other_kernels`.
const TOP_KERNELS: usize = 50;

#[derive(Deserialize, Default)]
struct Args {
    #[serde(default, deserialize_with = "lenient_number")]
    device: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    correlation: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    bytes: Option<u64>,
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

/// An element of `traceEvents`: an event object, or something else (skipped).
struct MaybeEvent(Option<Event>);

impl<'de> Deserialize<'de> for MaybeEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeEvent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a trace event")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MaybeEvent, A::Error> {
                Event::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|e| MaybeEvent(Some(e)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MaybeEvent, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeEvent(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
            fn visit_unit<E>(self) -> Result<MaybeEvent, E> {
                Ok(MaybeEvent(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    args: Option<Args>,
}
// Unknown fields (pid, tid, id, bp, ...) are ignored: serde's default.

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
}

/// Per device: (start, end) intervals of kernels (NCCL or not), copies and sets.
#[derive(Default)]
struct DeviceAcc {
    all: Vec<(f64, f64)>,
    comm: Vec<(f64, f64)>,
    compute: Vec<(f64, f64)>,
    kernel: f64,
    memcpy: f64,
    memset: f64,
}

#[derive(Default)]
struct Acc {
    events: u64,
    kernels: HashMap<String, KernelAcc>,
    copies: BTreeMap<&'static str, CopyAcc>,
    devices: BTreeMap<u32, DeviceAcc>,
    names: BTreeMap<u32, String>,
    rank: Option<u32>,
    launch_calls: u64,
    launch_api: f64,
    launch_ts: HashMap<u64, f64>,
    kernel_ts: HashMap<u64, f64>,
    short_kernels: u64,
    kernel_count: u64,
    kernel_total: f64,
    skipped: u64,
}

impl Acc {
    fn add(&mut self, e: Event) {
        self.events += 1;
        if e.ph.as_deref() != Some("X") {
            return;
        }
        let (Some(cat), Some(ts), Some(dur)) = (e.cat.as_deref(), e.ts, e.dur) else {
            return;
        };
        let args = e.args.unwrap_or_default();
        match cat {
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let Some(device) = args.device.and_then(|d| u32::try_from(d).ok()) else {
                    self.skipped += 1;
                    return;
                };
                let d = self.devices.entry(device).or_default();
                d.all.push((ts, ts + dur));
                let name = e.name.unwrap_or_default();
                match cat {
                    "kernel" => {
                        d.kernel += dur;
                        if category(&name) == "nccl" {
                            d.comm.push((ts, ts + dur));
                        } else {
                            d.compute.push((ts, ts + dur));
                        }
                        self.kernel_count += 1;
                        self.kernel_total += dur;
                        if dur < 10.0 {
                            self.short_kernels += 1;
                        }
                        if let Some(c) = args.correlation {
                            self.kernel_ts.insert(c, ts);
                        }
                        let k = self.kernels.entry(name).or_insert(KernelAcc {
                            min: f64::INFINITY,
                            ..Default::default()
                        });
                        k.count += 1;
                        k.total += dur;
                        k.min = k.min.min(dur);
                        k.max = k.max.max(dur);
                    }
                    "gpu_memcpy" => {
                        d.memcpy += dur;
                        let c = self.copies.entry(copy_direction(&name)).or_default();
                        c.count += 1;
                        c.total += dur;
                        let bytes = args.bytes.unwrap_or(0);
                        c.bytes += bytes;
                        let bucket = match bytes {
                            0..1024 => 0,
                            1024..65536 => 1,
                            65536..1048576 => 2,
                            1048576..16777216 => 3,
                            _ => 4,
                        };
                        c.buckets[bucket] += 1;
                    }
                    _ => d.memset += dur,
                }
            }
            "cuda_runtime" | "cuda_driver" => {
                let name = e.name.as_deref().unwrap_or("");
                if name.starts_with("cudaLaunchKernel")
                    || name.starts_with("cuLaunchKernel")
                    || name == "cudaLaunchCooperativeKernel"
                {
                    self.launch_calls += 1;
                    self.launch_api += dur;
                    if let Some(c) = args.correlation {
                        self.launch_ts.insert(c, ts);
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> TraceAnalysis {
        let kernel_total = self.kernel_total;
        let pct = |x: f64, of: f64| if of > 0.0 { x / of * 100.0 } else { 0.0 };
        let mut devices = Vec::new();
        for (device, d) in self.devices.iter_mut() {
            let all = merge(&mut d.all);
            let comm = merge(&mut d.comm);
            let compute = merge(&mut d.compute);
            let span = match (all.first(), all.last()) {
                (Some(a), Some(b)) => b.1 - a.0,
                _ => 0.0,
            };
            let busy = length(&all);
            let comm_us = length(&comm);
            let overlap = intersection(&comm, &compute);
            devices.push(TraceDeviceTime {
                device: *device,
                name: self.names.get(device).cloned(),
                span_us: span,
                busy_us: busy,
                idle_us: span - busy,
                idle_percent: pct(span - busy, span),
                kernel_us: d.kernel,
                memcpy_us: d.memcpy,
                memset_us: d.memset,
                comm_us,
                compute_us: length(&compute),
                comm_compute_overlap_us: overlap,
                comm_overlapped_percent: pct(overlap, comm_us),
            });
        }
        let mut kernels: Vec<TraceKernel> = self
            .kernels
            .into_iter()
            .map(|(name, k)| TraceKernel {
                category: category(&name).to_string(),
                name,
                count: k.count,
                total_us: k.total,
                mean_us: k.total / k.count as f64,
                min_us: k.min,
                max_us: k.max,
                percent: pct(k.total, kernel_total),
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
        let copies = self
            .copies
            .into_iter()
            .map(|(direction, c)| TraceCopies {
                direction: direction.to_string(),
                count: c.count,
                bytes: c.bytes,
                total_us: c.total,
                bandwidth_gbps: if c.total > 0.0 {
                    c.bytes as f64 / (c.total * 1e-6) / 1e9
                } else {
                    0.0
                },
                size_buckets: c.buckets.to_vec(),
            })
            .collect();
        let mut delays: Vec<f64> = self
            .kernel_ts
            .iter()
            .filter_map(|(c, k)| self.launch_ts.get(c).map(|l| k - l))
            .collect();
        delays.sort_by(f64::total_cmp);
        let rank_of = |q: f64| {
            (!delays.is_empty()).then(|| {
                delays[((q * delays.len() as f64).ceil() as usize).clamp(1, delays.len()) - 1]
            })
        };
        TraceAnalysis {
            rank: self.rank,
            events: self.events,
            devices,
            categories,
            kernels,
            other_kernels,
            copies,
            launches: TraceLaunches {
                launches: self.launch_calls,
                launch_api_us: self.launch_api,
                launch_api_mean_us: if self.launch_calls > 0 {
                    self.launch_api / self.launch_calls as f64
                } else {
                    0.0
                },
                kernels: self.kernel_count,
                kernel_us: kernel_total,
                launch_to_start_p50_us: rank_of(0.5),
                launch_to_start_p95_us: rank_of(0.95),
                short_kernels: self.short_kernels,
                short_kernels_percent: pct(self.short_kernels as f64, self.kernel_count as f64),
            },
        }
    }
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
    v.iter().map(|(s, e)| e - s).sum()
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

/// The top-level object, with `traceEvents` streamed through `Acc`.
struct Trace<'a>(&'a mut Acc);

impl<'de> DeserializeSeed<'de> for Trace<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Trace<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace object with traceEvents")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => map.next_value_seed(Events(self.0))?,
                "deviceProperties" => {
                    for p in map.next_value::<Vec<DeviceProperty>>()? {
                        if let Some(n) = p.name {
                            self.0.names.insert(p.id, n);
                        }
                    }
                }
                "distributedInfo" => self.0.rank = map.next_value::<DistributedInfo>()?.rank,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct Events<'a>(&'a mut Acc);

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // An element that is not an event object is counted and skipped.
        while let Some(MaybeEvent(e)) = seq.next_element::<MaybeEvent>()? {
            match e {
                Some(ev) => self.0.add(ev),
                None => self.0.skipped += 1,
            }
        }
        Ok(())
    }
}

/// Analyse a trace read from `reader` (decompress `.gz` before).
pub fn analyze_reader<R: Read>(reader: R) -> Parsed<TraceAnalysis> {
    let mut acc = Acc::default();
    let mut diagnostics = Vec::new();
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, reader));
    if let Err(e) = Trace(&mut acc).deserialize(&mut de) {
        diagnostics.push(Diag::general(format!(
            "the trace stops being JSON at line {}, column {} ({e}): what came before is analysed",
            e.line(),
            e.column()
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
    } else if acc.kernel_count == 0 {
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
}
