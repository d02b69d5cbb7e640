//! `time_v` and `measure` (`time -v`, with the /proc sampler and the NVML sampler), and `procfs_sampler` alone.

use super::nvidia::{machine_execution, nvml_config};
use super::{perf, py_spy};
use crate::*;
use system_profile_exec::{find_gate, gated};

/// Seconds an observer may take to write its files after the program ended.
const OBSERVER_GRACE: Duration = Duration::from_secs(30);
/// Longest the program waits at its gate for its observers: past it, it starts without them
/// ready (a machine so busy that py-spy has not started in that time).
const GATE_DEADLINE: Duration = Duration::from_secs(20);
/// A wait at the gate long enough to say in the run.
const NOTABLE_HOLD: Duration = Duration::from_millis(500);

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
    // With observers the program waits at a gate (innermost, so the gate's PID becomes the
    // program's): py-spy attaches by PID and is started first, or its own start-up on a busy
    // machine loses the program's first second; and the /proc sampler reads the program's
    // tree, not perf's and time's processes around it.
    let gate = with_sampler && !observers.is_empty();
    if gate {
        argv.extend(gated(&target).into_iter().map(|a| a.to_string_lossy().into_owned()));
    } else {
        argv.extend(target);
    }
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
    let mut held = Duration::ZERO;
    let mut e = if gate {
        let observer = &mut py_spy_observer;
        let wants_py_spy = observers.contains(&Method::PySpyRecord);
        let (mut e, waited, program) = launch_sampled_gated(input, place, argv, |root| async move {
            let program = find_gate_under(root).await;
            if wants_py_spy {
                *observer = Some(match program {
                    Ok(pid) => PySpyObserver::start_at_gate(input, place, pid).await,
                    Err(ref why) => Err(why.clone()),
                });
            }
            program.ok()
        })
        .await?;
        if program.is_none() {
            e.warnings.push(
                "the program's own process was not found under time: the /proc figures cover perf's and time's processes around it too".into(),
            );
        }
        held = waited;
        e
    } else if with_sampler {
        launch_sampled(input, place, argv).await?
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
    let mut parsed = system_profile_parse::time_v::parse(&read(&report));
    if !held.is_zero() {
        parsed.value.started_later_by(held.as_secs_f64());
        if held >= NOTABLE_HOLD {
            e.warnings.push(format!(
                "the program waited {:.2} s at its start for py-spy to attach; its wall time and CPU share count from when it started",
                held.as_secs_f64()
            ));
        }
    }
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

/// py-spy attached by PID to the program of a run another method started (under `time` and
/// `perf`, at its gate), `--subprocesses` so it follows the program's children (a pool's
/// workers, a launcher's Python). Not in the run's process group: the sampler's tree is the
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
    /// Why its samples may miss the program's start.
    late: Option<String>,
}

impl PySpyObserver {
    /// py-spy on the program waiting at its gate (`gate`, its PID); returns when py-spy has
    /// started its sampler for that PID (a second thread, made once its own start-up is done:
    /// on the truth corpus's `json.tool` beside CPU hogs, attaching to a running program lost
    /// its first 18%), or has ended, or `GATE_DEADLINE` passed.
    async fn start_at_gate(
        input: &RunProfilerInput,
        place: &RunPlace,
        gate: u32,
    ) -> Result<Self, String> {
        let deadline = Instant::now() + GATE_DEADLINE;
        let mut observer = Self::start(input, place, gate)?;
        let tasks = observer
            .child
            .id()
            .map(|pid| PathBuf::from(format!("/proc/{pid}/task")));
        loop {
            let threads = tasks
                .as_ref()
                .and_then(|t| std::fs::read_dir(t).ok())
                .map_or(0, |d| d.count());
            let ended = !matches!(observer.child.try_wait(), Ok(None));
            if threads >= 2 || ended {
                break;
            }
            if Instant::now() > deadline {
                observer.late = Some(format!(
                    "py_spy_record (observer) had not started after {} s: the program started without it, and its first moments may be missing from the samples",
                    GATE_DEADLINE.as_secs()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(observer)
    }

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
        Ok(PySpyObserver {
            child,
            folded,
            log,
            late: None,
        })
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
        e.warnings.extend(self.late);
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

/// The PID of the program waiting at its gate under `root` (perf's and time's child).
async fn find_gate_under(root: u32) -> Result<u32, String> {
    let deadline = Instant::now() + GATE_DEADLINE;
    loop {
        if let Some(gate) = find_gate(root) {
            return Ok(gate);
        }
        if Instant::now() > deadline || !Path::new(&format!("/proc/{root}")).exists() {
            return Err(format!(
                "the program's start was not found under PID {root} in {} s",
                GATE_DEADLINE.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Start `argv` with the /proc sampler attached to it from its first instant, and finish the
/// execution with the sampler's summary and timeline.
async fn launch_sampled(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: Vec<String>,
) -> Result<Execution, RunError> {
    let jsonl = artifact_path(input, place, ArtifactKind::ProcfsJsonl);
    let config = sampler_config(input, place, jsonl.clone());
    let mut sampler: Option<Sampler> = None;
    let outcome = launch(input, place, &argv, timeout_of(input), |pid| {
        sampler = Some(Sampler::start(pid, config))
    })
    .await?;
    Ok(sampled(finish(&outcome, argv, place), sampler, jsonl))
}

/// `launch_sampled` of an argv holding a gate: `hold` starts the observers on the waiting
/// program and gives its PID, and the sampler starts on that PID (on the root where there is
/// none) when `hold` ends, with the program. Also returns how long the program waited, and
/// its PID.
async fn launch_sampled_gated<F: std::future::Future<Output = Option<u32>>>(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: Vec<String>,
    hold: impl FnOnce(u32) -> F,
) -> Result<(Execution, Duration, Option<u32>), RunError> {
    let jsonl = artifact_path(input, place, ArtifactKind::ProcfsJsonl);
    let config = sampler_config(input, place, jsonl.clone());
    let mut sampler: Option<Sampler> = None;
    let mut program: Option<u32> = None;
    let outcome = launch_gated(input, place, &argv, timeout_of(input), |root| {
        let (sampler, program) = (&mut sampler, &mut program);
        let observers = hold(root);
        async move {
            *program = observers.await;
            *sampler = Some(Sampler::start(program.unwrap_or(root), config));
        }
    })
    .await?;
    let held = outcome.held;
    Ok((
        sampled(finish(&outcome, argv, place), sampler, jsonl),
        held,
        program,
    ))
}

/// The execution with the sampler's summary and timeline.
fn sampled(mut e: Execution, sampler: Option<Sampler>, jsonl: PathBuf) -> Execution {
    if let Some(s) = sampler {
        e.metrics.procfs = Some(s.stop());
        e.artifacts.extend(file_artifact(jsonl, ArtifactKind::ProcfsJsonl));
    }
    e
}
