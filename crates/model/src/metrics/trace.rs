//! Trace metrics: a torch.profiler (Kineto) trace's analysis and Nsight Systems' `nsys stats`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One GPU's time in a trace, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceDeviceTime {
    pub device: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// From the first GPU event's start to the last one's end.
    pub span_us: f64,
    /// Time with at least one kernel, copy or set running (overlaps counted once).
    pub busy_us: f64,
    pub idle_us: f64,
    pub idle_percent: f64,
    /// Sums of event durations by kind (overlapping streams counted each).
    pub kernel_us: f64,
    pub memcpy_us: f64,
    pub memset_us: f64,
    /// Time with an NCCL kernel running, time with another kernel running, and both at once.
    pub comm_us: f64,
    pub compute_us: f64,
    pub comm_compute_overlap_us: f64,
    /// Share of the communication time hidden under computation.
    pub comm_overlapped_percent: f64,
}

/// A kernel (by name) over the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceKernel {
    pub name: String,
    /// gemm, convolution, attention, nccl, elementwise, reduction, normalization, other.
    pub category: String,
    pub count: u64,
    pub total_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// Of all kernel time.
    pub percent: f64,
}

/// Kernel time of one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceCategory {
    pub category: String,
    pub count: u64,
    pub total_us: f64,
    pub percent: f64,
}

/// Copies in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceCopies {
    /// HtoD, DtoH, DtoD, PtoP (peer to peer), HtoH.
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    pub total_us: f64,
    /// bytes / total time, GB/s (10^9 bytes).
    pub bandwidth_gbps: f64,
    /// Counts by size: < 1 KiB, < 64 KiB, < 1 MiB, < 16 MiB, >= 16 MiB.
    pub size_buckets: Vec<u64>,
    /// Bytes of one copy, median and p95 (where each copy was seen: Kineto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p95: Option<u64>,
    /// Duration of one copy, median and p95, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us_p95: Option<f64>,
    /// Copies from or to pageable host memory (Kineto names them `Pageable`): each is staged
    /// through a pinned buffer by the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageable_count: Option<u64>,
    /// The bandwidth against the link it crossed (PCIe for HtoD/DtoH, NVLink for PtoP, device
    /// memory for DtoD), when the GPU model is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_peak: Option<crate::peaks::PeakUse>,
}

/// What launching kernels costs the CPU, against what the kernels take.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceLaunches {
    /// cudaLaunchKernel (and its variants) calls, and their summed CPU time.
    pub launches: u64,
    pub launch_api_us: f64,
    pub launch_api_mean_us: f64,
    /// Kernels, and their summed GPU time.
    pub kernels: u64,
    pub kernel_us: f64,
    /// Launch call start to kernel start, through the correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_to_start_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_to_start_p95_us: Option<f64>,
    /// Kernels shorter than 10 µs: where launch cost, not the GPU, sets the pace.
    pub short_kernels: u64,
    pub short_kernels_percent: f64,
}

/// Which GPU events the figures cover. With two `ProfilerStep#N` annotations or more, only
/// the work launched before the last step began (the last step is cut short when the profiler
/// stops): the window Holistic Trace Analysis uses, so the figures compare with its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceWindow {
    pub profiler_steps: u64,
    pub last_step_excluded: bool,
    /// Mean and longest profiler step, µs, over the steps that ran whole (not the last, which
    /// the profiler's stop cuts short): the step time the program would log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_max_us: Option<f64>,
    pub gpu_events_kept: u64,
    pub gpu_events_excluded: u64,
}

/// One Kineto (PyTorch profiler) trace, analysed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceAnalysis {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub events: u64,
    pub window: TraceWindow,
    pub devices: Vec<TraceDeviceTime>,
    pub categories: Vec<TraceCategory>,
    /// The kernels by total time, largest first (the first 50; the rest in `other_kernels`).
    pub kernels: Vec<TraceKernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_kernels: Option<TraceCategory>,
    pub copies: Vec<TraceCopies>,
    pub launches: TraceLaunches,
    /// Collective communication (gloo or NCCL), when the trace has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collectives: Option<crate::collectives::Collectives>,
    /// torch's operators (and `record_function` labels) on the CPU by self time, as
    /// torch.profiler's own table counts them (the first 30).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_ops: Vec<CpuOp>,
    /// The collectives one by one, in this rank's clock, for lining up the ranks' clocks
    /// (`parse::kineto::align`); held while the traces are compared, never stored.
    #[serde(skip)]
    #[schemars(skip)]
    pub sync_points: Vec<crate::trace::SyncPoint>,
}

/// One operator on the CPU: its calls, its time less its children's (self) and with them
/// (total), µs, its share of all operators' self time, and the input shapes that took most of
/// its self time (with `record_shapes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuOp {
    pub name: String,
    pub calls: u64,
    pub self_us: f64,
    pub total_us: f64,
    pub self_percent: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<String>,
    /// Each of `shapes`' share of all operators' self time (torch's table grouped by input
    /// shape), in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape_self_percent: Vec<f64>,
}

/// One row of an nsys API or OS runtime summary (cuda_api_sum, osrt_sum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysCall {
    pub name: String,
    pub calls: u64,
    pub total_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    /// nsys's `Time (%)`: share of the report's total.
    pub percent: f64,
}

/// One NVTX range of nvtx_sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysRange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    pub instances: u64,
    pub total_us: f64,
    pub mean_us: f64,
}

/// `nsys stats` reports, read into the tables the Kineto analysis uses where they mean the
/// same (kernels, categories, copies, launches), plus the API, OS runtime and NVTX summaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysStats {
    /// Reports read, by their nsys name (cuda_gpu_kern_sum, ...), and those nsys skipped.
    pub reports: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// From cuda_gpu_kern_sum; names as nsys printed them (it cuts long ones with `…`).
    pub kernels: Vec<TraceKernel>,
    pub categories: Vec<TraceCategory>,
    /// From cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum (nsys's MB are 10^6 bytes).
    pub copies: Vec<TraceCopies>,
    /// cudaLaunchKernel calls from cuda_api_sum against the kernels.
    pub launches: TraceLaunches,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_api: Vec<NsysCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os_runtime: Vec<NsysCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvtx: Vec<NsysRange>,
}
