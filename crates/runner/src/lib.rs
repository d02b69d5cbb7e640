//! Runs one profiling method against a command or a PID, under supervision (`exec`), and turns
//! what it leaves into artifacts and typed metrics (`parse`, `sample`). It knows each method's
//! argv and files; it knows nothing of sessions, manifests or JSON-RPC (the engine does).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use system_profile_exec::{
    run, run_observed, CommandSpec, ExecError, ExitKind, Outcome, RunOptions,
};
use system_profile_model::run::{
    Method, ProfilerOptions, RunMetrics, RunProfilerInput, RunStatus, RunTarget,
};
use system_profile_sample::gpu::GpuSeries;
use system_profile_sample::nvml::{NvmlSampler, NvmlSamplerConfig};
use system_profile_sample::sampler::{Sampler, SamplerConfig};

/// Observation window of attach-mode methods when `duration_s` is not given.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30);

/// Where and how one run happens.
#[derive(Debug, Clone, Default)]
pub struct RunPlace {
    /// The run's own folder (created by the caller); every artifact goes here.
    pub dir: PathBuf,
    /// Working directory of a started command.
    pub cwd: PathBuf,
    /// The run's id, given to every program it starts as `SP_RUN_ID`: the instrumentation
    /// helper writes it in each record, so one log shared by many runs splits by run.
    pub run_id: String,
    /// Samples the /proc sampler has taken so far, for progress reports.
    pub samples_taken: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// A file the run left, with its absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactFile {
    pub path: PathBuf,
    pub kind: &'static str,
    pub bytes: u64,
}

/// What a finished run gives back.
#[derive(Debug, Clone)]
pub struct Execution {
    pub status: RunStatus,
    pub argv: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_s: f64,
    pub artifacts: Vec<ArtifactFile>,
    pub metrics: RunMetrics,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub warnings: Vec<String>,
    pub error: Option<String>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RunError {
    kind: RunErrorKind,
    message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunErrorKind {
    /// The target does not fit the method (a PID for a method that starts the target).
    BadTarget,
    /// The profiler's program is not installed or not permitted.
    ToolUnavailable,
    /// The run's folder could not be written.
    Io,
}

impl RunError {
    pub fn kind(&self) -> &RunErrorKind {
        &self.kind
    }

    fn new(kind: RunErrorKind, message: impl Into<String>) -> Self {
        RunError {
            kind,
            message: message.into(),
        }
    }
}

impl From<ExecError> for RunError {
    fn from(e: ExecError) -> Self {
        let kind = if e.is_not_found() {
            RunErrorKind::ToolUnavailable
        } else {
            RunErrorKind::Io
        };
        RunError::new(kind, e.to_string())
    }
}

fn window(input: &RunProfilerInput) -> Duration {
    input
        .duration_s
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_WINDOW)
}

fn command_of(input: &RunProfilerInput) -> Result<Vec<String>, RunError> {
    match &input.target {
        RunTarget::Command { command, shell } => {
            if command.is_empty() {
                return Err(RunError::new(
                    RunErrorKind::BadTarget,
                    "target.command is empty: give the argv to run",
                ));
            }
            Ok(if *shell {
                vec!["/bin/sh".into(), "-c".into(), command.join(" ")]
            } else {
                command.clone()
            })
        }
        RunTarget::Pid { pid } => Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} starts the target itself and cannot attach to PID {pid}: give target.command, or use procfs_sampler, strace_c or perf_stat, which attach",
                input.profiler.id()
            ),
        )),
        RunTarget::System { .. } => Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} needs a command to run, not the whole machine",
                input.profiler.id()
            ),
        )),
    }
}

fn file_artifact(path: PathBuf, kind: &'static str) -> Option<ArtifactFile> {
    let bytes = std::fs::metadata(&path).ok()?.len();
    Some(ArtifactFile { path, kind, bytes })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// What a target's stdout and stderr may each take on disk unless `output_cap_bytes` says.
pub const DEFAULT_OUTPUT_CAP_BYTES: u64 = 1 << 30;

/// Supervise `argv` with the run's streams, env, cwd and timeout.
async fn launch(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: &[String],
    timeout: Option<Duration>,
    on_spawn: impl FnOnce(u32),
) -> Result<Outcome, RunError> {
    let mut spec = spec_of(input, argv, &place.cwd);
    if !place.run_id.is_empty() {
        spec = spec.env("SP_RUN_ID", &place.run_id);
    }
    let opts = RunOptions {
        timeout,
        stdout_path: Some(place.dir.join("stdout.txt")),
        stderr_path: Some(place.dir.join("stderr.txt")),
        file_cap_bytes: input
            .options
            .output_cap_bytes
            .unwrap_or(DEFAULT_OUTPUT_CAP_BYTES),
        ..Default::default()
    };
    Ok(run_observed(&spec, &opts, on_spawn).await?)
}

/// `argv` in `cwd` with the run's environment: every program a run starts, the target or a
/// helper (nvidia-smi, nsys stats), sees the same `env` and resolves its name on that `PATH`.
fn spec_of(input: &RunProfilerInput, argv: &[String], cwd: &Path) -> CommandSpec {
    let mut spec = CommandSpec::new(argv.iter().map(String::as_str)).cwd(cwd);
    for (k, v) in &input.env {
        spec = spec.env(k, v);
    }
    spec
}

/// The outcome of the supervised process as status, exit and tails.
fn finish(outcome: &Outcome, argv: Vec<String>, place: &RunPlace) -> Execution {
    let (status, exit_code, signal) = match outcome.exit {
        ExitKind::Exited { code: 0 } => (RunStatus::Completed, Some(0), None),
        ExitKind::Exited { code } => (RunStatus::Failed, Some(code), None),
        ExitKind::Signaled { signal } => (RunStatus::Failed, None, Some(signal)),
        ExitKind::TimedOut => (RunStatus::TimedOut, None, None),
    };
    let mut artifacts = Vec::new();
    artifacts.extend(file_artifact(place.dir.join("stdout.txt"), "stdout"));
    artifacts.extend(file_artifact(place.dir.join("stderr.txt"), "stderr"));
    let mut warnings = Vec::new();
    for (name, t) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        let kept_on_disk = place.dir.join(format!("{name}.txt")).exists();
        if kept_on_disk && t.total_bytes() > t.file_bytes() {
            warnings.push(format!(
                "{name}.txt keeps the first {} of the {} bytes the target wrote (options.output_cap_bytes); the last ones are in {name}_tail",
                t.file_bytes(),
                t.total_bytes()
            ));
        }
    }
    if outcome.killed_leftovers {
        warnings.push(
            "processes the target left running in its group were killed when it ended".into(),
        );
    }
    Execution {
        status,
        argv,
        exit_code,
        signal,
        wall_s: outcome.wall.as_secs_f64(),
        artifacts,
        metrics: RunMetrics::default(),
        stdout_tail: outcome.stdout.text(),
        stderr_tail: outcome.stderr.text(),
        warnings,
        error: None,
    }
}

fn timeout_of(input: &RunProfilerInput) -> Option<Duration> {
    input.timeout_s.map(Duration::from_secs_f64)
}

fn sampler_config(options: &ProfilerOptions, place: &RunPlace, jsonl: PathBuf) -> SamplerConfig {
    SamplerConfig {
        rate_hz: options.rate_hz.unwrap_or(100.0),
        jsonl: Some(jsonl),
        samples_taken: Some(place.samples_taken.clone()),
        ..Default::default()
    }
}

/// Say in the run why it failed when the target's exit explains it.
/// The last non-blank line a target wrote to stderr, shortened: usually why it failed (a
/// traceback's last line).
fn last_words(stderr_tail: &str) -> Option<String> {
    stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(300).collect())
}

fn explain_exit(e: &mut Execution) {
    if e.error.is_some() {
        // The method said why already (nothing traced, nothing kept).
        return;
    }
    match (e.status, e.exit_code, e.signal) {
        (RunStatus::Failed, Some(code), _) => {
            let said = last_words(&e.stderr_tail)
                .map(|l| format!(": it said `{l}`"))
                .unwrap_or_default();
            e.error = Some(format!(
                "the target exited with status {code}{said}; what was measured until then is kept (see stderr_tail)"
            ))
        }
        (RunStatus::Failed, _, Some(sig)) => {
            e.error = Some(format!(
                "the target was killed by signal {sig}; what was measured until then is kept"
            ))
        }
        (RunStatus::TimedOut, _, _) => {
            e.error = Some(
                "timeout_s passed: the run's process group was killed; what was measured until then is kept"
                    .into(),
            )
        }
        _ => {}
    }
}

