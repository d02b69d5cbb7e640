//! `py_spy_record` and `py_spy_dump`.

use crate::*;

/// Samples per second py-spy takes (100 unless asked).
pub(crate) fn rate_of(options: &ProfilerOptions) -> f64 {
    options.rate_hz.unwrap_or(100.0).round().max(1.0)
}

/// `py-spy record` writing raw folded stacks to `folded`, with the switches asked for; the
/// target (`-- argv` or `--pid`) follows.
pub(crate) fn record_argv(options: &ProfilerOptions, folded: &Path) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "py-spy".into(),
        "record".into(),
        // Whole paths: shortened ones (`jinja2/environment.py`) read as the user's own files.
        "--full-filenames".into(),
        "--format".into(),
        "raw".into(),
        "-o".into(),
        folded.to_string_lossy().into_owned(),
        "--rate".into(),
        format!("{}", rate_of(options)),
    ];
    // Children are followed unless asked not to (as strace_c does): a pool's workers are
    // where a multi-process program spends its CPU, and a lone process loses nothing.
    for (flag, on) in [
        ("--native", options.native),
        ("--subprocesses", Some(options.subprocesses != Some(false))),
        ("--gil", options.gil),
        ("--idle", options.idle),
    ] {
        if on == Some(true) {
            argv.push(flag.into());
        }
    }
    // Under `--gil` a sample is the thread holding the GIL: naming the thread tells whether
    // several took turns with it (the stacks' thread frames are counted, not shown).
    if options.gil == Some(true) {
        argv.push("--threads".into());
    }
    argv
}

/// py-spy's folded stacks into the run: `metrics.stacks`, the folded file and a flame graph.
/// Returns the samples taken.
pub(crate) fn keep_stacks(
    e: &mut Execution,
    input: &RunProfilerInput,
    place: &RunPlace,
    folded: PathBuf,
    rate_hz: f64,
) -> u64 {
    let text = read(&folded);
    let parsed = system_profile_parse::folded::parse(&text);
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("py-spy: {}", d.message)),
    );
    let mut stacks = parsed.value;
    let samples = stacks.total_samples;
    stacks.sample_period_s = Some(1.0 / rate_hz);
    stacks.gil_holders_only = input.options.gil == Some(true);
    e.metrics.stacks = Some(stacks);
    e.artifacts.extend(file_artifact(folded, ArtifactKind::Folded));
    let svg = artifact_path(input, place, ArtifactKind::FlamegraphSvg);
    let title = input.label.clone().unwrap_or_else(|| "py-spy".into());
    if let Some(w) = flamegraph(&text, &title, &svg) {
        e.warnings.push(w);
    }
    e.artifacts.extend(file_artifact(svg, ArtifactKind::FlamegraphSvg));
    samples
}

pub(crate) async fn py_spy_record(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let folded = artifact_path(input, place, ArtifactKind::Folded);
    let options = &input.options;
    let rate_hz = rate_of(options);
    let mut argv = record_argv(options, &folded);
    let attach = matches!(input.target, RunTarget::Pid { .. });
    let status_file = place.dir.join("target-exit-status.txt");
    let mut wrapped = false;
    match &input.target {
        RunTarget::Pid { pid } => argv.extend([
            "--pid".into(),
            pid.to_string(),
            "--duration".into(),
            format!("{}", window(input).as_secs_f64().ceil().max(1.0)),
        ]),
        _ => {
            argv.push("--".into());
            // py-spy exits 0 whatever its target did, so a target that crashed after a few
            // samples would pass for a profile. Under `--subprocesses` a shell can stand
            // between them and keep the target's status (py-spy samples the shell's Python
            // children); the argv goes through `"$@"`, never through the shell's parser.
            if options.subprocesses != Some(false) {
                wrapped = true;
                argv.extend([
                    "/bin/sh".into(),
                    "-c".into(),
                    // No `";` in it: py-spy quotes each process's command line and its
                    // folded stacks end that quote at the first `";`.
                    r#""$@" ; s=$? ; echo $s > "$0" ; exit $s"#.into(),
                    status_file.to_string_lossy().into_owned(),
                ]);
            }
            argv.extend(command_of(input)?);
        }
    }
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if wrapped {
        target_status(&mut e, &status_file);
    }
    let folded_written = folded.exists();
    let samples = keep_stacks(&mut e, input, place, folded, rate_hz);
    // A run with samples saw its target, whatever py-spy's status says.
    if let Some(target) = py_spy_missed_it(&e, &status_file).filter(|_| samples == 0) {
        missed(&mut e, target);
    }
    if samples == 0 {
        if e.status == RunStatus::TimedOut && !folded_written {
            // py-spy writes its samples only when it ends by itself or on Ctrl-C; a run
            // stopped by the timeout keeps nothing, so saying "kept" would be false.
            e.error = Some(
                "timeout_s passed before py-spy wrote its samples: nothing it sampled was kept; give timeout_s longer than duration_s, or a shorter duration_s"
                    .into(),
            );
        } else if !attach && e.status == RunStatus::Completed {
            // Nothing was measured, and py-spy's own status says nothing of the target's: a
            // run that passed for a profile would be sold as coverage. The target was missed
            // (on a busy machine py-spy can read it and end with no sample).
            e.status = RunStatus::Failed;
            missed(
                &mut e,
                "the target ended at once or never ran Python code: py-spy took no samples",
            );
        } else {
            e.warnings.push(
                "py-spy took no samples: the target ended at once, or never ran Python code".into(),
            );
        }
    }
    if e.status == RunStatus::Failed {
        if let Some(advice) = ptrace_refused(&e.stderr_tail).filter(|_| attach) {
            e.error = Some(advice);
        }
    }
    if e.error.is_none() {
        explain_exit(&mut e);
    }
    Ok(e)
}

