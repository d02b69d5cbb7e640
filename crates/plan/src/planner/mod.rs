//! Step 2: a target, a focus and the detected tools → an ordered plan. Pure: the same inputs
//! give the same plan, so it is tested without running anything.
//!
//! The recipe gives the steps and their order; each step takes the first of its methods that
//! can run here (tool usable, permission granted, GPU present, mode fits the target); metric
//! families the focus asks for and no recipe step measures are filled from the method catalog,
//! lowest overhead first; what cannot be measured is said, with the reason.
//!
//! `plan` runs the phases in order (`phases`): draft the recipe's steps, dedupe (a method's
//! spec says which others it subsumes), fill uncovered families, fit the time budget, number
//! the steps, then say the coverage.

mod conditions;
mod drafts;
mod families;
mod instrumentation;
mod options;
mod phases;
mod together;
mod viable;

use drafts::*;
use families::*;
use instrumentation::*;
use options::*;
use phases::*;
use together::*;
use viable::*;

use crate::recipe::{fill, Recipes};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use system_profile_model::detect::DetectReport;
use system_profile_model::instrument::{InstrumentFileInput, LineRange, Measure};
use system_profile_model::plan::{
    CoverageStatus, DetectionUsed, Fallback, FamilyCoverage, InstrumentSuggestion, Plan, PlanStep,
    RecipeRef, SkippedMethod,
};
use system_profile_model::recipe::{InstrumentRule, Per, Recipe, Step, When};
use system_profile_model::report::Lang;
use system_profile_model::run::{
    Method, MetricFamily, ProfilerOptions, RunProfilerInput, RunTarget, TargetMode,
};
use system_profile_model::target::{Focus, ProcessInfo, PythonOutline, Target, TargetKind};

/// What the caller adds to the target.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Focus to plan for; empty: the target's, else the recipe's default.
    pub focus: Vec<Focus>,
    pub time_budget_s: Option<f64>,
    /// The server's root: `instrument_file` only edits files under it.
    pub root: PathBuf,
    /// Whether a program can be started (a load generator's CLI); `exec::which` in the server.
    pub program_exists: fn(&str) -> bool,
    /// The language of the runs' labels.
    pub lang: Lang,
}

/// Default observation window of attach and machine steps, in seconds.
const DEFAULT_WINDOW_S: f64 = 30.0;
/// The shortest window a budget may cut a step down to.
const MIN_WINDOW_S: f64 = 5.0;
/// At most this many processes get a per-process step; the rest are named in a note.
const MAX_PER_PROCESS: usize = 16;

/// Packages whose import means the code uses a GPU.
const GPU_PACKAGES: &[&str] = &[
    "torch",
    "cupy",
    "jax",
    "tensorflow",
    "vllm",
    "sglang",
    "triton",
    "numba",
    "transformers",
];

/// Facts about the target and machine that steps and families depend on.
struct Context<'a> {
    target: &'a Target,
    detect: &'a DetectReport,
    gpu_count: usize,
    gpu_present: bool,
    python: bool,
    running: bool,
    launchable: bool,
    facts: BTreeMap<String, String>,
    package_version: Option<String>,
    outline: Option<&'a PythonOutline>,
    profile_output: PathBuf,
    recipe_distributed: bool,
    /// The language of the runs' labels.
    lang: Lang,
}

impl<'a> Context<'a> {
    fn new(
        target: &'a Target,
        detect: &'a DetectReport,
        root: &Path,
        recipe: Option<&Recipe>,
    ) -> Self {
        let gpu_count = detect.hardware.gpu.gpus.len();
        let smi_usable = detect
            .tools
            .iter()
            .any(|t| t.id == "nvidia_smi" && t.usable);
        let python = match target.kind {
            TargetKind::PythonScript | TargetKind::PythonModule | TargetKind::Function => true,
            TargetKind::Command => target.program.as_ref().is_some_and(|p| p.is_python),
            TargetKind::Process | TargetKind::Service | TargetKind::Framework => {
                target.processes.iter().any(|p| p.is_python)
                    || (target.processes.is_empty() && target.framework.is_some())
            }
            TargetKind::Focus | TargetKind::Unknown | TargetKind::ClusterJob => false,
        };
        let outline = target
            .function
            .as_ref()
            .and_then(|f| f.outline.as_ref())
            .or_else(|| target.script.as_ref().and_then(|s| s.outline.as_ref()));
        let root = std::path::absolute(root).unwrap_or(root.to_path_buf());
        Context {
            target,
            detect,
            gpu_count,
            gpu_present: gpu_count > 0 || smi_usable,
            python,
            running: !target.processes.is_empty(),
            launchable: target.command.is_some(),
            facts: target
                .framework
                .as_ref()
                .map(|f| f.facts.clone())
                .unwrap_or_default(),
            package_version: target
                .framework
                .as_ref()
                .and_then(|f| f.package_version.clone()),
            outline,
            profile_output: root.join("profile_output"),
            recipe_distributed: recipe.is_some_and(|r| r.distributed),
            lang: Lang::En,
        }
    }

