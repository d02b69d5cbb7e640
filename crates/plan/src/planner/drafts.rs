//! A recipe's steps turned into drafts: per target or per process, the command expanded, the mode chosen; skips with their fix.

use super::*;

/// Processes a per-process step runs on: the components named (or all with a role), Python
/// only for Python methods.
pub(super) fn step_processes<'t>(ctx: &Context<'t>, step: &Step) -> Vec<&'t ProcessInfo> {
    ctx.target
        .processes
        .iter()
        .filter(|p| {
            step.components.is_empty()
                || p.role
                    .as_deref()
                    .is_some_and(|r| step.components.iter().any(|c| c == r))
        })
        .filter(|p| {
            // A framework's plumbing children (resource trackers) are left to the tree samplers.
            ctx.target.framework.is_none()
                || ctx.target.kind == TargetKind::Process
                || !p.role.as_deref().unwrap_or("").starts_with("child of")
        })
        .collect()
}

/// The processes an attached step starts from: those of the target that no other of its
/// processes has as a child (their children come with them).
pub(super) fn attach_roots<'t>(ctx: &Context<'t>) -> Vec<&'t ProcessInfo> {
    let procs = &ctx.target.processes;
    procs
        .iter()
        .filter(|p| {
            !procs
                .iter()
                .any(|o| o.pid != p.pid && (o.pid == p.ppid || o.children.contains(&p.pid)))
        })
        .collect()
}

/// The node of a running job's agent (or rank) here, from its ranks' `GROUP_RANK`, when
/// the job has more than one node.
fn node_of(ctx: &Context, pid: u32) -> Option<u32> {
    let l = ctx
        .target
        .launcher
        .as_ref()
        .filter(|l| l.agents.len() > 1)?;
    l.ranks
        .iter()
        .find(|r| r.pid == pid || r.launcher_pid == Some(pid))
        .and_then(|r| r.ids.node_rank)
}

pub(super) fn label_of(p: &ProcessInfo) -> String {
    match &p.role {
        Some(r) => format!("pid {} ({r})", p.pid),
        None => format!("pid {}", p.pid),
    }
}

/// Expand a recipe command: `{argv:<component>}` as a whole element becomes that component's
/// command line; other placeholders are facts or `{profile_output}`.
pub(super) fn expand_command(ctx: &Context, step: &Step) -> Result<Vec<String>, String> {
    let mut argv = Vec::new();
    let lookup = |name: &str| -> Option<String> {
        if name == "profile_output" {
            return Some(ctx.profile_output.to_string_lossy().into_owned());
        }
        ctx.facts.get(name).cloned()
    };
    for arg in &step.command {
        if let Some(comp) = arg.strip_prefix("{argv:").and_then(|r| r.strip_suffix('}')) {
            let p = ctx
                .target
                .processes
                .iter()
                .find(|p| p.role.as_deref() == Some(comp))
                .ok_or_else(|| {
                    format!("needs the command line of the running {comp}, and none runs")
                })?;
            argv.extend(p.cmdline.iter().cloned());
            continue;
        }
        let (filled, missing) = fill(arg, lookup);
        if let Some(m) = missing.first() {
            return Err(format!(
                "needs `{m}`, which the target's command line does not give"
            ));
        }
        argv.push(filled);
    }
    Ok(argv)
}

/// A command for a title: file names instead of full paths, at most 60 characters.
pub(super) fn short_command(argv: &[String]) -> String {
    let words: Vec<&str> = argv
        .iter()
        .map(|a| {
            if a.starts_with('/') {
                a.rsplit('/').next().unwrap_or(a)
            } else {
                a.as_str()
            }
        })
        .collect();
    let line = words.join(" ");
    if line.chars().count() > 60 {
        format!("`{}…`", line.chars().take(59).collect::<String>())
    } else {
        format!("`{line}`")
    }
}

pub(super) fn title_of(method: Method, target: &str) -> String {
    format!("{} on {target}", method.id())
}

pub(super) fn duration(step: &Step) -> f64 {
    step.duration_s.unwrap_or(DEFAULT_WINDOW_S)
}

