//! An LLM server observed over one window (`serving_window`): what its own `/metrics` said
//! (histogram deltas between the window's first and last scrape, counters, gauges sampled every
//! second), what the load's client measured of each request, and vLLM's profiler over the same
//! window, when the server exposes it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Percentiles of one of the server's histograms over the window, from the difference of its
/// buckets between the window's first and last scrape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyQuantiles {
    /// Observations made in the window.
    pub count: u64,
    /// Exact: the sum's difference over the count's.
    pub mean_s: f64,
    /// Interpolated within the bucket holding the rank, as Prometheus' `histogram_quantile`.
    pub p50_s: f64,
    pub p90_s: f64,
    pub p99_s: f64,
    /// The bucket each percentile lies in: its error is at most the bucket's width.
    pub p50_bucket_s: Bucket,
    pub p90_bucket_s: Bucket,
    pub p99_bucket_s: Bucket,
}

/// A histogram bucket's bounds; no upper bound is the `+Inf` bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bucket {
    pub lower: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper: Option<f64>,
}

impl Bucket {
    /// The bucket of a value known exactly.
    pub fn exact(value: f64) -> Self {
        Bucket {
            lower: value,
            upper: Some(value),
        }
    }
}

/// A gauge's readings over the window, one a scrape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GaugeReadings {
    pub mean: f64,
    pub max: f64,
    pub last: f64,
    pub readings: u32,
}

/// What the load's own client measured, request by request, on its own clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientFigures {
    /// Requests that finished in the window, and those that failed.
    pub completed: u64,
    pub failed: u64,
    /// Streamed chunks with text, over all requests.
    pub chunks: u64,
    pub ttft: Option<LatencyQuantiles>,
    /// Each request's mean gap between streamed chunks (its time per output token): one figure
    /// a request, since a client's reads coalesce chunks after a stall.
    pub itl: Option<LatencyQuantiles>,
    pub e2e: Option<LatencyQuantiles>,
    /// The first failures' messages (program output: data, not our words).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Whose load the window observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoadSource {
    /// Requests were already arriving when the window opened: the user's own load; ours was
    /// not started.
    User,
    /// None was arriving: a bounded load of ours (streaming completions, a fixed concurrency).
    Ours,
}

/// vLLM's profiler over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerProfiler {
    /// `started`, `absent` (the server answers 404: started without `--profiler-config`),
    /// `skipped` (too little of the run's time left), `failed`, or `stop_timed_out`.
    pub state: String,
    /// How long `/stop_profile` took (traces are written then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// The trace files the window made, as copied into the run's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<String>,
    /// How to restart the server with the profiler, where it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_hint: Option<String>,
}

/// What an engine step is made of, from the worker's trace: vLLM names every step it
/// executes by its batch (`execute_context_<requests>(<tokens>)_generation_<requests>(<tokens>)`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineSteps {
    pub steps: u64,
    /// Steps that prefilled at least one prompt (chunked or not), and decode-only steps.
    pub prefill_steps: u64,
    pub decode_steps: u64,
    pub mean_step_us: f64,
    pub mean_prefill_step_us: Option<f64>,
    pub mean_decode_step_us: Option<f64>,
    /// Requests decoded per decode step, on average (the batch the engine really ran).
    pub mean_decode_batch: f64,
    /// Of the steps' time: inside operators (model forward, attention, sampling), and the rest,
    /// the Python around them (input preparation, scheduling output, bookkeeping).
    pub operator_percent: f64,
    pub python_percent: f64,
    /// The heaviest operators by self time, with their share of the steps' time.
    pub top_operators: Vec<(String, f64)>,
    /// Which operators' share is sampling (`sampler`, `argmax`, `gumbel`, `topk`...).
    pub sampling_percent: f64,
    pub attention_percent: f64,
    pub matmul_percent: f64,
}

/// The server over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServingWindow {
    /// The server's base URL, found from the process's listening sockets.
    pub url: String,
    /// The window between the first and the last scrape (seconds since the epoch, and length).
    pub window_start_unix_s: f64,
    pub window_s: f64,
    pub scrapes: u32,
    pub load: Option<LoadSource>,
    /// Requests the server finished in the window, by its reason (`length`, `stop`, `abort`,
    /// `error`), and their sum.
    pub requests_finished: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finished_by_reason: Vec<(String, u64)>,
    pub requests_per_s: f64,
    pub prompt_tokens_per_s: f64,
    pub generation_tokens_per_s: f64,
    /// Of the prompts' tokens, those the prefix cache served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_percent: Option<f64>,
    pub ttft: Option<LatencyQuantiles>,
    pub itl: Option<LatencyQuantiles>,
    pub e2e: Option<LatencyQuantiles>,
    pub queue: Option<LatencyQuantiles>,
    pub prefill: Option<LatencyQuantiles>,
    pub decode: Option<LatencyQuantiles>,
    pub running: Option<GaugeReadings>,
    pub waiting: Option<GaugeReadings>,
    /// KV-cache use, 0-100.
    pub kv_cache_percent: Option<GaugeReadings>,
    pub preemptions: u64,
    pub client: Option<ClientFigures>,
    pub profiler: Option<ServerProfiler>,
    pub engine_steps: Option<EngineSteps>,
}
