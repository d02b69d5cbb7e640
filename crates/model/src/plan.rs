//! `plan_profile`: an ordered plan of measurements for a target, from its recipe, its focus and
//! the tools this machine really has.

use crate::instrument::{InstrumentFileInput, Measure};
use crate::run::{Method, MetricFamily, OverheadLevel, RunProfilerInput, TargetMode};
use crate::target::{Focus, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The target to plan for: what `identify_target` returned, or the raw arguments (identified
/// first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TargetSpec {
    /// The raw arguments, as `identify_target` takes them.
    Arguments(String),
    /// The output of `identify_target`.
    Identified(Box<Target>),
}

/// Input of `plan_profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanProfileInput {
    /// The `target_id` identify_target returned (this server's session keeps the target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    /// Or the target itself: the raw arguments, or identify_target's whole output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
    /// Focus areas; default: the target's own, else what suits its kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub focus: Vec<Focus>,
    /// Seconds the whole plan may take; steps that do not fit are skipped, longest last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub time_budget_s: Option<f64>,
    /// For raw arguments: the directory to resolve them in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The target's Python interpreter (also used for detection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The language of the runs' labels (the recipe steps' names), as the report's.
    #[serde(default)]
    pub lang: crate::report::Lang,
}

/// The recipe a plan follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecipeRef {
    pub id: String,
    pub name: String,
    /// `recipes/<id>.toml` in the source tree.
    pub file: String,
    pub description: String,
}

/// One measurement of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanStep {
    /// `s1`, `s2`, ... in run order.
    pub id: String,
    pub method: Method,
    /// The `detect_tools` id it uses; absent for built-in samplers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub mode: TargetMode,
    /// What it does to what (`py-spy record on pid 4121 (api server)`).
    pub title: String,
    /// Why it fits this target.
    pub why: String,
    pub overhead: OverheadLevel,
    pub overhead_note: String,
    pub families: Vec<MetricFamily>,
    pub artifacts: Vec<String>,
    pub metrics: Vec<String>,
    /// Seconds the step is expected to take (its `duration_s`, or the target's run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_s: Option<f64>,
    /// Run it in the background while the step named here runs (samplers beside a load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alongside: Option<String>,
    /// Methods preferred for this step that cannot run here (see `skipped`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instead_of: Vec<Method>,
    /// Limits that apply (software counters only, needs the server restarted, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Exactly what to pass to `run_profiler`.
    pub run_profiler: RunProfilerInput,
    /// The later methods of the step's chain that can run here too, in order: when this
    /// step's run measured nothing (`not_started`: its program missing or refused, or the
    /// target ended before py-spy could read it), the next one runs instead and says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<Fallback>,
    /// Run it only when the step named here (an earlier run of the same command) showed
    /// what it is for; `profile` decides when that run ends, and says why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_if: Option<RunsIf>,
}

/// What an earlier run must show for a step to be worth its cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunsIf {
    /// The step whose run decides (a `measure` of the same command).
    pub after_step: String,
    pub condition: RunCondition,
}

/// A condition read on the plain figures of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunCondition {
    /// The program's memory is worth an allocation profile: it held at least
    /// `MEMORY_WORTH_A_PROFILE_RSS_BYTES` (its largest process's peak RSS, or its whole tree's
    /// PSS peak where the /proc sampler read it: a pool of workers holds more than any one
    /// of them), or the pages it faulted in over the run add up to
    /// `MEMORY_WORTH_A_PROFILE_PAGED_IN_BYTES` (buffers made and freed).
    MemoryMatters,
}

/// A largest-process peak RSS worth an allocation profile: the interpreter alone holds 10 to
/// 20 MiB (pyperformance's richards peaked at 19.9 MiB), so this is some 40 MiB of the
/// program's own.
pub const MEMORY_WORTH_A_PROFILE_RSS_BYTES: u64 = 64 << 20;
/// Bytes of pages faulted in over the run (minor faults times the page size) worth an
/// allocation profile: large buffers (served by mmap) made and freed fault their pages in each
/// time (json.tool on 37.5 MB: 297 MiB). A total, not a rate: the interpreter's start-up
/// faults in some 15 MiB, which a short run's rate would magnify.
pub const MEMORY_WORTH_A_PROFILE_PAGED_IN_BYTES: u64 = 256 << 20;

