//! `summarize` and `compare`: the report of step 6. Part A (CPU, memory, interconnect, GPU
//! compute, hotspots, recommendations), Part B (the change log), charts; every row cites the
//! run and the artifact it came from.

use crate::instrument::ChangeRow;
use crate::run::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod compare;
mod hotspots;

pub use compare::*;
pub use hotspots::*;

/// The language of a report's headings and sentences; numbers, names and paths are never
/// translated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    #[default]
    En,
    /// Japanese, the language of the seed.
    Ja,
}

/// What a report call returns as its text: the Markdown (default) or the JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    #[default]
    Markdown,
    Json,
}

/// Input of `summarize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeInput {
    /// A session folder under `profile_output/` (`20261202-130203-4121`); default: this
    /// server's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only these runs of the session; default: every run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    #[serde(default)]
    pub lang: Lang,
    /// What the call's text carries; both files are written either way.
    #[serde(default)]
    pub format: ReportFormat,
}

/// Where a figure came from: a run of the session and the file it was read from.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct Source {
    /// A run id, `trace` for a stored `analyze_trace` result, or `instrument` for the
    /// instrumentation log.
    pub run_id: String,
    /// Relative to the server's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
}

/// One run the report read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRef {
    pub run_id: String,
    pub profiler: Method,
    /// Methods that observed the same run (py-spy, perf stat on `measure`'s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<Method>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `completed`, `failed`, ...
    pub status: String,
    /// The target's command line, or `pid N`, or `system`.
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// The program was ended after this step, once its window was traced
    /// (`after_trace: end_program`): the wall is start-up and those steps, not the program's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_after_step: Option<u32>,
}

/// One process of a distributed job as the /proc sampler saw it: a rank, or the launcher
/// (agent) that started ranks, with the node it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankProcessRow {
    pub run_id: String,
    pub sources: Vec<Source>,
    /// `GROUP_RANK` of its ranks' environment: the node of the job it runs for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    /// Absent for an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    pub pid: u32,
    /// `rank` or `agent`.
    pub role: String,
    /// When the sampler first saw it (Unix time), and for how many seconds: its part of the
    /// run's window, which tells whether the nodes' figures cover the same time.
    pub seen_from_unix_s: f64,
    pub seen_s: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// (user + sys) / seen: cores it kept busy.
    pub cpu_utilization_cores: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_s: Option<f64>,
    pub rss_peak_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_peak_bytes: Option<u64>,
}

/// One run's CPU figures (`time -v`, `perf stat`, the /proc sampler).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuRow {
    pub run_id: String,
    pub sources: Vec<Source>,
    /// What the row's figures cover: which processes and threads, over which window.
    pub covers: Coverage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_s: Option<f64>,
    /// CPU time over wall time: cores kept busy on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilization_cores: Option<f64>,
    /// The same over the machine's logical CPUs, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilization_of_machine_percent: Option<f64>,
    /// Time runnable but not running (on a run queue, waiting for a CPU), summed over
    /// threads (schedstat), and the same per second of wall time: cores' worth of waiting for
    /// a CPU. Together with `cpu_utilization_cores` it is what the program wanted to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_cores: Option<f64>,
    /// Context switches where the source splits them (getrusage, /proc): voluntary (the
    /// thread blocked) and involuntary (it was preempted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_ctx_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_ctx_switches: Option<u64>,
    /// Context switches of both kinds, where the source does not split them (perf stat's
    /// `context-switches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_ctx_switches_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_ctx_switches_per_s: Option<f64>,
    /// Page faults: all, and those that read from disk (major) or not (minor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_migrations: Option<u64>,
    /// Instructions per cycle, where the machine has the counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
}

/// What a figure covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Coverage {
    pub scope: CoverageScope,
    /// Processes counted (at most; a tree's count is of those seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// Said in words: "pid 4121 and 3 children, every thread, 10.0 s".
    pub text: String,
}

/// Which processes a figure covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CoverageScope {
    /// The target and every descendant (a started command's tree, a sampled tree).
    #[default]
    Tree,
    /// The listed processes only, not their children.
    Processes,
    /// The whole machine.
    Machine,
}

/// One place in the code that allocated memory, from a run that traced allocations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AllocationSiteRow {
    pub run_id: String,
    pub source: Source,
    /// `tracemalloc` (bytes live at the heap's peak) or `memray` (bytes allocated over the
    /// run, freed or not).
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Relative to the root when under it.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Of the peak (live at the peak) or of all bytes allocated (allocated over the run), in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_percent: Option<f64>,
    /// What `bytes` counts.
    #[serde(default)]
    pub measure: SiteMeasure,
    /// The library frame that made most of the bytes on the program's behalf, as
    /// `function (file:line)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// `bytes` and `count` are estimates from one allocation sampled in about this many
    /// bytes (the allocation sampler); absent, they are counts of every allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_every_bytes: Option<u64>,
    /// The first and last of a training's steps the profile tracked, when it tracked a window
    /// of them (`options.schedule`) rather than the run: the peak and the bytes allocated are
    /// those steps'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_steps: Option<[u32; 2]>,
}

