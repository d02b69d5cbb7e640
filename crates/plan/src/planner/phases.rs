//! The phases of a plan after the recipe's steps are drafted: dedupe, fill the families no
//! step measures, fit the time budget, number the steps, say the coverage. Each takes plain
//! data and gives plain data.

use super::*;

/// The same method on the same target twice measures the same thing twice, and a method that
/// subsumes another (its spec's `subsumes`: `measure` is `time -v` with the /proc sampler)
/// makes that one redundant: the first draft of each is kept.
pub(super) fn dedupe(drafts: Vec<Draft>) -> Vec<Draft> {
    let subsumes = |a: Method, b: Method| a == b || a.spec().subsumes.contains(&b);
    let mut unique: Vec<Draft> = Vec::new();
    for d in drafts {
        if unique.iter().any(|u| {
            // A running process observed twice by one method with other options is two windows
            // at two times (vLLM's figures, then its profiler after a window of its own); a
            // command started twice by one method is one run.
            let another_window = u.method == d.method
                && matches!(d.run.target, RunTarget::Pid { .. })
                && u.run.options != d.run.options;
            subsumes(u.method, d.method)
                && u.run.target == d.run.target
                && u.run.env == d.run.env
                && !another_window
        }) {
            continue;
        }
        unique.push(d);
    }
    unique
}

/// Fill families no recipe step measures, from the catalog, lowest overhead first.
#[allow(clippy::too_many_arguments)]
pub(super) fn fill_uncovered_families(
    ctx: &Context,
    recipe: &Recipe,
    focus: &[Focus],
    families: &[MetricFamily],
    program_exists: fn(&str) -> bool,
    mut drafts: Vec<Draft>,
    skipped: &mut Vec<SkippedMethod>,
    notes: &mut Vec<String>,
) -> Vec<Draft> {
    // A cluster job's processes are on its nodes, reached only through its engine: this
    // machine's samplers would describe the login node.
    if ctx.target.cluster.is_some() {
        return drafts;
    }
    for fam in families {
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
        let added = draft_steps(ctx, program_exists, &fake, focus, &mut filler_skips, notes);
        if added.is_empty() {
            // Only fixable refusals say something the user can act on.
            skipped.extend(filler_skips.into_iter().filter(|s| s.fix.is_some()));
        }
        drafts.extend(added.into_iter().take(1));
    }
    drafts
}

/// The budget: shorten observation windows, then drop the last steps that still do not fit.
pub(super) fn fit_budget(
    mut drafts: Vec<Draft>,
    time_budget_s: Option<f64>,
    skipped: &mut Vec<SkippedMethod>,
    notes: &mut Vec<String>,
) -> Vec<Draft> {
    if let Some(budget) = time_budget_s {
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
    drafts
}

/// Ids, alongside links and estimates: the plan's steps and the wall time they take.
pub(super) fn into_steps(
    ctx: &Context,
    drafts: &[Draft],
    notes: &mut Vec<String>,
) -> (Vec<PlanStep>, f64) {
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
        // What detection said of its tool and of its observers' (perf's software counters).
        let tools: Vec<&str> = run.methods().filter_map(|m| m.spec().tool).collect();
        for t in ctx
            .detect
            .tools
            .iter()
            .filter(|t| tools.contains(&t.id.as_str()))
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
            artifacts: d
                .method
                .artifacts_with(&run.options.observers)
                .iter()
                .map(|s| s.file.to_string())
                .collect(),
            metrics: run
                .methods()
                .flat_map(|m| m.spec().metrics.iter().map(|s| s.to_string()))
                .collect(),
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
            runs_if: None,
        });
    }
    if launches > 0 {
        notes.push(format!(
            "{launches} step(s) run the target once each; their time is the target's own run time (times the overhead), not counted in estimated_wall_s"
        ));
    }
    (steps, estimated)
}

/// Coverage of every family: by which steps, by instrumentation, or why not.
pub(super) fn coverage(
    ctx: &Context,
    families: &[MetricFamily],
    not_applicable: Vec<(MetricFamily, String)>,
    steps: &[PlanStep],
    instrumentation: &[InstrumentSuggestion],
    skipped: &[SkippedMethod],
) -> Vec<FamilyCoverage> {
    let mut coverage = Vec::new();
    for fam in families {
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
    coverage
}
