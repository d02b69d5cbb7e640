//! Step 2: a target, a focus and the detected tools → an ordered plan. Pure: the same inputs
//! give the same plan, so it is tested without running anything.
//!
//! The recipe gives the steps and their order; each step takes the first of its methods that
//! can run here (tool usable, permission granted, GPU present, mode fits the target); metric
//! families the focus asks for and no recipe step measures are filled from the method catalog,
//! lowest overhead first; what cannot be measured is said, with the reason.

mod drafts;
mod families;
mod instrumentation;
mod options;
mod viable;

use drafts::*;
use families::*;
use instrumentation::*;
use options::*;
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
            TargetKind::Focus | TargetKind::Unknown => false,
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
    let focus = dedup;
    plan.focus = focus.clone();
    plan.focus_source = source;

    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut drafts = draft_steps(
        &ctx,
        opts.program_exists,
        recipe,
        &focus,
        &mut skipped,
        &mut notes,
    );

    // The same method on the same target twice measures the same thing twice; `measure` is
    // `time -v` with the /proc sampler, so it makes either of those redundant.
    let subsumes = |a: Method, b: Method| {
        a == b || (a == Method::Measure && matches!(b, Method::TimeV | Method::ProcfsSampler))
    };
    let mut unique: Vec<Draft> = Vec::new();
    for d in drafts.drain(..) {
        if unique.iter().any(|u| {
            subsumes(u.method, d.method) && u.run.target == d.run.target && u.run.env == d.run.env
        }) {
            continue;
        }
        unique.push(d);
    }
    let mut drafts = unique;

    let (families, not_applicable) = applicable_families(&ctx, &focus);
    let mut instrumentation = suggest_instrumentation(&ctx, recipe, &focus, &opts.root);
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
        instrumentation.extend(suggest_instrumentation(
            &ctx,
            &timing_only,
            &focus,
            &opts.root,
        ));
    }

    // Fill families no recipe step measures, from the catalog, lowest overhead first.
    for fam in &families {
        if drafts
            .iter()
            .any(|d| d.method.spec().families.contains(fam) || d.yields.contains(fam))
        {
            continue;
        }
        let mut candidates: Vec<Method> = Method::ALL
            .iter()
            .copied()
            .filter(|m| m.spec().families.contains(fam) && *m != Method::Custom)
            .collect();
        candidates.sort_by_key(|m| m.spec().overhead);
        let filler = Step {
            name: format!("{} (added: the recipe does not measure it)", family_name(*fam)),
            name_ja: format!("{}（レシピにないため追加）", family_name(*fam)),
            methods: candidates,
            per: Per::Target,
            components: Vec::new(),
            focus: Vec::new(),
            when: When::default(),
            why: format!(
                "Covers {}, which the {} recipe does not measure; the lowest-overhead method that can run here.",
                family_name(*fam),
                recipe.name
            ),
            options: ProfilerOptions::default(),
            duration_s: None,
            env: BTreeMap::new(),
            command: Vec::new(),
            alongside: None,
            notes: Vec::new(),
            yields: Vec::new(),
        };
        let fake = Recipe {
            steps: vec![filler],
            ..recipe.clone()
        };
        let mut filler_skips = Vec::new();
        let added = draft_steps(
            &ctx,
            opts.program_exists,
            &fake,
            &focus,
            &mut filler_skips,
            &mut notes,
        );
        if added.is_empty() {
            // Only fixable refusals say something the user can act on.
            skipped.extend(filler_skips.into_iter().filter(|s| s.fix.is_some()));
        }
        drafts.extend(added.into_iter().take(1));
    }

    // The budget: shorten observation windows, then drop the last steps that still do not fit.
    if let Some(budget) = opts.time_budget_s {
        let windowed: f64 = drafts
            .iter()
            .filter(|d| d.alongside_step.is_none())
            .filter_map(|d| d.run.duration_s)
            .sum();
        if windowed > budget {
            let scale = budget / windowed;
            for d in &mut drafts {
                if let Some(s) = d.run.duration_s.as_mut() {
                    *s = (*s * scale).max(MIN_WINDOW_S).round();
                }
            }
            notes.push(format!(
                "observation windows shortened to fit the {budget:.0} s budget (at least {MIN_WINDOW_S:.0} s each)"
            ));
        }
        let mut total = 0.0;
        let mut kept = Vec::new();
        for d in drafts {
            let cost = if d.alongside_step.is_some() {
                0.0
            } else {
                d.run.duration_s.unwrap_or(0.0)
            };
            if total + cost > budget && cost > 0.0 {
                skipped.push(SkippedMethod {
                    method: d.method,
                    tool: d.method.spec().tool.map(str::to_string),
                    step: d.recipe_step.clone(),
                    reason: format!(
                        "over the time budget: {:.0} s planned before it, {cost:.0} s more would pass {budget:.0} s",
                        total
                    ),
                    fix: Some("give a larger time_budget_s".into()),
                });
                continue;
            }
            total += cost;
            kept.push(d);
        }
        drafts = kept;
    }

    // Ids, alongside links and estimates.
    let ids: Vec<String> = (1..=drafts.len()).map(|i| format!("s{i}")).collect();
    let mut steps = Vec::new();
    let mut estimated = 0.0;
    let mut launches = 0;
    for (i, d) in drafts.iter().enumerate() {
        let spec = d.method.spec();
        let mut notes_here = d.notes.clone();
        let alongside = d.alongside_step.as_ref().and_then(|name| {
            drafts
                .iter()
                .position(|o| &o.recipe_step == name)
                .map(|j| ids[j].clone())
        });
        let mut run = d.run.clone();
        if d.alongside_step.is_some() && alongside.is_none() {
            notes_here.push(format!(
                "meant to run alongside `{}`, which is not in this plan: runs on its own",
                d.alongside_step.clone().unwrap_or_default()
            ));
            run.background = false;
        }
        if let Some(t) = ctx
            .detect
            .tools
            .iter()
            .find(|t| Some(t.id.as_str()) == spec.tool)
        {
            notes_here.extend(t.notes.iter().cloned());
        }
        let estimated_s = run.duration_s;
        if alongside.is_none() {
            match estimated_s {
                Some(s) => estimated += s,
                None if d.mode == TargetMode::Launch => launches += 1,
                None => {}
            }
        }
        steps.push(PlanStep {
            id: ids[i].clone(),
            method: d.method,
            tool: spec.tool.map(str::to_string),
            mode: d.mode,
            title: d.title.clone(),
            why: d.why.clone(),
            overhead: spec.overhead,
            overhead_note: spec.overhead_note.to_string(),
            families: {
                let mut f = spec.families.to_vec();
                f.extend(d.yields.iter().filter(|y| !spec.families.contains(y)));
                // Without a GPU a method sees nothing of one (torch_profiler records CPU
                // operators only): it covers no GPU family, and the plan must not say so.
                f.retain(|fam| !fam.needs_gpu() || ctx.gpu_present);
                f
            },
            artifacts: spec.artifacts.iter().map(|s| s.file.to_string()).collect(),
            metrics: spec.metrics.iter().map(|s| s.to_string()).collect(),
            estimated_s,
            alongside,
            instead_of: d.instead_of.clone(),
            notes: notes_here,
            // The same run with another method: same target, window, label and place.
            fallbacks: d
                .fallbacks
                .iter()
                .map(|(method, options)| Fallback {
                    method: *method,
                    tool: method.spec().tool.map(str::to_string),
                    run_profiler: RunProfilerInput {
                        profiler: *method,
                        options: options.clone(),
                        ..run.clone()
                    },
                })
                .collect(),
            run_profiler: run,
        });
    }
    if launches > 0 {
        notes.push(format!(
            "{launches} step(s) run the target once each; their time is the target's own run time (times the overhead), not counted in estimated_wall_s"
        ));
    }

    // Coverage.
    let mut coverage = Vec::new();
    for fam in &families {
        let by: Vec<String> = steps
            .iter()
            .filter(|s| s.families.contains(fam))
            .map(|s| s.id.clone())
            .collect();
        let by_instrumentation = (!fam.needs_gpu() || ctx.gpu_present)
            && instrumentation
                .iter()
                .any(|i| i.instrument_file.is_some() && measure_families(i.measure).contains(fam));
        let status = if !by.is_empty() {
            CoverageStatus::Covered
        } else if by_instrumentation {
            CoverageStatus::ByInstrumentation
        } else {
            CoverageStatus::Uncovered
        };
        let reason = (status == CoverageStatus::Uncovered).then(|| {
            let why: Vec<String> = Method::ALL
                .iter()
                .filter(|m| m.spec().families.contains(fam) && **m != Method::Custom)
                .filter_map(|m| {
                    skipped
                        .iter()
                        .find(|s| s.method == *m)
                        .map(|s| format!("{}: {}", m.id(), s.reason))
                })
                .collect();
            let methods: Vec<String> = Method::ALL
                .iter()
                .filter(|m| m.spec().families.contains(fam))
                .map(|m| m.id())
                .collect();
            let measures: Vec<&str> = [
                (Measure::Timing, "timing"),
                (Measure::CudaEvents, "cuda_events"),
                (Measure::Transfers, "transfers"),
                (Measure::Memory, "memory"),
                (Measure::Duplicates, "duplicates"),
                (Measure::Nccl, "nccl"),
            ]
            .iter()
            .filter(|(m, _)| measure_families(*m).contains(fam))
            .map(|(_, n)| *n)
            .collect();
            if why.is_empty() {
                let by_code = if measures.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; measurement code sees it (instrument_file measure {}) but none was placed{}",
                        measures.join(" or "),
                        if fam.needs_gpu() && !ctx.gpu_present { " (no GPU here)" } else { "" }
                    )
                };
                if methods.is_empty() {
                    format!("no profiler measures it{by_code}")
                } else {
                    format!(
                        "none of {} can run on this target here{by_code}",
                        methods.join(", ")
                    )
                }
            } else {
                let mut why = why;
                why.dedup();
                why.join("; ")
            }
        });
        coverage.push(FamilyCoverage {
            family: *fam,
            status,
            steps: by,
            reason,
        });
    }
    for (fam, why) in not_applicable {
        coverage.push(FamilyCoverage {
            family: fam,
            status: CoverageStatus::NotApplicable,
            steps: Vec::new(),
            reason: Some(why),
        });
    }
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
