//! `time_v` and `measure` (`time -v`, with the /proc sampler and the NVML sampler), and `procfs_sampler` alone.

use super::*;

pub(crate) async fn time_v(
    input: &RunProfilerInput,
    place: &RunPlace,
    with_sampler: bool,
) -> Result<Execution, RunError> {
    let target = command_of(input)?;
    let report = place.dir.join("time-v.txt");
    let mut argv: Vec<String> = vec![
        "/usr/bin/time".into(),
        "-v".into(),
        "-o".into(),
        report.to_string_lossy().into_owned(),
        "--".into(),
    ];
    argv.extend(target);
    // measure samples the GPUs too when NVML is there (unless options.gpu is false).
    let gpu = if with_sampler && input.options.gpu != Some(false) {
        Some(NvmlSampler::start(nvml_config(&input.options, place)))
    } else {
        None
    };
    let mut e = launch_sampled(input, place, argv, with_sampler).await?;
    match gpu {
        Some(Ok(sampler)) => {
            e.metrics.gpu = Some(sampler.stop());
            e.artifacts
                .extend(file_artifact(place.dir.join("nvml.jsonl"), "nvml_jsonl"));
        }
        Some(Err(why)) if input.options.gpu == Some(true) => {
            e.warnings.push(format!("no GPU series in this run: {why}"))
        }
        _ => {}
    }
    let parsed = system_profile_parse::time_v::parse(&read(&report));
    if e.status != RunStatus::TimedOut {
        // time's own report of the target: exit status or the signal that ended it.
        e.exit_code = parsed.value.exit_status;
        e.signal = parsed.value.terminated_by_signal;
        if e.status == RunStatus::Failed || e.exit_code == Some(0) {
            e.status = if e.exit_code == Some(0) {
                RunStatus::Completed
            } else {
                RunStatus::Failed
            };
        }
    }
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("time -v: {}", d.message)),
    );
    if !parsed.diagnostics.is_empty() && e.status == RunStatus::TimedOut {
        e.warnings
            .push("time -v wrote no report: it was killed with the target".into());
    } else {
        e.metrics.time_v = Some(parsed.value);
    }
    e.artifacts.extend(file_artifact(report, "time_v"));
    explain_exit(&mut e);
    Ok(e)
}

pub(crate) async fn procfs_sampler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let jsonl = place.dir.join("procfs.jsonl");
    let config = sampler_config(&input.options, place, jsonl.clone());
    match &input.target {
        RunTarget::Pid { pid } => {
            if system_profile_sample::proc::read_process(*pid).is_none() {
                return Err(RunError::new(
                    RunErrorKind::BadTarget,
                    format!("no process {pid} is running: identify the target again"),
                ));
            }
            let started = Instant::now();
            let sampler = Sampler::start(*pid, config);
            let limit = window(input);
            while started.elapsed() < limit && !sampler.finished() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let summary = sampler.stop();
            let mut warnings = Vec::new();
            let ended_early = summary.processes.iter().all(|p| p.exited);
            if ended_early {
                warnings.push(format!(
                    "PID {pid} ended after {:.1} s, before the {:.0} s window: the summary covers its life until then",
                    summary.wall_s,
                    limit.as_secs_f64()
                ));
            }
            let mut e = machine_execution(Vec::new(), started.elapsed().as_secs_f64());
            e.artifacts.extend(file_artifact(jsonl, "procfs_jsonl"));
            e.metrics.procfs = Some(summary);
            e.warnings = warnings;
            Ok(e)
        }
        _ => {
            let mut e = launch_sampled(input, place, command_of(input)?, true).await?;
            explain_exit(&mut e);
            Ok(e)
        }
    }
}
