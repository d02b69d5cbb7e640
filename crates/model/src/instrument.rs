//! `instrument_file`'s input: which file, what to measure, where, and how to insert it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the inserted code measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Wall and CPU time of a function or block.
    Timing,
    /// CUDA events around kernels (GPU time without a sync per call).
    CudaEvents,
    /// CPU↔GPU and GPU↔GPU copies: direction, bytes, count, time, bandwidth.
    Transfers,
    /// GPU memory allocated, reserved and peak per device at marked points.
    Memory,
    /// Tensors whose data is on the CPU and on a GPU at once.
    Duplicates,
    /// torch.distributed collectives: op, bytes, world size, latency, bandwidth.
    Nccl,
    /// A snippet of the caller's own.
    Custom,
}

/// How the measurement is inserted, most preferred first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A runner under `profile_output/` wraps the functions at run time; the file is untouched.
    Runner,
    /// One marked decorator line above the `def`.
    Decorator,
    /// A marked `with` block around a line range.
    Context,
    /// Marked lines inside the code.
    Inline,
}

/// A line range, 1-based and inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineRange {
    #[schemars(range(min = 1))]
    pub start: u32,
    #[schemars(range(min = 1))]
    pub end: u32,
}

/// Input of `instrument_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstrumentFileInput {
    /// The Python file, under the server's root.
    pub path: String,
    pub measure: Measure,
    /// The function or method by qualified name (`Trainer.step`); or give `lines`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The block to wrap; or give `function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<LineRange>,
    pub strategy: Strategy,
    /// Record every Nth call only (hot paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub sample_every: Option<u32>,
    /// Record this fraction of calls (0-1], at random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sample_rate: Option<f64>,
    /// The code to insert (`custom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// Show the change without making it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}
