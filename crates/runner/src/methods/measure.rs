//! `time_v` and `measure` (`time -v`, with the /proc sampler and the NVML sampler), and `procfs_sampler` alone.

use super::nvidia::{machine_execution, nvml_config};
use super::{perf, py_spy};
use crate::*;

/// Seconds an observer may take to write its files after the program ended.
const OBSERVER_GRACE: Duration = Duration::from_secs(30);

/// `time -v` around the command; `measure` adds the samplers.
pub(crate) async fn time_v(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let with_sampler = input.profiler == Method::Measure;
    let target = command_of(input)?;
    let observers = &input.options.observers;
    if let Some(why) = input.observers_refused() {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!("options.observers: {why}"),
        ));
    }
    let report = artifact_path(input, place, ArtifactKind::TimeV);
    let mut argv: Vec<String> = Vec::new();
    // perf stat outermost counts the command's whole tree (time and the program); time -v
    // inside it still reports the program's own exit.
    let perf_csv = observers
        .contains(&Method::PerfStat)
        .then(|| artifact_path(input, place, ArtifactKind::PerfStatCsv));
    if let Some(csv) = &perf_csv {
        argv.extend(perf::stat_argv(&observer_options(&input.options), csv));
        argv.push("--".into());
    }
    argv.extend([
        "/usr/bin/time".into(),
        "-v".into(),
        "-o".into(),
        report.to_string_lossy().into_owned(),
        "--".into(),
    ]);
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
    let mut py_spy_observer: Option<Result<PySpyObserver, String>> = None;
    let mut e = if with_sampler {
        launch_sampled(input, place, argv, |pid| {
            if observers.contains(&Method::PySpyRecord) {
                py_spy_observer = Some(PySpyObserver::start(input, place, pid));
            }
        })
        .await?
    } else {
        let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
        finish(&outcome, argv, place)
    };
    if let Some(csv) = perf_csv {
        perf::keep_stat(&mut e, csv);
    }
    match py_spy_observer {
        Some(Ok(observer)) => observer.finish(&mut e, input, place).await,
        Some(Err(why)) => e
            .warnings
            .push(format!("py_spy_record (observer) did not start: {why}")),
        None => {}
    }
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
            let mut e = launch_sampled(input, place, command_of(input)?, |_| {}).await?;
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

/// What the observers read of the run's options: their switches, and the run's rate (the
/// /proc sampler's and py-spy's: one rate for both).
fn observer_options(options: &ProfilerOptions) -> ProfilerOptions {
    ProfilerOptions {
        rate_hz: options.rate_hz,
        native: options.native,
        gil: options.gil,
        idle: options.idle,
        events: options.events.clone(),
        ..Default::default()
    }
}

/// py-spy attached by PID to a run another method started, `--subprocesses` so it finds the
/// Python under `time` and `perf`. Not in the run's process group: the sampler's tree is the
/// program's. It pauses the program for each sample, as py-spy does by default:
/// `--nonblocking` reads stacks while they change, and on `json.tool` it put 30.8% of the run
/// in `dump` against the clock's 59.5% (the truth corpus), so the run's context-switch counts
/// include py-spy's pauses, which the record says.
/// Its files are py_spy_record's (`ArtifactKind::Folded`, `ArtifactKind::FlamegraphSvg`,
/// written by `py_spy::keep_stacks`).
struct PySpyObserver {
    child: tokio::process::Child,
    folded: PathBuf,
    log: PathBuf,
}

impl PySpyObserver {
    fn start(input: &RunProfilerInput, place: &RunPlace, pid: u32) -> Result<Self, String> {
        let folded = artifact_path(input, place, ArtifactKind::Folded);
        let mut argv = py_spy::record_argv(&observer_options(&input.options), &folded);
        argv.extend(["--pid".into(), pid.to_string()]);
        let log = place.dir.join("py-spy-observer.log");
        let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .envs(&input.env)
            .current_dir(&place.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("`{}`: {e}", argv[0]))?;
        Ok(PySpyObserver { child, folded, log })
    }

    /// py-spy ends when the program does, writing its samples; they join the run's record.
    async fn finish(mut self, e: &mut Execution, input: &RunProfilerInput, place: &RunPlace) {
        if tokio::time::timeout(OBSERVER_GRACE, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
            e.warnings.push(format!(
                "py_spy_record (observer) had not ended {} s after the program: stopped, its samples lost",
                OBSERVER_GRACE.as_secs()
            ));
        }
        let rate_hz = py_spy::rate_of(&input.options);
        let samples = py_spy::keep_stacks(e, input, place, self.folded, rate_hz);
        if samples > 0 {
            e.warnings.push(format!(
                "py-spy paused the program {rate_hz:.0} times a second to read its stacks: this run's context switches include those pauses (compare them with a measure run without observers)"
            ));
        } else {
            e.metrics.stacks = None;
            let said = last_words(&read(&self.log))
                .map(|l| format!(" (it said `{l}`)"))
                .unwrap_or_default();
            e.warnings.push(format!(
                "py_spy_record (observer) took no samples{said}: the program ended before py-spy found its interpreter, or never ran Python; run py_spy_record or cprofile on its own"
            ));
        }
    }
}

/// Start `argv` with the /proc sampler attached to it from its first instant (and whatever
/// else `also` starts on its pid), and finish the execution with the sampler's summary and
/// timeline.
async fn launch_sampled(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: Vec<String>,
    also: impl FnOnce(u32),
) -> Result<Execution, RunError> {
    let jsonl = artifact_path(input, place, ArtifactKind::ProcfsJsonl);
    let config = sampler_config(input, place, jsonl.clone());
    let mut sampler: Option<Sampler> = None;
    let outcome = launch(input, place, &argv, timeout_of(input), |pid| {
        sampler = Some(Sampler::start(pid, config));
        also(pid);
    })
    .await?;
    let mut e = finish(&outcome, argv, place);
    if let Some(s) = sampler {
        e.metrics.procfs = Some(s.stop());
        e.artifacts.extend(file_artifact(jsonl, ArtifactKind::ProcfsJsonl));
    }
    Ok(e)
}
