//! `memray`: `memray run`, then `memray stats --json`, a flame graph, and what was live at the
//! peak (`memray transform csv`) summed by the program's own lines.

use crate::*;
use system_profile_model::metrics::ShortLivedSite;

/// memray's "temporary" allocation: freed before this many other allocations were made.
/// memray's own default (1) counts only what is freed at once: on pyperformance's json_dumps it
/// found 36 MB of the 476 MB allocated, 1000 found 324 MB (the encoder's buffers, freed after
/// the string is built); a training step's outputs live through hundreds of allocations of its
/// forward and backward passes.
const SHORT_LIVED_WITHIN_ALLOCATIONS: &str = "1000";

/// `memray run` of a script or module, then `memray stats --json` and a flame graph HTML
/// (of the leaks when `options.leaks`, with what was not freed at exit by the program's
/// lines), all through the target's own interpreter.
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
    let short = artifact_path(input, place, ArtifactKind::MemrayShortLivedCsv);
    let short_s = short.to_string_lossy().into_owned();
    let leaks = artifact_path(input, place, ArtifactKind::MemrayLeaksCsv);
    let leaks_s = leaks.to_string_lossy().into_owned();
    let mut reports: Vec<(Vec<&str>, &str)> = vec![
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
            transform(&py, &capture_s, &[], &peak_s),
            "transform csv (what was live at the peak)",
        ),
        (
            transform(
                &py,
                &capture_s,
                &["--temporary-allocation-threshold", SHORT_LIVED_WITHIN_ALLOCATIONS],
                &short_s,
            ),
            "transform csv (short-lived allocations)",
        ),
    ];
    if input.options.leaks == Some(true) {
        reports.push((
            transform(&py, &capture_s, &["--leaks"], &leaks_s),
            "transform csv (not freed at exit)",
        ));
    }
    // Each reads the capture alone and writes its own file: run side by side, they cost the
    // longest of them, not the sum (json_dumps' capture: BENCHMARKS.md).
    let outcomes = futures::future::join_all(reports.into_iter().map(|(report_argv, what)| {
        let spec = CommandSpec::new(report_argv).cwd(&place.cwd);
        async move {
            let outcome = system_profile_exec::run(
                &spec,
                &RunOptions::with_timeout(Duration::from_secs(300)),
            )
            .await;
            (what, outcome)
        }
    }))
    .await;
    for (what, outcome) in outcomes {
        match outcome {
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
    if let (Some(a), true) = (e.metrics.allocations.as_mut(), short.exists()) {
        let parsed = system_profile_parse::memray_peak::parse_at_least(
            &read(&short),
            |file| system_profile_model::metrics::is_program_file(file, &place.cwd),
            system_profile_model::metrics::SHORT_LIVED_MIN_BYTES,
        );
        e.warnings
            .extend(parsed.diagnostics.iter().take(3).map(|d| d.message.clone()));
        a.short_lived_large = parsed
            .value
            .into_iter()
            .map(|s| ShortLivedSite {
                function: s.function,
                file: s.file,
                line: s.line,
                bytes: s.live_bytes,
                allocations: s.allocations,
                via: s.via,
            })
            .collect();
    }
    e.artifacts
        .extend(file_artifact(stats, ArtifactKind::MemrayStatsJson));
    e.artifacts
        .extend(file_artifact(flame, ArtifactKind::MemrayFlamegraphHtml));
    e.artifacts
        .extend(file_artifact(peak, ArtifactKind::MemrayPeakCsv));
    if let (Some(a), true) = (e.metrics.allocations.as_mut(), leaks.exists()) {
        let parsed = system_profile_parse::memray_peak::parse(&read(&leaks), |file| {
            system_profile_model::metrics::is_program_file(file, &place.cwd)
        });
        e.warnings
            .extend(parsed.diagnostics.iter().take(3).map(|d| d.message.clone()));
        a.not_freed = parsed.value;
    }
    e.artifacts
        .extend(file_artifact(short, ArtifactKind::MemrayShortLivedCsv));
    e.artifacts
        .extend(file_artifact(leaks, ArtifactKind::MemrayLeaksCsv));
    explain_exit(&mut e);
    Ok(e)
}

/// `memray transform csv` of `capture` into `out`, with `which` allocations (the peak's when
/// empty).
fn transform<'a>(py: &'a str, capture: &'a str, which: &[&'a str], out: &'a str) -> Vec<&'a str> {
    let mut argv = vec![py, "-m", "memray", "transform", "csv", "-f"];
    argv.extend_from_slice(which);
    argv.extend(["-o", out, capture]);
    argv
}
