//! A cluster job seen on every node it holds: what the observers placed on each node by the
//! job's engine measured there, each node's clock against ours, and the ranks side by side.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `cluster_nodes` gathered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterProfile {
    /// `slurm`.
    pub engine: String,
    pub job_id: String,
    /// The window each node observed, s.
    pub window_s: f64,
    pub nodes: Vec<NodeObservation>,
    /// The ranks that the others waited for, as `rank N`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stragglers: Vec<u32>,
    /// Largest compute share over the smallest among the ranks (1.0: even).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_imbalance: Option<f64>,
}

/// One node's observation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeObservation {
    pub node: String,
    /// The node's clock minus ours, s, measured when gathering (the exchange with the
    /// smallest round trip of several), and its uncertainty (half that round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_s: Option<f64>,
    /// When the node's window began, on our clock (its own reading less the offset), Unix s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start_unix_s: Option<f64>,
    /// The job's processes found there (the observers' own step left out).
    pub processes: u32,
    /// CPU time of all of them over the window, s.
    pub cpu_s: f64,
    /// Their resident memory at its highest, summed over processes, bytes.
    pub rss_peak_bytes: u64,
    pub ranks: Vec<RankObservation>,
    /// The node's GPUs over the window (NVML), where it has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<super::GpuSummary>,
    /// What went wrong there (no process of the job, srun refused, the observer failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the node's observer said along the way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One rank (a process with `RANK` in its environment) on its node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankObservation {
    pub rank: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// What the engine calls it, where it is not a rank of a launcher (a Ray actor's class
    /// and id); `rank` is then its place among those observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub pid: u32,
    /// CPU time over the window (its threads and children included), s.
    pub cpu_s: f64,
    /// Time runnable but not running over the window, summed over its threads (schedstat):
    /// off the CPU because the machine was busy, not waiting for the other ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_s: Option<f64>,
    /// Time its main thread was blocked over the window (neither running nor runnable,
    /// schedstat): where a rank waits for the others' collectives. The straggler test's
    /// measure of waiting where present, since the sums over threads above count a pool's
    /// idle and spinning threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_thread_blocked_s: Option<f64>,
    pub rss_peak_bytes: u64,
    /// py-spy's samples of it over the window (0: not sampled).
    pub samples: u64,
    /// Share of its samples in collective communication or waiting for it (torch.distributed
    /// calls, gloo/NCCL waits), %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_percent: Option<f64>,
    /// Its hottest functions by own samples, `function (file:line)` with the share, %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_functions: Vec<FunctionShare>,
}

/// A function and its share of samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionShare {
    pub function: String,
    pub percent: f64,
}
