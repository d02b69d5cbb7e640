//! Typed metrics that runs produce and parsers return: `/usr/bin/time -v`, `perf stat`,
//! `strace -c`, sampled stacks, the /proc sampler's summary and the memory profilers' views here;
//! GPU, interconnect and trace metrics in their own modules, re-exported.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod cluster;
mod gpu;
mod interconnect;
mod own_code;
mod serving;
mod trace;

pub use gpu::*;
pub use interconnect::*;
pub use own_code::{is_program_file, library_file, native_file};
pub use serving::*;
pub use trace::*;

/// What `/usr/bin/time -v` reports for one command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimeV {
    /// The command as time printed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub user_s: f64,
    pub sys_s: f64,
    /// Elapsed wall-clock time.
    pub wall_s: f64,
    /// time's own "Percent of CPU this job got" (CPU time over wall time, in %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// (user + sys) / wall: cores kept busy on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<f64>,
    /// Peak resident set of the largest process (time reports kbytes; this is bytes).
    pub max_rss_bytes: u64,
    pub major_faults: u64,
    pub minor_faults: u64,
    pub voluntary_ctx_switches: u64,
    pub involuntary_ctx_switches: u64,
    pub swaps: u64,
    /// Blocks read and written through the file system (512-byte units, as the kernel counts).
    pub fs_inputs: u64,
    pub fs_outputs: u64,
    pub signals_delivered: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size_bytes: Option<u64>,
    /// Exit status of the command; absent when a signal ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated_by_signal: Option<i32>,
}

impl TimeV {
    /// `cpu_utilization` from the times: (user + sys) / wall.
    pub fn set_utilization(&mut self) {
        self.cpu_utilization =
            (self.wall_s > 0.0).then(|| (self.user_s + self.sys_s) / self.wall_s);
    }

    /// time counts from the fork of its child: a program that first waited `held_s` at its
    /// gate (its observers starting, `system_profile_exec::gated`) began that much later, and
    /// its wall time and share of CPU count from then. time's own percentage goes with them.
    pub fn started_later_by(&mut self, held_s: f64) {
        self.wall_s = (self.wall_s - held_s).max(0.0);
        self.set_utilization();
        self.cpu_percent = self.cpu_utilization.map(|u| (u * 100.0).round());
    }
}

/// One counter of `perf stat -x,`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PerfCounter {
    /// The event as perf names it (`task-clock`, `cycles:u`).
    pub event: String,
    /// The thread or CPU the row is for (`--per-thread`, `-A`); absent for totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Absent when the counter is `<not supported>` or `<not counted>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The machine has this counter (false for `<not supported>`, typical of VMs).
    pub supported: bool,
    /// The counter ran (false for `<not counted>`).
    pub counted: bool,
    /// Time the counter was enabled, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_ns: Option<u64>,
    /// Share of that time it was really counting (multiplexing), in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_percent: Option<f64>,
    /// perf's derived metric on the same line (`0.844` `CPUs utilized`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_unit: Option<String>,
}

/// `perf stat -x,` output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PerfStat {
    pub counters: Vec<PerfCounter>,
    /// instructions / cycles, when both were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    /// task-clock over the wall time, as perf prints it ("CPUs utilized"): cores kept busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_utilized: Option<f64>,
    /// Events the machine does not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<String>,
    /// The processes it was attached to (`-p`), as they were at its start: perf counts their
    /// threads, not children they had then. Empty for a started command (perf follows every
    /// child it forks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached_pids: Vec<u32>,
}

/// One row of `strace -c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyscallRow {
    pub syscall: String,
    /// Share of the traced syscall time, in %.
    pub time_percent: f64,
    pub seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usecs_per_call: Option<f64>,
    pub calls: u64,
    pub errors: u64,
}

/// `strace -c` output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyscallSummary {
    /// Rows by time, as strace sorts them.
    pub rows: Vec<SyscallRow>,
    pub total_seconds: f64,
    pub total_calls: u64,
    pub total_errors: u64,
}

