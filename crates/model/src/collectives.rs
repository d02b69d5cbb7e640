//! Collective communication (all_reduce, broadcast, all_gather, ...) as one rank's Kineto
//! trace shows it: per operation, how many, how large, how long; and how much of the
//! communication ran while the rank computed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One collective operation of one backend, over the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveOp {
    /// `all_reduce`, `broadcast`, `all_gather`, `reduce_scatter`, `all_to_all`, ...
    pub op: String,
    /// `gloo` or `nccl`.
    pub backend: String,
    pub calls: u64,
    /// Calls whose message size the trace gave (record_shapes, or NCCL's own arguments).
    pub sized_calls: u64,
    pub bytes_total: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p95: Option<u64>,
    /// Each call's duration: the NCCL kernel's on the GPU, the gloo work's on the CPU. None
    /// from `nccl:` annotations: their CPU time is the launch, not the transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_total_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p95_us: Option<f64>,
    /// Bytes of the sized calls over their time (algorithm bandwidth), GB/s (10^9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algbw_gbps: Option<f64>,
    /// Ranks in the communicator, when the trace says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
    /// Where the figures come from: `nccl kernels`, `gloo annotations`, `nccl annotations`.
    pub source: String,
}

/// The collectives of one trace, and communication against computation on the CPU side (gloo
/// runs its collectives on threads of its own, beside the thread that computes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Collectives {
    pub ops: Vec<CollectiveOp>,
    /// Time with a CPU-side collective running (overlaps counted once), µs.
    pub cpu_comm_us: f64,
    /// Time the busiest other thread ran operators (the compute thread), µs.
    pub cpu_compute_us: f64,
    /// Both at once: communication hidden under computation, µs.
    pub cpu_overlap_us: f64,
    /// From the first collective's start to the last one's end, µs.
    pub span_us: f64,
}
