//! Collectives in a Kineto trace. NCCL kernels carry their collective's name, element count
//! and dtype (PyTorch 2.1 and later): they give NCCL's figures, with the GPU time as latency.
//! gloo has no kernels: its `gloo:<op>` annotations run on gloo's own threads, with the
//! tensor's shape and type when the trace recorded shapes; their CPU time is the latency.
//! `nccl:<op>` annotations (the CPU side of a launch) count only when the trace has no NCCL
//! kernel, e.g. one recorded without CUDA activity.

use super::{intersection, length, merge, nearest_rank};
use std::collections::{BTreeMap, HashMap};
use system_profile_model::collectives::{CollectiveOp, Collectives};
use system_profile_model::trace::{SyncBasis, SyncPoint};

/// One collective call.
struct Call {
    backend: &'static str,
    op: String,
    bytes: Option<u64>,
    group_size: Option<u32>,
    ts: f64,
    dur: f64,
    tid: Option<u64>,
}

/// Busy time of one thread as disjoint intervals, merged as events arrive (a thread's events
/// come in time order, children inside their parents).
#[derive(Default)]
struct Busy {
    intervals: Vec<(f64, f64)>,
}

impl Busy {
    fn add(&mut self, start: f64, end: f64) {
        match self.intervals.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => self.intervals.push((start, end)),
        }
    }

    fn merged(&self) -> Vec<(f64, f64)> {
        merge(&mut self.intervals.clone())
    }
}

/// What one event says of a collective, as the trace's arguments give it.
#[derive(Default)]
pub(super) struct CommArgs<'a> {
    pub collective: Option<&'a str>,
    pub in_nelems: Option<u64>,
    pub dtype: Option<&'a str>,
    pub group_size: Option<u64>,
    /// `Input Dims` and `Input type` as JSON text (record_shapes).
    pub input_dims: Option<&'a str>,
    pub input_type: Option<&'a str>,
    /// The launch's correlation id (a kernel's step is its launch's).
    pub correlation: Option<u64>,
}

#[derive(Default)]
pub(super) struct CommAcc {
    kernels: Vec<Call>,
    annotations: Vec<Call>,
    threads: HashMap<u64, Busy>,
    /// The collectives that bound the ranks' clocks (every NCCL kernel, named or not; gloo's
    /// spans), with the correlation id that finds a kernel's launch.
    pub(super) sync: Vec<(SyncPoint, Option<u64>)>,
}

/// Bytes of one element of a PyTorch dtype, as traces spell it (`Float`, `float`,
/// `c10::BFloat16`, `long int`).
fn dtype_bytes(dtype: &str) -> Option<u64> {
    let t = dtype
        .trim()
        .trim_start_matches("c10::")
        .to_ascii_lowercase();
    Some(match t.as_str() {
        "double" | "long" | "long int" | "int64" | "complexfloat" | "unsigned long" => 8,
        "float" | "int" | "int32" | "unsigned int" => 4,
        "half" | "bfloat16" | "short" | "short int" | "int16" => 2,
        "byte" | "char" | "bool" | "unsigned char" | "signed char" | "int8" | "uint8" => 1,
        t if t.starts_with("float8") => 1,
        "complexdouble" => 16,
        _ => return None,
    })
}

/// `all_reduce` from `allreduce`, `_allgather_base`, `all_gather_into_tensor_coalesced`.
fn op_name(raw: &str) -> String {
    let t = raw.trim_start_matches('_').to_ascii_lowercase();
    let t = t
        .trim_end_matches("_coalesced")
        .trim_end_matches("_base")
        .trim_end_matches("_into_tensor");
    match t {
        "allreduce" => "all_reduce".into(),
        "allgather" => "all_gather".into(),
        "reducescatter" => "reduce_scatter".into(),
        "alltoall" | "all_to_all_single" | "alltoall_base" => "all_to_all".into(),
        "sendrecv" => "send_recv".into(),
        other => other.to_string(),
    }
}

/// The first tensor's bytes from `Input Dims` (`[[9352]]`) and `Input type` (`["float"]`).
fn bytes_of_inputs(dims: &str, types: &str) -> Option<u64> {
    let dims: Vec<Vec<u64>> = serde_json::from_str(dims).ok()?;
    let types: Vec<String> = serde_json::from_str(types).ok()?;
    let shape = dims.first().filter(|d| !d.is_empty())?;
    let size = dtype_bytes(types.first()?)?;
    Some(shape.iter().product::<u64>() * size)
}

impl CommAcc {
    fn sync_point(
        &mut self,
        basis: SyncBasis,
        ts: f64,
        dur: f64,
        bytes: Option<u64>,
        correlation: Option<u64>,
    ) {
        let point = SyncPoint {
            basis,
            step: None,
            start_us: ts,
            end_us: ts + dur,
            bytes,
        };
        self.sync.push((point, correlation));
    }

