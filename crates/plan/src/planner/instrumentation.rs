//! `instrument_file` suggestions: the sites a recipe's instrumentation rules pick from the code's own calls.

use super::*;

pub(super) fn measure_families(m: Measure) -> &'static [MetricFamily] {
    use MetricFamily as F;
    match m {
        Measure::Timing => &[F::BlockTiming, F::CpuUtilization],
        Measure::CudaEvents => &[F::GpuUtilization, F::KernelLaunchOverhead],
        Measure::Transfers => &[F::HostDeviceTransfers, F::PeerTransfers],
        Measure::Memory => &[F::GpuMemory],
        Measure::Duplicates => &[F::RedundantCopies],
        Measure::Nccl => &[F::NcclCollectives, F::CommComputeRatio],
        Measure::Custom => &[],
    }
}

/// Instrumentation suggestions from the recipe's rules and the target's syntax tree.
pub(super) fn suggest_instrumentation(
    ctx: &Context,
    recipe: &Recipe,
    focus: &[Focus],
    root: &Path,
) -> Vec<InstrumentSuggestion> {
    let mut out: Vec<InstrumentSuggestion> = Vec::new();
    let file = ctx
        .target
        .function
        .as_ref()
        .map(|f| f.path.clone())
        .or_else(|| ctx.target.script.as_ref().map(|s| s.path.clone()));
    let root = std::path::absolute(root).unwrap_or(root.to_path_buf());
    let under_root = |p: &str| Path::new(p).starts_with(&root);
    for rule in &recipe.instrument {
        if !rule.focus.is_empty() && !rule.focus.iter().any(|f| focus.contains(f)) {
            continue;
        }
        if ctx.holds(&rule.when).is_err() {
            continue;
        }
        let sites = sites_for(ctx, rule);
        if sites.is_empty() {
            if !rule.calls.is_empty()
                && ctx.outline.is_none()
                && ctx.python
                && ctx.target.kind != TargetKind::Focus
            {
                out.push(InstrumentSuggestion {
                    measure: rule.measure,
                    why: rule.why.clone(),
                    evidence: "the target's source was not read (a running process or a framework)".into(),
                    instrument_file: None,
                    todo: Some(format!(
                        "find the function that calls {} in the target's code, then call instrument_file on it",
                        rule.calls.iter().take(4).map(|c| format!("`{c}()`")).collect::<Vec<_>>().join(", ")
                    )),
                });
            }
            continue;
        }
        for (site, evidence) in sites {
            let Some(path) = file.clone() else { continue };
            if out.iter().any(|s| {
                s.measure == rule.measure
                    && s.instrument_file.as_ref().is_some_and(|i| {
                        i.function.as_deref() == site.function.as_deref() && i.lines == site.lines
                    })
            }) {
                continue;
            }
            // A runner wraps functions; a line range needs a marked `with` block.
            let strategy = match (&site.lines, rule.strategy) {
                (Some(_), system_profile_model::instrument::Strategy::Runner) => {
                    system_profile_model::instrument::Strategy::Context
                }
                (_, s) => s,
            };
            let input = InstrumentFileInput {
                path: path.clone(),
                measure: rule.measure,
                function: site.function,
                lines: site.lines,
                strategy,
                sample_every: rule.sample_every,
                sample_rate: None,
                snippet: None,
                dry_run: false,
                python: ctx
                    .target
                    .python
                    .as_ref()
                    .map(|p| p.executable.clone().unwrap_or_else(|| p.requested.clone())),
            };
            let (instrument_file, todo) = if under_root(&path) {
                (Some(input), None)
            } else {
                (
                    None,
                    Some(format!(
                        "{path} is outside the server's root ({}): instrument_file edits only files under it; start the server with --root above it",
                        root.display()
                    )),
                )
            };
            out.push(InstrumentSuggestion {
                measure: rule.measure,
                why: rule.why.clone(),
                evidence,
                instrument_file,
                todo,
            });
        }
    }
    out
}

/// Where a rule applies: the named function or block, or the functions calling its names
/// (innermost first, at most three).
pub(super) fn sites_for(ctx: &Context, rule: &InstrumentRule) -> Vec<(Site, String)> {
    let func = ctx.target.function.as_ref();
    if rule.calls.is_empty() {
        return match func {
            Some(f) if f.def.is_some() => vec![(
                Site {
                    function: f.qualname.clone(),
                    lines: None,
                },
                format!(
                    "the target names `{}`",
                    f.qualname.clone().unwrap_or_default()
                ),
            )],
            Some(f) if f.start_line > 0 => vec![(
                Site {
                    function: None,
                    lines: Some(LineRange {
                        start: f.start_line,
                        end: f.end_line,
                    }),
                },
                format!("the target names lines {}-{}", f.start_line, f.end_line),
            )],
            _ => Vec::new(),
        };
    }
    let Some(outline) = ctx.outline else {
        return Vec::new();
    };
    let mut found: Vec<(u32, &system_profile_model::target::PythonDef, Vec<&String>)> = outline
        .defs
        .iter()
        .filter(|d| d.def_kind != "class")
        .filter(|d| {
            func.and_then(|f| f.qualname.as_ref())
                .is_none_or(|q| d.qualname == *q || d.qualname.starts_with(&format!("{q}.")))
        })
        .filter_map(|d| {
            let hits: Vec<&String> = rule
                .calls
                .iter()
                .filter(|c| d.notable_calls.contains(c))
                .collect();
            (!hits.is_empty()).then(|| (d.end_line - d.start_line, d, hits))
        })
        .collect();
    // Innermost first: a small function that does the work, not `main` that calls it.
    found.sort_by_key(|(span, d, _)| (*span, d.start_line));
    let mut chosen: Vec<(Site, String)> = Vec::new();
    let mut taken: Vec<&system_profile_model::target::PythonDef> = Vec::new();
    for (_, d, hits) in found {
        // Skip a def that encloses one already chosen: its calls are that one's.
        if taken
            .iter()
            .any(|t| d.start_line <= t.start_line && t.end_line <= d.end_line)
        {
            continue;
        }
        taken.push(d);
        chosen.push((
            Site {
                function: Some(d.qualname.clone()),
                lines: None,
            },
            format!(
                "`{}` (lines {}-{}) calls {}",
                d.qualname,
                d.start_line,
                d.end_line,
                hits.iter()
                    .map(|h| format!("`{h}()`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
        if chosen.len() == 3 {
            break;
        }
    }
    chosen
}