impl RunCondition {
    /// Whether the run's figures meet the condition, and the figures that say so, as a
    /// sentence; `None` when the run has none of them (it failed early: the step runs).
    pub fn holds(self, earlier: &crate::run::RunRecord) -> Option<(bool, String)> {
        match self {
            RunCondition::MemoryMatters => {
                let t = earlier.metrics.time_v.as_ref()?;
                let tree_pss = earlier
                    .metrics
                    .procfs
                    .as_ref()
                    .and_then(|p| p.pss_peak_bytes);
                let (held, what) = match tree_pss {
                    Some(pss) if pss > t.max_rss_bytes => (pss, "its processes' PSS peak"),
                    _ => (t.max_rss_bytes, "its largest process's RSS peak"),
                };
                let paged_in = t.minor_faults * t.page_size_bytes.unwrap_or(4096);
                let holds = held >= MEMORY_WORTH_A_PROFILE_RSS_BYTES
                    || paged_in >= MEMORY_WORTH_A_PROFILE_PAGED_IN_BYTES;
                let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
                let against = |v: u64, limit: u64| if v >= limit { "at least" } else { "under" };
                let figures = format!(
                    "in {} the program held {:.1} MiB ({what}; {} {} MiB) and it faulted in {:.0} MiB of pages ({} {} MiB)",
                    earlier.run_id,
                    mib(held),
                    against(held, MEMORY_WORTH_A_PROFILE_RSS_BYTES),
                    MEMORY_WORTH_A_PROFILE_RSS_BYTES >> 20,
                    mib(paged_in),
                    against(paged_in, MEMORY_WORTH_A_PROFILE_PAGED_IN_BYTES),
                    MEMORY_WORTH_A_PROFILE_PAGED_IN_BYTES >> 20,
                );
                Some((holds, figures))
            }
        }
    }
}

/// Large buffers made and freed again cost a program something only where its run without a
/// profiler spent at least this share of its CPU time in the kernel, with at least this many
/// minor page faults (a buffer above glibc's thresholds is mapped and unmapped each time, and
/// every first touch of its pages faults): the large-buffer churn rule's floor. Below it the
/// pass that reads memray's short-lived allocations has nothing to feed (json.tool on 37.5 MB:
/// 6% in the kernel; the pass took 29 s of its capture, the longest of memray's three).
pub const CHURN_SYS_SHARE: f64 = 0.1;
pub const CHURN_MIN_MINOR_FAULTS: u64 = 100_000;

/// Whether a run without a profiler spent enough in the kernel, with enough page faults, for
/// large-buffer churn to have cost it anything, and the figures that say so, as a sentence;
/// `None` without `time -v`'s figures.
pub fn kernel_churn_can_cost(run: &crate::run::RunRecord) -> Option<(bool, String)> {
    let t = run.metrics.time_v.as_ref()?;
    let cpu_s = t.user_s + t.sys_s;
    if cpu_s <= 0.0 {
        return None;
    }
    let share = t.sys_s / cpu_s;
    let holds = share >= CHURN_SYS_SHARE && t.minor_faults >= CHURN_MIN_MINOR_FAULTS;
    let against = |at_least: bool| if at_least { "at least" } else { "under" };
    Some((
        holds,
        format!(
            "in {} the program spent {:.1}% of its CPU time in the kernel ({} {:.0}%) with {} minor page faults ({} {})",
            run.run_id,
            share * 100.0,
            against(share >= CHURN_SYS_SHARE),
            CHURN_SYS_SHARE * 100.0,
            t.minor_faults,
            against(t.minor_faults >= CHURN_MIN_MINOR_FAULTS),
            CHURN_MIN_MINOR_FAULTS
        ),
    ))
}

/// A method that stands in for a step's own when that one measured nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fallback {
    pub method: Method,
    /// The `detect_tools` id it uses; absent for built-in samplers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Exactly what to pass to `run_profiler` instead.
    pub run_profiler: RunProfilerInput,
}

/// A method the plan would have used, and why it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedMethod {
    pub method: Method,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The recipe step it was for.
    pub step: String,
    pub reason: String,
    /// The install line, permission setting or other change that would allow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Measurement code to insert where outside tools cannot see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstrumentSuggestion {
    pub measure: Measure,
    /// What it finds that no profiler above does.
    pub why: String,
    /// The code it was chosen from (`train_step calls .to() and backward()`).
    pub evidence: String,
    /// Exactly what to pass to `instrument_file`; absent when the place is not known yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instrument_file: Option<InstrumentFileInput>,
    /// What to decide before instrumenting, when `instrument_file` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo: Option<String>,
}

/// Whether a metric family is measured, and by which steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CoverageStatus {
    /// A step measures it.
    Covered,
    /// Only the suggested instrumentation measures it.
    ByInstrumentation,
    /// It applies but nothing here can measure it (see `reason`).
    Uncovered,
    /// The focus names it but this target or machine cannot have it (one GPU has no
    /// GPU-to-GPU traffic); see `reason`.
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FamilyCoverage {
    pub family: MetricFamily,
    pub status: CoverageStatus,
    /// Step ids that measure it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A target named by the id this server's session keeps it under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TargetRef {
    /// What `run_profiler` takes as `{"target_id": …}`.
    pub target_id: String,
    pub kind: crate::target::TargetKind,
    /// One line saying what the target is.
    pub summary: String,
}

