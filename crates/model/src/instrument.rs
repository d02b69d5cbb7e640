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
    /// The function or method by qualified name (`Trainer.step`); or give `lines`. With
    /// `runner` or `decorator`, several names separated by commas are one change.
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
    /// The interpreter that parses the file and checks the result compiles (the target's);
    /// the server's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
}

/// Whether a change made a file or changed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    Created,
    Modified,
}

/// Where a change is in its life. `applying` and `reverting` exist only between the ledger
/// write and the file write; the next ledger open settles them from the file's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeState {
    Applying,
    Active,
    Reverting,
    Reverted,
}

/// What a change is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeRole {
    /// Measurement code (a decorator, a `with`, marks, a snippet, a runner).
    #[default]
    Measure,
    /// The runtime helper module the measurement code calls.
    Helper,
    /// The line in a file that imports the helper; shared by that file's measurements.
    HelperImport,
}

/// One change to one file, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// `c0001`, `c0002`, …: unique within the root, never reused.
    pub id: String,
    /// Relative to the server's root.
    pub file: String,
    pub change_type: ChangeType,
    #[serde(default)]
    pub role: ChangeRole,
    /// What was added or changed, in a phrase (Part B's third column).
    pub description: String,
    /// The same phrase in Japanese (absent in ledgers written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_ja: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Lines of the changed file that the change added or re-indented (1-based, in the file
    /// as it is after the change); empty for a created file.
    #[serde(default)]
    pub lines: Vec<LineRange>,
    /// SHA-256 of the file before the change, hex; absent for a created file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256_before: Option<String>,
    /// SHA-256 of the file the change left, hex.
    pub sha256_after: String,
    /// The original bytes, relative to the root (`profile_output/.backup/<id>`); absent for a
    /// created file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// Unix permission bits the file had, kept on every write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Other changes this one needs (the helper import, the helper); reverting the last
    /// change that needs one reverts that one too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    pub state: ChangeState,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_at: Option<String>,
}

/// `profile_output/ledger.json`: every change made under the root, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// Format version of this file.
    pub version: u32,
    /// The number the next change id takes.
    pub next_id: u32,
    pub changes: Vec<Change>,
}

/// One change `instrument_file` made (or, with `dry_run`, would make).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeMade {
    pub id: String,
    pub file: String,
    pub change_type: ChangeType,
    pub description: String,
    #[serde(default)]
    pub lines: Vec<LineRange>,
    /// Unified diff of the change (for a created file, against nothing).
    pub diff: String,
}

/// Output of `instrument_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstrumentResult {
    /// True when nothing was written.
    pub dry_run: bool,
    /// Ids of the changes, in the order they were made.
    pub change_ids: Vec<String>,
    pub changes: Vec<ChangeMade>,
    /// What the inserted code measures in the named place, resolved from the syntax tree:
    /// `Trainer.step (lines 40-61)` or `lines 12-18 of main`.
    pub place: String,
    /// argv that runs the instrumented target (a runner, or the script itself).
    pub run_command: Vec<String>,
    /// How to run it when `run_command` is not the whole story (a module imported by
    /// another entry point).
    pub run_note: String,
    /// The JSONL log every measurement goes to, relative to the root
    /// (`schemas/instrument_record.json` describes its lines; `SP_PROFILE_LOG` overrides).
    pub log: String,
    /// The interpreter that parsed and compiled the result.
    pub python: String,
}

/// Input of `list_changes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListChangesInput {
    /// Also list the changes already reverted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_reverted: bool,
}

/// One row of Part B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeRow {
    pub id: String,
    pub file: String,
    pub change_type: ChangeType,
    pub what: String,
    /// `what` in Japanese, when the ledger keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_ja: Option<String>,
    /// `12-14, 40`, or `—` for a created file.
    pub lines: String,
    pub state: ChangeState,
    /// When it was made (RFC 3339, UTC): which session it belongs to.
    #[serde(default)]
    pub created_at: String,
}

/// Output of `list_changes`: the ledger as Part B of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeList {
    pub changes: Vec<ChangeRow>,
    /// Part B as a Markdown table (File | Change type | What was added or changed | Lines).
    pub markdown: String,
    /// Changes still in place.
    pub active: u32,
    /// Files that differ from what the ledger says we left (edited since); revert will
    /// refuse them without `force`.
    pub drifted: Vec<String>,
    /// Relative to the root.
    pub ledger: String,
}

/// Input of `revert_changes`: `all: true`, or the ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevertChangesInput {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Restore files edited since we changed them anyway (their current bytes are kept under
    /// `profile_output/.backup/` first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// How one change was undone, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RevertOutcome {
    /// The original bytes are back, verified by hash.
    Restored,
    /// The created file is gone.
    Deleted,
    /// The file had other edits; our lines were taken out and theirs kept (three-way).
    Merged,
    /// The file had other edits and `force` restored the original; the edited bytes were kept.
    Forced,
    /// The file had other edits and the three-way undo did not apply cleanly: nothing done.
    Conflict,
    /// Nothing to do: the change was already reverted.
    AlreadyReverted,
    /// The revert failed (the backup is missing or damaged): nothing done.
    Failed,
}

