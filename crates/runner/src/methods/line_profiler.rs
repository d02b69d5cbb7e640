//! `line_profiler` on one function (and `function_of`, which `memory_profiler` shares).

use crate::*;

/// Reads a line_profiler stats file and prints one function's lines as JSON: argv is the
/// .lprof file, the script, the function's qualified name and the output path. The function's
/// first line is found with `ast` (decorators included, as `co_firstlineno` counts them).
pub(crate) const LPROF_TO_JSON: &str = include_str!("py/lprof_to_json.py");

/// `options.function` as (file, qualname), for the methods that profile one function.
pub(crate) fn function_of(input: &RunProfilerInput) -> Result<(&str, &str), RunError> {
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

pub(crate) async fn line_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (file, qualname) = function_of(input)?;
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let lprof = artifact_path(input, place, ArtifactKind::Lprof);
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
    if module_missing(&mut e, "kernprof", "line_profiler", &python) {
        return Ok(e);
    }
    let rows = artifact_path(input, place, ArtifactKind::LineProfilerJson);
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
    e.artifacts.extend(file_artifact(lprof, ArtifactKind::Lprof));
    e.artifacts
        .extend(file_artifact(rows, ArtifactKind::LineProfilerJson));
    explain_exit(&mut e);
    Ok(e)
}