impl From<&Target> for TargetRef {
    /// `target_id` is set by the session that kept the target (empty when none did).
    fn from(t: &Target) -> Self {
        TargetRef {
            target_id: t.target_id.clone().unwrap_or_default(),
            kind: t.kind,
            summary: t.summary.clone(),
        }
    }
}

/// The detection the plan rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DetectionUsed {
    pub python: String,
    pub usable_tools: Vec<String>,
    pub gpus: usize,
    pub cached: bool,
    pub detected_at_unix_s: f64,
}

/// Output of `plan_profile`. `T` is how the plan holds its target: whole (`Target`), or as
/// MCP clients get it, by id (`TargetRef`: they hold identify_target's answer already).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan<T = Target> {
    pub target: T,
    /// Absent when the target is not resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<RecipeRef>,
    /// The focus the plan covers.
    pub focus: Vec<Focus>,
    /// Where the focus came from.
    pub focus_source: String,
    /// Metric families that apply to this target and focus, with their coverage.
    pub coverage: Vec<FamilyCoverage>,
    pub steps: Vec<PlanStep>,
    pub skipped: Vec<SkippedMethod>,
    pub instrumentation: Vec<InstrumentSuggestion>,
    /// Sum of the steps' estimates, in seconds (steps that run alongside others not counted).
    pub estimated_wall_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_budget_s: Option<f64>,
    /// The target is not resolved: ask these first (the plan then has no steps).
    pub needs_clarification: bool,
    pub questions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub detection: DetectionUsed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::TimeV;
    use crate::run::RunRecord;

    /// A measure run with time -v's figures as a real one wrote them.
    fn measured(max_rss_bytes: u64, minor_faults: u64, wall_s: f64) -> RunRecord {
        let mut r: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r001-measure", "session": "s", "profiler": "measure",
            "status": "completed", "target": {"command": ["python", "x.py"]}, "argv": [],
            "cwd": ".", "started_at_unix_s": 0.0, "dir": "d", "artifacts": [],
            "metrics": {}, "stdout_tail": "", "stderr_tail": ""
        }))
        .unwrap();
        r.metrics.time_v = Some(TimeV {
            max_rss_bytes,
            minor_faults,
            wall_s,
            page_size_bytes: Some(4096),
            ..TimeV::default()
        });
        r
    }

    #[test]
    fn memory_matters_for_what_a_program_holds_or_pages_in_not_for_the_interpreter() {
        let c = RunCondition::MemoryMatters;
        // pyperformance richards (--loops 100): 20.8 MB at most, 3,834 faults in 8.2 s.
        let (holds, figures) = c.holds(&measured(20_770_816, 3_834, 8.2)).unwrap();
        assert!(!holds, "{figures}");
        assert!(
            figures.contains("19.8 MiB (its largest process's RSS peak; under 64 MiB)"),
            "{figures}"
        );
        assert!(
            figures.contains("15 MiB of pages (under 256 MiB)"),
            "{figures}"
        );
        // The same interpreter start-up in a 0.3 s run: as few pages, so still not.
        assert!(!c.holds(&measured(20_770_816, 3_834, 0.3)).unwrap().0);
        // json.tool on 37.5 MB: 266.6 MiB held, 76,054 faults.
        assert!(c.holds(&measured(279_552_000, 76_054, 4.85)).unwrap().0);
        // Little held at once, but large buffers made and freed: 400 MiB paged in.
        assert!(c.holds(&measured(40 << 20, 102_400, 30.0)).unwrap().0);
        // A pool: each of four workers holds 30 MiB, the tree 120 MiB (PSS): it matters.
        let mut pool = measured(30 << 20, 8_000, 10.0);
        pool.metrics.procfs = Some(crate::metrics::ProcfsSummary {
            pss_peak_bytes: Some(120 << 20),
            ..Default::default()
        });
        let (holds, figures) = c.holds(&pool).unwrap();
        assert!(holds, "{figures}");
        assert!(
            figures.contains("120.0 MiB (its processes' PSS peak; at least 64 MiB)"),
            "{figures}"
        );
        // No time -v figures (the run failed early): nothing says the step is not needed.
        let mut failed = measured(0, 0, 0.0);
        failed.metrics.time_v = None;
        assert_eq!(c.holds(&failed), None);
    }
}
