//! The six steps in one call, for a person without an agent (`system-profile profile`):
//! identify → detect → plan → (instrument) → the planned runs within a budget → summarize →
//! (revert). The same engine calls and artifacts as the MCP tools; each stage is reported to
//! an observer so the CLI can draw progress.

use crate::{Engine, EngineError, Progress};
use std::time::Instant;
use system_profile_model::detect::DetectToolsInput;
use system_profile_model::instrument::{RevertChangesInput, Strategy};
use system_profile_model::plan::{PlanProfileInput, PlanStep, RunCondition, TargetSpec};
use system_profile_model::report::{Lang, ReportFormat, SummarizeInput};
use system_profile_model::run::{
    GetRunInput, InsteadOf, RunProfilerInput, RunRecord, RunStatus, StepNotRun,
};
use system_profile_model::target::IdentifyTargetInput;
use system_profile_model::wire_name;

/// What to do with the plan's instrumentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Instrumentation {
    /// Run the profilers only; the user's files are not touched.
    #[default]
    Off,
    /// Apply the planned changes, run, report, then revert them.
    ApplyAndRevert,
    /// Apply the planned changes and leave them (the ledger keeps them for `revert_changes`).
    ApplyAndKeep,
}

/// Options of [`Engine::profile`].
#[derive(Debug, Clone, Default)]
pub struct PipelineConfig {
    /// What the user typed, as after `/system-profile`.
    pub target: String,
    /// Seconds the planned runs may take in all; a run is given what is left as its timeout,
    /// and runs that no longer fit are skipped.
    pub budget_s: Option<f64>,
    pub instrumentation: Instrumentation,
    pub lang: Lang,
    /// The target's interpreter, when the words do not say it.
    pub python: Option<String>,
}

/// One thing the pipeline did, as it happens.
#[derive(Debug, Clone)]
pub enum PipelineEvent {
    /// A stage began: `identify`, `detect`, `plan`, `instrument`, `summarize`, `revert`.
    Stage { name: &'static str, detail: String },
    /// A planned run starts (`index` of `total`, from 1).
    RunStarted {
        index: usize,
        total: usize,
        step: String,
        title: String,
        method: String,
        background: bool,
    },
    /// A run ended (or could not start).
    RunFinished {
        index: usize,
        step: String,
        run_id: Option<String>,
        status: String,
        wall_s: Option<f64>,
        note: Option<String>,
    },
    /// A planned run not started, and why.
    RunSkipped {
        index: usize,
        step: String,
        reason: String,
    },
}

/// One planned run, as it went.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineRun {
    pub step: String,
    pub method: String,
    pub run_id: Option<String>,
    /// `completed`, `failed`, `timed_out`, `cancelled`, `skipped`, `error`.
    pub status: String,
    pub wall_s: Option<f64>,
    pub note: Option<String>,
}

/// What [`Engine::profile`] did.
#[derive(Debug, Clone)]
pub struct PipelineOutcome {
    pub session: String,
    pub target_summary: String,
    pub runs: Vec<PipelineRun>,
    /// Methods the plan could not use here, with the reason.
    pub skipped_methods: Vec<String>,
    /// Changes applied (ids) and whether they were reverted.
    pub changes: Vec<String>,
    pub reverted: bool,
    pub report_markdown_path: String,
    pub report_json_path: String,
    /// The top recommendations' titles, in order.
    pub recommendations: Vec<String>,
    pub wall_s: f64,
}

/// Extra seconds a background run may take past its window before it is cancelled.
const BACKGROUND_GRACE_S: f64 = 30.0;

fn failed(stage: &str, e: EngineError) -> EngineError {
    match e {
        EngineError::Failed { message } => EngineError::Failed {
            message: format!("{stage}: {message}"),
        },
        other => other,
    }
}

