//! `run_profiler`'s input: which method, against which target, with which options. The methods
//! are a closed set; `MethodSpec` says what each needs and yields, for the planner and the
//! runner alike.

pub use crate::artifact::{ArtifactKind, ArtifactSpec};
pub use crate::options::{AfterTrace, OptionName, ProfilerOptions, TorchSchedule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A measurement method `run_profiler` runs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `/usr/bin/time -v`: wall, user, sys, CPU%, max RSS, page faults, context switches.
    TimeV,
    /// `perf stat -x,`: counters (hardware where the machine has them, software otherwise).
    PerfStat,
    /// `perf record -g` + `perf script`, folded into a flame graph.
    PerfRecord,
    /// `strace -c -f`: the syscall table.
    StraceC,
    /// `python -m cProfile -o`: per-function rows.
    Cprofile,
    /// `py-spy record`: sampled Python stacks, flame graph, hotspots.
    PySpyRecord,
    /// `py-spy dump`: every thread's stack of a running process, once.
    PySpyDump,
    /// line_profiler on one function: per-line hits and time.
    LineProfiler,
    Vmstat,
    Iostat,
    Pidstat,
    Mpstat,
    /// Our own /proc sampler of a process tree: CPU, RSS, threads, context switches, I/O.
    ProcfsSampler,
    /// One run under `time -v` with the procfs sampler (and the NVML sampler with a GPU).
    Measure,
    /// Any command, its output kept as an artifact.
    Custom,
    /// Python's tracemalloc around the target: current/peak bytes, top allocation sites.
    Tracemalloc,
    /// `memray run` + `memray stats --json`: peak, top allocators, flame graph HTML.
    Memray,
    /// Our allocation sampler (a C extension built for the target's interpreter): every Python
    /// allocation counted, one in about every 256 KiB written with its stack.
    AllocSample,
    /// memory_profiler on one function: per-line increments.
    MemoryProfiler,
    /// Our own NVML sampler: SM and memory utilisation, memory, PCIe/NVLink throughput, power.
    NvmlSampler,
    /// `nvidia-smi dmon`.
    NvidiaSmiDmon,
    /// `nvidia-smi --query-gpu=... --format=csv` on an interval.
    NvidiaSmiQuery,
    /// The target wrapped in `torch.profiler.profile`: a Kineto trace.
    TorchProfiler,
    /// `nsys profile` + `nsys stats`.
    Nsys,
    /// `nvidia-smi topo -m`: the GPU/NIC/CPU topology matrix.
    NvidiaSmiTopo,
    /// `nvidia-smi nvlink --status` (and counters): link states and speeds.
    NvlinkStatus,
    /// The target run with `NCCL_DEBUG=INFO`: transports, rings/trees, collectives.
    NcclDebug,
    /// `pyinstrument`: sampled Python stacks from inside the process (no ptrace), as a tree.
    Pyinstrument,
    /// Scalene: CPU (Python, native, system), memory and copy volume per line, in one run.
    Scalene,
    /// Our observers on every node of a cluster job, placed there by the job's own engine
    /// (Slurm: `srun --jobid --overlap`; Ray: an actor pinned to each node): each node's
    /// processes of the job, their CPU, memory and hottest Python functions per rank or actor,
    /// and the node's clock offset.
    ClusterNodes,
    /// A running LLM server (vLLM) over one window under load: its own /metrics (latency
    /// percentiles, token rates, queue, KV cache, preemptions), the load's client figures, and
    /// vLLM's profiler through its endpoints after the window when the server has them.
    ServingWindow,
}

/// How a method reaches its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetMode {
    /// Starts the target itself (`target.command`).
    Launch,
    /// Attaches to a running process (`target.pid`) for `duration_s`.
    Attach,
    /// Observes the machine for `duration_s`; the target argument names what is of interest.
    Machine,
    /// Reaches a cluster job's processes on every node it holds, through the job's engine,
    /// for `duration_s`.
    Cluster,
}

/// A family of metrics from the seed's step 3 (and the block timing of its step 2).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MetricFamily {
    /// CPU time over wall time.
    CpuUtilization,
    /// Voluntary and involuntary context switches.
    ContextSwitches,
    /// Per-function hotspots.
    CpuHotspots,
    /// Wall and CPU time of one function or block.
    BlockTiming,
    /// Syscalls, disk and network I/O.
    SyscallsIo,
    /// Process memory: RSS, peak, page faults.
    CpuMemory,
    /// Where memory is allocated (sites, sizes, counts).
    AllocationSites,
    /// GPU memory allocated, reserved and peak, per device (balance on multi-GPU).
    GpuMemory,
    /// The same data held on the CPU and on a GPU.
    RedundantCopies,
    /// CPU↔GPU transfers: count, size, total, effective bandwidth.
    HostDeviceTransfers,
    /// GPU↔GPU transfers: P2P bandwidth.
    PeerTransfers,
    /// NCCL collectives: op, message sizes, latency.
    NcclCollectives,
    /// Communication time over compute time, and their overlap.
    CommComputeRatio,
    /// NVLink vs PCIe paths between GPUs.
    Topology,
    /// SM utilisation.
    GpuUtilization,
    /// Kernel-launch overhead.
    KernelLaunchOverhead,
    /// Memory-bandwidth use against peak.
    MemoryBandwidth,
}