/// Start `argv` with the /proc sampler attached to it from its first instant (when `sampled`),
/// and finish the execution with the sampler's summary and timeline.
async fn launch_sampled(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: Vec<String>,
    sampled: bool,
) -> Result<Execution, RunError> {
    let jsonl = place.dir.join("procfs.jsonl");
    let config = sampler_config(&input.options, place, jsonl.clone());
    let mut sampler: Option<Sampler> = None;
    let outcome = launch(input, place, &argv, timeout_of(input), |pid| {
        if sampled {
            sampler = Some(Sampler::start(pid, config));
        }
    })
    .await?;
    let mut e = finish(&outcome, argv, place);
    if let Some(s) = sampler {
        e.metrics.procfs = Some(s.stop());
        e.artifacts.extend(file_artifact(jsonl, "procfs_jsonl"));
    }
    Ok(e)
}

async fn time_v(
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

async fn procfs_sampler(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
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

/// The NVML sampler's settings from the run's options (default 10 Hz, every GPU).
fn nvml_config(options: &ProfilerOptions, place: &RunPlace) -> NvmlSamplerConfig {
    NvmlSamplerConfig {
        rate_hz: options.rate_hz.unwrap_or(10.0),
        devices: options.gpus.clone(),
        jsonl: Some(place.dir.join("nvml.jsonl")),
        samples_taken: None,
    }
}

/// Every GPU through NVML: while a command runs, or for the window beside a PID or the machine.
async fn nvml_sampler(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let mut config = nvml_config(&input.options, place);
    config.samples_taken = Some(place.samples_taken.clone());
    let sampler = NvmlSampler::start(config).map_err(|why| {
        RunError::new(
            RunErrorKind::ToolUnavailable,
            format!("nvml_sampler cannot run here: {why}. Without a GPU, plan CPU methods; nvidia_smi_dmon needs the same driver"),
        )
    })?;
    let jsonl = place.dir.join("nvml.jsonl");
    let mut e = match &input.target {
        RunTarget::Command { .. } => {
            let outcome =
                launch(input, place, &command_of(input)?, timeout_of(input), |_| {}).await?;
            let mut e = finish(&outcome, command_of(input)?, place);
            explain_exit(&mut e);
            e
        }
        RunTarget::Pid { .. } | RunTarget::System { .. } => {
            let started = Instant::now();
            tokio::time::sleep(window(input)).await;
            machine_execution(Vec::new(), started.elapsed().as_secs_f64())
        }
    };
    let summary = sampler.stop();
    if let RunTarget::Pid { pid } = &input.target {
        if !summary
            .devices
            .iter()
            .any(|d| d.processes.iter().any(|p| p.pid == *pid))
        {
            e.warnings.push(format!(
                "PID {pid} held no GPU memory while sampled: the figures are the GPUs', not its own"
            ));
        }
    }
    e.metrics.gpu = Some(summary);
    e.artifacts.extend(file_artifact(jsonl, "nvml_jsonl"));
    Ok(e)
}

/// The --query-gpu fields asked for by default: enough for every `GpuSample` field it has.
const QUERY_GPU_FIELDS: &str = "timestamp,index,name,uuid,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,clocks.sm,clocks.mem,temperature.gpu";

/// `nvidia-smi dmon` or `nvidia-smi --query-gpu` every `interval_s` (whole seconds): beside a
/// command until it ends, or for the window beside a PID or the machine. The output is parsed
/// into the same `GpuSummary` as the NVML sampler's.
async fn nvidia_smi(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let method = input.profiler;
    let interval = input.options.interval_s.unwrap_or(1.0).round().max(1.0);
    let window_s = window(input).as_secs_f64();
    let (file, mut argv): (&str, Vec<String>) = if method == Method::NvidiaSmiDmon {
        let columns = input
            .options
            .dmon_columns
            .clone()
            .unwrap_or_else(|| "pucmt".into());
        if columns.is_empty() || !columns.chars().all(|c| "pucvmetd".contains(c)) {
            return Err(RunError::new(
                RunErrorKind::BadTarget,
                format!("options.dmon_columns {columns:?}: use the letters of `nvidia-smi dmon -s` (p u c v m e t d)"),
            ));
        }
        (
            "dmon.txt",
            vec![
                "nvidia-smi".into(),
                "dmon".into(),
                "-s".into(),
                columns,
                "-d".into(),
                format!("{interval}"),
                "-o".into(),
                "T".into(),
            ],
        )
    } else {
        let mut fields: Vec<String> = if input.options.query_fields.is_empty() {
            QUERY_GPU_FIELDS.split(',').map(String::from).collect()
        } else {
            input.options.query_fields.clone()
        };
        // Rows are told apart and placed in time by these two.
        for needed in ["index", "timestamp"] {
            if !fields.iter().any(|f| f == needed) {
                fields.insert(0, needed.into());
            }
        }
        (
            "nvidia-smi-query.csv",
            vec![
                "nvidia-smi".into(),
                format!("--query-gpu={}", fields.join(",")),
                "--format=csv".into(),
                "-l".into(),
                format!("{interval}"),
            ],
        )
    };
    let watches_window = !matches!(input.target, RunTarget::Command { .. });
    if watches_window && method == Method::NvidiaSmiDmon {
        let count = (window_s / interval).ceil().max(1.0) as u64;
        argv.extend(["-c".into(), count.to_string()]);
    }
    let out_path = place.dir.join(file);
    let smi_spec = spec_of(input, &argv, &place.cwd);
    let smi_opts = |limit: Option<Duration>| RunOptions {
        timeout: limit,
        stdout_path: Some(out_path.clone()),
        stderr_path: Some(place.dir.join("nvidia-smi.stderr.txt")),
        ..Default::default()
    };
    let mut e = match &input.target {
        RunTarget::Command { .. } => {
            let command = command_of(input)?;
            // nvidia-smi's run is dropped at the end of this block, which kills it: the
            // command is over.
            let (outcome, smi_ended) = {
                let opts = smi_opts(timeout_of(input));
                let smi = run(&smi_spec, &opts);
                tokio::pin!(smi);
                let target = launch(input, place, &command, timeout_of(input), |_| {});
                tokio::pin!(target);
                let mut smi_ended: Option<Result<Outcome, ExecError>> = None;
                let outcome = loop {
                    tokio::select! {
                        out = &mut target => break out?,
                        r = &mut smi, if smi_ended.is_none() => smi_ended = Some(r),
                    }
                };
                (outcome, smi_ended)
            };
            if let Some(Err(err)) = smi_ended {
                return Err(err.into());
            }
            let mut e = finish(&outcome, command, place);
            explain_exit(&mut e);
            e
        }
        RunTarget::Pid { .. } | RunTarget::System { .. } => {
            let started = Instant::now();
            // The query loops until stopped: the window is its limit.
            let limit = Duration::from_secs_f64(window_s + interval + 5.0);
            let limit = if method == Method::NvidiaSmiDmon {
                limit
            } else {
                window(input)
            };
            let outcome = run(&smi_spec, &smi_opts(Some(limit))).await?;
            let ended_by_window =
                matches!(outcome.exit, ExitKind::TimedOut) && method != Method::NvidiaSmiDmon;
            if !outcome.exit.success() && !ended_by_window {
                return Err(RunError::new(
                    RunErrorKind::ToolUnavailable,
                    format!(
                        "nvidia-smi failed ({:?}): {}",
                        outcome.exit,
                        outcome.first_line()
                    ),
                ));
            }
            machine_execution(argv.clone(), started.elapsed().as_secs_f64())
        }
    };
    let text = read(&out_path);
    let mut readings = system_profile_model::metrics::GpuReadings::default();
    let diagnostics = if method == Method::NvidiaSmiDmon {
        let parsed = system_profile_parse::nvidia_smi_dmon::parse(&text, interval);
        readings = parsed.value;
        parsed.diagnostics
    } else {
        system_profile_parse::nvidia_smi_query::add(&mut readings, &text)
    };
    e.warnings.extend(
        diagnostics
            .iter()
            .map(|d| format!("{}: {}", method.id(), d.message)),
    );
    let source = if method == Method::NvidiaSmiDmon {
        "nvidia-smi dmon"
    } else {
        "nvidia-smi query"
    };
    let wall_s = readings.samples.iter().map(|s| s.t_s).fold(0.0, f64::max) + interval;
    let mut summary =
        GpuSeries::from_readings(&readings).summary(source, wall_s, Some(1.0 / interval));
    if readings.samples.is_empty() {
        summary.rate_hz_achieved = None;
    }
    e.metrics.gpu = Some(summary);
    e.artifacts.extend(file_artifact(
        out_path,
        if method == Method::NvidiaSmiDmon {
            "dmon"
        } else {
            "nvidia_smi_query_csv"
        },
    ));
    Ok(e)
}

/// The command with `NCCL_DEBUG=INFO`, every process writing its own log
/// (`NCCL_DEBUG_FILE=<run>/nccl.%h.%p.log`), then the logs parsed together.
async fn nccl_debug(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let command = command_of(input)?;
    let mut with_env = input.clone();
    let subsys = input
        .options
        .nccl_subsys
        .clone()
        .unwrap_or_else(|| "INIT,GRAPH,NET,ENV,TUNING,COLL".into());
    with_env.env.insert("NCCL_DEBUG".into(), "INFO".into());
    with_env.env.insert("NCCL_DEBUG_SUBSYS".into(), subsys);
    with_env.env.insert(
        "NCCL_DEBUG_FILE".into(),
        place
            .dir
            .join("nccl.%h.%p.log")
            .to_string_lossy()
            .into_owned(),
    );
    let outcome = launch(&with_env, place, &command, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, command, place);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&place.dir)
        .map(|d| {
            d.flatten()
                .map(|f| f.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("nccl.") && n.ends_with(".log"))
                })
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    // Without per-process files (an NCCL that ignores NCCL_DEBUG_FILE) the lines are in the
    // program's own streams.
    let mut text: String = logs.iter().map(|p| read(p)).collect::<Vec<_>>().join("\n");
    if logs.is_empty() {
        text = format!(
            "{}\n{}",
            read(&place.dir.join("stdout.txt")),
            read(&place.dir.join("stderr.txt"))
        );
    }
    let parsed = system_profile_parse::nccl_debug::parse(&text);
    if parsed.value.communicators.is_empty() && parsed.value.transports.is_empty() {
        e.warnings.push(
            "NCCL said nothing: the program created no NCCL communicator (one GPU, the gloo backend, or it ended first)".into(),
        );
    } else {
        e.warnings.extend(
            parsed
                .diagnostics
                .iter()
                .map(|d| format!("nccl_debug: {}", d.message)),
        );
    }
    e.metrics.nccl = Some(parsed.value);
    // An nccl-tests program prints its bandwidth table on stdout.
    let tests = system_profile_parse::nccl_tests::parse(&read(&place.dir.join("stdout.txt")));
    if !tests.value.rows.is_empty() {
        e.metrics.nccl_tests = Some(tests.value);
    }
    for log in logs {
        e.artifacts.extend(file_artifact(log, "nccl_log"));
    }
    explain_exit(&mut e);
    Ok(e)
}

/// The reports `nsys stats` is asked for: what `NsysStats` reads.
const NSYS_REPORTS: &str =
    "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,cuda_api_sum,nvtx_sum,osrt_sum";

/// `nsys profile` of the command, then `nsys stats` of its report, parsed.
async fn nsys(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let command = command_of(input)?;
    let trace = if input.options.nsys_trace.is_empty() {
        "cuda,nvtx,osrt".to_string()
    } else {
        input.options.nsys_trace.join(",")
    };
    let base = place.dir.join("report");
    let mut argv: Vec<String> = vec![
        "nsys".into(),
        "profile".into(),
        "--trace".into(),
        trace,
        "--force-overwrite".into(),
        "true".into(),
        "-o".into(),
        base.to_string_lossy().into_owned(),
    ];
    argv.extend(command);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let rep = place.dir.join("report.nsys-rep");
    if !rep.exists() {
        e.warnings.push(
            "nsys wrote no report.nsys-rep: see stderr_tail (a GPU driver nsys can reach is needed)".into(),
        );
        explain_exit(&mut e);
        return Ok(e);
    }
    let stats_path = place.dir.join("nsys-stats.txt");
    let stats = spec_of(
        input,
        &[
            "nsys".to_string(),
            "stats".to_string(),
            "--report".to_string(),
            NSYS_REPORTS.to_string(),
            "--format".to_string(),
            "column".to_string(),
            rep.to_string_lossy().into_owned(),
        ],
        &place.dir,
    );
    let opts = RunOptions {
        timeout: Some(Duration::from_secs(600)),
        stdout_path: Some(stats_path.clone()),
        ..Default::default()
    };
    match run(&stats, &opts).await {
        Ok(o) if o.exit.success() => {
            let parsed = system_profile_parse::nsys_stats::parse(&read(&stats_path));
            e.warnings.extend(
                parsed
                    .diagnostics
                    .iter()
                    .map(|d| format!("nsys stats: {}", d.message)),
            );
            e.metrics.nsys = Some(parsed.value);
        }
        Ok(o) => e.warnings.push(format!(
            "nsys stats failed ({:?}): {}",
            o.exit,
            o.stderr.text().trim()
        )),
        Err(err) => e.warnings.push(format!("nsys stats did not run: {err}")),
    }
    e.artifacts.extend(file_artifact(rep, "nsys_rep"));
    e.artifacts.extend(file_artifact(stats_path, "nsys_stats"));
    explain_exit(&mut e);
    Ok(e)
}

/// Runs the target under memory_profiler with only the named function traced: a global trace
/// hook adds that function's code to memory_profiler's map the first time it is called (it is
/// defined by the target, so it cannot be named before the target runs) and hands its frames
/// to memory_profiler's own tracer; every other frame is left untraced. Writes the per-line
/// table as JSON. argv: out.json, file, qualname, then the target (`script args` or
/// `-m module args`).
const MEMPROF_RUNNER: &str = r#"
import json, linecache, os, runpy, sys, threading
out, target, qualname = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
try:
    from memory_profiler import LineProfiler
except ImportError:
    sys.stderr.write("No module named memory_profiler\n")
    sys.exit(97)
prof = LineProfiler(backend="psutil")
prof._original_trace_function = None
def tracer(frame, event, arg):
    code = frame.f_code
    if event == "call" and code not in prof.code_map:
        if getattr(code, "co_qualname", code.co_name) == qualname and os.path.realpath(code.co_filename) == target:
            prof.code_map.add(code)
    if code in prof.code_map:
        return prof.trace_memory_usage(frame, event, arg)
    return None
def write():
    sys.settrace(None)
    rows = []
    for filename, lines in prof.code_map.items():
        for lineno, m in lines:
            rows.append({
                "line": lineno,
                "source": linecache.getline(filename, lineno).rstrip("\n"),
                "occurrences": m[2] if m else 0,
                "mem_usage_mib": m[1] if m else None,
                "increment_mib": m[0] if m else None,
            })
        break
    with open(out, "w") as f:
        json.dump({"file": target, "function": qualname, "lines": rows}, f)
threading.settrace(tracer)
sys.settrace(tracer)
try:
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path.insert(0, os.path.dirname(os.path.realpath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")
finally:
    write()
"#;

/// Per-line memory of the function `options.function` names, through memory_profiler.
async fn memory_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (file, qualname) = function_of(input)?;
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let rows = place.dir.join("memory_profiler.json");
    let file_path = place.cwd.join(file);
    let mut argv = interpreter;
    argv.extend([
        "-c".into(),
        MEMPROF_RUNNER.into(),
        rows.to_string_lossy().into_owned(),
        file_path.to_string_lossy().into_owned(),
        qualname.to_string(),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("No module named memory_profiler") {
        e.error = Some(format!(
            "memory_profiler is not installed for {python}: {python} -m pip install memory_profiler"
        ));
        return Ok(e);
    }
    if rows.exists() {
        let parsed = system_profile_parse::memory_profile::parse(&read(&rows));
        e.warnings
            .extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
        if parsed.value.lines.is_empty() {
            e.warnings
                .push(format!("`{qualname}` never ran, or is not in {file}"));
        }
        e.metrics.memory_lines = Some(parsed.value);
        e.artifacts
            .extend(file_artifact(rows, "memory_profiler_json"));
    }
    explain_exit(&mut e);
    Ok(e)
}

/// Run one nvidia-smi query whose output is the artifact `file`; its text, or an error that
/// says why nvidia-smi did not answer.
async fn nvidia_smi_once(
    input: &RunProfilerInput,
    place: &RunPlace,
    args: &[&str],
    file: &str,
) -> Result<String, RunError> {
    let mut argv = vec!["nvidia-smi".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let spec = spec_of(input, &argv, &place.cwd);
    let path = place.dir.join(file);
    let opts = RunOptions {
        timeout: Some(Duration::from_secs(60)),
        stdout_path: Some(path.clone()),
        ..Default::default()
    };
    let o = run(&spec, &opts).await?;
    if !o.exit.success() {
        return Err(RunError::new(
            RunErrorKind::ToolUnavailable,
            format!(
                "`{}` failed ({:?}): {}",
                argv.join(" "),
                o.exit,
                o.first_line()
            ),
        ));
    }
    Ok(read(&path))
}

/// A run that watched for a window rather than running a target of its own.
fn machine_execution(argv: Vec<String>, wall_s: f64) -> Execution {
    Execution {
        status: RunStatus::Completed,
        argv,
        exit_code: None,
        signal: None,
        wall_s,
        artifacts: Vec::new(),
        metrics: RunMetrics::default(),
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        warnings: Vec::new(),
        error: None,
    }
}

/// `nvidia-smi topo -m`: the GPU/NIC matrix, NVLink pairs and the GPU pairs that go over PCIe.
async fn nvidia_smi_topo(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let started = Instant::now();
    let text = nvidia_smi_once(input, place, &["topo", "-m"], "topo.txt").await?;
    let parsed = system_profile_parse::nvidia_smi_topo::parse(&text);
    let mut e = machine_execution(
        vec!["nvidia-smi".into(), "topo".into(), "-m".into()],
        started.elapsed().as_secs_f64(),
    );
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("topo: {}", d.message)),
    );
    if !parsed.value.pcie_gpu_pairs.is_empty() {
        e.warnings.push(format!(
            "{} GPU pair(s) have no NVLink between them and talk over PCIe: see metrics.topology.pcie_gpu_pairs",
            parsed.value.pcie_gpu_pairs.len()
        ));
    }
    e.metrics.topology = Some(parsed.value);
    e.artifacts
        .extend(file_artifact(place.dir.join("topo.txt"), "nvidia_smi_topo"));
    Ok(e)
}

/// `nvidia-smi nvlink -s` (links and speeds), and `-gt d` at the start and the end of the
/// window: the data each link carried meanwhile, as counters in the report (end minus start).
async fn nvlink_status(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let started = Instant::now();
    let status = nvidia_smi_once(input, place, &["nvlink", "-s"], "nvlink-status.txt").await?;
    let mut parsed = system_profile_parse::nvidia_smi_nvlink::parse(&status);
    let mut warnings: Vec<String> = parsed
        .diagnostics
        .iter()
        .map(|d| format!("nvlink -s: {}", d.message))
        .collect();
    let window_s = input.duration_s.unwrap_or(0.0);
    if window_s > 0.0 {
        let before = nvidia_smi_once(
            input,
            place,
            &["nvlink", "-gt", "d"],
            "nvlink-counters-start.txt",
        )
        .await;
        tokio::time::sleep(Duration::from_secs_f64(window_s)).await;
        let after = nvidia_smi_once(
            input,
            place,
            &["nvlink", "-gt", "d"],
            "nvlink-counters-end.txt",
        )
        .await;
        match (before, after) {
            (Ok(b), Ok(a)) => {
                let (b, a) = (
                    system_profile_parse::nvidia_smi_nvlink::parse(&b).value,
                    system_profile_parse::nvidia_smi_nvlink::parse(&a).value,
                );
                for g in &mut parsed.value.gpus {
                    let find = |r: &system_profile_model::metrics::NvLinkReport, link: u32| {
                        r.gpus
                            .iter()
                            .find(|x| x.gpu == g.gpu)
                            .and_then(|x| x.links.iter().find(|l| l.link == link).cloned())
                    };
                    for l in &mut g.links {
                        if let (Some(x), Some(y)) = (find(&b, l.link), find(&a, l.link)) {
                            l.data_tx_kib = y
                                .data_tx_kib
                                .zip(x.data_tx_kib)
                                .map(|(y, x)| y.saturating_sub(x));
                            l.data_rx_kib = y
                                .data_rx_kib
                                .zip(x.data_rx_kib)
                                .map(|(y, x)| y.saturating_sub(x));
                        }
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                warnings.push(format!("no NVLink counters over the window: {e}"))
            }
        }
    }
    let inactive: u32 = parsed
        .value
        .gpus
        .iter()
        .map(|g| g.links.len() as u32 - g.active_links)
        .sum();
    if inactive > 0 {
        warnings.push(format!("{inactive} NVLink link(s) are inactive"));
    }
    let mut e = machine_execution(
        vec!["nvidia-smi".into(), "nvlink".into(), "-s".into()],
        started.elapsed().as_secs_f64(),
    );
    e.warnings = warnings;
    e.metrics.nvlink = Some(parsed.value);
    for f in [
        "nvlink-status.txt",
        "nvlink-counters-start.txt",
        "nvlink-counters-end.txt",
    ] {
        e.artifacts
            .extend(file_artifact(place.dir.join(f), "nvidia_smi_nvlink"));
    }
    Ok(e)
}

/// Runs the target inside `torch.profiler.profile` (CPU, and CUDA when torch sees a GPU) and
/// exports the Kineto trace. With a schedule, the profiler steps after every optimizer step
/// (a global optimizer hook: the target's code is not touched) and each active cycle is
/// exported as `trace-<n>.json.gz`; without one the whole run is `trace.json.gz`. Writes
/// `torch-profiler.json` with what happened (steps seen, traces written, CUDA or not).
/// argv: run dir, schedule (`wait,warmup,active,repeat` or empty), record_shapes,
/// profile_memory, with_stack (0/1), then the target.
const TORCH_RUNNER: &str = r#"
import json, os, runpy, sys
out_dir, schedule, shapes, memory, stack = sys.argv[1:6]
rest = sys.argv[6:]
try:
    import torch
    from torch.profiler import ProfilerActivity, profile
except Exception as e:
    sys.stderr.write("torch cannot be imported: %s\n" % e)
    sys.exit(97)
acts = [ProfilerActivity.CPU]
cuda = torch.cuda.is_available()
if cuda:
    acts.append(ProfilerActivity.CUDA)
state = {"steps": 0, "traces": [], "cuda": cuda}
def ready(p):
    path = os.path.join(out_dir, "trace-%d.json.gz" % len(state["traces"]))
    p.export_chrome_trace(path)
    state["traces"].append(path)
kwargs = dict(activities=acts, record_shapes=shapes == "1", profile_memory=memory == "1", with_stack=stack == "1")
if schedule:
    w, wu, a, r = (int(x) for x in schedule.split(","))
    kwargs["schedule"] = torch.profiler.schedule(wait=w, warmup=wu, active=a, repeat=r)
    kwargs["on_trace_ready"] = ready
prof = profile(**kwargs)
def stepped(optimizer, args, kw):
    state["steps"] += 1
    if schedule:
        prof.step()
from torch.optim.optimizer import register_optimizer_step_post_hook
register_optimizer_step_post_hook(stepped)
code = 0
prof.__enter__()
try:
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path.insert(0, os.path.dirname(os.path.realpath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
finally:
    prof.__exit__(None, None, None)
    if not schedule:
        path = os.path.join(out_dir, "trace.json.gz")
        prof.export_chrome_trace(path)
        state["traces"].append(path)
    with open(os.path.join(out_dir, "torch-profiler.json"), "w") as f:
        json.dump(state, f)
sys.exit(code)
"#;

/// The target under torch.profiler, its Kineto trace(s) analysed like `analyze_trace` does.
async fn torch_profiler(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let flag = |o: Option<bool>| if o == Some(true) { "1" } else { "0" }.to_string();
    let schedule = input
        .options
        .schedule
        .map(|s| {
            format!(
                "{},{},{},{}",
                s.wait,
                s.warmup,
                s.active.max(1),
                s.repeat.max(1)
            )
        })
        .unwrap_or_default();
    let mut argv = interpreter;
    argv.extend([
        "-c".into(),
        TORCH_RUNNER.into(),
        place.dir.to_string_lossy().into_owned(),
        schedule.clone(),
        flag(input.options.record_shapes),
        flag(input.options.profile_memory),
        flag(input.options.with_stack),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("torch cannot be imported") {
        e.error = Some(format!(
            "torch cannot be imported by {python}: run the profile with the interpreter the program uses (its venv), or install torch there"
        ));
        return Ok(e);
    }
    let state: serde_json::Value =
        serde_json::from_str(&read(&place.dir.join("torch-profiler.json"))).unwrap_or_default();
    let traces: Vec<PathBuf> = state["traces"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(PathBuf::from))
                .collect()
        })
        .unwrap_or_default();
    if !schedule.is_empty() && state["steps"].as_u64() == Some(0) {
        // Nothing was traced: a run that says it profiled would be sold as coverage.
        e.status = RunStatus::Failed;
        e.error = Some(
            "the program made no optimizer step, so the profiler's schedule never started and nothing was traced: run again without options.schedule to trace the whole run".into(),
        );
    }
    if state["cuda"] == false {
        e.warnings
            .push("torch sees no GPU: the trace has CPU operators only".into());
    }
    // The last active cycle is the one analysed (the first ones still warm up caches).
    if let Some(last) = traces.last() {
        let file = std::fs::File::open(last).map_err(|err| {
            RunError::new(
                RunErrorKind::Io,
                format!("cannot read {}: {err}", last.display()),
            )
        })?;
        let parsed =
            system_profile_parse::kineto::analyze_reader(flate2::read::GzDecoder::new(file));
        e.warnings.extend(
            parsed
                .diagnostics
                .iter()
                .filter(|d| state["cuda"] != false || !d.message.starts_with("no GPU kernels"))
                .map(|d| format!("trace: {}", d.message)),
        );
        e.metrics.trace = Some(parsed.value);
    }
    for t in traces {
        e.artifacts.extend(file_artifact(t, "kineto_trace"));
    }
    e.artifacts.extend(file_artifact(
        place.dir.join("torch-profiler.json"),
        "torch_profiler_state",
    ));
    explain_exit(&mut e);
    Ok(e)
}

async fn custom(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let argv = command_of(input)?;
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    explain_exit(&mut e);
    Ok(e)
}

/// `strace -c` of a started command, or of a PID for the window (strace detaches on SIGTERM
/// and writes its table).
async fn strace_c(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let table = place.dir.join("strace-c.txt");
    let mut argv: Vec<String> = vec!["strace".into(), "-c".into()];
    if input.options.subprocesses != Some(false) {
        argv.push("-f".into());
    }
    argv.extend(["-o".into(), table.to_string_lossy().into_owned()]);
    let attach = matches!(input.target, RunTarget::Pid { .. });
    let timeout = match &input.target {
        RunTarget::Pid { pid } => {
            argv.extend(["-p".into(), pid.to_string()]);
            Some(window(input))
        }
        _ => {
            argv.push("--".into());
            argv.extend(command_of(input)?);
            timeout_of(input)
        }
    };
    let outcome = launch(input, place, &argv, timeout, |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if attach && e.status == RunStatus::TimedOut {
        // The window ended: strace was told to detach, which is how an attach run ends.
        e.status = RunStatus::Completed;
    }
    if attach && e.stderr_tail.contains("Operation not permitted") {
        e.status = RunStatus::Failed;
        e.error = Some("strace may not attach here: run as root, set kernel.yama.ptrace_scope=0, or in a container add --cap-add=SYS_PTRACE".into());
    }
    let parsed = system_profile_parse::strace_c::parse(&read(&table));
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("strace -c: {}", d.message)),
    );
    e.metrics.syscalls = Some(parsed.value);
    e.artifacts.extend(file_artifact(table, "strace_c"));
    if e.error.is_none() {
        explain_exit(&mut e);
    }
    Ok(e)
}

/// The counters asked for, or a default set that every Linux machine has in software and
/// most have in hardware.
fn perf_events(options: &ProfilerOptions) -> String {
    if options.events.is_empty() {
        "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions".into()
    } else {
        options.events.join(",")
    }
}

/// The end of a perf command line: `-- argv` for a command; for a PID, `-p PID -- sleep D`,
/// so perf ends with the `sleep` it runs (the window, without signals).
fn perf_target(input: &RunProfilerInput) -> Result<Vec<String>, RunError> {
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
fn attached_pids(pid: u32) -> Vec<u32> {
    let table = system_profile_sample::proc::list_processes();
    let tree = system_profile_sample::proc::tree(&table, pid);
    if table.iter().any(|p| p.pid == pid) {
        tree
    } else {
        vec![pid]
    }
}

/// `perf stat -x,` of a started command, or of a PID's tree for the window.
async fn perf_stat(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let csv = place.dir.join("perf-stat.csv");
    let mut argv: Vec<String> = vec![
        "perf".into(),
        "stat".into(),
        "-x,".into(),
        "-o".into(),
        csv.to_string_lossy().into_owned(),
        "-e".into(),
        perf_events(&input.options),
    ];
    argv.extend(perf_target(input)?);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
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
    e.artifacts.extend(file_artifact(csv, "perf_stat_csv"));
    explain_exit(&mut e);
    Ok(e)
}

/// The pids given to `-p`, from the argv that ran.
fn argv_pids(argv: &[String]) -> Option<Vec<u32>> {
    let at = argv.iter().position(|a| a == "-p")?;
    Some(
        argv.get(at + 1)?
            .split(',')
            .filter_map(|p| p.parse().ok())
            .collect(),
    )
}

/// The advice for a refused ptrace, found in a tool's stderr.
fn ptrace_refused(stderr: &str) -> Option<String> {
    let s = stderr.to_lowercase();
    (s.contains("permission denied") || s.contains("operation not permitted"))
        .then(|| "attaching was refused: run as root, set kernel.yama.ptrace_scope=0 (sysctl), or in a container add --cap-add=SYS_PTRACE".to_string())
}

/// Draw folded stacks as a flame graph SVG (inferno); `None` when there is nothing to draw.
fn flamegraph(folded: &str, title: &str, svg: &Path) -> Option<String> {
    if folded.trim().is_empty() {
        return None;
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    let file = std::fs::File::create(svg).ok()?;
    match inferno::flamegraph::from_lines(
        &mut options,
        folded.lines(),
        std::io::BufWriter::new(file),
    ) {
        Ok(()) => None,
        Err(e) => Some(format!("flame graph not drawn: {e}")),
    }
}

async fn py_spy_record(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let folded = place.dir.join("py-spy.folded");
    let o = &input.options;
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
        format!("{}", o.rate_hz.unwrap_or(100.0).round().max(1.0)),
    ];
    // Children are followed unless asked not to (as strace_c does): a pool's workers are
    // where a multi-process program spends its CPU, and a lone process loses nothing.
    for (flag, on) in [
        ("--native", o.native),
        ("--subprocesses", Some(o.subprocesses != Some(false))),
        ("--gil", o.gil),
        ("--idle", o.idle),
    ] {
        if on == Some(true) {
            argv.push(flag.into());
        }
    }
    let attach = matches!(input.target, RunTarget::Pid { .. });
    match &input.target {
        RunTarget::Pid { pid } => argv.extend([
            "--pid".into(),
            pid.to_string(),
            "--duration".into(),
            format!("{}", window(input).as_secs_f64().ceil().max(1.0)),
        ]),
        _ => {
            argv.push("--".into());
            argv.extend(command_of(input)?);
        }
    }
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let text = read(&folded);
    let parsed = system_profile_parse::folded::parse(&text);
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("py-spy: {}", d.message)),
    );
    if parsed.value.total_samples == 0 {
        if e.status == RunStatus::TimedOut && !folded.exists() {
            // py-spy writes its samples only when it ends by itself or on Ctrl-C; a run
            // stopped by the timeout keeps nothing, so saying "kept" would be false.
            e.error = Some(
                "timeout_s passed before py-spy wrote its samples: nothing it sampled was kept; give timeout_s longer than duration_s, or a shorter duration_s"
                    .into(),
            );
        } else if !attach && e.status == RunStatus::Completed {
            // Nothing was measured, and py-spy's own status says nothing of the target's: a
            // run that passed for a profile would be sold as coverage.
            e.status = RunStatus::Failed;
            let said = last_words(&e.stderr_tail)
                .map(|l| format!(" (it said `{l}`)"))
                .unwrap_or_default();
            e.error = Some(format!(
                "py-spy took no samples: the target ended at once{said}, or never ran Python code"
            ));
        } else {
            e.warnings.push(
                "py-spy took no samples: the target ended at once, or never ran Python code".into(),
            );
        }
    }
    e.metrics.stacks = Some(parsed.value);
    e.artifacts.extend(file_artifact(folded, "folded"));
    let svg = place.dir.join("flamegraph.svg");
    let title = input.label.clone().unwrap_or_else(|| "py-spy".into());
    if let Some(w) = flamegraph(&text, &title, &svg) {
        e.warnings.push(w);
    }
    e.artifacts.extend(file_artifact(svg, "flamegraph_svg"));
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

async fn py_spy_dump(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let RunTarget::Pid { pid } = input.target else {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            "py_spy_dump reads a running process: give target.pid",
        ));
    };
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
    let json = place.dir.join("py-spy-dump.json");
    if std::fs::write(&json, outcome.stdout.text()).is_ok() {
        e.artifacts.extend(file_artifact(json, "py_spy_dump_json"));
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

/// Reads a pstats file and prints its rows as JSON (see `parse::cprofile_json`).
const PSTATS_TO_JSON: &str = "import json, pstats, sys\nst = pstats.Stats(sys.argv[1])\nrows = [[f, l, n, cc, nc, tt, ct] for (f, l, n), (cc, nc, tt, ct, _) in st.stats.items()]\nwith open(sys.argv[2], 'w') as out:\n    json.dump(rows, out)\n";

fn is_python(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    name.starts_with("python") || name.starts_with("pypy")
}

/// A Python command split where a profiler goes in: the interpreter with its own options
/// (`-u`, `-X dev`, `-W error`), then the script or `-m module` and their arguments.
fn split_python(input: &RunProfilerInput) -> Result<(Vec<String>, Vec<String>), RunError> {
    let target = command_of(input)?;
    let mut pos = 1;
    while let Some(a) = target.get(pos) {
        match a.as_str() {
            "-m" => break,
            "-X" | "-W" => pos += 2,
            o if o.starts_with('-') && o != "-c" => pos += 1,
            _ => break,
        }
    }
    let names_code = target
        .get(pos)
        .is_some_and(|a| a != "-c" && (a != "-m" || target.len() > pos + 1));
    if !is_python(&target[0]) || !names_code {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} runs Python code: the command must start with the interpreter and name a script or module (`python3 script.py [args]`, `python3 -m module [args]`), not `{}`",
                input.profiler.id(),
                target.join(" ")
            ),
        ));
    }
    let rest = target[pos..].to_vec();
    let mut interpreter = target;
    interpreter.truncate(pos);
    Ok((interpreter, rest))
}

async fn cprofile(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let (mut argv, rest) = split_python(input)?;
    let python = argv[0].clone();
    let pstats = place.dir.join("cprofile.pstats");
    // The interpreter's own options stay before `-m cProfile`; the script or `-m module` after.
    argv.extend([
        "-m".into(),
        "cProfile".into(),
        "-o".into(),
        pstats.to_string_lossy().into_owned(),
    ]);
    argv.extend(rest);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let rows = place.dir.join("cprofile.json");
    let convert = CommandSpec::new([
        python.as_str(),
        "-c",
        PSTATS_TO_JSON,
        &pstats.to_string_lossy(),
        &rows.to_string_lossy(),
    ]);
    match system_profile_exec::run(&convert, &RunOptions::with_timeout(Duration::from_secs(60))).await {
        Ok(o) if o.exit.success() => {
            let parsed = system_profile_parse::cprofile_json::parse(&read(&rows));
            e.warnings.extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
            e.metrics.calls = Some(parsed.value);
        }
        Ok(o) => e.warnings.push(format!(
            "the profile could not be read back (cProfile writes it only when the program exits normally): {}",
            o.stderr.text().lines().last().unwrap_or("").trim()
        )),
        Err(err) => e.warnings.push(format!("the profile could not be read back: {err}")),
    }
    e.artifacts.extend(file_artifact(pstats, "pstats"));
    e.artifacts.extend(file_artifact(rows, "cprofile_json"));
    explain_exit(&mut e);
    Ok(e)
}

/// vmstat, iostat, mpstat or pidstat over the window, every `interval_s` (whole seconds).
async fn sysstat(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let method = input.profiler;
    let interval = input.options.interval_s.unwrap_or(1.0).round().max(1.0);
    let count = (window(input).as_secs_f64() / interval).ceil().max(1.0) as u64;
    let mut argv: Vec<String> = match method {
        Method::Vmstat => vec!["vmstat".into(), "-n".into(), "-w".into(), "-t".into()],
        Method::Iostat => ["iostat", "-d", "-x", "-y", "-o", "JSON"]
            .map(String::from)
            .to_vec(),
        Method::Mpstat => ["mpstat", "-P", "ALL", "-o", "JSON"]
            .map(String::from)
            .to_vec(),
        _ => ["pidstat", "-u", "-r", "-d", "-w", "-h"]
            .map(String::from)
            .to_vec(),
    };
    match (&input.target, method) {
        (RunTarget::System { .. }, _) => {}
        (RunTarget::Pid { pid }, Method::Pidstat) => argv.extend(["-p".into(), pid.to_string()]),
        _ => {
            return Err(RunError::new(
                RunErrorKind::BadTarget,
                format!(
                    "{} observes {} for duration_s: give target {{\"system\": true}}{}; to cover a command, run this in the background alongside it (plan_profile does)",
                    method.id(),
                    if method == Method::Pidstat { "processes" } else { "the machine" },
                    if method == Method::Pidstat { " or a pid" } else { "" }
                ),
            ))
        }
    }
    argv.extend([format!("{interval}"), count.to_string()]);
    // Times in 24-hour form whatever the locale, so every row parses the same way.
    let mut fixed = input.clone();
    fixed.env.insert("LC_ALL".into(), "C".into());
    let outcome = launch(&fixed, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let text = read(&place.dir.join("stdout.txt"));
    let parsed = match method {
        Method::Vmstat => system_profile_parse::sysstat::vmstat(&text),
        Method::Iostat => system_profile_parse::sysstat::iostat(&text),
        Method::Mpstat => system_profile_parse::sysstat::mpstat(&text),
        _ => system_profile_parse::sysstat::pidstat(&text),
    };
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", method.id(), d.message)),
    );
    if method == Method::Pidstat && parsed.value.series.is_empty() {
        e.warnings
            .push("pidstat reported no interval: the process ended within the first second".into());
    }
    e.metrics.sysstat = Some(parsed.value);
    explain_exit(&mut e);
    Ok(e)
}

/// `perf record -g` of a command or a PID for the window, then `perf script` folded by
/// inferno into stacks and a flame graph. The event is `cpu-clock` (a software timer, present
/// in VMs without a PMU) unless `options.events` names others.
async fn perf_record(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let data = place.dir.join("perf.data");
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
    e.artifacts.extend(file_artifact(data.clone(), "perf_data"));
    // perf script writes the samples as text; inferno folds them.
    let script = place.dir.join("perf.script");
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
            let folded_path = place.dir.join("perf.folded");
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
                    let parsed = system_profile_parse::folded::parse(&text);
                    e.metrics.stacks = Some(parsed.value);
                    e.artifacts.extend(file_artifact(folded_path, "folded"));
                    let svg = place.dir.join("flamegraph.svg");
                    let title = input.label.clone().unwrap_or_else(|| "perf record".into());
                    if let Some(w) = flamegraph(&text, &title, &svg) {
                        e.warnings.push(w);
                    }
                    e.artifacts.extend(file_artifact(svg, "flamegraph_svg"));
                }
                Err(err) => e
                    .warnings
                    .push(format!("perf script output could not be folded: {err}")),
            }
            e.artifacts.extend(file_artifact(script, "perf_script"));
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

/// Reads a line_profiler stats file and prints one function's lines as JSON: argv is the
/// .lprof file, the script, the function's qualified name and the output path. The function's
/// first line is found with `ast` (decorators included, as `co_firstlineno` counts them).
const LPROF_TO_JSON: &str = r#"
import ast, json, os, sys
import line_profiler
stats_path, script, qualname, out = sys.argv[1:5]
src = open(script, encoding="utf-8", errors="replace").read()
lines_of_src = src.splitlines()
first = set()
def walk(body, prefix):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            q = prefix + n.name
            if q == qualname and not isinstance(n, ast.ClassDef):
                first.add(n.lineno)
                first.update(d.lineno for d in n.decorator_list)
            walk(n.body, q + ".")
walk(ast.parse(src).body, "")
st = line_profiler.load_stats(stats_path)
name = qualname.rsplit(".", 1)[-1]
result = {"function": qualname, "file": os.path.abspath(script), "lines": []}
for (f, line, fname), rows in st.timings.items():
    same_file = os.path.abspath(f) == os.path.abspath(script) or os.path.basename(f) == os.path.basename(script)
    if same_file and fname == name and (not first or line in first):
        for lineno, hits, t in rows:
            text = lines_of_src[lineno - 1] if 0 < lineno <= len(lines_of_src) else ""
            result["lines"].append([lineno, hits, t * st.unit, text])
json.dump(result, open(out, "w"))
"#;

/// `options.function` as (file, qualname), for the methods that profile one function.
fn function_of(input: &RunProfilerInput) -> Result<(&str, &str), RunError> {
    let Some(function) = input.options.function.as_deref() else {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} needs options.function (`path/to/file.py:Class.method`)",
                input.profiler.id()
            ),
        ));
    };
    function.rsplit_once(':').ok_or_else(|| {
        RunError::new(
            RunErrorKind::BadTarget,
            format!("options.function {function:?} is not `file.py:qualname`"),
        )
    })
}