impl Engine {
    /// Identify, detect, plan, run the plan within the budget, summarize; with
    /// instrumentation, apply it first and revert it (unless kept) before the report, so its
    /// Part B lists what was done and undone.
    pub async fn profile(
        &self,
        config: PipelineConfig,
        observe: &(dyn Fn(PipelineEvent) + Send + Sync),
    ) -> Result<PipelineOutcome, EngineError> {
        let started = Instant::now();
        if let Some(b) = config.budget_s {
            if !(b.is_finite() && (1.0..=86400.0).contains(&b)) {
                return Err(EngineError::InvalidInput {
                    field: "budget".into(),
                    message: format!("{b} is out of range: give seconds between 1 and 86400"),
                });
            }
        }
        observe(PipelineEvent::Stage {
            name: "identify",
            detail: config.target.clone(),
        });
        let target = self
            .identify_target(IdentifyTargetInput {
                arguments: config.target.clone(),
                cwd: None,
                python: config.python.clone(),
            })
            .await?;
        if target.needs_clarification {
            return Err(EngineError::InvalidInput {
                field: "target".into(),
                message: format!(
                    "{:?} needs clarifying: {}",
                    config.target,
                    target.questions.join(" ")
                ),
            });
        }
        let python = target
            .python
            .as_ref()
            .map(|p| p.executable.clone().unwrap_or_else(|| p.requested.clone()))
            .or(config.python.clone());
        observe(PipelineEvent::Stage {
            name: "detect",
            detail: target.summary.clone(),
        });
        let detected = self
            .detect_tools(
                DetectToolsInput {
                    python: python.clone(),
                    ..DetectToolsInput::default()
                },
                &Progress::none(),
            )
            .await
            .map_err(|e| failed("detect_tools", e))?;
        let usable = detected.tools.iter().filter(|t| t.usable).count();
        observe(PipelineEvent::Stage {
            name: "plan",
            detail: format!(
                "{usable} usable tools, {} GPU(s)",
                detected.hardware.gpu.gpus.len()
            ),
        });
        let plan = self
            .plan_profile(
                PlanProfileInput {
                    target_id: None,
                    target: Some(TargetSpec::Identified(Box::new(target.clone()))),
                    focus: Vec::new(),
                    time_budget_s: config.budget_s,
                    cwd: None,
                    python: python.clone(),
                    lang: config.lang,
                },
                &Progress::none(),
            )
            .await
            .map_err(|e| failed("plan_profile", e))?;
        let skipped_methods: Vec<String> = plan
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.method.id(), s.reason))
            .collect();

        // A plan with nothing to run would end in a session-less summary: say why instead
        // (its questions, or each skipped method's reason, which says what to install).
        if plan.steps.is_empty() {
            return Err(if plan.questions.is_empty() {
                EngineError::Failed {
                    message: format!(
                        "the plan for {} has no step this machine can run ({}); install what the reasons name, then profile again",
                        target.summary,
                        if skipped_methods.is_empty() {
                            "no method applies to it".to_string()
                        } else {
                            skipped_methods.join("; ")
                        }
                    ),
                }
            } else {
                EngineError::InvalidInput {
                    field: "target".into(),
                    message: plan.questions.join(" "),
                }
            });
        }
        let mut changes = Vec::new();
        if config.instrumentation != Instrumentation::Off {
            changes = self.apply_planned(&plan, observe).await?;
        }

        // The budget is for the runs: identifying and detecting take what they take (seconds
        // on a busy machine), and a run starved by them would measure nothing.
        let runs = self
            .run_steps(&plan.steps, config.budget_s, Instant::now(), observe)
            .await;

        let mut reverted = false;
        if config.instrumentation == Instrumentation::ApplyAndRevert && !changes.is_empty() {
            observe(PipelineEvent::Stage {
                name: "revert",
                detail: format!("{} change(s)", changes.len()),
            });
            let result = self
                .revert_changes(RevertChangesInput {
                    all: false,
                    ids: changes.clone(),
                    force: false,
                })
                .await
                .map_err(|e| failed("revert_changes", e))?;
            reverted = result.complete;
        }

        observe(PipelineEvent::Stage {
            name: "summarize",
            detail: self.runs.session().to_string(),
        });
        let report = self
            .summarize(SummarizeInput {
                session: None,
                runs: Vec::new(),
                lang: config.lang,
                format: ReportFormat::Markdown,
            })
            .await
            .map_err(|e| failed("summarize", e))?;
        Ok(PipelineOutcome {
            session: self.runs.session().to_string(),
            target_summary: target.summary,
            runs,
            skipped_methods,
            changes,
            reverted,
            report_markdown_path: report.markdown_path,
            report_json_path: report.json_path,
            recommendations: report
                .report
                .recommendations
                .iter()
                .map(|r| r.title.clone())
                .collect(),
            wall_s: started.elapsed().as_secs_f64(),
        })
    }

    /// The plan's concrete instrumentation, applied. A runner wraps one measure per run, so
    /// here functions are wrapped by decorators (they stack, and revert exactly); a change
    /// the code refuses is reported and skipped, not fatal.
    async fn apply_planned(
        &self,
        plan: &system_profile_model::plan::Plan,
        observe: &(dyn Fn(PipelineEvent) + Send + Sync),
    ) -> Result<Vec<String>, EngineError> {
        let mut ids = Vec::new();
        let concrete: Vec<_> = plan
            .instrumentation
            .iter()
            .filter_map(|s| s.instrument_file.clone())
            .collect();
        observe(PipelineEvent::Stage {
            name: "instrument",
            detail: if concrete.is_empty() {
                "the plan has no instrumentation for this target's code".into()
            } else {
                format!("{} change(s) planned", concrete.len())
            },
        });
        for mut input in concrete {
            if input.strategy == Strategy::Runner {
                input.strategy = Strategy::Decorator;
            }
            let what = format!(
                "{} {} in {}",
                wire_name(&input.measure),
                input.function.clone().unwrap_or_else(|| "the block".into()),
                input.path
            );
            match self.instrument_file(input).await {
                Ok(r) => {
                    observe(PipelineEvent::Stage {
                        name: "instrument",
                        detail: format!("{what}: {}", r.change_ids.join(", ")),
                    });
                    ids.extend(r.change_ids);
                }
                Err(e) => observe(PipelineEvent::Stage {
                    name: "instrument",
                    detail: format!("{what}: not applied ({e})"),
                }),
            }
        }
        Ok(ids)
    }

    /// Run the steps in order; a background step starts before the step it runs beside and
    /// is waited for after it.
    async fn run_steps(
        &self,
        steps: &[PlanStep],
        budget_s: Option<f64>,
        started: Instant,
        observe: &(dyn Fn(PipelineEvent) + Send + Sync),
    ) -> Vec<PipelineRun> {
        let total = steps.len();
        let index_of = |id: &str| steps.iter().position(|s| s.id == id).unwrap_or(0) + 1;
        let mut out: Vec<PipelineRun> = Vec::new();
        // How long each started command took (the longest completed run of it).
        let mut took_s: std::collections::HashMap<String, f64> = Default::default();
        // Each step's run once it ended, for the steps that run only if it showed a need.
        let mut ended: std::collections::HashMap<String, RunRecord> = Default::default();
        for step in steps.iter().filter(|s| !s.run_profiler.background) {
            let beside: Vec<&PlanStep> = steps
                .iter()
                .filter(|s| s.run_profiler.background && s.alongside.as_deref() == Some(&step.id))
                .collect();
            let left_s = budget_s.map(|b| b - started.elapsed().as_secs_f64());
            // A started command runs to its end: when an earlier run of the same command
            // took longer than what is left, this one would be killed before its profiler
            // wrote anything. Say so instead of running it.
            let too_long = left_s.and_then(|left| {
                let took = took_s
                    .get(&target_key(&step.run_profiler))
                    .filter(|_| !target_key(&step.run_profiler).is_empty())?;
                (step.run_profiler.duration_s.is_none() && took * 1.1 + STOP_MARGIN_S > left)
                    .then(|| format!("the command took {took:.1} s in an earlier run and {left:.1} s of the budget is left: it would be stopped before writing anything; give a larger --budget"))
            });
            let spent = left_s
                .filter(|l| *l < 1.0)
                .map(|left| format!("the budget is spent ({left:.0} s left)"));
            if let Some(reason) = spent.or(too_long).or_else(|| not_worth_it(step, &ended)) {
                for s in std::iter::once(step).chain(beside.iter().copied()) {
                    let reason = reason.clone();
                    observe(PipelineEvent::RunSkipped {
                        index: index_of(&s.id),
                        step: s.id.clone(),
                        reason: reason.clone(),
                    });
                    self.runs.left_out(StepNotRun {
                        step: s.id.clone(),
                        method: s.method,
                        title: s.title.clone(),
                        reason: reason.clone(),
                    });
                    out.push(PipelineRun {
                        step: s.id.clone(),
                        method: s.method.id(),
                        run_id: None,
                        status: "skipped".into(),
                        wall_s: None,
                        note: Some(reason),
                    });
                }
                continue;
            }
            let mut background = Vec::new();
            for b in &beside {
                observe(PipelineEvent::RunStarted {
                    index: index_of(&b.id),
                    total,
                    step: b.id.clone(),
                    title: b.title.clone(),
                    method: b.method.id(),
                    background: true,
                });
                let mut input = b.run_profiler.clone();
                fit_to_budget(&mut input, left_s);
                match self.run_profiler(input, &Progress::none()).await {
                    Ok(r) => background.push((b, r.run_id)),
                    Err(e) => out.push(self.finished(observe, index_of(&b.id), b, Err(e))),
                }
            }
            observe(PipelineEvent::RunStarted {
                index: index_of(&step.id),
                total,
                step: step.id.clone(),
                title: step.title.clone(),
                method: step.method.id(),
                background: false,
            });
            let trimmed = trim_passes(step, &ended);
            let step = trimmed.as_ref().map_or(step, |(s, _)| s);
            if let Some((_, why)) = &trimmed {
                observe(PipelineEvent::Stage {
                    name: "trimmed",
                    detail: format!("{}: {why}", step.id),
                });
            }
            let result = self
                .run_with_fallbacks(step, budget_s, started, observe)
                .await;
            if let Ok(r) = &result {
                ended.insert(step.id.clone(), r.clone());
                if let (RunStatus::Completed, Some(wall)) = (&r.status, r.wall_s) {
                    let key = target_key(&step.run_profiler);
                    let longest = took_s.get(&key).copied().unwrap_or(0.0).max(wall);
                    took_s.insert(key, longest);
                }
            }
            out.push(self.finished(observe, index_of(&step.id), step, result));
            for (b, run_id) in background {
                let wait_s = b.run_profiler.duration_s.unwrap_or(0.0) + BACKGROUND_GRACE_S;
                let mut record = self
                    .get_run(GetRunInput {
                        run_id: run_id.clone(),
                        wait_s: Some(wait_s),
                    })
                    .await;
                if matches!(&record, Ok(r) if r.status == RunStatus::Running) {
                    record = self.cancel_run(system_profile_model::run::CancelRunInput {
                        run_id: run_id.clone(),
                    });
                }
                out.push(self.finished(observe, index_of(&b.id), b, record));
            }
        }
        out
    }

    /// Run a step; when its method cannot start (its program missing or refused), run the
    /// next of its fallbacks instead, and mark that run with the one it replaced.
    async fn run_with_fallbacks(
        &self,
        step: &PlanStep,
        budget_s: Option<f64>,
        started: Instant,
        observe: &(dyn Fn(PipelineEvent) + Send + Sync),
    ) -> Result<system_profile_model::run::RunRecord, EngineError> {
        let left_s = || budget_s.map(|b| b - started.elapsed().as_secs_f64());
        let mut input = step.run_profiler.clone();
        fit_to_budget(&mut input, left_s());
        let mut record = self.run_recorded(input, &Progress::none()).await?;
        for fallback in &step.fallbacks {
            let Some(why) = record.not_started.clone() else {
                break;
            };
            observe(PipelineEvent::Stage {
                name: "fallback",
                detail: format!(
                    "{}: {} measured nothing ({why}); {} runs instead",
                    step.id,
                    record.profiler.id(),
                    fallback.method.id()
                ),
            });
            let replaced = InsteadOf {
                method: record.profiler,
                run_id: record.run_id.clone(),
                why,
            };
            let mut input = fallback.run_profiler.clone();
            fit_to_budget(&mut input, left_s());
            record = self.run_recorded(input, &Progress::none()).await?;
            self.runs.stands_in_for(&record.run_id, replaced.clone());
            record.instead_of = Some(replaced);
        }
        Ok(record)
    }

    fn finished(
        &self,
        observe: &(dyn Fn(PipelineEvent) + Send + Sync),
        index: usize,
        step: &PlanStep,
        result: Result<system_profile_model::run::RunRecord, EngineError>,
    ) -> PipelineRun {
        let run = match result {
            Ok(r) => PipelineRun {
                step: step.id.clone(),
                method: r.profiler.id(),
                status: wire_name(&r.status),
                wall_s: r.wall_s,
                note: r.error.clone().or_else(|| {
                    r.instead_of
                        .as_ref()
                        .map(|i| {
                            format!(
                                "instead of {}, which measured nothing: {}",
                                i.method.id(),
                                i.why
                            )
                        })
                        .or_else(|| r.warnings.first().cloned())
                }),
                run_id: Some(r.run_id),
            },
            Err(e) => PipelineRun {
                step: step.id.clone(),
                method: step.method.id(),
                run_id: None,
                status: "error".into(),
                wall_s: None,
                note: Some(e.to_string()),
            },
        };
        observe(PipelineEvent::RunFinished {
            index,
            step: run.step.clone(),
            run_id: run.run_id.clone(),
            status: run.status.clone(),
            wall_s: run.wall_s,
            note: run.note.clone(),
        });
        run
    }
}

