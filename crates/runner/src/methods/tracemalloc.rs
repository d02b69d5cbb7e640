//! `tracemalloc`: the script's leading imports weighed untraced, then the script traced.

use crate::*;

/// Runs the target's script or `-m` module under tracemalloc from its first line: a thread
/// records [t, current, peak] every interval and takes a snapshot whenever the traced memory
/// grows 10% past the last one (so the sites at the peak are known), and at exit the sites
/// still live. argv: report path, traceback depth, interval, then the target's argv after the
/// interpreter.
pub(crate) const TRACEMALLOC_RUNNER: &str = concat!(
    include_str!("py/sp_launch.py"),
    include_str!("py/tracemalloc_runner.py")
);

pub(crate) async fn tracemalloc(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let report = artifact_path(input, place, ArtifactKind::TracemallocJson);
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
        .extend(file_artifact(report, ArtifactKind::TracemallocJson));
    explain_exit(&mut e);
    Ok(e)
}
