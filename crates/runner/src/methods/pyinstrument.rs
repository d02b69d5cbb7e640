//! `pyinstrument`: the target under `python -m pyinstrument`, its session file read as folded
//! stacks. It samples from inside the process through a profiling hook, so it needs no ptrace
//! (py-spy does), and it starts scripts and `-m` modules alike.

use crate::*;

pub(crate) async fn pyinstrument(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, mut rest) = split_python(input)?;
    // pyinstrument names a script's frames by the path it was given: an absolute one makes
    // them the same files py-spy and Scalene name, so the report merges their rows.
    if rest[0] != "-m" && Path::new(&rest[0]).is_relative() {
        rest[0] = place.cwd.join(&rest[0]).to_string_lossy().into_owned();
    }
    let python = argv[0].clone();
    let session = artifact_path(input, place, ArtifactKind::PyinstrumentSession);
    let interval_s = 1.0 / input.options.rate_hz.unwrap_or(100.0);
    argv.extend([
        "-m".into(),
        "pyinstrument".into(),
        "-r".into(),
        "pyisession".into(),
        "-o".into(),
        session.to_string_lossy().into_owned(),
        "-i".into(),
        format!("{interval_s}"),
    ]);
    argv.extend(rest);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if module_missing(&mut e, "pyinstrument", "pyinstrument", &python) {
        return Ok(e);
    }
    let parsed = system_profile_parse::pyinstrument_session::to_folded(&read(&session));
    let folded = artifact_path(input, place, ArtifactKind::Folded);
    if session.exists() {
        e.warnings.extend(
            parsed
                .diagnostics
                .iter()
                .map(|d| format!("pyinstrument: {}", d.message)),
        );
        if let Err(err) = std::fs::write(&folded, &parsed.value) {
            e.warnings
                .push(format!("the folded stacks were not written: {err}"));
        }
    } else {
        // pyinstrument writes its session when the program ends, also after an exception, but
        // not when it was killed.
        e.warnings
            .push("pyinstrument wrote no session: the target was killed before it ended".into());
    }
    let stacks = system_profile_parse::pyinstrument_session::parse(&read(&session)).value;
    if stacks.total_samples > 0 {
        e.metrics.stacks = Some(stacks);
    }
    let svg = artifact_path(input, place, ArtifactKind::FlamegraphSvg);
    let title = input.label.clone().unwrap_or_else(|| "pyinstrument".into());
    if let Some(w) = flamegraph(&parsed.value, &title, &svg) {
        e.warnings.push(w);
    }
    e.artifacts
        .extend(file_artifact(session, ArtifactKind::PyinstrumentSession));
    e.artifacts.extend(file_artifact(folded, ArtifactKind::Folded));
    e.artifacts.extend(file_artifact(svg, ArtifactKind::FlamegraphSvg));
    explain_exit(&mut e);
    Ok(e)
}