impl MetricFamily {
    pub const ALL: [MetricFamily; 17] = [
        MetricFamily::CpuUtilization,
        MetricFamily::ContextSwitches,
        MetricFamily::CpuHotspots,
        MetricFamily::BlockTiming,
        MetricFamily::SyscallsIo,
        MetricFamily::CpuMemory,
        MetricFamily::AllocationSites,
        MetricFamily::GpuMemory,
        MetricFamily::RedundantCopies,
        MetricFamily::HostDeviceTransfers,
        MetricFamily::PeerTransfers,
        MetricFamily::NcclCollectives,
        MetricFamily::CommComputeRatio,
        MetricFamily::Topology,
        MetricFamily::GpuUtilization,
        MetricFamily::KernelLaunchOverhead,
        MetricFamily::MemoryBandwidth,
    ];

    /// Needs an NVIDIA GPU to measure.
    pub fn needs_gpu(self) -> bool {
        matches!(
            self,
            MetricFamily::GpuMemory
                | MetricFamily::RedundantCopies
                | MetricFamily::HostDeviceTransfers
                | MetricFamily::PeerTransfers
                | MetricFamily::NcclCollectives
                | MetricFamily::CommComputeRatio
                | MetricFamily::Topology
                | MetricFamily::GpuUtilization
                | MetricFamily::KernelLaunchOverhead
                | MetricFamily::MemoryBandwidth
        )
    }
}

/// What `run_profiler` runs the method against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RunTarget {
    /// Start this argv (never through a shell unless `shell` is true).
    Command {
        command: Vec<String>,
        /// Run `command` as one shell string (`sh -c`); only when asked for.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shell: bool,
    },
    /// Attach to this running process.
    Pid { pid: u32 },
    /// Observe the whole machine for `duration_s` (`{"system": true}`): vmstat, iostat,
    /// mpstat, the GPU samplers, the topology.
    System { system: bool },
    /// The target `identify_target` returned (`{"target_id": "t1"}`): its command, or its one
    /// process. The server resolves it before the run; the record keeps what ran.
    Identified { target_id: String },
    /// A running Slurm job by id (`{"slurm_job": "1234"}`): its processes on every node.
    SlurmJob { slurm_job: String },
    /// A Ray job's live actors on every node of the cluster this machine belongs to
    /// (`{"ray_job": "02000000"}`; `""`: every job's).
    RayJob { ray_job: String },
}

/// Input of `run_profiler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunProfilerInput {
    /// The method to run.
    pub profiler: Method,
    /// A command to start (argv) or a running process (`pid`).
    pub target: RunTarget,
    /// Working directory of a started command (default: the server's root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Extra environment for a started command.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How long to observe (attach and machine modes; samplers alongside a command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub duration_s: Option<f64>,
    /// Kill the run (its whole process group) after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout_s: Option<f64>,
    #[serde(default, skip_serializing_if = "is_default_options")]
    pub options: ProfilerOptions,
    /// A name for the run in the manifest and the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Return a `run_id` at once; follow it with `get_run`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

impl RunProfilerInput {
    /// The methods this run runs: its profiler, then the methods observing it.
    pub fn methods(&self) -> impl Iterator<Item = Method> + '_ {
        std::iter::once(self.profiler).chain(self.options.observers.iter().copied())
    }

    /// Why its `options.observers` cannot be run, if they cannot: only the methods that
    /// watch from outside (`Method::OBSERVERS`) observe, and only a measure run.
    pub fn observers_refused(&self) -> Option<String> {
        let observers = &self.options.observers;
        if let Some(other) = observers.iter().find(|m| !Method::OBSERVERS.contains(m)) {
            let watchers: Vec<String> = Method::OBSERVERS.iter().map(|m| m.id()).collect();
            return Some(format!(
                "{} cannot observe another method's run; only {} can (run {} on its own)",
                other.id(),
                watchers.join(" and "),
                other.id()
            ));
        }
        (!observers.is_empty() && self.profiler != Method::Measure).then(|| {
            format!(
                "observers are read by measure, not {}: use profiler measure",
                self.profiler.id()
            )
        })
    }
}

fn is_default_options(o: &ProfilerOptions) -> bool {
    *o == ProfilerOptions::default()
}

/// How much a method slows its target down.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OverheadLevel {
    /// Outside the process or sampling at a low rate: under ~2%.
    Negligible,
    /// Sampling in or beside the process: ~2-10%.
    Low,
    /// Tracing every call or allocation: ~10-100%.
    Medium,
    /// Deterministic tracing or heavy instrumentation: 2x or more.
    High,
}

/// What a method needs, yields and costs.
#[derive(Debug, Clone, Copy)]
pub struct MethodSpec {
    pub method: Method,
    /// The `detect_tools` id of the tool it needs; `None` for built-in samplers.
    pub tool: Option<&'static str>,
    /// The ways it can reach a target.
    pub modes: &'static [TargetMode],
    /// Only for Python targets.
    pub python_only: bool,
    /// Needs an NVIDIA GPU.
    pub needs_gpu: bool,
    /// Needs torch in the target's interpreter.
    pub needs_torch: bool,
    /// Needs a function named in `options.function`.
    pub needs_function: bool,
    /// The options it reads (besides `output_cap_bytes`, which every started program reads);
    /// a plan's step keeps only these.
    pub options: &'static [OptionName],
    pub families: &'static [MetricFamily],
    pub overhead: OverheadLevel,
    /// The overhead in words, with the figure it rests on.
    pub overhead_note: &'static str,
    /// The files it writes; the runner names them from here.
    pub artifacts: &'static [ArtifactSpec],
    /// Attaching to a PID goes through ptrace (refused where `ptrace_scope` or the container
    /// forbids it).
    pub attaches_by_ptrace: bool,
    /// One reading, not a window: a plan gives it no `duration_s`.
    pub instant: bool,
    /// Methods whose measurement this one's includes: on the same target a plan keeps one.
    pub subsumes: &'static [Method],
    pub metrics: &'static [&'static str],
}