/// Why `step` is not worth running after the run it waits for (`PlanStep::runs_if`): that
/// run completed and its figures do not meet the condition. A step whose deciding run failed
/// or has no figures runs: nothing says it is not needed.
fn not_worth_it(
    step: &PlanStep,
    ended: &std::collections::HashMap<String, RunRecord>,
) -> Option<String> {
    let runs_if = step.runs_if.as_ref()?;
    let earlier = ended
        .get(&runs_if.after_step)
        .filter(|r| r.status == RunStatus::Completed)?;
    match runs_if.condition.holds(earlier)? {
        (true, _) => None,
        (false, figures) => Some(match runs_if.condition {
            RunCondition::MemoryMatters => format!(
                "{figures}; an allocation profile ({}) would find little worth changing at that size, and costs several times the run; name `memory` in the target to run it anyway",
                step.method.id()
            ),
        }),
    }
}

/// `step` without the parts of its run that the run it waits for shows nothing will use, and
/// why: memray's pass over its short-lived allocations feeds only the large-buffer churn
/// finding, which needs the run without a profiler to have spent time in the kernel.
fn trim_passes(
    step: &PlanStep,
    ended: &std::collections::HashMap<String, RunRecord>,
) -> Option<(PlanStep, String)> {
    if step.method != system_profile_model::run::Method::Memray
        || step.run_profiler.options.short_lived.is_some()
    {
        return None;
    }
    let earlier = ended
        .get(&step.runs_if.as_ref()?.after_step)
        .filter(|r| r.status == RunStatus::Completed)?;
    let (false, figures) = system_profile_model::plan::kernel_churn_can_cost(earlier)? else {
        return None;
    };
    let mut trimmed = step.clone();
    trimmed.run_profiler.options.short_lived = Some(false);
    Some((
        trimmed,
        format!("{figures}: no churn of large buffers cost it anything, so memray's short-lived allocations are not read"),
    ))
}