    /// An `X` event; `cat` and `name` as the trace has them.
    pub(super) fn add(
        &mut self,
        cat: &str,
        name: &str,
        ts: f64,
        dur: f64,
        tid: Option<u64>,
        a: &CommArgs<'_>,
    ) {
        let group_size = a.group_size.and_then(|g| u32::try_from(g).ok());
        match cat {
            "kernel" if name.starts_with("nccl") => {
                let bytes = a
                    .in_nelems
                    .zip(a.dtype.and_then(dtype_bytes))
                    .map(|(n, s)| n * s);
                self.sync_point(SyncBasis::NcclKernels, ts, dur, bytes, a.correlation);
                // Kernels without the collective's name (older PyTorch) stay kernels only.
                if let Some(c) = a.collective {
                    self.kernels.push(Call {
                        backend: "nccl",
                        op: op_name(c),
                        bytes,
                        group_size,
                        ts,
                        dur,
                        tid: None,
                    });
                }
            }
            "user_annotation" | "cpu_op" | "cpu_instant_event" => {
                let backend = if name.starts_with("gloo:") {
                    "gloo"
                } else if name.starts_with("nccl:") {
                    "nccl"
                } else {
                    if cat == "cpu_op" {
                        if let Some(t) = tid {
                            self.threads.entry(t).or_default().add(ts, ts + dur);
                        }
                    }
                    return;
                };
                let op = op_name(name.split_once(':').map_or(name, |(_, op)| op));
                let bytes = a
                    .input_dims
                    .zip(a.input_type)
                    .and_then(|(d, t)| bytes_of_inputs(d, t));
                // gloo's spans last until the transfer is done; `nccl:` ones only launch it.
                if backend == "gloo" && cat != "cpu_instant_event" {
                    self.sync_point(SyncBasis::GlooCollectives, ts, dur, bytes, None);
                }
                self.annotations.push(Call {
                    backend,
                    op,
                    bytes,
                    group_size,
                    ts,
                    dur,
                    tid,
                });
            }
            _ => {}
        }
    }

    /// `gpu_cutoff`: the window the GPU figures use (HTA's: GPU work before the last profiler
    /// step began, the last one being cut short by the profiler's stop); NCCL kernels outside
    /// it are left out so the collectives agree with the devices' communication time.
    pub(super) fn finish(self, gpu_cutoff: Option<f64>) -> Option<Collectives> {
        let has_kernels = !self.kernels.is_empty();
        let calls: Vec<&Call> = self
            .kernels
            .iter()
            .filter(|k| gpu_cutoff.is_none_or(|c| k.ts < c))
            .chain(
                self.annotations
                    .iter()
                    .filter(|c| c.backend == "gloo" || !has_kernels),
            )
            .collect();
        if calls.is_empty() {
            return None;
        }
        let mut by_op: BTreeMap<(&str, &str), Vec<&Call>> = BTreeMap::new();
        for c in &calls {
            by_op.entry((c.backend, c.op.as_str())).or_default().push(c);
        }
        let ops = by_op
            .into_iter()
            .map(|((backend, op), calls)| {
                let mut sizes: Vec<u64> = calls.iter().filter_map(|c| c.bytes).collect();
                sizes.sort_unstable();
                let mut durs: Vec<f64> = calls.iter().map(|c| c.dur).collect();
                durs.sort_by(f64::total_cmp);
                let sized_us: f64 = calls
                    .iter()
                    .filter(|c| c.bytes.is_some())
                    .map(|c| c.dur)
                    .sum();
                let bytes_total: u64 = sizes.iter().sum();
                let from_kernels = has_kernels && backend == "nccl";
                // An `nccl:` annotation times the launch on the CPU; the transfer runs later.
                let timed = from_kernels || backend == "gloo";
                CollectiveOp {
                    op: op.to_string(),
                    backend: backend.to_string(),
                    calls: calls.len() as u64,
                    sized_calls: sizes.len() as u64,
                    bytes_total,
                    bytes_p50: nearest_rank(&sizes, 0.50),
                    bytes_p95: nearest_rank(&sizes, 0.95),
                    latency_total_us: timed.then(|| durs.iter().sum()),
                    latency_p50_us: nearest_rank(&durs, 0.50).filter(|_| timed),
                    latency_p95_us: nearest_rank(&durs, 0.95).filter(|_| timed),
                    algbw_gbps: (timed && sized_us > 0.0)
                        .then(|| bytes_total as f64 / sized_us / 1e3),
                    group_size: calls.iter().find_map(|c| c.group_size),
                    source: if from_kernels {
                        "nccl kernels".into()
                    } else if timed {
                        format!("{backend} annotations")
                    } else {
                        "nccl annotations (launches: counts and sizes, no transfer time)".into()
                    },
                }
            })
            .collect();
        // CPU side: gloo's threads against the busiest thread that is not one of them.
        let gloo: Vec<&Call> = calls
            .iter()
            .copied()
            .filter(|c| c.backend == "gloo")
            .collect();
        let comm_threads: Vec<u64> = gloo.iter().filter_map(|c| c.tid).collect();
        let comm = merge(
            &mut gloo
                .iter()
                .map(|c| (c.ts, c.ts + c.dur))
                .collect::<Vec<_>>(),
        );
        let compute = self
            .threads
            .iter()
            .filter(|(t, _)| !comm_threads.contains(t))
            .map(|(_, b)| b.merged())
            .max_by(|a, b| length(a).total_cmp(&length(b)))
            .unwrap_or_default();
        let first = calls.iter().map(|c| c.ts).fold(f64::INFINITY, f64::min);
        let last = calls.iter().map(|c| c.ts + c.dur).fold(0.0, f64::max);
        Some(Collectives {
            ops,
            cpu_comm_us: length(&comm),
            cpu_compute_us: length(&compute),
            cpu_overlap_us: intersection(&comm, &compute),
            span_us: (last - first).max(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_percentiles() {
        assert_eq!(op_name("allreduce"), "all_reduce");
        assert_eq!(op_name("_allgather_base"), "all_gather");
        assert_eq!(op_name("all_gather_into_tensor_coalesced"), "all_gather");
        assert_eq!(op_name("broadcast"), "broadcast");
        assert_eq!(bytes_of_inputs("[[9352]]", r#"["float"]"#), Some(37_408));
        assert_eq!(
            bytes_of_inputs("[[2, 3]]", r#"["c10::BFloat16"]"#),
            Some(12)
        );
        assert_eq!(bytes_of_inputs("[[]]", r#"["TensorList"]"#), None);
    }
}
