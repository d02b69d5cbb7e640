//! `memray`: `memray run`, then `memray stats --json`, a flame graph, and what was live at the
//! peak (`memray transform csv`) summed by the program's own lines.

use crate::*;

/// `memray run` of a script or module, then `memray stats --json` and a flame graph HTML
/// (with leaks only when `options.leaks`), all through the target's own interpreter.
pub(crate) async fn memray(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let py = argv[0].clone();
    let capture = artifact_path(input, place, ArtifactKind::MemrayBin);
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
    // Every pymalloc allocation, unless asked otherwise: without it the sites rank where
    // pymalloc requested arenas (raytrace: 12.5 MiB at `Canvas.__init__`), not where the
    // program makes its objects (5.7 GiB at `Vector.__sub__`; BENCHMARKS.md).
    if input.options.python_allocators != Some(false) {
        argv.push("--trace-python-allocators".into());
    }
    argv.extend(["-o".into(), capture_s.clone()]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if module_missing(&mut e, "memray", "memray", &py) {
        return Ok(e);
    }
    e.artifacts
        .extend(file_artifact(capture.clone(), ArtifactKind::MemrayBin));
    let stats = artifact_path(input, place, ArtifactKind::MemrayStatsJson);
    let flame = artifact_path(input, place, ArtifactKind::MemrayFlamegraphHtml);
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
    let peak = artifact_path(input, place, ArtifactKind::MemrayPeakCsv);
    let peak_s = peak.to_string_lossy().into_owned();
    let reports: [(Vec<&str>, &str); 3] = [
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
        (
            vec![
                py.as_str(),
                "-m",
                "memray",
                "transform",
                "csv",
                "-f",
                "-o",
                &peak_s,
                &capture_s,
            ],
            "transform csv (what was live at the peak)",
        ),
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
    if let (Some(a), true) = (e.metrics.allocations.as_mut(), peak.exists()) {
        let parsed = system_profile_parse::memray_peak::parse(&read(&peak), |file| {
            system_profile_model::metrics::is_program_file(file, &place.cwd)
        });
        e.warnings
            .extend(parsed.diagnostics.iter().take(3).map(|d| d.message.clone()));
        a.at_peak = parsed.value;
    }
    e.artifacts
        .extend(file_artifact(stats, ArtifactKind::MemrayStatsJson));
    e.artifacts
        .extend(file_artifact(flame, ArtifactKind::MemrayFlamegraphHtml));
    e.artifacts
        .extend(file_artifact(peak, ArtifactKind::MemrayPeakCsv));
    explain_exit(&mut e);
    Ok(e)
}