/// One process of a sampled tree, over the samples that saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessUsage {
    pub pid: u32,
    pub ppid: u32,
    pub name: String,
    pub cmdline: Vec<String>,
    /// Seconds after the sampler started that it was first and last seen.
    pub first_seen_s: f64,
    pub last_seen_s: f64,
    /// CPU time used while sampled (from /proc/<pid>/stat utime and stime).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub rss_peak_bytes: u64,
    pub rss_mean_bytes: u64,
    pub threads_peak: u32,
    /// Context switches while sampled, summed over every thread seen (each thread's
    /// /proc/<pid>/task/<tid>/status; threads are looked for once a second, so one born and
    /// ended between two looks is missed); absent when never readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_ctx_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_ctx_switches: Option<u64>,
    /// Time its threads were runnable but not running (waiting on a run queue for a CPU),
    /// summed over every thread seen, from /proc/<pid>/task/<tid>/schedstat; absent where the
    /// kernel has no schedstat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_s: Option<f64>,
    /// Time its main thread (the thread-group leader) was neither running nor runnable
    /// between the sampler's first and last readings of it (schedstat): blocked, waiting for
    /// I/O, a lock or another process. One thread's figure, so it cannot exceed the window as
    /// a sum over threads can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_thread_blocked_s: Option<f64>,
    /// Threads seen over the window (not at once).
    #[serde(default)]
    pub threads_seen: u32,
    /// Its largest proportional set size (read twice a second from smaps_rollup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_peak_bytes: Option<u64>,
    /// Storage bytes read and written while sampled (/proc/<pid>/io); absent when not readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u64>,
    /// It ended before the sampler did.
    pub exited: bool,
    /// Its place in a distributed job when it is a rank of one.
    #[serde(flatten)]
    pub ids: crate::target::RankIds,
}

/// What the /proc sampler saw of a process tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcfsSummary {
    pub root_pid: u32,
    pub wall_s: f64,
    pub samples: u64,
    pub rate_hz_requested: f64,
    pub rate_hz_achieved: f64,
    /// Sums over the processes of the CPU time they used: from birth for processes born while
    /// sampling (the started command and the children found later), from the first sample
    /// for older ones. A child that ends before the next discovery (every 100 ms at 100 Hz)
    /// is missed; `time -v` has the exact total.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// (user + sys) / wall: cores kept busy on average.
    pub cpu_utilization: f64,
    /// The largest sum of RSS over the tree at one sample. A page shared by several
    /// processes (libraries, fork's copy-on-write) counts once per process.
    pub rss_peak_bytes: u64,
    /// The largest sum of PSS over the tree at one reading (twice a second): each shared
    /// page divided among its sharers, so what the tree really holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_peak_bytes: Option<u64>,
    /// Time runnable but not running, summed over every thread of every process (schedstat);
    /// absent where the kernel has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_s: Option<f64>,
    /// Context switches summed over every thread of every process.
    pub voluntary_ctx_switches: u64,
    pub involuntary_ctx_switches: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Processes, by CPU time, most first.
    pub processes: Vec<ProcessUsage>,
    /// CPU time the sampler itself used: its observer effect.
    pub sampler_cpu_s: f64,
}

/// A function's share of sampled stacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionHotspot {
    pub function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line of its first sample on top of the stack (or anywhere, when never on top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Samples with this function on top: time spent in its own code.
    pub self_samples: u64,
    /// Samples with this function anywhere on the stack: time in it and what it called.
    pub total_samples: u64,
    pub self_percent: f64,
    pub total_percent: f64,
}

/// One source line's samples on top of the stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LineHotspot {
    pub function: String,
    pub file: String,
    pub line: u32,
    pub self_samples: u64,
    pub self_percent: f64,
}

/// Sampled call stacks (py-spy raw, `perf script` folded), summarised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StackProfile {
    pub total_samples: u64,
    /// Distinct stacks seen.
    pub stacks: u64,
    /// The hottest functions by self samples (at most 100), then by total.
    pub by_self: Vec<FunctionHotspot>,
    /// The hottest functions by total samples (at most 100).
    pub by_total: Vec<FunctionHotspot>,
    /// The hottest lines (at most 50).
    pub lines: Vec<LineHotspot>,
    /// Seconds one sample stands for, as the method was run (py-spy's and perf's `1/rate`,
    /// pyinstrument's microsecond weights, Scalene's share of the elapsed time); absent in
    /// records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_period_s: Option<f64>,
    /// Where the program's own code called into library code, most samples first (at most
    /// 50): absent where the stacks name no files (perf) or in records written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_sites: Vec<CallSite>,
    /// Native code on top of the stack by the program's call that ran it, most samples
    /// first (at most 20): where the stacks have native frames (`py-spy --native`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub native_calls: Vec<NativeCallSite>,
    /// Samples per thread, most first (at most 50), where the stacks name their threads
    /// (py-spy `--threads`, which runs with `--gil` ask for): under `--gil` a thread's samples
    /// are the times it held the GIL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadSamples>,
    /// Each sample is of the thread holding the GIL, and a tick with no holder has none
    /// (py-spy `--gil`): the samples over the ticks are the GIL's busy share.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gil_holders_only: bool,
}

