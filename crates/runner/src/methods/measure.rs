//! `time_v` and `measure` (`time -v`, with the /proc sampler and the NVML sampler), and `procfs_sampler` alone.

use super::nvidia::{machine_execution, nvml_config};
use crate::*;

/// `time -v` around the command; `measure` adds the samplers.
pub(crate) async fn time_v(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let with_sampler = input.profiler == Method::Measure;
    let target = command_of(input)?;
    let report = artifact_path(input, place, ArtifactKind::TimeV);
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
        Some(NvmlSampler::start(nvml_config(
            input,
            place,
            input.options.rate_hz,
            &input.options.gpus,
        )))
    } else {
        None
    };
    let mut e = if with_sampler {
        launch_sampled(input, place, argv).await?
    } else {
        let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
        finish(&outcome, argv, place)
    };
    match gpu {
        Some(Ok(sampler)) => {
            e.metrics.gpu = Some(sampler.stop());
            e.artifacts
                .extend(file_artifact(artifact_path(input, place, ArtifactKind::NvmlJsonl), ArtifactKind::NvmlJsonl));
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
    e.artifacts.extend(file_artifact(report, ArtifactKind::TimeV));
    explain_exit(&mut e);
    Ok(e)
}

pub(crate) async fn procfs_sampler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let jsonl = artifact_path(input, place, ArtifactKind::ProcfsJsonl);
    let config = sampler_config(input, place, jsonl.clone());
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
            e.artifacts.extend(file_artifact(jsonl, ArtifactKind::ProcfsJsonl));
            e.metrics.procfs = Some(summary);
            e.warnings = warnings;
            Ok(e)
        }
        _ => {
            let mut e = launch_sampled(input, place, command_of(input)?).await?;
            explain_exit(&mut e);
            Ok(e)
        }
    }
}

fn sampler_config(input: &RunProfilerInput, place: &RunPlace, jsonl: PathBuf) -> SamplerConfig {
    SamplerConfig {
        rate_hz: input.options.rate_hz.unwrap_or(100.0),
        jsonl: Some(jsonl),
        samples_taken: Some(place.samples_taken.clone()),
        ..Default::default()
    }
}

/// Start `argv` with the /proc sampler attached to it from its first instant, and finish the execution with the sampler's summary and timeline.
async fn launch_sampled(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: Vec<String>,
) -> Result<Execution, RunError> {
    let jsonl = artifact_path(input, place, ArtifactKind::ProcfsJsonl);
    let config = sampler_config(input, place, jsonl.clone());
    let mut sampler: Option<Sampler> = None;
    let outcome = launch(input, place, &argv, timeout_of(input), |pid| {
        sampler = Some(Sampler::start(pid, config));
    })
    .await?;
    let mut e = finish(&outcome, argv, place);
    if let Some(s) = sampler {
        e.metrics.procfs = Some(s.stop());
        e.artifacts.extend(file_artifact(jsonl, ArtifactKind::ProcfsJsonl));
    }
    Ok(e)
}