/// One change's revert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RevertedChange {
    pub id: String,
    pub file: String,
    pub outcome: RevertOutcome,
    pub message: String,
    /// For a conflict: the foreign edit, as a diff from what we left to what is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_diff: Option<String>,
    /// Where the edited bytes were kept (`forced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// Output of `revert_changes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RevertResult {
    pub reverted: Vec<RevertedChange>,
    /// Changes still in place after this call.
    pub active: u32,
    /// True when every asked change is undone.
    pub complete: bool,
}

/// One line of the instrumentation log (`profile_output/instrument/measure.jsonl`), written by
/// the runtime helper `_sp_profile.py`. Every line names its process; lines from a site name
/// the ledger change that put the site there.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InstrumentRecord {
    /// A process loaded the helper.
    Meta(MetaRecord),
    /// Wall and CPU time of one sampled call of a function or pass through a block.
    Timing(TimingRecord),
    /// GPU time of one sampled call, from CUDA events on the current stream (resolved later,
    /// without a sync per call).
    CudaTime(CudaTimeRecord),
    /// Copies between host and device made during one sampled call, per direction.
    Transfer(TransferRecord),
    /// Memory at the start or end of one sampled call.
    Memory(MemoryRecord),
    /// Tensors whose data is held more than once (on the CPU and a GPU, or twice anywhere),
    /// found by shape, dtype and a content hash of sampled elements.
    Duplicates(DuplicatesRecord),
    /// One `torch.distributed` collective or point-to-point call.
    Collective(CollectiveRecord),
    /// Totals of one site at process exit: how many calls, how many were sampled.
    Summary(SummaryRecord),
    /// Something the helper could not measure and why.
    Note(NoteRecord),
}

/// Every `kind` a line of the log may have.
pub const RECORD_KINDS: &[&str] = &[
    "meta",
    "timing",
    "cuda_time",
    "transfer",
    "memory",
    "duplicates",
    "collective",
    "summary",
    "note",
];

// By hand: serde's derive for internally tagged enums buffers numbers, which serde_json's
// `arbitrary_precision` (on in this workspace) turns into maps that no f64 field accepts.
impl<'de> Deserialize<'de> for InstrumentRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let kind = match map.remove("kind") {
            Some(serde_json::Value::String(k)) => k,
            Some(_) => return Err(D::Error::custom("`kind` is not a string")),
            None => return Err(D::Error::missing_field("kind")),
        };
        let rest = serde_json::Value::Object(map);
        let record = match kind.as_str() {
            "meta" => serde_json::from_value(rest).map(InstrumentRecord::Meta),
            "timing" => serde_json::from_value(rest).map(InstrumentRecord::Timing),
            "cuda_time" => serde_json::from_value(rest).map(InstrumentRecord::CudaTime),
            "transfer" => serde_json::from_value(rest).map(InstrumentRecord::Transfer),
            "memory" => serde_json::from_value(rest).map(InstrumentRecord::Memory),
            "duplicates" => serde_json::from_value(rest).map(InstrumentRecord::Duplicates),
            "collective" => serde_json::from_value(rest).map(InstrumentRecord::Collective),
            "summary" => serde_json::from_value(rest).map(InstrumentRecord::Summary),
            "note" => serde_json::from_value(rest).map(InstrumentRecord::Note),
            other => return Err(D::Error::unknown_variant(other, RECORD_KINDS)),
        };
        record.map_err(D::Error::custom)
    }
}

/// A process loaded the helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetaRecord {
    /// Unix time, seconds.
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub argv: Vec<String>,
    pub python: String,
    pub helper_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// CUDA devices torch sees (0 without CUDA or torch).
    pub cuda_devices: u32,
    /// Resident set when the helper was loaded: before the program's own imports when the
    /// runner strategy loads it, or when its import is the file's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
}

/// Wall and CPU time of one sampled call of a function or pass through a block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimingRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    /// 1-based index of this call among all calls of the site in this process.
    pub call: u64,
    pub wall_s: f64,
    /// CPU time of the process over the call (`time.process_time`).
    pub cpu_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// GPU time of one sampled call, from CUDA events on the current stream (resolved later,
/// without a sync per call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CudaTimeRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub call: u64,
    pub gpu_s: f64,
    pub device: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// Copies between host and device made during one sampled call, per direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub call: u64,
    /// `h2d`, `d2h`, `d2d`.
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    /// Copies from or to pinned host memory.
    pub pinned_count: u64,
    /// Summed copy time (CUDA events when CUDA is there, else wall).
    pub time_s: f64,
    pub bandwidth_gbps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// Memory at the start or end of one sampled call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub call: u64,
    /// `enter` or `exit`.
    pub point: String,
    /// Resident set of the process (`/proc/self/statm`), bytes.
    pub rss_bytes: u64,
    pub devices: Vec<DeviceMemory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// Tensors whose data is held more than once (on the CPU and a GPU, or twice anywhere),