impl StackProfile {
    /// Whether the sampler unwound native frames (`py-spy --native`, perf): any frame in a
    /// shared object or a C source. Without them a C call's time is its Python caller's own.
    pub fn has_native_frames(&self) -> bool {
        self.by_total
            .iter()
            .any(|f| f.file.as_deref().is_some_and(native_file))
    }
}

/// One thread's samples: `thread` as py-spy names it (`thread (27296): Thread-1 (work)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadSamples {
    /// Its process, where the stacks name it (py-spy `--subprocesses`): each has its own GIL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub thread: String,
    pub samples: u64,
}

/// How the library was reached from a call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallVia {
    /// A call of the program's own code.
    Call,
    /// An `import` statement: Python's import machinery is on the stack between (start-up
    /// work, not work the program asked a library for).
    Import,
}

/// Samples whose top frame is library code (a package's, the standard library's, or
/// native), by the deepest frame of the program's own code on the stack: the call that led
/// there, and the library function on top.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallSite {
    /// The program's frame: its function, its file, and the line it was on (the call).
    pub function: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The library function on top of those stacks, and its file (none for a native frame).
    pub library_function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_file: Option<String>,
    pub via: CallVia,
    pub samples: u64,
    /// Of all samples.
    pub percent: f64,
}

/// Samples with native code (C, C++) on top, by the deepest frame of the program's own code
/// beneath: one C call (`conn.execute(...)`) spreads over many C functions, so its cost is
/// their sum, which the capped `call_sites` cannot give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NativeCallSite {
    pub function: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub samples: u64,
    /// Of all samples.
    pub percent: f64,
    /// The heaviest native functions on top, most first (at most 4).
    pub functions: Vec<NativeFunction>,
}

/// A native function on top of the stack and its library (a shared object's name, or the C
/// source debug information names), with its share of all samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NativeFunction {
    pub function: String,
    pub library: String,
    pub percent: f64,
}

/// One frame of a thread's stack (innermost first in `ThreadStack::frames`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackFrame {
    pub function: String,
    pub file: String,
    pub line: u32,
}

/// A thread of a Python process at one instant (`py-spy dump`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadStack {
    pub pid: u32,
    pub thread_name: Option<String>,
    pub os_thread_id: Option<u64>,
    /// Running Python code (not waiting).
    pub active: bool,
    pub owns_gil: bool,
    pub frames: Vec<StackFrame>,
}

/// One function of a cProfile run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionStat {
    pub function: String,
    pub file: String,
    pub line: u32,
    pub calls: u64,
    /// Calls that were not recursive.
    pub primitive_calls: u64,
    /// Time in the function itself.
    pub tottime_s: f64,
    /// Time in it and everything it called.
    pub cumtime_s: f64,
}

/// A cProfile run, read back from its pstats file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallProfile {
    pub total_calls: u64,
    pub primitive_calls: u64,
    /// Sum of the functions' own time.
    pub total_time_s: f64,
    pub functions: u64,
    /// The 50 functions with the most own time.
    pub by_tottime: Vec<FunctionStat>,
    /// The 50 functions with the most cumulative time.
    pub by_cumtime: Vec<FunctionStat>,
}

/// Mean, smallest, largest and last value of one column over the samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ColumnStats {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub last: f64,
}

/// One entity's samples (the machine, a disk, a CPU, a process), summarised per column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Series {
    /// `machine` (vmstat), a device (`vda`), a CPU (`all`, `0`) or `pid <n> <command>`.
    pub entity: String,
    pub samples: u64,
    /// Every numeric column, named as the tool names it (vmstat `cs`, iostat `util`, mpstat
    /// `iowait`, pidstat `cswch/s`), with its statistics over the samples.
    pub columns: std::collections::BTreeMap<String, ColumnStats>,
}

/// A sysstat or procps report over an interval: vmstat, iostat, mpstat, pidstat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SysstatReport {
    pub tool: String,
    pub series: Vec<Series>,
}

/// One line of a line_profiler run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LineStat {
    pub line: u32,
    pub hits: u64,
    pub time_s: f64,
    /// Share of the function's time, in %.
    pub percent: f64,
    /// The source line, as the file has it now.
    pub source: String,
}

