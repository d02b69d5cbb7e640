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
    /// The ranks' clocks lined up on their common collectives, and the merged timeline
    /// (two traces or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment: Option<ClockAlignment>,
    /// Where the session keeps this result for `summarize`
    /// (`profile_output/<session>/traces/t001.json`), relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<String>,
}

/// Which collectives line up the ranks' clocks: NCCL kernels (their spans are the transfer
/// on the GPU) or gloo's collectives (their CPU spans last until the transfer is done).
/// `nccl:` CPU annotations only launch, and are not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyncBasis {
    NcclKernels,
    GlooCollectives,
}

/// One collective as one rank saw it, in that rank's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncPoint {
    pub basis: SyncBasis,
    /// The `ProfilerStep#N` it was issued in, when the trace has steps.
    pub step: Option<u64>,
    pub start_us: f64,
    pub end_us: f64,
    /// Its payload, when the trace says (a key that tells two collectives apart).
    pub bytes: Option<u64>,
}

/// The ranks' clocks against one rank's: no rank can finish a collective before every rank
/// has started it, so each pair of spans bounds the offset between two clocks, and all the
/// pairs together bound it tightly. Traces from different nodes (each stamped with its own
/// monotonic clock) line up once shifted by these offsets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClockAlignment {
    /// The rank whose clock the others are put on.
    pub reference_rank: u32,
    pub ranks: Vec<RankClock>,
    /// Every rank's events on the reference rank's clock, one process group per rank
    /// (Chrome trace JSON, gzip; opens in Perfetto), relative to the root; absent when no
    /// offset could be measured or it was not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_trace: Option<String>,
}

impl ClockAlignment {
    /// Whether a merged timeline says anything: a rank other than the reference has a known
    /// offset.
    pub fn worth_merging(&self) -> bool {
        self.ranks
            .iter()
            .any(|c| c.rank != self.reference_rank && c.offset_us.is_some())
    }
}

/// One rank's clock against the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankClock {
    pub rank: u32,
    pub path: String,
    /// Its clock minus the reference's, µs: subtracted from its timestamps to merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_us: Option<f64>,
    /// Half the width of the interval the collectives allow (bounded), or the spread of the
    /// collectives' ends (not bounded), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty_us: Option<f64>,
    /// Collectives matched with the reference's.
    pub collectives: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<SyncBasis>,
    /// Whether every matched pair agreed on one interval (false: the spans were not the
    /// transfers themselves, and the median of the ends' differences was taken).
    pub bounded: bool,
    /// Why there is no offset, or what to doubt in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
