//! `torch_profiler`: the target inside `torch.profiler.profile`, its Kineto trace analysed.

use crate::*;
use system_profile_model::run::AfterTrace;
use system_profile_model::trace::{TraceFile, TraceReport};
use system_profile_parse::launcher::{launcher_name, read_launcher};

/// Runs the target inside `torch.profiler.profile` (CPU, and CUDA when torch sees a GPU) and
/// exports the Kineto trace. With a schedule, the profiler steps after every optimizer step
/// (a global optimizer hook: the target's code is not touched), or, in a loop without an
/// optimizer, after every backward or outermost module forward, and each active cycle is
/// exported as `trace-<n>.json.gz`; without one the whole run is `trace.json.gz`. Writes
/// `torch-profiler.json` with what happened (steps seen, traces written, CUDA or not).
/// Under a distributed launcher it is each rank's entry point, and each rank names its files
/// after its `RANK` (`trace-rank1.json.gz`, `torch-profiler-rank1.json`).
/// argv: run dir, schedule (`wait,warmup,active,repeat,after_trace` or empty), record_shapes,
/// profile_memory, with_stack (0/1), then the target.
pub(crate) const TORCH_RUNNER: &str = concat!(
    include_str!("py/sp_launch.py"),
    include_str!("py/sp_steps.py"),
    include_str!("py/torch_runner.py")
);