/// What an allocation site's bytes count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SiteMeasure {
    /// Bytes still live at the peak (tracemalloc's peak snapshot, memray's high-water mark,
    /// Scalene's per-line peak): what holding memory costs.
    #[default]
    LiveAtPeak,
    /// Bytes allocated over the run, freed or not: churn, which costs time.
    AllocatedOverRun,
    /// Large buffers (each at least glibc's 128 KiB mmap threshold) made and freed again soon
    /// after, over the run: churn that can cost page faults and system time on every one.
    ShortLivedLarge,
    /// Still allocated when tracking stopped, at the program's exit (memray's leak view).
    NotFreedAtExit,
}

/// The resident memory of one Python process at start, after its leading imports, and at its
/// peak. The start figures come from one run (`source`), the peak from another run of the same
/// command without a tracing profiler (`peak_source`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryBaseline {
    pub source: Source,
    /// The interpreter alone, before the script's first import.
    pub interpreter_rss_bytes: u64,
    /// Once the script's leading imports were done, before its own code ran.
    pub after_imports_rss_bytes: u64,
    /// The leading imports, the costliest first (the resident set each one added).
    pub imports: Vec<ImportRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_source: Option<Source>,
    /// The largest resident set of the program's process in `peak_source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// `peak_rss_bytes` less `after_imports_rss_bytes`: what the program's own code added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_added_bytes: Option<u64>,
    /// The share of the peak that was there before the program's code ran, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_share_percent: Option<f64>,
}

/// One leading import and the resident set it added.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportRow {
    pub module: String,
    pub rss_added_bytes: u64,
    pub wall_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One memory reading at a point `instrument_file` marked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryMarkRow {
    /// The run whose process wrote it.
    pub run_id: String,
    pub pid: u32,
    pub site: String,
    pub call: u64,
    /// `enter` or `exit`.
    pub point: String,
    /// Seconds since the run started.
    pub at_s: f64,
    pub rss_bytes: u64,
    /// The resident set when the process loaded the helper (the interpreter, before the
    /// program's imports when the helper came first), for reading the marks against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_at_load_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_allocated_bytes: Option<u64>,
}

/// Memory of one place (`cpu`, `cuda:0`) in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryRow {
    pub run_id: String,
    /// `cpu` or `cuda:N`.
    pub place: String,
    pub sources: Vec<Source>,
    /// Processes the CPU figures cover (a tree's, as the sampler saw it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// Resident set: the largest seen, and at the last reading of a process that was attached
    /// to (a started command's last reading is its exit, which says nothing). For a tree of
    /// several processes it is the largest sum at one reading, which counts a page shared by
    /// several processes (libraries, fork's copy-on-write) once per process: read it beside
    /// `pss_peak_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_peak_bytes: Option<u64>,
    /// The tree's proportional set size at its largest (each shared page divided among its
    /// sharers): what the tree really held. Read twice a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_peak_bytes: Option<u64>,
    /// The largest resident set of one process of the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_process_rss_peak_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_last_bytes: Option<u64>,
    /// Python heap at its peak (tracemalloc: Python objects; memray: every allocation), and
    /// still allocated at exit (tracemalloc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_peak_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_last_bytes: Option<u64>,
    /// torch's caching allocator on this GPU (instrumentation): allocated, reserved, peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_allocated_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_reserved_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_peak_allocated_bytes: Option<u64>,
    /// Memory used on the device as NVML / nvidia-smi saw it (every process), at its peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_used_peak_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_total_bytes: Option<u64>,
    /// Bytes of tensors held both on the CPU and on a GPU (instrumentation): every copy of
    /// a group that spans devices, counted on each place it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated_bytes: Option<u64>,
    /// Bytes held twice or more on this same place (every copy but one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated_same_place_bytes: Option<u64>,
    /// This device's share of the GPUs' peak memory, in % (1/N is even).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_gpus_percent: Option<f64>,
}