    fn multi_gpu(&self) -> bool {
        self.gpu_count > 1
    }

    /// The code uses a GPU library, or the framework is a GPU one.
    fn gpu_code(&self) -> bool {
        self.outline
            .is_some_and(|o| o.imports.iter().any(|i| GPU_PACKAGES.contains(&i.as_str())))
            || self.target.framework.as_ref().is_some_and(|f| {
                f.package
                    .as_deref()
                    .is_some_and(|p| GPU_PACKAGES.contains(&p))
            })
    }

    /// Several processes talk over NCCL: a distributed recipe, or tensor parallel > 1.
    fn distributed(&self) -> bool {
        let tp = self
            .facts
            .get("tensor_parallel")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(1.0);
        tp > 1.0 || self.recipe_distributed
    }

    fn holds(&self, when: &When) -> Result<(), String> {
        let check = |ok: bool, why: String| if ok { Ok(()) } else { Err(why) };
        if let Some(g) = when.gpu {
            check(
                g == self.gpu_present,
                if g {
                    format!("no NVIDIA GPU here{}", self.gpu_reason())
                } else {
                    "only without a GPU".into()
                },
            )?;
        }
        if let Some(m) = when.multi_gpu {
            check(
                m == self.multi_gpu(),
                format!(
                    "needs more than one GPU; this machine has {}",
                    self.gpu_count
                ),
            )?;
        }
        if let Some(r) = when.running {
            check(
                r == self.running,
                if r {
                    "the target is not running".into()
                } else {
                    "the target is already running".into()
                },
            )?;
        }
        if let Some(p) = when.python {
            check(p == self.python, "the target is not Python".into())?;
        }
        if let Some(f) = when.function {
            check(
                f == self.target.function.is_some(),
                "no function or block was named".into(),
            )?;
        }
        for (fact, min) in &when.fact_above {
            let v = self.facts.get(fact).and_then(|v| v.parse::<f64>().ok());
            check(
                v.is_some_and(|v| v > *min),
                format!(
                    "{fact} is {} (needs more than {min})",
                    v.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into())
                ),
            )?;
        }
        if let Some(min) = &when.package_at_least {
            check(
                self.package_version
                    .as_deref()
                    .is_none_or(|v| version_at_least(v, min)),
                format!(
                    "needs version {min} or later; {} is installed",
                    self.package_version.clone().unwrap_or_default()
                ),
            )?;
        }
        if let Some(max) = &when.package_below {
            // Unknown version: the newer recipe step is the one to show.
            check(
                self.package_version
                    .as_deref()
                    .is_some_and(|v| !version_at_least(v, max)),
                format!("applies below version {max} only"),
            )?;
        }
        Ok(())
    }

    fn gpu_reason(&self) -> String {
        self.detect
            .hardware
            .gpu
            .reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    }
}

/// Why a method cannot run here, and the fix when there is one.
struct Refusal {
    reason: String,
    fix: Option<String>,
    /// Worth telling the user (a tool, permission or GPU is missing), not just "does not fit".
    fixable: bool,
}

/// One planned step before ids are given.
#[derive(Clone)]
struct Draft {
    recipe_step: String,
    method: Method,
    /// Families beyond the method's own (the recipe step's `yields`).
    yields: Vec<MetricFamily>,
    mode: TargetMode,
    title: String,
    why: String,
    run: RunProfilerInput,
    alongside_step: Option<String>,
    instead_of: Vec<Method>,
    /// The later methods of the chain that can run in the same mode, with their options.
    fallbacks: Vec<(Method, ProfilerOptions)>,
    notes: Vec<String>,
}

