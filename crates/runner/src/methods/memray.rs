//! `memray`: `memray run`, then `memray stats --json`, a flame graph, and what was live at the
//! peak (`memray transform csv`) summed by the program's own lines.

use crate::*;
use system_profile_model::metrics::ShortLivedSite;
use system_profile_model::run::{AfterTrace, TorchSchedule};


/// The largest capture drawn as a flame graph HTML at once: drawing richards' 35.7 MB capture
/// took 21.5 s of the 37 s its reports took, and the report reads none of it; past this the
/// record says the command that draws it (issue 26).
const FLAME_GRAPH_MAX_CAPTURE_BYTES: u64 = 8 << 20;

/// The largest memray CSV kept on disk once summed.
const KEPT_CSV_MAX_BYTES: u64 = 256 << 20;

/// memray's short-lived allocations in its CSV format, only the large ones (`py/`'s comment
/// says why not `memray transform csv`).
const LARGE_TEMPORARY: &str = include_str!("py/memray_large_temporary.py");

/// memray's Tracker over a window of a training's steps (`options.schedule`): the steps
/// counted as the torch.profiler runner counts them.
pub(crate) const MEMRAY_WINDOW_RUNNER: &str = concat!(
    include_str!("py/sp_launch.py"),
    include_str!("py/sp_steps.py"),
    include_str!("py/memray_window_runner.py")
);

