//! `nccl_debug`: the target with `NCCL_DEBUG=INFO`, one log per process, parsed.

use crate::*;

/// The command with `NCCL_DEBUG=INFO`, every process writing its own log
/// (`NCCL_DEBUG_FILE=<run>/nccl.%h.%p.log`), then the logs parsed together.
pub(crate) async fn nccl_debug(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
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
        e.artifacts.extend(file_artifact(log, ArtifactKind::NcclLog));
    }
    explain_exit(&mut e);
    Ok(e)
}