async fn line_profiler(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let (file, qualname) = function_of(input)?;
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let lprof = place.dir.join("line_profiler.lprof");
    // kernprof profiles every function of the file the function is in (`-p FILE`); the
    // converter keeps the one asked for.
    let mut argv = interpreter;
    argv.extend([
        "-m".into(),
        "kernprof".into(),
        "-l".into(),
        "-p".into(),
        file.to_string(),
        "-o".into(),
        lprof.to_string_lossy().into_owned(),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("No module named kernprof") {
        e.error = Some(format!(
            "line_profiler is not installed for {python}: {python} -m pip install line_profiler"
        ));
        return Ok(e);
    }
    let rows = place.dir.join("line_profiler.json");
    let convert = CommandSpec::new([
        python.as_str(),
        "-c",
        LPROF_TO_JSON,
        &lprof.to_string_lossy(),
        file,
        qualname,
        &rows.to_string_lossy(),
    ])
    .cwd(&place.cwd);
    match system_profile_exec::run(&convert, &RunOptions::with_timeout(Duration::from_secs(60)))
        .await
    {
        Ok(o) if o.exit.success() => {
            let parsed = system_profile_parse::line_profile::parse(&read(&rows));
            e.warnings
                .extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
            if parsed.value.lines.is_empty() {
                e.warnings
                    .push(format!("`{qualname}` never ran, or is not in {file}"));
            }
            e.metrics.line_profile = Some(parsed.value);
        }
        Ok(o) => e.warnings.push(format!(
            "the line profile could not be read back: {}",
            o.stderr.text().lines().last().unwrap_or("").trim()
        )),
        Err(err) => e
            .warnings
            .push(format!("the line profile could not be read back: {err}")),
    }
    e.artifacts.extend(file_artifact(lprof, "lprof"));
    e.artifacts
        .extend(file_artifact(rows, "line_profiler_json"));
    explain_exit(&mut e);
    Ok(e)
}

/// Runs the target's script or `-m` module under tracemalloc from its first line: a thread
/// records [t, current, peak] every interval and takes a snapshot whenever the traced memory
/// grows 10% past the last one (so the sites at the peak are known), and at exit the sites
/// still live. argv: report path, traceback depth, interval, then the target's argv after the
/// interpreter.
const TRACEMALLOC_RUNNER: &str = r#"
import json, os, runpy, sys, threading, time, tracemalloc
out, depth, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
target = sys.argv[4:]
OWN = (tracemalloc.__file__, runpy.__file__, threading.__file__, "<string>")
def top(snapshot, n=30):
    # Grouped by line first, then the runner's own lines dropped: filter_traces runs Python
    # per block and took half a minute for a few million blocks; this is one pass in C.
    out = []
    for s in snapshot.statistics("lineno"):
        f = s.traceback[0].filename
        if f in OWN or f.startswith("<frozen "):
            continue
        out.append([f, s.traceback[0].lineno, s.size, s.count])
        if len(out) >= n:
            break
    return out
state = {"timeline": [], "snap_at": 0}
stop = threading.Event()
t0 = time.monotonic()
def watch():
    last = 0
    while not stop.wait(interval):
        cur, peak = tracemalloc.get_traced_memory()
        if len(state["timeline"]) < 100000:
            state["timeline"].append([round(time.monotonic() - t0, 4), cur, peak])
        # A new snapshot every 10% of growth, and once more when growth stops at a new high
        # (a plateau 1% above the last snapshot): the peak itself, not the ramp before it.
        grew = cur > max(state["snap_at"] * 1.1, 1 << 20)
        plateau = cur > max(state["snap_at"] * 1.01, 1 << 20) and cur <= last * 1.001
        if grew or plateau:
            state["snap_at"] = cur
            # Only the copy here (C, untraced, ~0.1 s per 300,000 blocks); grouping it by line
            # is Python and slow, and done at exit: grouped here, it starved this thread for
            # seconds while the target ran on to its peak.
            state["peak_snap"] = tracemalloc.take_snapshot()
        last = cur
def statm():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
def leading_imports(path):
    # The top-level imports before the first other statement: what the script pays before its
    # own code runs. Later imports may depend on that code (sys.path, environment variables).
    import ast
    try:
        with open(path, "rb") as f:
            src = f.read()
        body = ast.parse(src, path).body
        lines = src.decode("utf-8", "replace").splitlines()
    except Exception:
        return []
    def imported(n):
        # (module, names from it): `from a import b` may import the submodule a.b.
        if isinstance(n, ast.Import):
            return [(a.name, ()) for a in n.names]
        if isinstance(n, ast.ImportFrom):
            if n.level == 0 and n.module and n.module != "__future__":
                return [(n.module, tuple(a.name for a in n.names if a.name != "*"))]
            return []
        if isinstance(n, ast.Try) and n.body and all(isinstance(b, (ast.Import, ast.ImportFrom)) for b in n.body):
            # `try: import torch / except ImportError:` is an import too.
            return [m for b in n.body for m in imported(b)]
        return None
    names = []
    for i, n in enumerate(body):
        if i == 0 and isinstance(n, ast.Expr) and isinstance(getattr(n.value, "value", None), str):
            continue
        if isinstance(n, ast.Expr) and "__import__" in ast.unparse(n) and '# [PROFILE]' in lines[n.lineno - 1]:
            continue  # instrument_file's helper line: ours, not the program's
        more = imported(n)
        if more is None:
            break
        names += [m for m in more if m[0] != "_sp_profile"]
    return names
rss_before = statm()
imports = []
if target[0] != "-m":
    sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
    # Imported untraced: their memory is the baseline, and tracing them slows nothing we report.
    for name, fromlist in leading_imports(target[0]):
        t_import = time.monotonic()
        row = {"module": name}
        try:
            __import__(name, fromlist=fromlist)
        except BaseException as e:
            row["error"] = "%s: %s" % (type(e).__name__, e)
        row["rss_after_bytes"] = statm()
        row["wall_s"] = round(time.monotonic() - t_import, 4)
        imports.append(row)
    sys.path.pop(0)
t0 = time.monotonic()
tracemalloc.start(depth)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
code = 0
try:
    if target[0] == "-m":
        sys.argv = target[1:]
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = target
        sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
        runpy.run_path(target[0], run_name="__main__")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
finally:
    stop.set()
    # A snapshot in flight finishes before the report is written.
    watcher.join(timeout=30)
    cur, peak = tracemalloc.get_traced_memory()
    snap = state.pop("peak_snap", None)
    report = {"current": cur, "peak": peak, "depth": depth,
              "peak_sites": top(snap) if snap is not None else [],
              "exit_sites": top(tracemalloc.take_snapshot(), 200), "timeline": state["timeline"],
              "peak_sites_at": state["snap_at"], "rss_before_imports": rss_before,
              "imports": imports}
    tracemalloc.stop()
    with open(out, "w") as f:
        json.dump(report, f)
sys.exit(code)
"#;

async fn tracemalloc(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let report = place.dir.join("tracemalloc.json");
    let depth = input.options.traceback_depth.unwrap_or(1).clamp(1, 256);
    let interval = input.options.interval_s.unwrap_or(0.1).max(0.01);
    argv.extend([
        "-c".into(),
        TRACEMALLOC_RUNNER.into(),
        report.to_string_lossy().into_owned(),
        depth.to_string(),
        format!("{interval}"),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    // The runner's code is long; the record keeps its place, not its text.
    if let Some(code) = e.argv.iter_mut().find(|a| a.as_str() == TRACEMALLOC_RUNNER) {
        *code = "<tracemalloc runner>".into();
    }
    let parsed = system_profile_parse::tracemalloc_json::parse(&read(&report));
    if parsed.diagnostics.is_empty() {
        e.metrics.python_memory = Some(parsed.value);
    } else {
        e.warnings.push(
            "tracemalloc wrote no report: the target was killed before its exit handler ran".into(),
        );
    }
    e.artifacts
        .extend(file_artifact(report, "tracemalloc_json"));
    explain_exit(&mut e);
    Ok(e)
}

/// `memray run` of a script or module, then `memray stats --json` and a flame graph HTML
/// (with leaks only when `options.leaks`), all through the target's own interpreter.
async fn memray(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let py = argv[0].clone();
    let capture = place.dir.join("memray.bin");
    let capture_s = capture.to_string_lossy().into_owned();
    argv.extend([
        "-m".into(),
        "memray".into(),
        "run".into(),
        "-q".into(),
        "-f".into(),
    ]);
    if input.options.native == Some(true) {
        argv.push("--native".into());
    }
    argv.extend(["-o".into(), capture_s.clone()]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("No module named memray") {
        e.error = Some(format!(
            "memray is not installed for {py}: {py} -m pip install memray"
        ));
        return Ok(e);
    }
    e.artifacts
        .extend(file_artifact(capture.clone(), "memray_bin"));
    let stats = place.dir.join("memray-stats.json");
    let flame = place.dir.join("memray-flamegraph.html");
    let stats_s = stats.to_string_lossy().into_owned();
    let flame_s = flame.to_string_lossy().into_owned();
    let mut flame_argv = vec![
        py.as_str(),
        "-m",
        "memray",
        "flamegraph",
        "-f",
        "-o",
        &flame_s,
    ];
    if input.options.leaks == Some(true) {
        flame_argv.push("--leaks");
    }
    flame_argv.push(&capture_s);
    let reports: [(Vec<&str>, &str); 2] = [
        (
            vec![
                py.as_str(),
                "-m",
                "memray",
                "stats",
                "--json",
                "-f",
                "-o",
                &stats_s,
                &capture_s,
            ],
            "stats",
        ),
        (flame_argv, "flame graph"),
    ];
    for (report_argv, what) in reports {
        let spec = CommandSpec::new(report_argv).cwd(&place.cwd);
        match system_profile_exec::run(&spec, &RunOptions::with_timeout(Duration::from_secs(300)))
            .await
        {
            Ok(o) if o.exit.success() => {}
            Ok(o) => e.warnings.push(format!(
                "memray {what} failed: {}",
                o.stderr.text().lines().last().unwrap_or("").trim()
            )),
            Err(err) => e.warnings.push(format!("memray {what} did not run: {err}")),
        }
    }
    if stats.exists() {
        let parsed = system_profile_parse::memray_stats::parse(&read(&stats));
        e.warnings
            .extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
        e.metrics.allocations = Some(parsed.value);
    }
    e.artifacts
        .extend(file_artifact(stats, "memray_stats_json"));
    e.artifacts
        .extend(file_artifact(flame, "memray_flamegraph_html"));
    explain_exit(&mut e);
    Ok(e)
}

/// The methods this build runs.
pub const IMPLEMENTED: [Method; 26] = [
    Method::TimeV,
    Method::Measure,
    Method::ProcfsSampler,
    Method::Custom,
    Method::StraceC,
    Method::PerfStat,
    Method::PySpyRecord,
    Method::PySpyDump,
    Method::Cprofile,
    Method::Vmstat,
    Method::Iostat,
    Method::Mpstat,
    Method::Pidstat,
    Method::PerfRecord,
    Method::LineProfiler,
    Method::Tracemalloc,
    Method::Memray,
    Method::NvmlSampler,
    Method::NvidiaSmiDmon,
    Method::NvidiaSmiQuery,
    Method::NcclDebug,
    Method::Nsys,
    Method::MemoryProfiler,
    Method::NvidiaSmiTopo,
    Method::NvlinkStatus,
    Method::TorchProfiler,
];

/// Run `input` in `place`. The future can be dropped at any point: the run's process group
/// dies with it, and an attached sampler stops.
pub async fn execute(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    std::fs::create_dir_all(&place.dir).map_err(|e| {
        RunError::new(
            RunErrorKind::Io,
            format!("cannot create {}: {e}", place.dir.display()),
        )
    })?;
    match input.profiler {
        Method::TimeV => time_v(input, place, false).await,
        Method::Measure => time_v(input, place, true).await,
        Method::ProcfsSampler => procfs_sampler(input, place).await,
        Method::Custom => custom(input, place).await,
        Method::StraceC => strace_c(input, place).await,
        Method::PerfStat => perf_stat(input, place).await,
        Method::PySpyRecord => py_spy_record(input, place).await,
        Method::PySpyDump => py_spy_dump(input, place).await,
        Method::Cprofile => cprofile(input, place).await,
        Method::PerfRecord => perf_record(input, place).await,
        Method::LineProfiler => line_profiler(input, place).await,
        Method::Tracemalloc => tracemalloc(input, place).await,
        Method::Memray => memray(input, place).await,
        Method::NvmlSampler => nvml_sampler(input, place).await,
        Method::NvidiaSmiDmon | Method::NvidiaSmiQuery => nvidia_smi(input, place).await,
        Method::NcclDebug => nccl_debug(input, place).await,
        Method::Nsys => nsys(input, place).await,
        Method::MemoryProfiler => memory_profiler(input, place).await,
        Method::NvidiaSmiTopo => nvidia_smi_topo(input, place).await,
        Method::NvlinkStatus => nvlink_status(input, place).await,
        Method::TorchProfiler => torch_profiler(input, place).await,
        Method::Vmstat | Method::Iostat | Method::Mpstat | Method::Pidstat => {
            sysstat(input, place).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(argv: &[&str]) -> RunProfilerInput {
        RunProfilerInput {
            profiler: Method::Cprofile,
            target: RunTarget::Command {
                command: argv.iter().map(|s| s.to_string()).collect(),
                shell: false,
            },
            cwd: None,
            env: Default::default(),
            duration_s: None,
            timeout_s: None,
            options: Default::default(),
            label: None,
            background: false,
        }
    }

    #[test]
    fn python_commands_split_after_the_interpreter_options() {
        let split = |argv: &[&str]| split_python(&with(argv)).map_err(|e| e.to_string());
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            split(&["python3", "a.py", "-x"]),
            Ok((v(&["python3"]), v(&["a.py", "-x"])))
        );
        assert_eq!(
            split(&[
                "/usr/bin/python3.11",
                "-u",
                "-X",
                "dev",
                "-W",
                "error",
                "a.py"
            ]),
            Ok((
                v(&["/usr/bin/python3.11", "-u", "-X", "dev", "-W", "error"]),
                v(&["a.py"])
            ))
        );
        assert_eq!(
            split(&["python3", "-O", "-m", "pkg.mod", "--flag"]),
            Ok((v(&["python3", "-O"]), v(&["-m", "pkg.mod", "--flag"])))
        );
        for bad in [
            &["python3"][..],
            &["python3", "-c", "pass"],
            &["python3", "-m"],
            &["./tool", "a.py"],
        ] {
            let err = split(bad).unwrap_err();
            assert!(
                err.contains("must start with the interpreter"),
                "{bad:?}: {err}"
            );
        }
    }
}
