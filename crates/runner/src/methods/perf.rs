//! `perf_stat` and `perf_record` (and what both need: events, the attach target).

use crate::*;

/// The counters asked for, or a default set that every Linux machine has in software and
/// most have in hardware.
pub(crate) fn perf_events(options: &ProfilerOptions) -> String {
    if options.events.is_empty() {
        "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions".into()
    } else {
        options.events.join(",")
    }
}

/// The end of a perf command line: `-- argv` for a command; for a PID, `-p PID -- sleep D`,
/// so perf ends with the `sleep` it runs (the window, without signals).
pub(crate) fn perf_target(input: &RunProfilerInput) -> Result<Vec<String>, RunError> {
    Ok(match &input.target {
        RunTarget::Pid { pid } => vec![
            "-p".into(),
            attached_pids(*pid)
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            "--".into(),
            "sleep".into(),
            format!("{}", window(input).as_secs_f64()),
        ],
        _ => {
            let mut v = vec!["--".to_string()];
            v.extend(command_of(input)?);
            v
        }
    })
}

/// The process and its descendants now: `perf stat -p` counts the threads of the processes
/// it is given, not their children, so a server's workers are named one by one.
pub(crate) fn attached_pids(pid: u32) -> Vec<u32> {
    let table = system_profile_sample::proc::list_processes();
    let tree = system_profile_sample::proc::tree(&table, pid);
    if table.iter().any(|p| p.pid == pid) {
        tree
    } else {
        vec![pid]
    }
}

/// `perf stat -x,` of a started command, or of a PID's tree for the window.
pub(crate) async fn perf_stat(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let csv = artifact_path(input, place, ArtifactKind::PerfStatCsv);
    let mut argv = stat_argv(&input.options, &csv);
    argv.extend(perf_target(input)?);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    keep_stat(&mut e, csv);
    explain_exit(&mut e);
    Ok(e)
}

/// `perf stat -x,` writing to `csv`; the target (`-- argv` or `-p`) follows.
pub(crate) fn stat_argv(options: &ProfilerOptions, csv: &Path) -> Vec<String> {
    vec![
        "perf".into(),
        "stat".into(),
        "-x,".into(),
        "-o".into(),
        csv.to_string_lossy().into_owned(),
        "-e".into(),
        perf_events(options),
    ]
}

/// perf stat's CSV into the run: `metrics.perf_stat` and the file, unsupported counters said.
pub(crate) fn keep_stat(e: &mut Execution, csv: PathBuf) {
    let parsed = system_profile_parse::perf_stat::parse(&read(&csv));
    if !parsed.value.unsupported.is_empty() {
        e.warnings.push(format!(
            "hardware counters not supported here ({}): {}",
            parsed.value.unsupported.join(", "),
            if parsed
                .value
                .unsupported
                .iter()
                .any(|u| u.starts_with("cycles") || u.starts_with("instructions"))
            {
                "cycles and IPC omitted"
            } else {
                "those counters omitted"
            }
        ));
    }
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("perf stat: {}", d.message)),
    );
    let mut stat = parsed.value;
    if let Some(i) = argv_pids(&e.argv) {
        stat.attached_pids = i;
    }
    e.metrics.perf_stat = Some(stat);
    e.artifacts.extend(file_artifact(csv, ArtifactKind::PerfStatCsv));
}

/// The pids given to `-p`, from the argv that ran.
pub(crate) fn argv_pids(argv: &[String]) -> Option<Vec<u32>> {
    let at = argv.iter().position(|a| a == "-p")?;
    Some(
        argv.get(at + 1)?
            .split(',')
            .filter_map(|p| p.parse().ok())
            .collect(),
    )
}

/// `perf record -g` of a command or a PID for the window, then `perf script` folded by
/// inferno into stacks and a flame graph. The event is `cpu-clock` (a software timer, present
/// in VMs without a PMU) unless `options.events` names others.
pub(crate) async fn perf_record(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let data = artifact_path(input, place, ArtifactKind::PerfData);
    let events = if input.options.events.is_empty() {
        "cpu-clock".to_string()
    } else {
        input.options.events.join(",")
    };
    let rate = input.options.rate_hz.unwrap_or(99.0).round().max(1.0);
    let mut argv: Vec<String> = vec![
        "perf".into(),
        "record".into(),
        "-e".into(),
        events,
        "-F".into(),
        format!("{rate}"),
        "-g".into(),
        "-o".into(),
        data.to_string_lossy().into_owned(),
    ];
    if input.options.subprocesses == Some(false) {
        argv.push("--no-inherit".into());
    }
    argv.extend(perf_target(input)?);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    e.artifacts.extend(file_artifact(data.clone(), ArtifactKind::PerfData));
    // perf script writes the samples as text; inferno folds them.
    let script = artifact_path(input, place, ArtifactKind::PerfScript);
    let spec = CommandSpec::new([
        "perf".to_string(),
        "script".to_string(),
        "-i".to_string(),
        data.to_string_lossy().into_owned(),
    ])
    .cwd(&place.cwd);
    let opts = RunOptions {
        timeout: Some(Duration::from_secs(600)),
        stdout_path: Some(script.clone()),
        tail_bytes: 1024,
        ..Default::default()
    };
    match system_profile_exec::run(&spec, &opts).await {
        Ok(o) if o.exit.success() => {
            let folded_path = artifact_path(input, place, ArtifactKind::Folded);
            let collapsed = std::fs::File::open(&script).and_then(|input_file| {
                let out = std::fs::File::create(&folded_path)?;
                use inferno::collapse::Collapse;
                inferno::collapse::perf::Folder::from(inferno::collapse::perf::Options::default())
                    .collapse(
                        std::io::BufReader::new(input_file),
                        std::io::BufWriter::new(out),
                    )
            });
            match collapsed {
                Ok(()) => {
                    let text = read(&folded_path);
                    let mut stacks = system_profile_parse::folded::parse(&text).value;
                    stacks.sample_period_s = Some(1.0 / rate);
                    e.metrics.stacks = Some(stacks);
                    e.artifacts.extend(file_artifact(folded_path, ArtifactKind::Folded));
                    let svg = artifact_path(input, place, ArtifactKind::FlamegraphSvg);
                    let title = input.label.clone().unwrap_or_else(|| "perf record".into());
                    if let Some(w) = flamegraph(&text, &title, &svg) {
                        e.warnings.push(w);
                    }
                    e.artifacts.extend(file_artifact(svg, ArtifactKind::FlamegraphSvg));
                }
                Err(err) => e
                    .warnings
                    .push(format!("perf script output could not be folded: {err}")),
            }
            e.artifacts.extend(file_artifact(script, ArtifactKind::PerfScript));
        }
        Ok(o) => e.warnings.push(format!(
            "perf script failed: {}",
            o.stderr.text().lines().last().unwrap_or("").trim()
        )),
        Err(err) => e.warnings.push(format!("perf script did not run: {err}")),
    }
    if e.status == RunStatus::Failed && e.stderr_tail.contains("perf_event_paranoid") {
        e.error = Some("perf may not record here: set kernel.perf_event_paranoid to 1 or lower (sysctl), run as root, or grant CAP_PERFMON".into());
    } else {
        explain_exit(&mut e);
    }
    Ok(e)
}
