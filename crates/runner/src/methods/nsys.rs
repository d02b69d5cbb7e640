//! `nsys`: `nsys profile`, then `nsys stats` into the tables `analyze_trace` uses.

use crate::*;

/// The reports `nsys stats` is asked for: what `NsysStats` reads.
pub(crate) const NSYS_REPORTS: &str =
    "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,cuda_api_sum,nvtx_sum,osrt_sum";

/// `nsys profile` of the command, then `nsys stats` of its report, parsed.
pub(crate) async fn nsys(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
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
    let rep = artifact_path(input, place, ArtifactKind::NsysRep);
    if !rep.exists() {
        e.warnings.push(
            "nsys wrote no report.nsys-rep: see stderr_tail (a GPU driver nsys can reach is needed)".into(),
        );
        explain_exit(&mut e);
        return Ok(e);
    }
    let stats_path = artifact_path(input, place, ArtifactKind::NsysStats);
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
    e.artifacts.extend(file_artifact(rep, ArtifactKind::NsysRep));
    e.artifacts.extend(file_artifact(stats_path, ArtifactKind::NsysStats));
    explain_exit(&mut e);
    Ok(e)
}
