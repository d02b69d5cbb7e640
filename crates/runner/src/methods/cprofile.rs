//! `cprofile`: the target under `python -m cProfile`, its pstats turned into JSON.

use crate::*;

/// Reads a pstats file and prints its rows as JSON (see `parse::cprofile_json`).
pub(crate) const PSTATS_TO_JSON: &str = include_str!("py/pstats_to_json.py");

/// cProfile's own `python -m cProfile` set-up (the same globals, frames and `sys.argv`), less
/// its `except SystemExit: pass`: under `-m cProfile` a program that exits with an error exits
/// 0 and its message is lost, so a failed target passed for a completed profile. Here the
/// stats are written and then the exit or exception goes on as the program raised it.
/// argv: pstats path, then the script or `-m module` and its arguments.
pub(crate) const CPROFILE_RUNNER: &str = include_str!("py/cprofile_runner.py");

pub(crate) async fn cprofile(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, rest) = split_python(input)?;
    let python = argv[0].clone();
    let pstats = artifact_path(input, place, ArtifactKind::Pstats);
    // The interpreter's own options stay before the runner; the script or `-m module` after.
    argv.extend([
        "-c".into(),
        CPROFILE_RUNNER.into(),
        pstats.to_string_lossy().into_owned(),
    ]);
    argv.extend(rest);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    // The runner's code is long; the record keeps its place, not its text.
    if let Some(code) = e.argv.iter_mut().find(|a| a.as_str() == CPROFILE_RUNNER) {
        *code = "<cprofile runner>".into();
    }
    let rows = artifact_path(input, place, ArtifactKind::CprofileJson);
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
            "the profile could not be read back (cProfile writes it when the program ends, unless it was killed): {}",
            o.stderr.text().lines().last().unwrap_or("").trim()
        )),
        Err(err) => e.warnings.push(format!("the profile could not be read back: {err}")),
    }
    e.artifacts.extend(file_artifact(pstats, ArtifactKind::Pstats));
    e.artifacts.extend(file_artifact(rows, ArtifactKind::CprofileJson));
    explain_exit(&mut e);
    Ok(e)
}
