//! The hotspots table: each function's share by tool, the user's calls that lead into library
//! code, the user's functions by inclusive time, the native code the user's lines ran.

use super::*;

/// Which tool said what of one hotspot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HotspotEvidence {
    /// `py_spy_record`, `cprofile`, `perf_record`, `line_profiler`, `torch_profiler`.
    pub tool: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_percent: Option<f64>,
    /// A line-level tool's hottest line and its share of the function's time, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_line_percent: Option<f64>,
    /// Own time in seconds by this tool, where it can say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_s: Option<f64>,
    /// Calls counted (cProfile's exact count), where the tool counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
}

/// A function (or a kernel) that holds time, merged across the profilers that saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hotspot {
    pub function: String,
    /// Relative to the root when under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The hottest line where a line-level tool saw one, else the def line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `python`, `native`, `gpu_kernel`, or `waiting`: a Python frame sampled while it
    /// blocked (`waits_in` names the call), which is not CPU work.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_in: Option<String>,
    /// The best estimate: sampling first (least overhead), then deterministic.
    pub self_percent: f64,
    pub total_percent: f64,
    /// The function's own time in seconds by that tool (samples over the sampling rate, or
    /// cProfile's tottime), and the run it comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_s_run: Option<String>,
    /// For library code: the program's own call that most of its samples came through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called_from: Option<ProgramCall>,
    pub evidence: Vec<HotspotEvidence>,
}

/// A call in the program's own code that led to library work, from sampled stacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProgramCall {
    pub function: String,
    /// Relative to the root when under it.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub via: crate::metrics::CallVia,
    /// Of the samples the row counts (its own time), the share that came through this call.
    pub share_percent: f64,
    pub run_id: String,
}

/// A function of the program's own code with the time of everything it called (inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InclusiveRow {
    pub function: String,
    /// Relative to the root.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub self_percent: f64,
    pub total_percent: f64,
    /// Inclusive seconds (samples over the rate), where the rate is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_s: Option<f64>,
    pub source: Source,
}

/// A line of the program's own code and the native code (C, C++) its call ran, from a sampling
/// run that unwound native frames (`py-spy --native`): without them that time counts as the
/// line's own, and its advice would be about Python that barely runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NativeCall {
    pub function: String,
    /// Relative to the root.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Of all the run's samples: native code on top, reached through this call.
    pub percent: f64,
    /// The heaviest native functions under it, most first.
    pub functions: Vec<crate::metrics::NativeFunction>,
    pub source: Source,
}

/// A flame graph a run drew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlameGraph {
    pub run_id: String,
    pub path: String,
}

/// The hotspots table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HotspotTable {
    pub rows: Vec<Hotspot>,
    /// The program's own functions by inclusive time, from one sampling run: the phases
    /// (`evaluate`, `train_epoch`) that self time alone never shows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inclusive: Vec<InclusiveRow>,
    /// The program's lines whose calls ran the most native code, where native frames were
    /// sampled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub native_calls: Vec<NativeCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flame_graphs: Vec<FlameGraph>,
}