/// py-spy's own failure told apart from the target's: a target that ended well before py-spy
/// found its interpreter (py-spy gives up after about a second) is not a target that failed.
fn py_spy_missed_it(e: &Execution, status_file: &Path) -> Option<&'static str> {
    if e.status != RunStatus::Failed {
        return None;
    }
    // A target that failed is the target's failure (its status, kept by the shell, says so).
    // One that ended well while py-spy failed was missed, whatever py-spy said: on a busy
    // machine it also fails reading a process that vanishes under it. No status: the target
    // never ended by itself; py-spy gave up on a process too young to read (before its
    // interpreter is loaded, with words that vary) and what it left was ended with it. Only
    // a refusal is py-spy's own.
    let refused = ptrace_refused(&e.stderr_tail).is_some();
    let target = match read(status_file).trim() {
        "0" => "the target ended (status 0)",
        "" if !refused => "the target did not become a Python process py-spy could read",
        _ => return None,
    };
    Some(target)
}

/// The target was not seen: said with py-spy's last words, and marked so that a plan's next
/// method (cprofile, which sees a run this short) takes over.
fn missed(e: &mut Execution, target: &str) {
    let said = last_words(&e.stderr_tail)
        .map(|l| format!(" (py-spy said `{l}`)"))
        .unwrap_or_default();
    let why = format!(
        "{target} before py-spy found its Python interpreter ({:.1} s){said}: py-spy needs the program to run longer than about a second; give it more work, or use cprofile, which sees a run of any length",
        e.wall_s
    );
    e.not_started = Some(why.clone());
    e.error_kind = Some(RunErrorKind::MissedTarget);
    e.error = Some(why);
}

/// The target's own exit status, kept by the shell between py-spy and the target: a target
/// that failed makes the run failed, with its status and what it last said.
fn target_status(e: &mut Execution, status_file: &Path) {
    let Ok(code) = read(status_file).trim().parse::<i32>() else {
        return;
    };
    // py-spy's own status (0, or 1 when it could not read a target that died at once) gives
    // way to the target's.
    if code != 0 {
        e.status = RunStatus::Failed;
        // A shell reports death by signal N as 128 + N.
        if (129..=192).contains(&code) {
            e.signal = Some(code - 128);
            e.exit_code = None;
        } else {
            e.exit_code = Some(code);
        }
    }
}

pub(crate) async fn py_spy_dump(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let pid = running_pid(input, "reads a running process")?;
    let argv: Vec<String> = vec![
        "py-spy".into(),
        "dump".into(),
        "--json".into(),
        "--pid".into(),
        pid.to_string(),
    ];
    let outcome = launch(
        input,
        place,
        &argv,
        timeout_of(input).or(Some(Duration::from_secs(30))),
        |_| {},
    )
    .await?;
    let mut e = finish(&outcome, argv, place);
    let json = artifact_path(input, place, ArtifactKind::PySpyDumpJson);
    if std::fs::write(&json, outcome.stdout.text()).is_ok() {
        e.artifacts.extend(file_artifact(json, ArtifactKind::PySpyDumpJson));
    }
    if e.status == RunStatus::Completed {
        let parsed = system_profile_parse::py_spy_dump::parse(&outcome.stdout.text());
        e.warnings
            .extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
        e.metrics.threads = Some(parsed.value);
    } else {
        e.error = ptrace_refused(&e.stderr_tail).or_else(|| {
            Some(format!(
                "py-spy could not read PID {pid}: {}",
                e.stderr_tail.lines().last().unwrap_or("").trim()
            ))
        });
    }
    Ok(e)
}