/// One kind of transfer: a copy direction or a collective.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterconnectRow {
    /// `H2D`, `D2H`, `D2D`, `P2P`, or a collective (`AllReduce`, ...).
    pub kind: String,
    /// The rank whose trace this row reads, for a collective of a distributed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub sources: Vec<Source>,
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p95: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_total: Option<u64>,
    /// Time of one transfer: median and p95 where each was timed, else the mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us_p95: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us_mean: Option<f64>,
    /// Total bytes over total time, GB/s (bus bandwidth for collectives where known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
    /// Summed time of the transfers, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// NVLink, PCIe Gen5 x16, device memory, network (from the topology and NCCL's transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The bandwidth against that link's peak, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_peak_percent: Option<f64>,
    /// Copies from pageable (not pinned) host memory, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageable_count: Option<u64>,
}

/// Communication against computation on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CommComputeRow {
    pub sources: Vec<Source>,
    pub device: String,
    pub comm_us: f64,
    pub compute_us: f64,
    /// comm / compute.
    pub ratio: f64,
    /// Share of the communication hidden under computation, in %.
    pub overlapped_percent: f64,
}

/// The interconnect table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterconnectTable {
    pub rows: Vec<InterconnectRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comm_compute: Vec<CommComputeRow>,
    /// How the GPUs are linked, in one line, when the topology was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// How evenly the ranks worked, per run (or analysed set of traces) with two ranks or more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub balance: Vec<RanksBalance>,
}

/// The ranks of one distributed run side by side, and which of them the others waited for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RanksBalance {
    pub sources: Vec<Source>,
    /// `GPU` (kernels) or `CPU` (operators and gloo's collectives).
    pub measured_on: String,
    pub rows: Vec<RankRow>,
    /// Largest compute time over the smallest: 1.0 is even.
    pub compute_imbalance: f64,
    pub stragglers: Vec<u32>,
    /// The rank whose trace clock the others' offsets are against, when they were lined up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_reference: Option<u32>,
    /// Every rank's trace on that rank's clock (the merged timeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_trace: Option<String>,
}

/// One rank's time, over its trace's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankRow {
    pub rank: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    pub compute_us: f64,
    pub comm_us: f64,
    /// The GPU's idle time; none on the CPU, where waiting is not told from other work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_us: Option<f64>,
    /// Its mean profiler step, µs: the step time every rank shares when they keep in step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_mean_us: Option<f64>,
    /// Its trace's clock minus the lowest rank's, µs, and the uncertainty, as the collectives
    /// they share bound it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_us: Option<f64>,
}

/// One GPU's compute figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuRow {
    /// `cuda:N`.
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub sources: Vec<Source>,
    /// Share of time a kernel ran (NVML / dmon), mean and p95, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util_mean_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util_p95_percent: Option<f64>,
    /// Share of time the memory controller was busy (NVML / dmon), mean, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_util_mean_percent: Option<f64>,
    /// Kernels in the trace and their summed time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_time_s: Option<f64>,
    /// GPU busy and idle over the trace's span, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_percent: Option<f64>,
    /// Mean CPU time of one launch call, µs, and the launch-to-start delay (p50), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_to_start_p50_us: Option<f64>,
    /// Kernels shorter than 10 µs, in % of kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_kernels_percent: Option<f64>,
    /// The fastest memory-bound transfer against the device's memory bandwidth peak, in %,
    /// with that peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_percent_of_peak: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_peak_gbps: Option<f64>,
}

/// How sure a recommendation is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// What a recommendation would save, as its rule estimated it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gain {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// Of the run's wall time, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_percent: Option<f64>,
    /// Of the CPU time a process attached to used in the window, in %: what a saving means
    /// for a service, whose observation window is not a duration to shorten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Of the memory it is part of (RSS peak, the GPU's memory), in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_percent: Option<f64>,
}

/// One recommendation, ordered by `impact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommendation {
    /// The rule that fired (`hot_python_function`, `pageable_h2d_copies`, ...).
    pub rule: String,
    pub title: String,
    /// The concrete change, with the numbers it rests on.
    pub action: String,
    /// The rows it rests on: table and key (`cpu r001-measure`, `hotspots work.py:12`).
    pub evidence: Vec<String>,
    pub sources: Vec<Source>,
    pub gain: Gain,
    pub confidence: Confidence,
    /// What the order is by: the larger of the time share and the memory share saved,
    /// times the confidence weight (high 1, medium 0.6, low 0.3).
    pub impact: f64,
}

/// A table left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Omitted {
    /// `cpu`, `memory`, `interconnect`, `gpu`, `hotspots`.
    pub table: String,
    pub reason: String,
}

/// A picture drawn from the samplers' time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Chart {
    /// `cpu`, `rss`, `gpu_util`, `gpu_memory`, `pcie`, `nvlink`.
    pub kind: String,
    pub title: String,
    pub run_id: String,
    /// The SVG, relative to the root.
    pub path: String,
    pub points: u64,
}