/// The target under torch.profiler, its Kineto trace(s) analysed like `analyze_trace` does.
pub(crate) async fn torch_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let flag = |o: Option<bool>| if o == Some(true) { "1" } else { "0" }.to_string();
    let schedule = input
        .options
        .schedule
        .map(|s| {
            let after = match s.after_trace {
                AfterTrace::RunOn => "run_on",
                AfterTrace::EndProgram => "end_program",
            };
            format!(
                "{},{},{},{},{after}",
                s.wait,
                s.warmup,
                s.active.max(1),
                s.repeat.max(1)
            )
        })
        .unwrap_or_default();
    let runner_args = [
        place.dir.to_string_lossy().into_owned(),
        schedule.clone(),
        flag(input.options.record_shapes),
        flag(input.options.profile_memory),
        flag(input.options.with_stack),
    ];
    let (argv, python) = match split_python(input) {
        Ok((interpreter, script)) => {
            let python = interpreter[0].clone();
            let mut argv = interpreter;
            argv.extend(["-c".into(), TORCH_RUNNER.into()]);
            argv.extend(runner_args);
            argv.extend(script);
            (argv, python)
        }
        Err(not_python) => match under_launcher(input, place, &runner_args)? {
            Some(argv) => (argv, "the launcher's interpreter".to_string()),
            None => return Err(not_python),
        },
    };
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("torch cannot be imported") {
        e.error = Some(format!(
            "torch cannot be imported by {python}: run the profile with the interpreter the program uses (its venv), or install torch there"
        ));
        return Ok(e);
    }
    let states = rank_states(&place.dir);
    let steps: u64 = states.iter().filter_map(|s| s["steps"].as_u64()).sum();
    if !schedule.is_empty() && steps == 0 {
        // Nothing was traced: a run that says it profiled would be sold as coverage.
        e.status = RunStatus::Failed;
        e.error = Some(
            "the program made no step (no optimizer step, backward or torch.nn.Module forward), so the profiler's schedule never started and nothing was traced: run again without options.schedule to trace the whole run".into(),
        );
    }
    if states.iter().any(|s| s["cuda"] == false) {
        e.warnings
            .push("torch sees no GPU: the trace has CPU operators only".into());
    }
    let cpu_only = states.iter().all(|s| s["cuda"] == false);
    // Per rank, the last active cycle is the one analysed (the first ones warm up caches).
    let mut analysed = Vec::new();
    for state in &states {
        let traces: Vec<PathBuf> = state["traces"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str().map(PathBuf::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(last) = traces.last() {
            let bytes = std::fs::metadata(last).map(|m| m.len()).unwrap_or(0);
            let file = std::fs::File::open(last).map_err(|err| {
                RunError::new(
                    RunErrorKind::Io,
                    format!("cannot read {}: {err}", last.display()),
                )
            })?;
            let mut parsed = system_profile_parse::kineto::analyze_compressed_or_not(
                std::io::BufReader::new(file),
            )
            .map_err(|err| {
                RunError::new(
                    RunErrorKind::Io,
                    format!("cannot read {}: {err}", last.display()),
                )
            })?;
            parsed.value.rank = parsed
                .value
                .rank
                .or(state["rank"].as_u64().and_then(|r| u32::try_from(r).ok()));
            let diagnostics: Vec<String> = parsed
                .diagnostics
                .iter()
                .filter(|d| !cpu_only || !d.message.starts_with("no GPU kernels"))
                .map(|d| d.message.clone())
                .collect();
            analysed.push(TraceFile {
                path: last.to_string_lossy().into_owned(),
                bytes,
                analysis: parsed.value,
                node_rank: state["node_rank"]
                    .as_u64()
                    .and_then(|r| u32::try_from(r).ok()),
                diagnostics,
            });
        }
        for t in traces {
            e.artifacts.extend(file_artifact(t, ArtifactKind::KinetoTrace));
        }
    }
    if let (Some(schedule), Some(state)) = (input.options.schedule, lowest_rank(&states)) {
        let cycles = state["traces"].as_array().map_or(0, |t| t.len());
        let steps = super::steps::of_state(state, &schedule, u32::try_from(cycles).unwrap_or(0));
        e.metrics.step_window = steps.window;
        if let (Some(step), Some(w)) = (steps.ended_after_step, &e.metrics.step_window) {
            e.warnings.push(format!(
                "the program was ended after step {step}, once steps {}-{} were traced and {} more timed without the profiler (options.schedule.after_trace = end_program): this run's wall, exit and outputs are not the program's",
                w.first_traced_step, w.last_traced_step, step.saturating_sub(u64::from(w.last_traced_step))
            ));
        }
    }
    analysed.sort_by_key(|t| t.analysis.rank);
    if let Some(first) = analysed.first() {
        e.warnings
            .extend(first.diagnostics.iter().map(|d| format!("trace: {d}")));
        e.metrics.trace = Some(first.analysis.clone());
    }
    if states.iter().any(|s| !s["rank"].is_null()) {
        let ranks: Vec<u64> = states.iter().filter_map(|s| s["rank"].as_u64()).collect();
        if let Some(world) = world_size_of(input) {
            if (ranks.len() as u32) < world {
                e.warnings.push(format!(
                    "{} of the {world} ranks wrote a trace: the others ended before the profiler stopped, or never started",
                    ranks.len()
                ));
            }
        }
        let alignment = merged(input, place, &analysed, &mut e);
        e.metrics.ranks = Some(TraceReport {
            balance: system_profile_parse::kineto::rank_balance(&analysed),
            alignment,
            traces: analysed,
            stored: None,
        });
    }
    for name in state_files(&place.dir) {
        e.artifacts
            .extend(file_artifact(name, ArtifactKind::TorchProfilerState));
    }
    explain_exit(&mut e);
    Ok(e)
}

/// The ranks' clocks lined up on their collectives and, where a rank's clock is known, their
/// traces merged onto the lowest rank's (an artifact). One machine's ranks share a clock: the
/// offsets found are the method's error, near zero.
fn merged(
    input: &RunProfilerInput,
    place: &RunPlace,
    traces: &[TraceFile],
    e: &mut Execution,
) -> Option<system_profile_model::trace::ClockAlignment> {
    let mut alignment = system_profile_parse::kineto::align_clocks(traces)?;
    if !alignment.worth_merging() {
        return Some(alignment);
    }
    let out = artifact_path(input, place, ArtifactKind::MergedTrace);
    let written = traces
        .iter()
        .map(|t| std::fs::File::open(&t.path).map(std::io::BufReader::new))
        .collect::<std::io::Result<Vec<_>>>()
        .and_then(|readers| {
            let file = std::fs::File::create_new(&out)?;
            system_profile_parse::kineto::write_merged_gzip(
                readers,
                traces,
                &alignment,
                std::io::BufWriter::new(file),
            )
        });
    match written {
        Ok(notes) => {
            e.warnings.extend(notes.into_iter().map(|n| format!("merged trace: {n}")));
            alignment.merged_trace = Some(out.to_string_lossy().into_owned());
            e.artifacts.extend(file_artifact(out, ArtifactKind::MergedTrace));
        }
        Err(err) => e.warnings.push(format!("the ranks' traces were not merged: {err}")),
    }
    Some(alignment)
}

/// The argv that runs the runner as the entry point of every rank of a distributed launcher
/// (`torchrun ... runner.py <runner args> train.py ...`); `None` when the command is not a
/// launcher. The launcher keeps every option but the one saying its entry is a module: the
/// runner is a script and runs the module itself.
fn under_launcher(
    input: &RunProfilerInput,
    place: &RunPlace,
    runner_args: &[String],
) -> Result<Option<Vec<String>>, RunError> {
    let command = command_of(input)?;
    let (Some((launcher, used)), Some((_, named))) =
        (read_launcher(&command), launcher_name(&command))
    else {
        return Ok(None);
    };
    if launcher
        .argv
        .iter()
        .any(|a| a == "--no-python" || a == "--no_python")
    {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            "the launcher runs its entry as a program (--no-python): torch_profiler can only go inside ranks that run Python",
        ));
    }
    let runner = place.dir.join("sp_torch_profiler.py");
    std::fs::write(&runner, TORCH_RUNNER).map_err(|e| {
        RunError::new(
            RunErrorKind::Io,
            format!("cannot write {}: {e}", runner.display()),
        )
    })?;
    let mut argv: Vec<String> = launcher.argv[..named].to_vec();
    argv.extend(
        launcher.argv[named..]
            .iter()
            .filter(|a| !matches!(a.as_str(), "-m" | "--module"))
            .cloned(),
    );
    argv.push(runner.to_string_lossy().into_owned());
    argv.extend(runner_args.iter().cloned());
    argv.extend(launcher.entry);
    argv.extend(command[used..].iter().cloned());
    Ok(Some(argv))
}

/// The runner's state files: `torch-profiler.json`, or one per rank.
fn state_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("torch-profiler") && n.ends_with(".json")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The state of the lowest rank, or the only one.
fn lowest_rank(states: &[serde_json::Value]) -> Option<&serde_json::Value> {
    states
        .iter()
        .min_by_key(|s| s["rank"].as_u64().unwrap_or(0))
}

fn rank_states(dir: &Path) -> Vec<serde_json::Value> {
    state_files(dir)
        .iter()
        .filter_map(|p| serde_json::from_str(&read(p)).ok())
        .collect()
}

/// Ranks in all, when the launcher's options fix it.
fn world_size_of(input: &RunProfilerInput) -> Option<u32> {
    read_launcher(&command_of(input).ok()?)?.0.world_size
}
