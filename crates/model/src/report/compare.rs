//! `compare`: two sessions (or some of their runs) matched by method and target, each delta
//! judged against the runs' own noise.

use super::*;

/// One side of a comparison: a session, or some of its runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareSide {
    pub session: String,
    /// Only these runs; default: every run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
}

/// Input of `compare`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareInput {
    /// Before the fix.
    pub before: CompareSide,
    /// After the fix.
    pub after: CompareSide,
    #[serde(default)]
    pub lang: Lang,
    #[serde(default)]
    pub format: ReportFormat,
}

/// One measured quantity before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Delta {
    /// `cpu`, `memory`, `gpu`, `interconnect`, `hotspots`.
    pub table: String,
    /// What runs were matched on: the profiler and the target (or the label).
    pub group: String,
    /// `wall_s`, `rss_peak_bytes`, `self_percent work.py:busy`, ...
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// after - before, and the same over before, in %.
    pub delta: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_percent: Option<f64>,
    /// Runs of the group on each side: the repeats the noise comes from.
    pub repeats_before: u32,
    pub repeats_after: u32,
    /// Run-to-run noise: the pooled standard deviation of the repeats (absent with one run a
    /// side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    /// `larger_than_noise` (|delta| above twice the noise), `within_noise`, or `unknown`
    /// (one run a side: repeat it to know).
    pub verdict: String,
}

/// Output of `compare`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareOutput {
    pub before: String,
    pub after: String,
    pub lang: Lang,
    pub deltas: Vec<Delta>,
    /// Groups measured on one side only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmatched: Vec<String>,
    pub markdown: String,
    /// `compare-<before>-vs-<after>.md` / `.json` under the after session, relative to the root.
    pub markdown_path: String,
    pub json_path: String,
    /// What the call's text content carries: the Markdown, or the deltas as JSON.
    pub format: ReportFormat,
}