/// The command a run starts, as a key (`None`-like empty for a PID or the machine).
fn target_key(input: &RunProfilerInput) -> String {
    match &input.target {
        system_profile_model::run::RunTarget::Command { .. } => {
            serde_json::to_string(&input.target).unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// Time a method needs after its window to stop and write what it measured (py-spy writes its
/// samples at the end; a timeout inside that time loses them all).
const STOP_MARGIN_S: f64 = 2.0;

/// Fit one run into what is left of the budget: its window shrinks so that the window and the
/// time to write it out end before the budget does, and the timeout is the budget's end. A
/// window is never cut by the timeout when shrinking it would have kept the data.
fn fit_to_budget(input: &mut RunProfilerInput, left_s: Option<f64>) {
    let Some(left) = left_s else { return };
    if let Some(window) = input.duration_s.as_mut() {
        let room = (left - STOP_MARGIN_S).max(MIN_FITTED_WINDOW_S);
        if *window > room {
            *window = room;
        }
    }
    input.timeout_s = shorter(input.timeout_s, Some(left));
}

/// The shortest window worth running when the budget is nearly spent.
const MIN_FITTED_WINDOW_S: f64 = 0.5;

fn shorter(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An interpreter of its own under `root`: a fresh venv has nothing installed, memray
    /// included.
    fn fresh_venv(root: &std::path::Path) -> String {
        let made = std::process::Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(root.join("venv"))
            .status()
            .unwrap();
        assert!(made.success(), "python3 -m venv failed");
        root.join("venv/bin/python").to_string_lossy().into_owned()
    }

    /// memray's step waiting for the measure run `s1`, as the planner makes it.
    fn memray_after_measure() -> PlanStep {
        serde_json::from_value(serde_json::json!({
            "id": "s2", "method": "memray", "mode": "launch", "title": "allocation sites",
            "why": "", "overhead": "high", "overhead_note": "", "families": [], "artifacts": [],
            "metrics": [],
            "run_profiler": {"profiler": "memray", "target": {"command": ["python", "x.py"]}},
            "runs_if": {"after_step": "s1", "condition": "memory_matters"},
        }))
        .unwrap()
    }

    /// The measure run `s1` with time -v's user and system time and minor faults.
    fn measured(user_s: f64, sys_s: f64, minor_faults: u64) -> HashMap<String, RunRecord> {
        let mut r: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r001-measure", "session": "s", "profiler": "measure", "status": "completed",
            "target": {"command": ["python", "x.py"]}, "argv": [], "cwd": "/",
            "started_at_unix_s": 0.0, "dir": "r001-measure", "artifacts": [], "metrics": {},
            "stdout_tail": "", "stderr_tail": "",
        }))
        .unwrap();
        r.metrics.time_v = Some(system_profile_model::metrics::TimeV {
            user_s,
            sys_s,
            minor_faults,
            ..Default::default()
        });
        HashMap::from([("s1".to_string(), r)])
    }

    #[test]
    fn memrays_short_lived_pass_is_left_out_where_the_kernel_had_no_cost_to_show() {
        let step = memray_after_measure();
        // json.tool on 37.5 MB without a profiler: 6% in the kernel, 76,048 faults.
        let (trimmed, why) = trim_passes(&step, &measured(3.99, 0.27, 76_048)).unwrap();
        assert_eq!(trimmed.run_profiler.options.short_lived, Some(false));
        assert!(
            why.contains("6.3% of its CPU time in the kernel (under 10%)")
                && why.contains("76048 minor page faults (under 100000)"),
            "{why}"
        );
        // word_language_model: 21% in the kernel, 1.5 M faults: the churn finding needs it.
        assert!(trim_passes(&step, &measured(12.24, 3.3, 1_500_825)).is_none());
        // What the plan or the user set stays; so does a step that waits for nothing.
        let mut asked = step.clone();
        asked.run_profiler.options.short_lived = Some(true);
        assert!(trim_passes(&asked, &measured(3.99, 0.27, 76_048)).is_none());
        let mut named = step.clone();
        named.runs_if = None;
        assert!(trim_passes(&named, &measured(3.99, 0.27, 76_048)).is_none());
    }

    fn windowed(duration_s: Option<f64>) -> RunProfilerInput {
        serde_json::from_value(serde_json::json!({
            "profiler": "py_spy_record",
            "target": {"pid": 1},
            "duration_s": duration_s,
        }))
        .unwrap()
    }

    #[test]
    fn a_window_shrinks_to_end_before_the_budget_and_is_never_cut_by_it() {
        // 5 s left, a 7 s window: the window becomes 3 s, the timeout 5 s, so the method
        // stops by itself and writes what it measured before the timeout.
        let mut input = windowed(Some(7.0));
        fit_to_budget(&mut input, Some(5.0));
        assert_eq!(input.duration_s, Some(3.0));
        assert_eq!(input.timeout_s, Some(5.0));
        // A window that fits is left alone.
        let mut input = windowed(Some(2.0));
        fit_to_budget(&mut input, Some(30.0));
        assert_eq!((input.duration_s, input.timeout_s), (Some(2.0), Some(30.0)));
        // No budget: nothing changes.
        let mut input = windowed(Some(7.0));
        fit_to_budget(&mut input, None);
        assert_eq!((input.duration_s, input.timeout_s), (Some(7.0), None));
        // A command without a window gets only the timeout.
        let mut input = windowed(None);
        fit_to_budget(&mut input, Some(1.5));
        assert_eq!((input.duration_s, input.timeout_s), (None, Some(1.5)));
    }

    /// Detection said memray was there; the target's interpreter has none. The memray run
    /// does not start, tracemalloc (the next of the memory step's chain) runs instead, and
    /// the run, the pipeline's list and the report say so.
    #[tokio::test]
    async fn a_method_that_cannot_start_falls_back_to_the_next_of_its_chain() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let python = fresh_venv(root);
        std::fs::write(
            root.join("grow.py"),
            "hold = [bytes(1000) for _ in range(20_000)]\nprint(len(hold))\n",
        )
        .unwrap();
        let engine = Engine::new(crate::EngineConfig {
            root: root.to_path_buf(),
            default_python: python.clone(),
        });
        let target = engine
            .identify_target(IdentifyTargetInput {
                arguments: "grow.py memory".into(),
                cwd: None,
                python: Some(python.clone()),
            })
            .await
            .unwrap();
        let resolved = target
            .python
            .as_ref()
            .and_then(|p| p.executable.clone())
            .unwrap_or(python.clone());
        let mut report = engine
            .detect_tools(
                DetectToolsInput {
                    python: Some(resolved.clone()),
                    ..Default::default()
                },
                &Progress::none(),
            )
            .await
            .unwrap();
        let memray = report.tools.iter_mut().find(|t| t.id == "memray").unwrap();
        assert!(!memray.usable, "the fresh venv has no memray: {memray:?}");
        (memray.available, memray.usable, memray.reason) = (true, true, None);
        // The allocation sampler comes first where a C compiler is: left out here, so that
        // memray leads the chain this test is about.
        let cc = report.tools.iter_mut().find(|t| t.id == "cc").unwrap();
        (cc.available, cc.usable, cc.reason) = (false, false, Some("left out by the test".into()));
        engine
            .detect_cache
            .lock()
            .await
            .insert(resolved, std::sync::Arc::new(report));

        let stages = std::sync::Mutex::new(Vec::new());
        let outcome = engine
            .profile(
                PipelineConfig {
                    target: "grow.py memory".into(),
                    budget_s: Some(600.0),
                    python: Some(python),
                    ..Default::default()
                },
                &|e| {
                    if let PipelineEvent::Stage { name, detail } = e {
                        stages.lock().unwrap().push(format!("{name}: {detail}"));
                    }
                },
            )
            .await
            .unwrap();
        let stood_in = outcome
            .runs
            .iter()
            .find(|r| r.method == "tracemalloc")
            .unwrap_or_else(|| panic!("expected a tracemalloc run, came {:?}", outcome.runs));
        assert_eq!(stood_in.status, "completed", "{stood_in:?}");
        let note = stood_in.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("instead of memray"),
            "expected the run to say what it replaced, came {note:?}"
        );
        let record = engine
            .runs
            .get(stood_in.run_id.as_deref().unwrap())
            .unwrap();
        let replaced = record.instead_of.expect("instead_of on the record");
        assert_eq!(replaced.method, system_profile_model::run::Method::Memray);
        assert!(
            replaced.why.contains("memray is not installed"),
            "{replaced:?}"
        );
        let failed = engine.runs.get(&replaced.run_id).unwrap();
        assert!(failed.not_started.is_some(), "{failed:?}");
        assert_eq!(
            failed.error_kind,
            Some(system_profile_model::run::RunErrorKind::ToolUnavailable),
            "{failed:?}"
        );
        assert!(
            stages
                .lock()
                .unwrap()
                .iter()
                .any(|s| s.starts_with("fallback: ")),
            "{:?}",
            stages.lock().unwrap()
        );
        let markdown = std::fs::read_to_string(root.join(&outcome.report_markdown_path))
            .or_else(|_| std::fs::read_to_string(&outcome.report_markdown_path))
            .unwrap();
        assert!(
            markdown.contains("ran tracemalloc instead of memray"),
            "the report says which method stood in:\n{markdown}"
        );
    }

    /// Under the recipe's focus, the allocation profile runs only when the measure run shows
    /// memory worth it: a program holding 20 MiB gets none, and the session says why; one
    /// holding 160 MiB gets its sites.
    #[tokio::test]
    async fn an_allocation_profile_runs_only_for_a_program_whose_memory_matters() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let python = fresh_venv(root);
        std::fs::write(
            root.join("small.py"),
            "print(sum(i * i for i in range(3_000_000)))\n",
        )
        .unwrap();
        // 160 MiB of 1 KiB objects, each one written: resident, not just reserved.
        std::fs::write(
            root.join("held.py"),
            "hold = [bytes([i % 256]) * 1024 for i in range(160 * 1024)]\nprint(len(hold))\n",
        )
        .unwrap();
        let engine = Engine::new(crate::EngineConfig {
            root: root.to_path_buf(),
            default_python: python.clone(),
        });
        let profile = |target: &str| {
            engine.profile(
                PipelineConfig {
                    target: target.into(),
                    budget_s: Some(600.0),
                    python: Some(python.clone()),
                    ..Default::default()
                },
                &|_| {},
            )
        };
        let allocation_step = |o: &PipelineOutcome| {
            o.runs
                .iter()
                .find(|r| {
                    system_profile_model::run::Method::ALL.iter().any(|m| {
                        m.id() == r.method
                            && m.spec()
                                .families
                                .contains(&system_profile_model::run::MetricFamily::AllocationSites)
                    })
                })
                .cloned()
                .unwrap_or_else(|| panic!("no allocation step among {:?}", o.runs))
        };

        let small = profile("small.py").await.unwrap();
        let skipped = allocation_step(&small);
        assert_eq!(skipped.status, "skipped", "{skipped:?}");
        let why = skipped.note.clone().unwrap_or_default();
        assert!(
            why.contains("under 64 MiB") && why.contains("name `memory`"),
            "{why}"
        );
        let manifest = engine.runs.list();
        assert_eq!(manifest.not_run.len(), 1, "{:?}", manifest.not_run);
        assert_eq!(manifest.not_run[0].reason, why);
        let markdown = std::fs::read_to_string(root.join(&small.report_markdown_path))
            .or_else(|_| std::fs::read_to_string(&small.report_markdown_path))
            .unwrap();
        assert!(
            markdown.contains("Allocation sites not profiled"),
            "{markdown}"
        );

        let held = profile("held.py").await.unwrap();
        let ran = allocation_step(&held);
        assert_eq!(ran.status, "completed", "{ran:?}");
    }
}