/// found by shape, dtype and a content hash of sampled elements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DuplicatesRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub call: u64,
    pub tensors_scanned: u64,
    pub groups: Vec<DuplicateGroup>,
    pub bytes_duplicated: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// One `torch.distributed` collective or point-to-point call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectiveRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub op: String,
    pub backend: String,
    pub bytes: u64,
    pub world_size: u32,
    pub rank: u32,
    pub async_op: bool,
    /// Host-side time of the call; for NCCL with CUDA, CUDA-event time of the work.
    pub latency_s: f64,
    pub algbw_gbps: f64,
    /// Bus bandwidth with nccl-tests' factors (all_reduce 2(n-1)/n, …).
    pub busbw_gbps: f64,
    /// The DDP bucket this all-reduce carried (DDP's reducer, seen by a communication hook);
    /// none for a `torch.distributed` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ddp_bucket: Option<u32>,
}

/// Totals of one site at process exit: how many calls, how many were sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummaryRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub change: String,
    pub site: String,
    pub measure: Measure,
    pub calls: u64,
    pub sampled: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// Something the helper could not measure and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteRecord {
    pub t: f64,
    pub pid: u32,
    /// The run that started the process (`SP_RUN_ID`, set by `run_profiler` and inherited by
    /// the process's children); absent when the program ran outside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    pub message: String,
}

/// One device's memory at a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceMemory {
    pub device: u32,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
}

/// Tensors with the same shape, dtype and sampled content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DuplicateGroup {
    pub shape: Vec<u64>,
    pub dtype: String,
    /// `cpu`, `cuda:0`, … one per copy.
    pub devices: Vec<String>,
    pub copies: u32,
    pub bytes_each: u64,
    /// Every copy but one.
    pub bytes_duplicated: u64,
    /// The data is on the CPU and on a GPU.
    pub cross_device: bool,
}

/// The instrumentation log read back: what `summarize` puts in its tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstrumentSummary {
    /// Processes that loaded the helper (meta lines).
    pub processes: u32,
    /// One row per measured site, in the order sites first appear.
    pub sites: Vec<SiteSummary>,
    /// One row per copy direction.
    pub transfers: Vec<TransferSummary>,
    /// One row per (collective op, backend).
    pub collectives: Vec<CollectiveSummary>,
    /// The largest duplication seen, with its groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<DuplicatesRecord>,
    /// Peak memory seen at marked points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryPeaks>,
    /// The readings at marked points, in the log's order (the first `MEMORY_MARKS_KEPT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_marks: Vec<MemoryMark>,
    /// Marked readings beyond those kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_marks_left_out: u64,
    /// The smallest resident set a process had when it loaded the helper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_at_load_bytes: Option<u64>,
    /// What the helper said it could not measure.
    pub notes: Vec<String>,
}

/// One site: how often it ran, how often it was measured, and what a measured call took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SiteSummary {
    pub change: String,
    pub site: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
    /// All calls, every process, from the exit summaries.
    pub calls: u64,
    /// Calls with a timing record.
    pub timed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s_p95: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_mean: Option<f64>,
    /// Mean wall time of a measured call times all calls: the site's estimated total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s_total_est: Option<f64>,
    /// Mean GPU time of a measured call (CUDA events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_s_mean: Option<f64>,
}

/// Copies in one direction, over every measured call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransferSummary {
    /// `h2d`, `d2h`, `d2d`.
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    pub bytes_per_copy_mean: f64,
    pub pinned_count: u64,
    pub time_s: f64,
    /// Total bytes over total time.
    pub bandwidth_gbps: f64,
}

/// One collective op on one backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveSummary {
    pub op: String,
    pub backend: String,
    pub world_size: u32,
    /// Calls recorded, all ranks.
    pub count: u64,
    pub bytes_total: u64,
    pub bytes_p50: u64,
    pub latency_s_p50: f64,
    pub latency_s_p95: f64,
    pub algbw_gbps_p50: f64,
    pub busbw_gbps_p50: f64,
}

/// How many marked memory readings a summary keeps: a loop's marks repeat, the first ones
/// show the phases.
pub const MEMORY_MARKS_KEPT: usize = 64;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One memory reading at a marked point: a site entered or left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryMark {
    pub t: f64,
    pub pid: u32,
    pub site: String,
    pub call: u64,
    /// `enter` or `exit`.
    pub point: String,
    pub rss_bytes: u64,
    /// torch's allocated bytes summed over the devices, when CUDA is in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_allocated_bytes: Option<u64>,
}

/// The highest memory readings at marked points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryPeaks {
    pub rss_bytes_max: u64,
    /// Per device: the highest allocated, reserved and peak-allocated readings.
    pub devices: Vec<DeviceMemory>,
}