/// Turn the recipe's steps into drafts and skips.
pub(super) fn draft_steps(
    ctx: &Context,
    program_exists: fn(&str) -> bool,
    recipe: &Recipe,
    focus: &[Focus],
    skipped: &mut Vec<SkippedMethod>,
    notes: &mut Vec<String>,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    let cwd = Some(ctx.target.cwd.clone());
    for step in &recipe.steps {
        if !step.focus.is_empty() && !step.focus.iter().any(|f| focus.contains(f)) {
            continue;
        }
        if let Err(why) = ctx.holds(&step.when) {
            // Conditions that rule a step out for this target are not news; a missing GPU is.
            if step.when.gpu == Some(true) && !ctx.gpu_present {
                skipped.push(SkippedMethod {
                    method: step.methods[0],
                    tool: step.methods[0].spec().tool.map(str::to_string),
                    step: step.name.clone(),
                    reason: why,
                    fix: Some("run on a machine with an NVIDIA GPU and its driver".into()),
                });
            }
            continue;
        }
        let mut record_refusals = |refused: &[(Method, Refusal)], all_failed: bool| {
            for (m, r) in refused {
                if r.fixable || all_failed {
                    skipped.push(SkippedMethod {
                        method: *m,
                        tool: m.spec().tool.map(str::to_string),
                        step: step.name.clone(),
                        reason: r.reason.clone(),
                        fix: r.fix.clone(),
                    });
                }
            }
        };
        let label = match ctx.lang {
            Lang::En => step.name.clone(),
            Lang::Ja => step.name_ja.clone(),
        };
        let base_run = |method: Method, target: RunTarget| RunProfilerInput {
            profiler: method,
            target,
            cwd: None,
            env: BTreeMap::new(),
            duration_s: None,
            timeout_s: None,
            options: options_for(ctx, method, step),
            label: Some(label.clone()),
            background: step.alongside.is_some(),
        };
        match step.per {
            Per::Target => {
                let mut modes = Vec::new();
                if ctx.target.cluster.is_some() {
                    modes.push(TargetMode::Cluster);
                }
                if ctx.launchable {
                    modes.push(TargetMode::Launch);
                }
                if ctx.running {
                    modes.push(TargetMode::Attach);
                }
                modes.push(TargetMode::Machine);
                match choose(ctx, step, &modes) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let targets: Vec<(RunTarget, String)> = match mode {
                            TargetMode::Launch => {
                                let command = ctx.target.command.clone().unwrap_or_default();
                                let shown = short_command(&command);
                                vec![(
                                    RunTarget::Command {
                                        command,
                                        shell: false,
                                    },
                                    shown,
                                )]
                            }
                            // Every process the target names with its children: two agents
                            // of one job (its nodes here) or two services, each observed in
                            // the same window, never the first alone.
                            TargetMode::Attach => attach_roots(ctx)
                                .into_iter()
                                .take(MAX_PER_PROCESS)
                                .map(|p| {
                                    let node = node_of(ctx, p.pid)
                                        .map(|n| format!("node {n}: "))
                                        .unwrap_or_default();
                                    (
                                        RunTarget::Pid { pid: p.pid },
                                        format!("{node}{} and its children", label_of(p)),
                                    )
                                })
                                .collect(),
                            TargetMode::Machine => vec![(
                                RunTarget::System { system: true },
                                "the machine".to_string(),
                            )],
                            TargetMode::Cluster => ctx
                                .target
                                .cluster
                                .iter()
                                .map(|job| {
                                    let target = if job.engine == "ray" {
                                        RunTarget::RayJob {
                                            ray_job: job.job_id.clone(),
                                        }
                                    } else {
                                        RunTarget::SlurmJob {
                                            slurm_job: job.selector(),
                                        }
                                    };
                                    (
                                        target,
                                        format!(
                                            "{} on {} node(s)",
                                            system_profile_model::target::job_phrase(
                                                &job.engine,
                                                &job.selector()
                                            ),
                                            job.nodes.len().max(1)
                                        ),
                                    )
                                })
                                .collect(),
                        };
                        if mode == TargetMode::Machine && ctx.launchable && step.alongside.is_none()
                        {
                            // Observing the machine only means something while the target runs.
                            continue;
                        }
                        let several = targets.len() > 1;
                        for (i, (target, what)) in targets.into_iter().enumerate() {
                            let mut run = base_run(method, target);
                            if method == Method::TorchProfiler
                                && step.options.schedule.is_some()
                                && run.options.schedule.is_none()
                                && i == 0
                            {
                                notes.push(format!(
                                    "{}: the program's source makes no torch optimizer (no `torch.optim` class, no `zero_grad`, no trainer library), and torch.profiler's schedule advances on optimizer steps: the whole run is traced instead of a few steps.",
                                    step.name
                                ));
                            }
                            if mode == TargetMode::Launch {
                                run.cwd = cwd.clone();
                            } else {
                                run.duration_s = Some(duration(step));
                            }
                            if several {
                                run.label = Some(format!("{label} — {what}"));
                            }
                            let mut d = Draft::of(
                                ctx,
                                step,
                                method,
                                mode,
                                title_of(method, &what),
                                run,
                                &refused,
                            );
                            if i > 0 && d.alongside_step.is_none() {
                                // The others run beside the first, in its window.
                                d.alongside_step = Some(step.name.clone());
                                d.run.background = true;
                            }
                            drafts.push(d);
                        }
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
            Per::Process => {
                let procs = step_processes(ctx, step);
                if procs.is_empty() {
                    continue;
                }
                match choose(ctx, step, &[TargetMode::Attach]) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let spec = method.spec();
                        let eligible: Vec<&&ProcessInfo> = procs
                            .iter()
                            .filter(|p| !spec.python_only || p.is_python)
                            .collect();
                        if eligible.len() > MAX_PER_PROCESS {
                            notes.push(format!(
                                "{}: {} processes qualify; the plan covers the first {MAX_PER_PROCESS}",
                                step.name,
                                eligible.len()
                            ));
                        }
                        for p in eligible.into_iter().take(MAX_PER_PROCESS) {
                            let mut run = base_run(method, RunTarget::Pid { pid: p.pid });
                            // A dump is one instant; everything else observes a window.
                            run.duration_s = (!method.spec().instant).then(|| duration(step));
                            run.label = Some(format!("{label} — {}", label_of(p)));
                            let mut d = Draft::of(
                                ctx,
                                step,
                                method,
                                mode,
                                title_of(method, &label_of(p)),
                                run,
                                &refused,
                            );
                            d.fallbacks
                                .retain(|(m, _)| !m.spec().python_only || p.is_python);
                            drafts.push(d);
                        }
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
            Per::Machine => match choose(ctx, step, &[TargetMode::Machine]) {
                Ok((method, mode, refused)) => {
                    record_refusals(&refused, false);
                    let mut run = base_run(method, RunTarget::System { system: true });
                    run.duration_s = (!method.spec().instant).then(|| duration(step));
                    drafts.push(Draft::of(
                        ctx,
                        step,
                        method,
                        mode,
                        title_of(method, "the machine"),
                        run,
                        &refused,
                    ));
                }
                Err(refused) => record_refusals(&refused, true),
            },
            Per::Command => {
                let command = match expand_command(ctx, step) {
                    Ok(c) if c.first().is_some_and(|p| !program_exists(p)) => {
                        let program = c[0].clone();
                        skipped.push(SkippedMethod {
                            method: step.methods[0],
                            tool: None,
                            step: step.name.clone(),
                            reason: format!("`{program}` is not on PATH"),
                            fix: Some(format!(
                                "install what provides `{program}` into the environment, or run the equivalent by hand"
                            )),
                        });
                        continue;
                    }
                    Ok(c) => c,
                    Err(why) => {
                        skipped.push(SkippedMethod {
                            method: step.methods[0],
                            tool: step.methods[0].spec().tool.map(str::to_string),
                            step: step.name.clone(),
                            reason: why,
                            fix: None,
                        });
                        continue;
                    }
                };
                match choose(ctx, step, &[TargetMode::Launch]) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let mut run = base_run(
                            method,
                            RunTarget::Command {
                                command: command.clone(),
                                shell: false,
                            },
                        );
                        run.cwd = cwd.clone();
                        for (k, v) in &step.env {
                            let (filled, _) = fill(v, |n| {
                                (n == "profile_output")
                                    .then(|| ctx.profile_output.to_string_lossy().into_owned())
                            });
                            run.env.insert(k.clone(), filled);
                        }
                        let program = command.first().cloned().unwrap_or_default();
                        drafts.push(Draft::of(
                            ctx,
                            step,
                            method,
                            mode,
                            title_of(method, &format!("`{program}`")),
                            run,
                            &refused,
                        ));
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
        }
    }
    drafts
}
