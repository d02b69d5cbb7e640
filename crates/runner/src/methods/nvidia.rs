//! The NVIDIA methods read from outside the target: the NVML sampler, `nvidia-smi` dmon and query series, `nvidia-smi topo -m` and `nvlink`.

use crate::*;

/// The NVML sampler's settings: `rate_hz` (default 10 Hz) and `gpus` (default every GPU) as
/// the run's options give them, each caller naming the options it reads.
pub(crate) fn nvml_config(
    input: &RunProfilerInput,
    place: &RunPlace,
    rate_hz: Option<f64>,
    gpus: &[u32],
) -> NvmlSamplerConfig {
    NvmlSamplerConfig {
        rate_hz: rate_hz.unwrap_or(10.0),
        devices: gpus.to_vec(),
        jsonl: Some(artifact_path(input, place, ArtifactKind::NvmlJsonl)),
        samples_taken: None,
    }
}

/// Every GPU through NVML: while a command runs, or for the window beside a PID or the machine.
pub(crate) async fn nvml_sampler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let mut config = nvml_config(input, place, input.options.rate_hz, &input.options.gpus);
    config.samples_taken = Some(place.samples_taken.clone());
    let sampler = NvmlSampler::start(config).map_err(|why| {
        RunError::new(
            RunErrorKind::ToolUnavailable,
            format!("nvml_sampler cannot run here: {why}. Without a GPU, plan CPU methods; nvidia_smi_dmon needs the same driver"),
        )
    })?;
    let jsonl = artifact_path(input, place, ArtifactKind::NvmlJsonl);
    let mut e = match &input.target {
        // `command_of` refuses a target the server did not resolve.
        RunTarget::SlurmJob { slurm_job: job } | RunTarget::RayJob { ray_job: job } => {
            return Err(on_a_cluster_job(input, job))
        }
        RunTarget::Command { .. } | RunTarget::Identified { .. } => {
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
    e.artifacts.extend(file_artifact(jsonl, ArtifactKind::NvmlJsonl));
    Ok(e)
}

/// The --query-gpu fields asked for by default: enough for every `GpuSample` field it has.
pub(crate) const QUERY_GPU_FIELDS: &str = "timestamp,index,name,uuid,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,clocks.sm,clocks.mem,temperature.gpu";

/// `nvidia-smi dmon` or `nvidia-smi --query-gpu` every `interval_s` (whole seconds): beside a
/// command until it ends, or for the window beside a PID or the machine. The output is parsed
/// into the same `GpuSummary` as the NVML sampler's.
pub(crate) async fn nvidia_smi(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let method = input.profiler;
    let interval = input.options.interval_s.unwrap_or(1.0).round().max(1.0);
    let window_s = window(input).as_secs_f64();
    let (kind, mut argv) = if method == Method::NvidiaSmiDmon {
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
            ArtifactKind::Dmon,
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
            ArtifactKind::NvidiaSmiQueryCsv,
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
    let out_path = artifact_path(input, place, kind);
    let smi_spec = spec_of(input, &argv, &place.cwd);
    let smi_opts = |limit: Option<Duration>| RunOptions {
        timeout: limit,
        stdout_path: Some(out_path.clone()),
        stderr_path: Some(place.dir.join("nvidia-smi.stderr.txt")),
        ..Default::default()
    };
    let mut e = match &input.target {
        // `command_of` refuses a target the server did not resolve.
        RunTarget::SlurmJob { slurm_job: job } | RunTarget::RayJob { ray_job: job } => {
            return Err(on_a_cluster_job(input, job))
        }
        RunTarget::Command { .. } | RunTarget::Identified { .. } => {
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
    e.artifacts.extend(file_artifact(out_path, kind));
    Ok(e)
}

/// Run one nvidia-smi query whose output is the artifact `file`; its text, or an error that
/// says why nvidia-smi did not answer.
pub(crate) async fn nvidia_smi_once(
    input: &RunProfilerInput,
    place: &RunPlace,
    args: &[&str],
    kind: ArtifactKind,
) -> Result<String, RunError> {
    let mut argv = vec!["nvidia-smi".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let spec = spec_of(input, &argv, &place.cwd);
    let path = artifact_path(input, place, kind);
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
pub(crate) fn machine_execution(argv: Vec<String>, wall_s: f64) -> Execution {
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
        not_started: None,
        error_kind: None,
    }
}

/// `nvidia-smi topo -m`: the GPU/NIC matrix, NVLink pairs and the GPU pairs that go over PCIe.
pub(crate) async fn nvidia_smi_topo(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let started = Instant::now();
    let text = nvidia_smi_once(input, place, &["topo", "-m"], ArtifactKind::NvidiaSmiTopo).await?;
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
        .extend(kept(input, place, ArtifactKind::NvidiaSmiTopo));
    Ok(e)
}

/// `nvidia-smi nvlink -s` (links and speeds), and `-gt d` at the start and the end of the
/// window: the data each link carried meanwhile, as counters in the report (end minus start).
pub(crate) async fn nvlink_status(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let started = Instant::now();
    let status = nvidia_smi_once(input, place, &["nvlink", "-s"], ArtifactKind::NvidiaSmiNvlink).await?;
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
            ArtifactKind::NvlinkCountersStart,
        )
        .await;
        tokio::time::sleep(Duration::from_secs_f64(window_s)).await;
        let after = nvidia_smi_once(
            input,
            place,
            &["nvlink", "-gt", "d"],
            ArtifactKind::NvlinkCountersEnd,
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
    for kind in [
        ArtifactKind::NvidiaSmiNvlink,
        ArtifactKind::NvlinkCountersStart,
        ArtifactKind::NvlinkCountersEnd,
    ] {
        e.artifacts.extend(kept(input, place, kind));
    }
    Ok(e)
}