impl Draft {
    /// A recipe step's draft, with the methods refused before the chosen one and the viable
    /// ones after it (its fallbacks).
    fn of(
        ctx: &Context,
        step: &Step,
        method: Method,
        mode: TargetMode,
        title: String,
        run: RunProfilerInput,
        refused: &Refused,
    ) -> Draft {
        Draft {
            recipe_step: step.name.clone(),
            method,
            yields: step.yields.clone(),
            mode,
            title,
            why: step.why.clone(),
            run,
            alongside_step: step.alongside.clone(),
            instead_of: refused.iter().map(|(m, _)| *m).collect(),
            fallbacks: step
                .methods
                .iter()
                .skip_while(|m| **m != method)
                .skip(1)
                .filter(|m| viable(ctx, **m, mode).is_ok())
                .map(|m| (*m, options_for(ctx, *m, step)))
                .collect(),
            notes: step.notes.clone(),
        }
    }
}

/// Methods a step preferred and could not use, with why.
type Refused = Vec<(Method, Refusal)>;

struct Site {
    function: Option<String>,
    lines: Option<LineRange>,
}

fn recipe_for<'r>(target: &Target, recipes: &'r Recipes, python: bool) -> Option<&'r Recipe> {
    if let Some(f) = &target.framework {
        if let Some(r) = recipes.get(&f.recipe) {
            return Some(r);
        }
    }
    recipes.generic_for(target.kind, python)
}

/// The focus to plan for and where it came from: given, named in the arguments, or the
/// recipe's default (with `gpu` added when the code uses a GPU library and a GPU is here).
fn choose_focus(
    ctx: &Context,
    target: &Target,
    recipe: &Recipe,
    opts: &PlanOptions,
) -> (Vec<Focus>, String) {
    let (mut focus, mut source) = if !opts.focus.is_empty() {
        (opts.focus.clone(), "given to plan_profile".to_string())
    } else if !target.focus.is_empty() {
        (target.focus.clone(), "named in the arguments".to_string())
    } else {
        (
            recipe.default_focus.clone(),
            format!("the default of the {} recipe", recipe.name),
        )
    };
    if opts.focus.is_empty()
        && target.focus.is_empty()
        && ctx.gpu_present
        && ctx.gpu_code()
        && !focus.contains(&Focus::Gpu)
    {
        focus.push(Focus::Gpu);
        source.push_str(&format!(
            ", and gpu: the code uses a GPU library and this machine has {} GPU(s)",
            ctx.gpu_count.max(1)
        ));
    }
    let mut dedup = Vec::new();
    for f in focus {
        if !dedup.contains(&f) {
            dedup.push(f);
        }
    }
    (dedup, source)
}

/// The `instrument_file` suggestions: the recipe's rules that match the code, and for a
/// named function or block its own timing.
fn instrumentation_for(
    ctx: &Context,
    target: &Target,
    recipe: &Recipe,
    focus: &[Focus],
    root: &Path,
) -> Vec<InstrumentSuggestion> {
    let mut instrumentation = suggest_instrumentation(ctx, recipe, focus, root);
    if target.function.is_some() && !instrumentation.iter().any(|i| i.measure == Measure::Timing) {
        // A named function or block always gets its own wall and CPU time.
        let rule = InstrumentRule {
            measure: Measure::Timing,
            strategy: system_profile_model::instrument::Strategy::Runner,
            calls: Vec::new(),
            focus: Vec::new(),
            when: When::default(),
            why: "Wall and CPU time of the named function or block on every call (sampled), without editing the file.".into(),
            sample_every: None,
        };
        let timing_only = Recipe {
            instrument: vec![rule],
            ..recipe.clone()
        };
        instrumentation.extend(suggest_instrumentation(ctx, &timing_only, focus, root));
    }
    instrumentation
}

