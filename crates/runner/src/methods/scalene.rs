//! `scalene`: the target script under Scalene (CPU, memory and copy volume per line in one
//! run) through `py/scalene_runner.py`, its JSON read into the line view, the hotspots and
//! the allocation sites.

use crate::*;

/// Starts Scalene with its torch.profiler integration off (why: in the file).
pub(crate) const SCALENE_RUNNER: &str = include_str!("py/scalene_runner.py");

pub(crate) async fn scalene(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, rest) = split_python(input)?;
    if rest.first().is_some_and(|a| a == "-m") {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            "scalene runs a script, not `-m module` (Scalene 2 has no -m): give the module's file, or use pyinstrument or py_spy_record",
        ));
    }
    let python = argv[0].clone();
    // Scalene's memory mode re-executes its process, so the runner is a file with a path.
    let runner = place.dir.join("scalene_runner.py");
    std::fs::write(&runner, SCALENE_RUNNER).map_err(|e| {
        RunError::new(
            RunErrorKind::Io,
            format!("cannot write {}: {e}", runner.display()),
        )
    })?;
    let profile = artifact_path(input, place, ArtifactKind::ScaleneJson);
    let mode = if input.options.profile_memory == Some(false) {
        "cpu"
    } else {
        "memory"
    };
    argv.extend([
        runner.to_string_lossy().into_owned(),
        profile.to_string_lossy().into_owned(),
        mode.into(),
    ]);
    argv.extend(rest);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if module_missing(&mut e, "scalene", "scalene", &python) {
        return Ok(e);
    }
    if profile.exists() {
        let parsed = system_profile_parse::scalene_json::parse(&read(&profile));
        e.warnings.extend(
            parsed
                .diagnostics
                .iter()
                .map(|d| format!("scalene: {}", d.message)),
        );
        let usage = parsed.value;
        let stacks = system_profile_parse::scalene_json::stacks(&usage);
        if !stacks.by_self.is_empty() {
            e.metrics.stacks = Some(stacks);
        }
        e.metrics.allocations = system_profile_parse::scalene_json::allocations(&usage);
        if e.metrics.allocations.is_some() {
            e.warnings.push(
                "scalene's allocation figures are sampled (about one sample per MB of net growth): sizes are estimates and counts are samples, not calls".into(),
            );
            let one_sample = usage
                .lines
                .iter()
                .filter(|l| {
                    l.malloc_bytes > 0 && !system_profile_parse::scalene_json::is_allocation_site(l)
                })
                .count();
            if one_sample > 0 {
                e.warnings.push(format!(
                    "scalene: {one_sample} line(s) seen allocating once (about 1 MB) are not listed as allocation sites: one sample places a MB of net growth, it does not measure the line (metrics.line_usage keeps them)"
                ));
            }
        }
        e.metrics.line_usage = Some(usage);
    } else {
        e.warnings
            .push("scalene wrote no profile: the target was killed, or Scalene failed to start (see stderr_tail)".into());
    }
    e.artifacts.extend(file_artifact(profile, ArtifactKind::ScaleneJson));
    explain_exit(&mut e);
    Ok(e)
}
