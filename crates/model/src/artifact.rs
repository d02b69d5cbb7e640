//! The files a run leaves in its folder, by what they hold. A method's `MethodSpec` names each
//! one it writes ([`ArtifactSpec`]); the runner takes the file name from there, the planner
//! shows it, and the report cites a run's artifact by its kind.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The variants' notes are plain comments: as doc comments they would triple the schema that
// every run's record carries to the model.
/// What an artifact holds; its wire name is the `kind` of a run's artifact.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    // The target's standard output, up to `options.output_cap_bytes`.
    Stdout,
    // The target's standard error, up to `options.output_cap_bytes`.
    Stderr,
    // `/usr/bin/time -v`'s report.
    TimeV,
    // The /proc sampler's timeline, one JSON line per process and tick.
    ProcfsJsonl,
    // The NVML sampler's timeline, one JSON line per GPU and tick.
    NvmlJsonl,
    // `perf stat -x,` counters.
    PerfStatCsv,
    // `perf record`'s capture.
    PerfData,
    // `perf script` of the capture.
    PerfScript,
    // Folded stacks (`frame;frame;frame weight`), the input of flame graphs.
    Folded,
    // A flame graph drawn from the folded stacks.
    FlamegraphSvg,
    // `strace -c`'s syscall table.
    StraceC,
    // cProfile's binary stats.
    Pstats,
    // cProfile's rows as JSON.
    CprofileJson,
    // `py-spy dump --json`.
    PySpyDumpJson,
    // line_profiler's binary stats.
    Lprof,
    // line_profiler's rows as JSON.
    LineProfilerJson,
    // memray's capture.
    MemrayBin,
    // `memray stats --json`.
    MemrayStatsJson,
    // memray's HTML flame graph.
    MemrayFlamegraphHtml,
    // `memray transform csv`: the allocations live at the peak, with their stacks.
    MemrayPeakCsv,
    // `memray transform csv --temporary-allocation-threshold`: allocations freed soon after
    // they were made (churn), with their stacks.
    MemrayShortLivedCsv,
    // `memray transform csv --leaks`: the allocations not freed when tracking stopped (asked
    // for with `leaks`), with their stacks.
    MemrayLeaksCsv,
    // The allocation sampler's records: the code objects, the sampled allocations with their
    // stacks, the sampled blocks' frees, the exact totals.
    AllocSamples,
    // What the observers on every node of a cluster job saw, gathered.
    NodesJson,
    // tracemalloc's snapshot summary as JSON.
    TracemallocJson,
    // memory_profiler's rows as JSON.
    MemoryProfilerJson,
    // `nvidia-smi dmon`'s table.
    Dmon,
    // `nvidia-smi --query-gpu` as CSV.
    NvidiaSmiQueryCsv,
    // A torch.profiler (Kineto) trace.
    KinetoTrace,
    // Every rank's trace on one clock, lined up on their common collectives.
    MergedTrace,
    // What the torch.profiler runner saw (steps, traces written, CUDA or not).
    TorchProfilerState,
    // Nsight Systems' report.
    NsysRep,
    // `nsys stats` of the report.
    NsysStats,
    // `nvidia-smi topo -m`.
    NvidiaSmiTopo,
    // `nvidia-smi nvlink -s`.
    NvidiaSmiNvlink,
    // `nvidia-smi nvlink -gt d` at the start of the window.
    NvlinkCountersStart,
    // `nvidia-smi nvlink -gt d` at its end.
    NvlinkCountersEnd,
    // One NCCL debug log per process.
    NcclLog,
    // pyinstrument's session.
    PyinstrumentSession,
    // Scalene's JSON profile.
    ScaleneJson,
    // A server's /metrics (Prometheus text), one scrape a second, each after `# sp-scrape <unix s>`.
    ServingMetrics,
    // Our load's requests, one JSON line each, timed on the client's clock.
    ServingRequests,
    // What the serving window did: whose load, the profiler's calls and the traces it copied.
    ServingWindowJson,
    // torch.profiler's own operator table (`key_averages().table()`).
    TorchTable,
    // A kind this build does not know (a record written by another version).
    #[serde(other)]
    Other,
}

/// One file a method writes: what it holds and its name in the run's folder (`<…>` marks a
/// part that varies: a host, a PID, a rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactSpec {
    pub kind: ArtifactKind,
    pub file: &'static str,
}
