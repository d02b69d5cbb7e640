//! `detect_tools`: which profilers exist and are usable, the hardware, the permissions and the
//! Python environment the target will run in.

use crate::topology::GpuTopology;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Input of `detect_tools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DetectToolsInput {
    /// The Python interpreter the target will use (a path or a name on PATH). Python modules
    /// (cProfile, tracemalloc, memray, torch, ...) are checked by importing them with it.
    /// Default: `python3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// Probe again instead of answering from this session's cache.
    #[serde(default)]
    pub refresh: bool,
    /// Time limit for each probe, in seconds (default 5; torch's import gets 4x that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 120.0))]
    pub probe_timeout_s: Option<f64>,
}

/// What a tool is for, following the seed's categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    Cpu,
    Memory,
    Gpu,
    Interconnect,
    System,
    /// Benchmark drivers (hyperfine).
    Benchmark,
}

/// How a tool is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// A program on PATH (or at a known path such as /usr/bin/time).
    Executable,
    /// A module imported by the target's Python interpreter.
    PythonModule,
    /// A library or runtime facility (NVML, NCCL through torch).
    Library,
}

/// One profiler's status on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolStatus {
    /// Stable id used by `plan_profile` and `run_profiler` (`py_spy`, `perf`, `nvidia_smi`).
    pub id: String,
    /// The name people know it by.
    pub name: String,
    pub category: ToolCategory,
    pub kind: ToolKind,
    /// Found: on PATH, importable, or loadable.
    pub available: bool,
    /// Found and permitted to do its job here (checked, not assumed).
    pub usable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it is not available or not usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The command that installs it, or the setting that permits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
    /// Limits that leave it usable but partly (e.g. "software counters only").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Wall time of this tool's probe, in milliseconds.
    pub probe_ms: f64,
}

/// The CPU, from /proc/cpuinfo.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    pub architecture: String,
    pub sockets: usize,
    /// Distinct (socket, core) pairs.
    pub physical_cores: usize,
    /// Logical CPUs online (hardware threads).
    pub logical_cpus: usize,
    pub threads_per_core: usize,
    /// CPUs this process may run on (sched affinity).
    pub affinity_cpus: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mhz: Option<f64>,
    /// Whether the hypervisor flag is set.
    pub virtualized: bool,
}

/// One NUMA node, from /sys/devices/system/node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NumaNode {
    pub id: u32,
    /// The node's CPUs as a Linux cpulist (`0-15,32-47`).
    pub cpulist: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<u64>,
}

/// System memory, from /proc/meminfo.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryInfo {
    pub total_bytes: u64,
    pub available_bytes: u64,
    pub swap_total_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepage_size_bytes: Option<u64>,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvLinkStatus {
    pub link: u32,
    pub active: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_pci_bus_id: Option<String>,
}

/// One GPU, from NVML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    pub memory_total_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_current: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_max: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width_current: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width_max: Option<u32>,
    /// Compute capability `major.minor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    pub nvlinks: Vec<NvLinkStatus>,
}

/// Where GPU facts came from, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuEnvironment {
    /// NVML could be loaded and initialised.
    pub nvml_available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// CUDA driver API version (`12.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<String>,
    /// Why there are no GPUs (library missing, no device, permission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub gpus: Vec<GpuInfo>,
    /// GPU-to-GPU paths: NVML first, else `nvidia-smi topo -m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<GpuTopology>,
}

/// The machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hardware {
    pub hostname: String,
    pub kernel: String,
    pub cpu: CpuInfo,
    pub numa_nodes: Vec<NumaNode>,
    pub memory: MemoryInfo,
    pub gpu: GpuEnvironment,
}

/// What the kernel lets profilers do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Permissions {
    pub euid: u32,
    pub is_root: bool,
    /// /proc/sys/kernel/perf_event_paranoid (-1..4; 2 = user-space only for unprivileged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_event_paranoid: Option<i32>,
    /// /proc/sys/kernel/yama/ptrace_scope (0 any, 1 descendants, 2 admin, 3 none); absent
    /// when Yama is not built in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptrace_scope: Option<i32>,
    /// /proc/sys/kernel/kptr_restrict (kernel symbols in perf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kptr_restrict: Option<i32>,
    /// Effective capabilities that matter to profilers (CAP_SYS_PTRACE, CAP_SYS_ADMIN,
    /// CAP_PERFMON, CAP_BPF), from /proc/self/status CapEff.
    pub capabilities: Vec<String>,
    /// Attaching to a running process (py-spy --pid, strace -p) is allowed.
    pub can_attach_to_pid: bool,
    /// Why attaching is refused, and the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_advice: Option<String>,
}

/// Container and cgroup limits, when the server runs in one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContainerInfo {
    pub in_container: bool,
    /// docker, podman, kubernetes, lxc, ... when it can be told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// What the decision rests on (files, cgroup paths, environment).
    pub evidence: Vec<String>,
    /// 1 or 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// CPU quota as cores (quota / period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<u64>,
}

/// torch, as the target's interpreter imports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TorchInfo {
    pub version: String,
    pub cuda_available: bool,
    /// CUDA runtime torch was built with (`12.8`), absent for CPU builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    pub device_count: u32,
    /// NCCL version torch carries (`2.26.2`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_version: Option<String>,
    pub distributed_available: bool,
}

/// The Python the target will use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PythonEnv {
    /// The interpreter as asked for.
    pub requested: String,
    pub available: bool,
    /// `sys.executable`: the real interpreter behind shims such as pyenv's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// Inside a virtual environment (`sys.prefix != sys.base_prefix`).
    pub in_venv: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchInfo>,
    /// Why torch is absent or failed to import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Output of `detect_tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DetectReport {
    /// Every profiler checked, in a fixed order.
    pub tools: Vec<ToolStatus>,
    pub hardware: Hardware,
    pub permissions: Permissions,
    pub container: ContainerInfo,
    pub python: PythonEnv,
    /// Counts over `tools`.
    pub summary: DetectSummary,
    /// Wall time of the whole detection, in milliseconds (of the original probe when cached).
    pub probe_wall_ms: f64,
    /// Answered from this session's cache (`refresh: true` probes again).
    pub cached: bool,
    /// When the probes ran, seconds since the Unix epoch.
    pub detected_at_unix_s: f64,
    /// Probes that timed out or misbehaved.
    pub diagnostics: Vec<String>,
    /// Probes that timed out twice (the second time with a longer deadline): what they would
    /// have said is not known yet, and a report with any is not cached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed_out: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DetectSummary {
    pub checked: usize,
    pub available: usize,
    pub usable: usize,
    /// Ids of tools found but not usable, with the reason in `tools`.
    pub unusable: Vec<String>,
}
