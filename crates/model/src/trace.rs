//! `analyze_trace`: one or more Kineto (PyTorch profiler) traces, one per rank, analysed.

use crate::metrics::TraceAnalysis;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Input of `analyze_trace`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeTraceInput {
    /// Kineto traces (`.json` or `.json.gz`), one per rank for a distributed job, relative to
    /// the server's root or absolute under it.
    #[schemars(length(min = 1, max = 1024))]
    pub paths: Vec<String>,
}

/// One trace's analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceFile {
    pub path: String,
    pub bytes: u64,
    pub analysis: TraceAnalysis,
    /// The node (torchrun's `GROUP_RANK`) of the rank that wrote it, when the run knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    /// What could not be read (a cut file, events of an unexpected shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
}

/// How evenly the ranks worked (two traces or more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankBalance {
    /// Each trace's rank (from `distributedInfo` or the run's `RANK`; by position when a trace
    /// has none or two say the same) with its time computing and communicating, µs: on the
    /// GPU (non-NCCL against NCCL kernels, summed over its devices) when the trace has GPU
    /// work, else on the CPU (the busiest thread against gloo's collectives).
    pub ranks: Vec<RankTime>,
    /// Largest compute time over the smallest: 1.0 is even.
    pub compute_imbalance: f64,
    /// Ranks the others wait for, which shows as the others' larger time in collectives: the
    /// others' median exceeds the rank's own by at least 10% of the window, and by half of
    /// itself or while the rank computes more than 10% above the lower median.
    pub stragglers: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankTime {
    pub rank: u32,
    /// The node it ran on (torchrun's `GROUP_RANK`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    pub path: String,
    pub compute_us: f64,
    pub comm_us: f64,
    pub idle_us: f64,
    /// Its mean profiler step, µs (the trace's `window.step_mean_us`), when it has whole steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_mean_us: Option<f64>,
}

/// Output of `analyze_trace`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceReport {
    pub traces: Vec<TraceFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<RankBalance>,
    /// Where the session keeps this result for `summarize`
    /// (`profile_output/<session>/traces/t001.json`), relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<String>,
}