/// Plan the profile of `target` with what `detect` found.
pub fn plan(target: &Target, detect: &DetectReport, recipes: &Recipes, opts: &PlanOptions) -> Plan {
    let ctx = {
        let probe = Context::new(target, detect, &opts.root, None);
        let recipe = recipe_for(target, recipes, probe.python);
        let mut ctx = Context::new(target, detect, &opts.root, recipe);
        ctx.lang = opts.lang;
        ctx
    };
    let detection = DetectionUsed {
        python: detect.python.requested.clone(),
        usable_tools: detect
            .tools
            .iter()
            .filter(|t| t.usable)
            .map(|t| t.id.clone())
            .collect(),
        gpus: ctx.gpu_count,
        cached: detect.cached,
        detected_at_unix_s: detect.detected_at_unix_s,
    };
    let mut plan = Plan {
        target: target.clone(),
        recipe: None,
        focus: Vec::new(),
        focus_source: String::new(),
        coverage: Vec::new(),
        steps: Vec::new(),
        skipped: Vec::new(),
        instrumentation: Vec::new(),
        estimated_wall_s: 0.0,
        time_budget_s: opts.time_budget_s,
        needs_clarification: target.needs_clarification,
        questions: target.questions.clone(),
        notes: Vec::new(),
        detection,
    };
    if target.needs_clarification {
        plan.notes.push(
            "the target is not resolved: ask the questions, then identify and plan again".into(),
        );
        return plan;
    }
    let Some(recipe) = recipe_for(target, recipes, ctx.python) else {
        plan.needs_clarification = true;
        plan.questions.push(format!(
            "No recipe serves a {:?} target. What should I profile?",
            target.kind
        ));
        return plan;
    };
    plan.recipe = Some(RecipeRef {
        id: recipe.id.clone(),
        name: recipe.name.clone(),
        file: format!("recipes/{}.toml", recipe.id),
        description: recipe.description.clone(),
    });
    let (focus, source) = choose_focus(&ctx, target, recipe, opts);
    plan.focus = focus.clone();
    plan.focus_source = source;

    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let drafts = draft_steps(
        &ctx,
        opts.program_exists,
        recipe,
        &focus,
        &mut skipped,
        &mut notes,
    );
    let drafts = dedupe(drafts);
    let (families, not_applicable) = applicable_families(&ctx, &focus);
    let instrumentation = instrumentation_for(&ctx, target, recipe, &focus, &opts.root);

    let drafts = fill_uncovered_families(
        &ctx,
        recipe,
        &focus,
        &families,
        opts.program_exists,
        drafts,
        &mut skipped,
        &mut notes,
    );

    let drafts = observe_together(&ctx, drafts);
    let drafts = fit_budget(drafts, opts.time_budget_s, &mut skipped, &mut notes);

    let (mut steps, estimated) = into_steps(&ctx, &drafts, &mut notes);
    if opts.focus.is_empty() && target.focus.is_empty() {
        conditions::allocation_profiles_when_memory_matters(&mut steps);
    }

    let coverage = coverage(
        &ctx,
        &families,
        not_applicable,
        &steps,
        &instrumentation,
        &skipped,
    );
    let mut seen_skips: Vec<(Method, String)> = Vec::new();
    skipped.retain(|s| {
        let key = (s.method, s.reason.clone());
        if seen_skips.contains(&key) {
            false
        } else {
            seen_skips.push(key);
            true
        }
    });

    // A switch asked for that no planned method reads is said, with the methods that would.
    for asked in &target.asked_options {
        let name = asked.option();
        if !steps
            .iter()
            .any(|s| s.method.spec().options.contains(&name))
        {
            let readers: Vec<String> = name
                .readers()
                .iter()
                .map(|m| format!("`{}`", m.id()))
                .collect();
            notes.push(format!(
                "`{}` was asked for, but no step of this plan reads it (its readers: {}); add a focus that plans one, or run one with run_profiler",
                name.wire_name(),
                readers.join(", ")
            ));
        }
    }
    if steps.is_empty() {
        notes.push(
            "nothing in this plan can run here: see coverage and skipped for what is missing"
                .into(),
        );
    }
    plan.steps = steps;
    plan.skipped = skipped;
    plan.instrumentation = instrumentation;
    plan.coverage = coverage;
    plan.estimated_wall_s = estimated;
    plan.notes.extend(notes);
    plan
}

#[cfg(test)]
mod tests {
    use super::version_at_least;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("0.13.1", "0.13"));
        assert!(version_at_least("0.13", "0.13"));
        assert!(!version_at_least("0.9.2", "0.13"));
        assert!(version_at_least("2.8.0+cu128", "2.8"));
        assert!(!version_at_least("0.12.0rc1", "0.13"));
    }
}