/// `memray run` of a script or module (or, with `options.schedule`, memray's Tracker over a
/// window of its steps), then `memray stats --json` and a flame graph HTML (of the leaks when
/// `options.leaks`, with what was not freed at exit by the program's lines), all through the
/// target's own interpreter.
pub(crate) async fn memray(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let py = argv[0].clone();
    let capture = artifact_path(input, place, ArtifactKind::MemrayBin);
    let capture_s = capture.to_string_lossy().into_owned();
    // Every pymalloc allocation, unless asked otherwise: without it the sites rank where
    // pymalloc requested arenas (raytrace: 12.5 MiB at `Canvas.__init__`), not where the
    // program makes its objects (5.7 GiB at `Vector.__sub__`; BENCHMARKS.md).
    let python_allocators = input.options.python_allocators != Some(false);
    let native = input.options.native == Some(true);
    let state = place.dir.join("memray-window.json");
    if let Some(schedule) = input.options.schedule {
        let after = match schedule.after_trace {
            AfterTrace::RunOn => "run_on",
            AfterTrace::EndProgram => "end_program",
        };
        let flag = |on: bool| if on { "1" } else { "0" }.to_string();
        argv.extend([
            "-c".into(),
            MEMRAY_WINDOW_RUNNER.into(),
            capture_s.clone(),
            state.to_string_lossy().into_owned(),
            format!(
                "{},{},{after}",
                schedule.wait + schedule.warmup,
                schedule.active.max(1)
            ),
            flag(python_allocators),
            flag(native),
        ]);
    } else {
        argv.extend([
            "-m".into(),
            "memray".into(),
            "run".into(),
            "-q".into(),
            "-f".into(),
        ]);
        if native {
            argv.push("--native".into());
        }
        if python_allocators {
            argv.push("--trace-python-allocators".into());
        }
        argv.extend(["-o".into(), capture_s.clone()]);
    }
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    // The runner's code is long; the record keeps its place, not its text.
    if let Some(code) = e.argv.iter_mut().find(|a| a.as_str() == MEMRAY_WINDOW_RUNNER) {
        *code = "<memray window runner>".into();
    }
    if module_missing(&mut e, "memray", "memray", &py) {
        return Ok(e);
    }
    if let Some(schedule) = input.options.schedule {
        window_of_steps(&mut e, &schedule, &state);
        if !capture.exists() {
            explain_exit(&mut e);
            return Ok(e);
        }
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
    if input.options.temporal == Some(true) {
        flame_argv.push("--temporal");
    }
    flame_argv.push(&capture_s);
    let peak = artifact_path(input, place, ArtifactKind::MemrayPeakCsv);
    let peak_s = peak.to_string_lossy().into_owned();
    let short = artifact_path(input, place, ArtifactKind::MemrayShortLivedCsv);
    let short_s = short.to_string_lossy().into_owned();
    let short_lived_min = system_profile_model::metrics::SHORT_LIVED_MIN_BYTES.to_string();
    let short_lived_within =
        system_profile_model::metrics::SHORT_LIVED_WITHIN_ALLOCATIONS.to_string();
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
        (
            transform(&py, &capture_s, &[], &peak_s),
            "transform csv (what was live at the peak)",
        ),
    ];
    if input.options.short_lived == Some(false) {
        e.warnings.push(
            "the large allocations freed soon after were not read (options.short_lived: false): no large-buffer churn can be reported from this run".into(),
        );
    } else {
        reports.push((
            vec![
                py.as_str(),
                "-c",
                LARGE_TEMPORARY,
                &capture_s,
                &short_lived_within,
                &short_lived_min,
                &short_s,
            ],
            "short-lived large allocations",
        ));
    }
    let capture_bytes = std::fs::metadata(&capture).map(|m| m.len()).unwrap_or(0);
    if capture_bytes <= FLAME_GRAPH_MAX_CAPTURE_BYTES {
        reports.push((flame_argv, "flame graph"));
    } else {
        e.warnings.push(format!(
            "no flame graph HTML for a {:.1} MB capture (drawing one costs as much as the run's other reports together); `{}` draws it",
            capture_bytes as f64 / 1e6,
            flame_argv.join(" ")
        ));
    }
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
    // Each CSV summed by the program's own lines (a library call's allocations at the line
    // that made it); a report that failed leaves its list empty.
    let mut by_program_line = |csv: &std::path::Path, min_bytes_per_allocation: u64| {
        let Ok(file) = std::fs::File::open(csv) else {
            return Vec::new();
        };
        let parsed = system_profile_parse::memray_peak::parse_reader(
            std::io::BufReader::new(file),
            |file| system_profile_model::metrics::is_program_file(file, &place.cwd),
            min_bytes_per_allocation,
        );
        e.warnings
            .extend(parsed.diagnostics.iter().take(3).map(|d| d.message.clone()));
        parsed.value
    };
    let at_peak = by_program_line(&peak, 0);
    let not_freed = by_program_line(&leaks, 0);
    let short_lived = by_program_line(&short, system_profile_model::metrics::SHORT_LIVED_MIN_BYTES);
    if let Some(a) = e.metrics.allocations.as_mut() {
        a.at_peak = at_peak;
        a.short_lived_large = short_lived
            .into_iter()
            .map(ShortLivedSite::from)
            .collect();
        a.not_freed = not_freed;
    }
    // A CSV of every stack is summed above; kept whole it can be gigabytes (1.65 GB of peak
    // stacks for a 12 s Lightning training): past the cap it goes, and how to remake it is said.
    for (csv, which) in [(&peak, ""), (&leaks, " --leaks")] {
        let Some(size) = std::fs::metadata(csv).ok().map(|m| m.len()) else {
            continue;
        };
        if size > KEPT_CSV_MAX_BYTES && std::fs::remove_file(csv).is_ok() {
            let name = csv.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            e.warnings.push(format!(
                "{name} ({:.1} MB) was summed by the program's lines and removed to save disk; `{py} -m memray transform csv{which} -o {name} {capture_s}` writes it again",
                size as f64 / 1e6
            ));
        }
    }
    e.artifacts
        .extend(file_artifact(stats, ArtifactKind::MemrayStatsJson));
    e.artifacts
        .extend(file_artifact(flame, ArtifactKind::MemrayFlamegraphHtml));
    e.artifacts
        .extend(file_artifact(peak, ArtifactKind::MemrayPeakCsv));
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

/// The steps the window held, from the runner's state; said when the program ended before the
/// window opened or closed.
fn window_of_steps(e: &mut Execution, schedule: &TorchSchedule, state: &std::path::Path) {
    let state: serde_json::Value = serde_json::from_str(&read(state)).unwrap_or_default();
    let seen = super::steps::of_state(&state, schedule, 1);
    let (untraced, steps) = (schedule.wait + schedule.warmup, seen.steps);
    if steps < untraced {
        e.warnings.push(format!(
            "the program made {steps} steps (optimizer steps, else backwards, else outermost module forwards), fewer than the {untraced} before memray's window: nothing was tracked; run again without options.schedule to track the whole run"
        ));
        return;
    }
    if steps < untraced + schedule.active.max(1) {
        e.warnings.push(format!(
            "the program ended after step {steps}, inside memray's window of steps {}-{}: the figures cover steps {}-{steps}",
            untraced + 1,
            untraced + schedule.active.max(1),
            untraced + 1
        ));
    }
    e.metrics.step_window = seen.window;
    if let (Some(step), Some(w)) = (seen.ended_after_step, &e.metrics.step_window) {
        e.warnings.push(format!(
            "memray tracked steps {}-{} only, and the program was ended after step {step} (options.schedule.after_trace = end_program): the allocations are those steps', not the start-up's or the rest of the run's, and this run's wall, exit and outputs are not the program's",
            w.first_traced_step, w.last_traced_step
        ));
    }
}