/// line_profiler's view of one function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LineProfile {
    pub function: String,
    pub file: String,
    pub total_time_s: f64,
    /// Every line that ran, in source order.
    pub lines: Vec<LineStat>,
}

/// One allocation site (file:line) of a memory profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AllocationSite {
    pub file: String,
    pub line: u32,
    /// Bytes allocated there and still live when the snapshot was taken.
    pub size_bytes: u64,
    /// Live blocks allocated there.
    pub count: u64,
}

/// A tracemalloc run: Python allocations of the target's own code, from the end of its
/// leading imports (imported first, untraced, each one's resident cost measured) to its exit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PythonMemoryProfile {
    /// The process's resident set before the script's leading imports: the interpreter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_before_imports_bytes: Option<u64>,
    /// The script's leading imports (its top-level `import`/`from` lines before its first
    /// other statement), in order, each with the resident set after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ImportCost>,
    /// Traced memory at exit and at its peak.
    pub current_bytes: u64,
    pub peak_bytes: u64,
    /// Sites live at the snapshot taken nearest the peak, by size. Snapshots are taken, checking
    /// every `interval_s`, when memory has grown 10%, and when it stops growing at a new high:
    /// a peak shorter than the interval may be missed; `peak_sites_at_bytes` says how much was
    /// traced when this one was taken.
    pub peak_sites_by_size: Vec<AllocationSite>,
    pub peak_sites_at_bytes: u64,
    /// Sites live at exit, by size and by count.
    pub exit_sites_by_size: Vec<AllocationSite>,
    pub exit_sites_by_count: Vec<AllocationSite>,
    /// [seconds since start, current bytes, peak bytes] every interval.
    pub timeline: Vec<(f64, u64, u64)>,
    /// Frames kept per allocation traceback.
    pub traceback_depth: u32,
}

/// One leading import of a script, imported alone before the script ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportCost {
    pub module: String,
    /// The process's resident set once it was imported.
    pub rss_after_bytes: u64,
    pub wall_s: f64,
    /// Why it could not be imported ahead (the script then imports it itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Allocations of one place in the code over a whole memray run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AllocationTotal {
    pub function: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Bytes allocated there over the run (freed or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// Scalene's view of one run, line by line: CPU split into Python, native and system time,
/// memory allocated and copying, each line of the profiled program's own files (library time
/// is counted at the program's line that called into it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LineUsageProfile {
    /// The program's wall time as Scalene measured it.
    pub elapsed_s: f64,
    /// Memory and copies were profiled (off with `--cpu-only`).
    pub memory_profiled: bool,
    /// The highest footprint Scalene saw, and the line that reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_footprint_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_footprint_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_footprint_line: Option<u32>,
    /// The program's functions by CPU share (at most 100).
    pub functions: Vec<LineUsage>,
    /// The lines with CPU, allocation or copying, by CPU share then bytes (at most 100).
    pub lines: Vec<LineUsage>,
}

/// One line (or one function, summed over its lines) of a Scalene profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LineUsage {
    pub file: String,
    pub line: u32,
    /// The function the line is in (its qualified name: `Task.runTask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The source text of the line, trimmed (lines only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub code: String,
    /// Shares of the run's CPU time: in Python code, in native code called from it, in the
    /// kernel.
    pub cpu_python_percent: f64,
    pub cpu_native_percent: f64,
    pub cpu_system_percent: f64,
    /// Bytes allocated there over the run (Scalene's sampled estimate).
    pub malloc_bytes: u64,
    /// Scalene's per-line peak: the program's footprint at its highest while the line ran (on
    /// pyperformance's float two lines both show the whole 15.3 MiB), not what the line holds.
    pub peak_bytes: u64,
    /// Allocation samples Scalene took there (one per ~1 MB window, not a call count).
    pub malloc_samples: u64,
    /// Bytes copied per second (memcpy and friends) there.
    pub copy_mb_per_s: f64,
}

impl LineUsage {
    pub fn cpu_percent(&self) -> f64 {
        self.cpu_python_percent + self.cpu_native_percent + self.cpu_system_percent
    }
}

