//! `memory_profiler` on one function: resident memory per line.

use super::line_profiler::function_of;
use crate::*;

/// Runs the target under memory_profiler with only the named function traced: a global trace
/// hook adds that function's code to memory_profiler's map the first time it is called (it is
/// defined by the target, so it cannot be named before the target runs) and hands its frames
/// to memory_profiler's own tracer; every other frame is left untraced. Writes the per-line
/// table as JSON. argv: out.json, file, qualname, then the target (`script args` or
/// `-m module args`).
pub(crate) const MEMPROF_RUNNER: &str = concat!(
    include_str!("py/sp_launch.py"),
    include_str!("py/memprof_runner.py")
);

/// Per-line memory of the function `options.function` names, through memory_profiler.
pub(crate) async fn memory_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (file, qualname) = function_of(input)?;
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let rows = artifact_path(input, place, ArtifactKind::MemoryProfilerJson);
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
    if module_missing(&mut e, "memory_profiler", "memory_profiler", &python) {
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
            .extend(file_artifact(rows, ArtifactKind::MemoryProfilerJson));
    }
    explain_exit(&mut e);
    Ok(e)
}