/// Part B: the ledger's changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeLog {
    pub rows: Vec<ChangeRow>,
    /// Files edited by someone else since the change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<String>,
    /// The sentence offering to undo every change (`revert_changes {"all": true}`).
    pub offer: String,
    /// Changes of other sessions left out (all reverted: an active one is always listed,
    /// whatever session made it, since it is in the files now).
    #[serde(default)]
    pub other_sessions_changes: u32,
}

/// The report of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    pub session: String,
    pub lang: Lang,
    pub runs: Vec<RunRef>,
    /// Planned steps `profile` left out, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<crate::run::StepNotRun>,
    /// Logical CPUs of the machine the session ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_cpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<CpuRow>,
    /// The ranks of a distributed job and their launchers, by node, per sampler run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_processes: Vec<RankProcessRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryRow>,
    /// Where the Python heap's bytes came from, the largest sites of each tracing run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocation_sites: Vec<AllocationSiteRow>,
    /// What the process held before its own code ran (interpreter, leading imports) against
    /// its resident peak: which part of the memory the program's code added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_baseline: Option<MemoryBaseline>,
    /// Memory at the points `instrument_file` marked, per run, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_marks: Vec<MemoryMarkRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<InterconnectTable>,
    /// A cluster job seen on every node, per run that observed one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub across_nodes: Vec<AcrossNodes>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu: Vec<GpuRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotspots: Option<HotspotTable>,
    /// torch's operators on the CPU, per torch.profiler run (its first rank's trace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub torch_ops: Vec<TorchOps>,
    /// An LLM server under load: its own figures over the window, what an engine step is made
    /// of, and each of its processes' CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<Serving>,
    pub recommendations: Vec<Recommendation>,
    /// Tables left out for want of data, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<Omitted>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<Chart>,
    pub changes: ChangeLog,
    /// What the figures lack (a run that failed, an artifact that could not be read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One torch.profiler run's operators on the CPU, by self time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TorchOps {
    pub source: Source,
    pub ops: Vec<crate::metrics::CpuOp>,
    /// How many times an unprofiled step a traced step took (a window of steps), else how
    /// many times the same command's run without a profiler this traced run took: far above
    /// torch.profiler's own cost (about 1.1×), the shares are a disturbance's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// The steps the trace holds, when it is a window of the training.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<crate::metrics::StepWindow>,
}

/// An LLM server over one window (`serving_window`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Serving {
    /// The run whose window the figures are (the longest).
    pub source: Source,
    pub window: crate::metrics::ServingWindow,
    /// The run whose profiler trace the engine step's parts come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_source: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_steps: Option<crate::metrics::EngineSteps>,
    /// What vLLM's profiler did (the engine-step run's, else the window's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiler: Option<crate::metrics::ServerProfiler>,
    /// Each process of the server, from the /proc sampler over the same window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ServingProcess>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_source: Option<Source>,
}

/// One process of a server over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServingProcess {
    pub pid: u32,
    /// Its name as the kernel shows it (`VLLM::Worker`), or its program.
    pub name: String,
    /// `api server` for the process the window attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// CPU time over the window's wall time.
    pub cpu_cores: f64,
    /// Runnable but not running, over the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_cores: Option<f64>,
    pub rss_peak_bytes: u64,
}

/// What one `cluster_nodes` run saw on a cluster job's nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AcrossNodes {
    pub source: Source,
    pub profile: crate::metrics::cluster::ClusterProfile,
}

/// Output of `summarize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummarizeOutput {
    pub report: Report,
    /// The report as Markdown (what `report.md` holds).
    pub markdown: String,
    /// `report.md` and `report.json`, relative to the root.
    pub markdown_path: String,
    pub json_path: String,
    /// What the call's text content carries: the Markdown, or the report as JSON.
    pub format: ReportFormat,
}

/// What `summarize` answers an MCP client with: the report's Markdown and where both files
/// are. The report's data is `report.json` (a resource), kept out of the answer so that the
/// tool's output schema does not repeat the whole report's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReportWritten {
    /// The report as Markdown (what `report.md` holds).
    pub markdown: String,
    /// `report.md` and `report.json`, relative to the root.
    pub markdown_path: String,
    pub json_path: String,
    /// What the call's text content carries: the Markdown, or the report as JSON.
    pub format: ReportFormat,
}

impl From<SummarizeOutput> for ReportWritten {
    fn from(o: SummarizeOutput) -> Self {
        ReportWritten {
            markdown: o.markdown,
            markdown_path: o.markdown_path,
            json_path: o.json_path,
            format: o.format,
        }
    }
}