/// An allocation profile: memray's (every allocation, Python and native, summarised by `memray
/// stats --json`) or the allocation sampler's (CPython's allocators, sampled).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AllocationProfile {
    /// Highest heap memory in use at once.
    pub peak_bytes: u64,
    pub total_allocations: u64,
    pub total_bytes_allocated: u64,
    pub top_by_size: Vec<AllocationTotal>,
    pub top_by_count: Vec<AllocationTotal>,
    /// Calls per allocator function (MALLOC, CALLOC, REALLOC, MMAP, ...).
    pub allocator_distribution: std::collections::BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_allocator: Option<String>,
    pub native_traces: bool,
    /// Every allocation was counted, the small Python objects pymalloc serves included (memray
    /// with `python_allocators`). False: only pymalloc's arenas (memray without it) or sampled
    /// net growth (Scalene), so the sites say where memory grew, not where objects are made.
    #[serde(default)]
    pub traces_python_allocators: bool,
    /// The sites' bytes and counts, and the peak, are estimates from one allocation sampled in
    /// about this many bytes (the allocation sampler); the totals are exact counts. Absent:
    /// every allocation was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_every_bytes: Option<u64>,
    /// What was live at the peak, by the program's own line that allocated it (memray's
    /// high-water mark), largest first. Empty for Scalene, whose per-line peak is the
    /// footprint reached while the line ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_peak: Vec<PeakSite>,
    /// Large buffers made and freed again soon (memray's temporary allocations, each at least
    /// `SHORT_LIVED_MIN_BYTES`), by the program's own line that led to them, most bytes first:
    /// churn that can cost a fresh mapping (or a trimmed heap) and page faults each time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_lived_large: Vec<ShortLivedSite>,
    /// What was still allocated when tracking stopped (memray's leak view, with `leaks`), by
    /// the program's own line that allocated it, largest first: memory a long-running program
    /// would keep growing by if that code ran again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_freed: Vec<PeakSite>,
}

/// glibc's default `M_MMAP_THRESHOLD` (128 KiB): a malloc at least this large is served by
/// its own mmap until glibc raises the threshold dynamically (up to 32 MiB on 64-bit), so a
/// buffer this size made and freed in a loop can cost page faults every time.
pub const SHORT_LIVED_MIN_BYTES: u64 = 128 << 10;

/// Short-lived: freed before this many other allocations were made (memray's "temporary"
/// threshold, and the allocation sampler's). memray's own default (1) counts only what is
/// freed at once: on pyperformance's json_dumps it found 36 MB of the 476 MB allocated, 1000
/// found 324 MB (the encoder's buffers, freed after the string is built); a training step's
/// outputs live through hundreds of allocations of its forward and backward passes.
pub const SHORT_LIVED_WITHIN_ALLOCATIONS: u64 = 1000;

/// Short-lived large allocations of one line of the program over a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShortLivedSite {
    pub function: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Bytes allocated there and freed soon after, over the run.
    pub bytes: u64,
    pub allocations: u64,
    /// The frame outside the program's own code that made most of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A line's sum of large buffers freed soon after, from the same sum by line as a peak's
/// (`live_bytes` then counts what the line made).
impl From<PeakSite> for ShortLivedSite {
    fn from(s: PeakSite) -> ShortLivedSite {
        ShortLivedSite {
            function: s.function,
            file: s.file,
            line: s.line,
            bytes: s.live_bytes,
            allocations: s.allocations,
            via: s.via,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Memory live at the peak that one line of the program allocated: its own allocations and
/// those of the library calls it made (`via` names the library frame that allocated most).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PeakSite {
    pub function: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Bytes live at the peak that it allocated.
    pub live_bytes: u64,
    /// Allocations those bytes are.
    pub allocations: u64,
    /// Of `live_bytes`, what importing modules on that line made (`import torch`): the cost
    /// of the import, not of the program's data.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub imported_bytes: u64,
    /// The frame outside the program's own code that made most of them, as
    /// `function (file:line)`, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// One line of a memory_profiler run: the process's resident memory after it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryLine {
    pub line: u32,
    /// Source text of the line.
    pub source: String,
    /// Times it ran (0: never reached).
    pub occurrences: u64,
    /// Largest resident memory of the process seen after the line, MiB (psutil RSS / 2^20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_usage_mib: Option<f64>,
    /// Resident memory the line added, summed over its runs, MiB (negative: it freed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increment_mib: Option<f64>,
}

/// memory_profiler's view of one function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryLineProfile {
    pub function: String,
    pub file: String,
    /// Every line of the function, in source order.
    pub lines: Vec<MemoryLine>,
    /// The line that added the most, when any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_increment_line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_mib: Option<f64>,
}