/// What a secret's value is recorded as.
pub const MASKED_VALUE: &str = "***";

pub use crate::secrets::is_secret_name;

/// The environment as it may be written down: secret-looking values masked. The child still
/// gets the real values; only records (the manifest, reports) see this.
pub fn masked_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret_name(k) {
                MASKED_VALUE.to_string()
            } else {
                // A URL's password (`DATABASE_URL=postgres://u:pw@h`) whatever the name.
                crate::secrets::Scrubber::default().text(v)
            };
            (k.clone(), v)
        })
        .collect()
}

use MetricFamily as F;
use TargetMode::{Attach, Cluster, Launch, Machine};

macro_rules! spec {
    ($m:ident, tool: $tool:expr, modes: $modes:expr, python_only: $py:expr, gpu: $gpu:expr,
     torch: $torch:expr, function: $func:expr, options: [$($opt:ident),* $(,)?], families: $fam:expr, overhead: $lvl:ident, $note:literal,
     artifacts: [$(($kind:ident, $file:literal)),* $(,)?], metrics: $met:expr
     $(, attaches_by_ptrace: $ptrace:literal)? $(, instant: $instant:literal)?
     $(, subsumes: [$($sub:ident),*])?) => {
        MethodSpec {
            method: Method::$m,
            tool: $tool,
            modes: $modes,
            python_only: $py,
            needs_gpu: $gpu,
            needs_torch: $torch,
            needs_function: $func,
            options: &[$(OptionName::$opt),*],
            families: $fam,
            overhead: OverheadLevel::$lvl,
            overhead_note: $note,
            artifacts: &[$(ArtifactSpec { kind: ArtifactKind::$kind, file: $file }),*],
            metrics: $met,
            attaches_by_ptrace: false $(|| $ptrace)?,
            instant: false $(|| $instant)?,
            subsumes: &[$($(Method::$sub),*)?],
        }
    };
}

const SPECS: &[MethodSpec] = &[
    spec!(TimeV, tool: Some("time"), modes: &[Launch], python_only: false, gpu: false, torch: false, function: false, options: [],
        families: &[F::CpuUtilization, F::ContextSwitches, F::CpuMemory], overhead: Negligible,
        "none measurable: reads the kernel's rusage once at exit",
        artifacts: [(TimeV, "time-v.txt")], metrics: &["wall_s", "user_s", "sys_s", "cpu_percent", "max_rss_bytes", "major_faults", "minor_faults", "voluntary_ctx_switches", "involuntary_ctx_switches"]),
    spec!(PerfStat, tool: Some("perf"), modes: &[Launch, Attach], python_only: false, gpu: false, torch: false, function: false, options: [Events],
        families: &[F::CpuUtilization, F::ContextSwitches], overhead: Negligible,
        "under 1%: counting, not sampling",
        artifacts: [(PerfStatCsv, "perf-stat.csv")], metrics: &["counters", "ipc", "cpu_utilization", "context_switches", "cpu_migrations", "page_faults"]),
    spec!(PerfRecord, tool: Some("perf"), modes: &[Launch, Attach], python_only: false, gpu: false, torch: false, function: false, options: [RateHz, Events, Subprocesses],
        families: &[F::CpuHotspots], overhead: Low,
        "2-5% at the default 99 Hz with call graphs",
        artifacts: [(PerfData, "perf.data"), (PerfScript, "perf.script"), (Folded, "perf.folded"), (FlamegraphSvg, "flamegraph.svg")], metrics: &["top_symbols_self", "top_symbols_total"]),
    spec!(StraceC, tool: Some("strace"), modes: &[Launch, Attach], python_only: false, gpu: false, torch: false, function: false, options: [Subprocesses],
        families: &[F::SyscallsIo], overhead: High,
        "2x or more for syscall-heavy targets: every syscall stops the tracee",
        artifacts: [(StraceC, "strace-c.txt")], metrics: &["syscalls", "top_syscalls_by_time", "errors"], attaches_by_ptrace: true),
    spec!(Cprofile, tool: Some("cprofile"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [],
        families: &[F::CpuHotspots], overhead: High,
        "1.3-2x for call-heavy code: deterministic, every call is hooked",
        artifacts: [(Pstats, "cprofile.pstats"), (CprofileJson, "cprofile.json")], metrics: &["functions_by_tottime", "functions_by_cumtime"]),
    spec!(PySpyRecord, tool: Some("py_spy"), modes: &[Launch, Attach], python_only: true, gpu: false, torch: false, function: false, options: [RateHz, Native, Subprocesses, Gil, Idle],
        families: &[F::CpuHotspots], overhead: Negligible,
        "about 1% at 100 Hz: samples from outside the process",
        artifacts: [(Folded, "py-spy.folded"), (FlamegraphSvg, "flamegraph.svg")], metrics: &["hotspots_self", "hotspots_total", "samples", "threads"], attaches_by_ptrace: true),
    spec!(PySpyDump, tool: Some("py_spy"), modes: &[Attach], python_only: true, gpu: false, torch: false, function: false, options: [],
        families: &[F::CpuHotspots], overhead: Negligible,
        "one pause of a few milliseconds",
        artifacts: [(PySpyDumpJson, "py-spy-dump.json")], metrics: &["threads", "stacks"], attaches_by_ptrace: true, instant: true),
    spec!(LineProfiler, tool: Some("line_profiler"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: true, options: [Function],
        families: &[F::CpuHotspots, F::BlockTiming], overhead: High,
        "2-10x inside the profiled function only; the rest runs at full speed",
        artifacts: [(Lprof, "line_profiler.lprof"), (LineProfilerJson, "line_profiler.json")], metrics: &["lines", "total_time_s"]),
    spec!(Vmstat, tool: Some("vmstat"), modes: &[Machine], python_only: false, gpu: false, torch: false, function: false, options: [IntervalS],
        families: &[F::ContextSwitches, F::CpuUtilization, F::SyscallsIo, F::CpuMemory], overhead: Negligible,
        "none: reads /proc once per interval",
        artifacts: [(Stdout, "stdout.txt")], metrics: &["run_queue", "context_switches_per_s", "iowait_percent", "free_bytes", "swap_in_bytes_per_s", "swap_out_bytes_per_s"]),
    spec!(Iostat, tool: Some("iostat"), modes: &[Machine], python_only: false, gpu: false, torch: false, function: false, options: [IntervalS],
        families: &[F::SyscallsIo], overhead: Negligible,
        "none: reads /proc/diskstats once per interval",
        artifacts: [(Stdout, "stdout.txt")], metrics: &["device_utilization_percent", "read_bytes_per_s", "write_bytes_per_s", "await_ms"]),
    spec!(Pidstat, tool: Some("pidstat"), modes: &[Attach, Machine], python_only: false, gpu: false, torch: false, function: false, options: [IntervalS],
        families: &[F::CpuUtilization, F::ContextSwitches, F::SyscallsIo, F::CpuMemory], overhead: Negligible,
        "none: reads /proc once per interval",
        artifacts: [(Stdout, "stdout.txt")], metrics: &["cpu_percent", "cswch_per_s", "nvcswch_per_s", "rss_bytes", "minflt_per_s", "majflt_per_s", "read_kb_per_s", "write_kb_per_s"]),
    spec!(Mpstat, tool: Some("mpstat"), modes: &[Machine], python_only: false, gpu: false, torch: false, function: false, options: [IntervalS],
        families: &[F::CpuUtilization], overhead: Negligible,
        "none: reads /proc/stat once per interval",
        artifacts: [(Stdout, "stdout.txt")], metrics: &["per_cpu_utilization", "iowait_percent", "steal_percent"]),
    spec!(ProcfsSampler, tool: None, modes: &[Launch, Attach], python_only: false, gpu: false, torch: false, function: false, options: [RateHz],
        families: &[F::CpuUtilization, F::ContextSwitches, F::CpuMemory, F::SyscallsIo], overhead: Negligible,
        "under 1% of a core at 100 Hz for a 10-process tree: reads /proc from outside",
        artifacts: [(ProcfsJsonl, "procfs.jsonl")], metrics: &["cpu_utilization", "rss_peak_bytes", "voluntary_ctx_switches", "involuntary_ctx_switches", "read_bytes", "write_bytes", "threads"]),
    spec!(Measure, tool: Some("time"), modes: &[Launch], python_only: false, gpu: false, torch: false, function: false, options: [RateHz, Gpu, Gpus, Observers, Events, Native, Gil, Idle],
        families: &[F::CpuUtilization, F::ContextSwitches, F::CpuMemory, F::SyscallsIo], overhead: Negligible,
        "under 1%: rusage at exit plus the /proc sampler (observers add theirs: py-spy about 1%, perf stat under 1%)",
        artifacts: [(TimeV, "time-v.txt"), (ProcfsJsonl, "procfs.jsonl"), (NvmlJsonl, "nvml.jsonl"), (Folded, "py-spy.folded"), (FlamegraphSvg, "flamegraph.svg"), (PerfStatCsv, "perf-stat.csv")], metrics: &["wall_s", "cpu_percent", "max_rss_bytes", "voluntary_ctx_switches", "involuntary_ctx_switches", "rss_timeline"], subsumes: [TimeV, ProcfsSampler]),
    spec!(Custom, tool: None, modes: &[Launch], python_only: false, gpu: false, torch: false, function: false, options: [],
        families: &[], overhead: Negligible,
        "whatever the command costs",
        artifacts: [(Stdout, "stdout.txt"), (Stderr, "stderr.txt")], metrics: &["exit_code", "wall_s"]),
    spec!(Tracemalloc, tool: Some("tracemalloc"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [IntervalS, TracebackDepth],
        families: &[F::CpuMemory, F::AllocationSites], overhead: High,
        "every Python allocation of the script's own code is traced (its leading imports are not): 1.9x for memory_hog.py, 20x for the allocation-heavy cpu_hotspot.py (bench/tracemalloc_cost.py)",
        artifacts: [(TracemallocJson, "tracemalloc.json")], metrics: &["current_bytes", "peak_bytes", "top_sites_by_size", "top_sites_by_count"]),
    spec!(Memray, tool: Some("memray"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [Native, Leaks, Temporal, PythonAllocators, ShortLived, Schedule],
        families: &[F::CpuMemory, F::AllocationSites], overhead: High,
        "every allocation is recorded, pymalloc's too unless `python_allocators: false`: raytrace (pyperformance) ran 5.2x its time (capture 8.5 MB for 5 s), 3.1x with arenas only (bench/scalene_memory_vs_memray.py)",
        artifacts: [(MemrayBin, "memray.bin"), (MemrayStatsJson, "memray-stats.json"), (MemrayFlamegraphHtml, "memray-flamegraph.html"), (MemrayPeakCsv, "memray-peak.csv"), (MemrayShortLivedCsv, "memray-short-lived.csv"), (MemrayLeaksCsv, "memray-leaks.csv")], metrics: &["peak_bytes", "total_allocations", "top_allocations_by_size", "top_allocations_by_count", "allocator_distribution", "at_peak", "short_lived_large", "not_freed"]),
    spec!(AllocSample, tool: Some("cc"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [Leaks],
        families: &[F::CpuMemory, F::AllocationSites], overhead: Low,
        "every allocation through CPython's allocators is counted, one in about every 256 KiB recorded with its stack: json.tool ran 1.1x its time (bench/pipeline_wall.py); allocations that bypass CPython's allocators (numpy's and torch's buffers) are not seen",
        artifacts: [(AllocSamples, "alloc-samples.txt")], metrics: &["peak_bytes", "total_allocations", "total_bytes_allocated", "top_allocations_by_size", "at_peak", "short_lived_large", "not_freed"]),
    spec!(MemoryProfiler, tool: Some("memory_profiler"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: true, options: [Function],
        families: &[F::CpuMemory, F::AllocationSites], overhead: High,
        "10x or more inside the profiled function: RSS read on every line",
        artifacts: [(MemoryProfilerJson, "memory_profiler.json")], metrics: &["line_increments"]),
    spec!(NvmlSampler, tool: Some("nvml"), modes: &[Launch, Attach, Machine], python_only: false, gpu: true, torch: false, function: false, options: [RateHz, Gpus],
        families: &[F::GpuUtilization, F::GpuMemory, F::HostDeviceTransfers, F::PeerTransfers, F::MemoryBandwidth], overhead: Negligible,
        "under 1% of a core at 10 Hz per GPU: NVML queries from outside",
        artifacts: [(NvmlJsonl, "nvml.jsonl")], metrics: &["sm_utilization", "memory_used_bytes", "memory_utilization", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "power_w", "per_device_balance"]),
    spec!(NvidiaSmiDmon, tool: Some("nvidia_smi_dmon"), modes: &[Launch, Attach, Machine], python_only: false, gpu: true, torch: false, function: false, options: [IntervalS, DmonColumns],
        families: &[F::GpuUtilization, F::GpuMemory, F::HostDeviceTransfers, F::MemoryBandwidth], overhead: Negligible,
        "none measurable at 1 s intervals",
        artifacts: [(Dmon, "dmon.txt")], metrics: &["sm_percent", "mem_percent", "fb_used_mb", "pcie_rx_mb_per_s", "pcie_tx_mb_per_s"]),
    spec!(NvidiaSmiQuery, tool: Some("nvidia_smi"), modes: &[Launch, Attach, Machine], python_only: false, gpu: true, torch: false, function: false, options: [IntervalS, QueryFields],
        families: &[F::GpuUtilization, F::GpuMemory], overhead: Negligible,
        "none measurable at 1 s intervals",
        artifacts: [(NvidiaSmiQueryCsv, "nvidia-smi-query.csv")], metrics: &["utilization_gpu", "memory_used_bytes", "power_w", "clocks"]),
    spec!(TorchProfiler, tool: Some("torch_profiler"), modes: &[Launch], python_only: true, gpu: false, torch: true, function: false, options: [RecordShapes, ProfileMemory, WithStack, Schedule],
        families: &[F::GpuUtilization, F::KernelLaunchOverhead, F::HostDeviceTransfers, F::PeerTransfers, F::GpuMemory, F::CommComputeRatio, F::NcclCollectives, F::CpuHotspots], overhead: Medium,
        "10-30% while active; a schedule keeps it to a few steps, and `after_trace: end_program` ends the run after them",
        artifacts: [(KinetoTrace, "trace[-rank<r>][-<n>].json.gz"), (TorchProfilerState, "torch-profiler[-rank<r>].json"), (MergedTrace, "trace-merged.json.gz")], metrics: &["kernels_by_time", "copies", "launch_overhead", "gpu_idle_s", "comm_compute_overlap", "cpu_ops", "step_window"]),
    spec!(Nsys, tool: Some("nsys"), modes: &[Launch], python_only: false, gpu: true, torch: false, function: false, options: [NsysTrace],
        families: &[F::GpuUtilization, F::KernelLaunchOverhead, F::HostDeviceTransfers, F::PeerTransfers, F::NcclCollectives, F::CommComputeRatio], overhead: Low,
        "5-10% with cuda,nvtx tracing",
        artifacts: [(NsysRep, "report.nsys-rep"), (NsysStats, "nsys-stats.txt")], metrics: &["cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "cuda_api_sum", "nvtx_sum"]),
    spec!(NvidiaSmiTopo, tool: Some("nvidia_smi_topo"), modes: &[Machine], python_only: false, gpu: true, torch: false, function: false, options: [],
        families: &[F::Topology], overhead: Negligible,
        "none: one query",
        artifacts: [(NvidiaSmiTopo, "topo.txt")], metrics: &["matrix", "pcie_pairs", "nvlink_pairs", "numa_affinity"], instant: true),
    spec!(NvlinkStatus, tool: Some("nvidia_smi_nvlink"), modes: &[Machine], python_only: false, gpu: true, torch: false, function: false, options: [],
        families: &[F::Topology, F::PeerTransfers], overhead: Negligible,
        "none: one query",
        artifacts: [(NvidiaSmiNvlink, "nvlink-status.txt"), (NvlinkCountersStart, "nvlink-counters-start.txt"), (NvlinkCountersEnd, "nvlink-counters-end.txt")], metrics: &["links", "link_speed_gbps", "inactive_links"], instant: true),
    spec!(NcclDebug, tool: Some("nccl"), modes: &[Launch], python_only: false, gpu: true, torch: false, function: false, options: [NcclSubsys],
        families: &[F::NcclCollectives, F::Topology, F::PeerTransfers], overhead: Low,
        "a few % with INIT; COLL logs every collective and costs more",
        artifacts: [(NcclLog, "nccl.<host>.<pid>.log")], metrics: &["ranks", "transports", "rings", "trees", "collectives_by_op", "message_size_distribution"]),
    spec!(Pyinstrument, tool: Some("pyinstrument"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [RateHz],
        families: &[F::CpuHotspots], overhead: Low,
        "about 5% at its 1 ms interval: a profiling hook in the process reads the stack (bench/method_cost.py)",
        artifacts: [(PyinstrumentSession, "pyinstrument.pyisession"), (Folded, "pyinstrument.folded"), (FlamegraphSvg, "flamegraph.svg")], metrics: &["hotspots_self", "hotspots_total", "wall_s"]),
    spec!(Scalene, tool: Some("scalene"), modes: &[Launch], python_only: true, gpu: false, torch: false, function: false, options: [ProfileMemory],
        families: &[F::CpuHotspots, F::CpuMemory, F::AllocationSites], overhead: Medium,
        "its allocator is preloaded and samples every ~1 MB allocated; CPU by signals every 10 ms (bench/method_cost.py)",
        artifacts: [(ScaleneJson, "scalene.json")], metrics: &["hotspots_self", "line_cpu_percent", "line_malloc_bytes", "line_copy_mb_per_s", "max_footprint_bytes"]),
    spec!(ClusterNodes, tool: Some("srun"), modes: &[Cluster], python_only: false, gpu: false, torch: false, function: false, options: [RateHz],
        families: &[F::CpuUtilization, F::CpuMemory, F::CpuHotspots], overhead: Low,
        "the /proc sampler and py-spy from outside each rank on every node: py-spy's sampling only (bench/bench.py); placing the node part costs srun's step start (a second or two) or Ray's upload of the binary in the job's runtime environment (a minute for the 230 MB debug build)",
        artifacts: [(NodesJson, "nodes.json")], metrics: &["per_node_clock_offset_s", "per_rank_cpu_s", "per_rank_rss_peak_bytes", "per_rank_top_functions", "stragglers"]),
    spec!(ServingWindow, tool: None, modes: &[Attach], python_only: true, gpu: false, torch: false, function: false, options: [EngineProfileS],
        families: &[F::CpuUtilization, F::BlockTiming], overhead: Low,
        "/metrics read once a second; our load (8 streams) only where none was arriving, and it is the load, not a cost; vLLM's profiler runs 2 s after the window, never inside it, and its stop takes ~10 s per profiled second on a CPU build",
        artifacts: [(ServingMetrics, "serving-metrics.txt"), (ServingRequests, "serving-requests.jsonl"), (ServingWindowJson, "serving-window.json"), (KinetoTrace, "vllm-<trace>.pt.trace.json.gz"), (TorchTable, "vllm-<rank>.profiler_out.txt")], metrics: &["requests_per_s", "generation_tokens_per_s", "ttft", "itl", "e2e", "queue", "prefill", "decode", "kv_cache_percent", "preemptions", "client", "engine_steps"]),
];

impl Method {
    /// Every method, in `SPECS` order (the enum's order).
    pub const ALL: [Method; SPECS.len()] = {
        let mut all = [Method::TimeV; SPECS.len()];
        let mut i = 0;
        while i < SPECS.len() {
            all[i] = SPECS[i].method;
            i += 1;
        }
        all
    };

    /// What the method needs, yields and costs.
    pub fn spec(self) -> &'static MethodSpec {
        // SPECS is in `ALL` order; the unit test keeps it so.
        &SPECS[self as usize]
    }

    /// The id used on the wire (`py_spy_record`).
    pub fn id(self) -> String {
        crate::wire_name(&self)
    }

    /// The methods that can observe a run of another (`options.observers`): from outside,
    /// without changing the program or each other's figures.
    pub const OBSERVERS: [Method; 2] = [Method::PySpyRecord, Method::PerfStat];

    /// The files a run of this method writes with these observers: a file an observer writes
    /// is listed only when that observer is there.
    pub fn artifacts_with(self, observers: &[Method]) -> Vec<&'static ArtifactSpec> {
        let spec = self.spec();
        let takes_observers = spec.options.contains(&OptionName::Observers);
        spec.artifacts
            .iter()
            .filter(|a| {
                let by: Vec<Method> = Method::OBSERVERS
                    .into_iter()
                    .filter(|o| o.spec().artifacts.iter().any(|x| x.kind == a.kind))
                    .collect();
                !takes_observers || by.is_empty() || by.iter().any(|o| observers.contains(o))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_in_method_order() {
        for (i, m) in Method::ALL.iter().enumerate() {
            assert_eq!(*m as usize, i);
            assert_eq!(m.spec().method, *m);
            assert!(!m.spec().modes.is_empty(), "{m:?}");
            let s = m.spec();
            // Facts that only make sense together.
            if s.attaches_by_ptrace {
                assert!(s.modes.contains(&TargetMode::Attach), "{m:?}");
            }
            for sub in s.subsumes {
                assert_ne!(sub, m, "{m:?}");
                // What it subsumes, it measures: every family of the other is one of its own.
                assert!(
                    sub.spec().families.iter().all(|f| s.families.contains(f)),
                    "{m:?} subsumes {sub:?}"
                );
            }
        }
        assert_eq!(
            Method::Measure.spec().subsumes,
            &[Method::TimeV, Method::ProcfsSampler]
        );
        let ptrace: Vec<Method> = Method::ALL
            .into_iter()
            .filter(|m| m.spec().attaches_by_ptrace)
            .collect();
        assert_eq!(
            ptrace,
            vec![Method::StraceC, Method::PySpyRecord, Method::PySpyDump]
        );
    }

    #[test]
    fn targets_decode_by_shape() {
        let t: RunTarget = serde_json::from_str(r#"{"pid": 42}"#).unwrap();
        assert_eq!(t, RunTarget::Pid { pid: 42 });
        let t: RunTarget = serde_json::from_str(r#"{"command": ["python3", "x.py"]}"#).unwrap();
        assert_eq!(
            t,
            RunTarget::Command {
                command: vec!["python3".into(), "x.py".into()],
                shell: false
            }
        );
        assert_eq!(Method::PySpyRecord.id(), "py_spy_record");
        assert_eq!(Method::TimeV.id(), "time_v");
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// The method ran to its end (the target's exit, or the observation window).
    Completed,
    /// The profiler or the target failed; what was measured up to then is kept.
    Failed,
    /// `timeout_s` passed and the run's process group was killed.
    TimedOut,
    /// `cancel_run` (or the client's cancellation) stopped it.
    Cancelled,
}

/// A file a run left under `profile_output/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// Relative to the server's root.
    pub path: String,
    /// What it holds.
    pub kind: ArtifactKind,
    pub bytes: u64,
}

/// The typed metrics of a run; each method fills its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_v: Option<crate::metrics::TimeV>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procfs: Option<crate::metrics::ProcfsSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_stat: Option<crate::metrics::PerfStat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<crate::metrics::SyscallSummary>,
    /// Sampled stacks (py_spy_record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<crate::metrics::StackProfile>,
    /// Every thread's stack at one instant (py_spy_dump).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<crate::metrics::ThreadStack>>,
    /// Deterministic per-function profile (cprofile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<crate::metrics::CallProfile>,
    /// Per-line times of one function (line_profiler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_profile: Option<crate::metrics::LineProfile>,
    /// Per-line memory of one function (memory_profiler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_lines: Option<crate::metrics::MemoryLineProfile>,
    /// Python allocations (tracemalloc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_memory: Option<crate::metrics::PythonMemoryProfile>,
    /// Every allocation, Python and native (memray).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<crate::metrics::AllocationProfile>,
    /// Interval reports (vmstat, iostat, mpstat, pidstat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysstat: Option<crate::metrics::SysstatReport>,
    /// GPUs over the run (nvml_sampler, measure on a GPU machine, nvidia_smi_dmon,
    /// nvidia_smi_query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::metrics::GpuSummary>,
    /// What NCCL said of its communicators, transports and collectives (nccl_debug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<crate::metrics::NcclReport>,
    /// The table an nccl-tests program printed (`all_reduce_perf`, ... run under nccl_debug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_tests: Option<crate::metrics::NcclTestsReport>,
    /// The GPU and NIC topology matrix (nvidia_smi_topo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::topology::GpuTopology>,
    /// NVLink status, and with a window the bytes each link carried (nvlink_status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<crate::metrics::NvLinkReport>,
    /// The Kineto trace the run wrote, analysed (torch_profiler); under a distributed
    /// launcher, the lowest rank's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::metrics::TraceAnalysis>,
    /// The steps the trace holds and what a step cost with and without the profiler
    /// (torch_profiler with a schedule; the lowest rank's under a launcher).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_window: Option<crate::metrics::StepWindow>,
    /// Under a distributed launcher: every rank's trace analysed, and their balance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<crate::trace::TraceReport>,
    /// CPU, memory and copying per line of the program (scalene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_usage: Option<crate::metrics::LineUsageProfile>,
    /// `nsys stats` of the run's report (nsys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nsys: Option<crate::metrics::NsysStats>,
    /// A cluster job seen on every node it holds (cluster_nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<crate::metrics::cluster::ClusterProfile>,
    /// An LLM server over one window under load: its own figures, the load's client's, and
    /// what an engine step is made of (serving_window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<crate::metrics::ServingWindow>,
}

/// One run, as `run_profiler`, `get_run` and `list_runs` return it and the session's
/// `manifest.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    pub run_id: String,
    pub session: String,
    pub profiler: Method,
    /// Methods that observed this same run from outside (`options.observers`): their
    /// figures and files are this record's, taken on the same run as the profiler's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<Method>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub status: RunStatus,
    pub target: RunTarget,
    /// What was really started (the profiler's argv around the target's).
    pub argv: Vec<String>,
    /// Absolute working directory of the started command.
    pub cwd: String,
    /// Environment added to the server's, with the values of secret-looking variables
    /// (tokens, keys, passwords) replaced by `MASKED_VALUE` (see `masked_env`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    pub started_at_unix_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_unix_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The run's folder, relative to the server's root.
    pub dir: String,
    pub artifacts: Vec<Artifact>,
    pub metrics: RunMetrics,
    /// The last bytes of the target's output (the whole streams are artifacts).
    pub stdout_tail: String,
    pub stderr_tail: String,
    /// What the numbers lack or how far to trust them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why the run failed, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the method measured nothing of the target: its own program could not start
    /// (not installed, not permitted; the target never ran), or the target ended before the
    /// method could read it (py-spy on a program of a fraction of a second). A plan's pipeline
    /// runs the step's next method instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_started: Option<String>,
    /// Why the method could not start at all, as a kind to act on (the message is `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<RunErrorKind>,
    /// The step's method this run stands in for, and why that one measured nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead_of: Option<InsteadOf>,
}

impl RunRecord {
    /// The method whose stacks `metrics.stacks` are: py-spy when it observed the run.
    pub fn stacks_method(&self) -> Method {
        if self.observers.contains(&Method::PySpyRecord) {
            Method::PySpyRecord
        } else {
            self.profiler
        }
    }
}

/// Why a run could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunErrorKind {
    /// The target does not fit the method (a PID for a method that starts the target): change
    /// the target or the method.
    BadTarget,
    /// The profiler's program is not installed or not permitted: install or permit it
    /// (`detect_tools` says how), or use the step's fallback.
    ToolUnavailable,
    /// The run's folder could not be written.
    Io,
    /// The target ended before the method could read it (py-spy on a program of a fraction of
    /// a second): a method that starts inside the target sees it.
    MissedTarget,
}

/// The method a run replaced, and why that one could not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InsteadOf {
    pub method: Method,
    /// Its run, failed to start (kept in the session with its error).
    pub run_id: String,
    pub why: String,
}

/// Input of `get_run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetRunInput {
    pub run_id: String,
    /// Wait up to this long for a running run to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 3600.0))]
    pub wait_s: Option<f64>,
}

/// Input of `list_runs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRunsInput {
    /// Only runs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
}

/// Output of `list_runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunList {
    pub session: String,
    /// The session's folder, relative to the server's root.
    pub dir: String,
    /// CPUs the server could run on (for CPU use per core in the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_cpus: Option<u32>,
    pub runs: Vec<RunRecord>,
    /// Steps of the plan `profile` followed that it did not run, and why (an earlier run
    /// showed they would find nothing worth their cost, or the budget was spent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<StepNotRun>,
}

/// A planned step left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepNotRun {
    /// The plan's step id (`s2`).
    pub step: String,
    pub method: Method,
    /// The step's title in the plan.
    pub title: String,
    pub reason: String,
}

/// The runs of a session as `list_runs` gives them: one brief line each; `get_run` has a
/// run's whole record, `manifest.json` every record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunIndex {
    pub session: String,
    /// The session's folder, relative to the server's root.
    pub dir: String,
    pub runs: Vec<RunBrief>,
}

/// One run in brief: which it is, on what, and how it went. `run_profiler`, `cancel_run` and
/// `list_runs` answer with it; `get_run` has the whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunBrief {
    pub run_id: String,
    /// The session folder the run is in (under `profile_output/`).
    pub session: String,
    pub profiler: Method,
    /// Methods that observed the same run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<Method>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub status: RunStatus,
    pub target: RunTarget,
    pub started_at_unix_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The run's folder, relative to the server's root.
    pub dir: String,
    /// Warnings its record holds.
    pub warnings: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&RunRecord> for RunBrief {
    fn from(r: &RunRecord) -> Self {
        RunBrief {
            run_id: r.run_id.clone(),
            session: r.session.clone(),
            profiler: r.profiler,
            observers: r.observers.clone(),
            label: r.label.clone(),
            status: r.status,
            target: r.target.clone(),
            started_at_unix_s: r.started_at_unix_s,
            wall_s: r.wall_s,
            exit_code: r.exit_code,
            dir: r.dir.clone(),
            warnings: r.warnings.len() as u32,
            error: r.error.clone(),
        }
    }
}

impl From<&RunList> for RunIndex {
    fn from(l: &RunList) -> Self {
        RunIndex {
            session: l.session.clone(),
            dir: l.dir.clone(),
            runs: l.runs.iter().map(RunBrief::from).collect(),
        }
    }
}

/// Input of `cancel_run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRunInput {
    pub run_id: String,
}
