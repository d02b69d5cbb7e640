//! `alloc_sample`: our allocation sampler (`py/sp_allocsample.c`), built with the machine's C
//! compiler for the target's interpreter, around the target; its records summed by
//! `parse::alloc_samples`.

use crate::*;

/// The sampler's C source: one file, no dependency beyond the interpreter's headers.
const SAMPLER_SOURCE: &str = include_str!("py/sp_allocsample.c");

/// The runner that starts the sampler, runs the target and stops it.
pub(crate) const SAMPLER_RUNNER: &str = concat!(
    include_str!("py/sp_launch.py"),
    include_str!("py/alloc_sample_runner.py")
);

/// Mean bytes between samples: json.tool's 174.7 MB peak site is about 680 samples (a
/// standard error under 4%), its 2 GB of allocations 7,700 records (0.7 MB on disk), and the
/// run 1.1x the program's time (BENCHMARKS.md).
pub const MEAN_BYTES_BETWEEN_SAMPLES: u64 = 256 << 10;

/// Resident memory the sampler may leave unexplained before the run says where the rest is.
const UNSEEN_RESIDENT_BYTES: u64 = 64 << 20;

/// What the interpreter needs to build an extension: its headers and extension suffix.
const BUILD_FACTS: &str = "import sysconfig, os; inc = sysconfig.get_paths()['include']; print(inc); print(sysconfig.get_config_var('EXT_SUFFIX') or '.so'); print(os.path.exists(os.path.join(inc, 'Python.h')))";

pub(crate) async fn alloc_sample(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, script) = split_python(input)?;
    let py = argv[0].clone();
    let build_dir = place.dir.join("alloc-sampler");
    build(&py, &build_dir, &place.cwd).await?;
    let records = artifact_path(input, place, ArtifactKind::AllocSamples);
    argv.extend([
        "-c".into(),
        SAMPLER_RUNNER.into(),
        build_dir.to_string_lossy().into_owned(),
        records.to_string_lossy().into_owned(),
        MEAN_BYTES_BETWEEN_SAMPLES.to_string(),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    // The runner's code is long; the record keeps its place, not its text.
    if let Some(code) = e.argv.iter_mut().find(|a| a.as_str() == SAMPLER_RUNNER) {
        *code = "<allocation sampler runner>".into();
    }
    if let Ok(file) = std::fs::File::open(&records) {
        let parsed = system_profile_parse::alloc_samples::parse(
            std::io::BufReader::new(file),
            |file| system_profile_model::metrics::is_program_file(file, &place.cwd),
        );
        e.warnings
            .extend(parsed.diagnostics.iter().take(3).map(|d| d.message.clone()));
        let mut samples = parsed.value;
        if input.options.leaks != Some(true) {
            samples.profile.not_freed.clear();
        }
        if let Some(rss) = samples.max_rss_bytes {
            let seen = samples.profile.peak_bytes;
            if rss > seen + UNSEEN_RESIDENT_BYTES {
                e.warnings.push(format!(
                    "the Python heap's peak (about {:.1} MB) is {:.0}% of the process's peak resident set ({:.1} MB): the rest is the interpreter, imported libraries and memory allocated outside CPython's allocators (numpy's and torch's buffers, C libraries), which this sampler does not see; memray does (`run_profiler` with `memray`)",
                    seen as f64 / 1e6,
                    seen as f64 / rss as f64 * 100.0,
                    rss as f64 / 1e6
                ));
            }
        }
        if samples.profile.sampled_every_bytes.is_some() {
            e.metrics.allocations = Some(samples.profile);
        }
    }
    e.artifacts
        .extend(file_artifact(records, ArtifactKind::AllocSamples));
    explain_exit(&mut e);
    Ok(e)
}

/// Build the sampler for `py` into `dir`; what is missing (a compiler, the headers) is the
/// error, with how to get it.
async fn build(py: &str, dir: &std::path::Path, cwd: &std::path::Path) -> Result<(), RunError> {
    let unavailable = |why: String| RunError::new(RunErrorKind::ToolUnavailable, why);
    let facts = system_profile_exec::run(
        &CommandSpec::new(vec![py.to_string(), "-c".into(), BUILD_FACTS.into()]).cwd(cwd),
        &RunOptions::with_timeout(Duration::from_secs(60)),
    )
    .await?;
    let text = facts.stdout.text();
    let mut lines = text.lines();
    let (Some(include), Some(suffix), Some(has_header)) = (lines.next(), lines.next(), lines.next())
    else {
        return Err(unavailable(format!(
            "{py} did not say where its headers are: {}",
            facts.stderr.text().lines().last().unwrap_or("").trim()
        )));
    };
    if has_header.trim() != "True" {
        return Err(unavailable(format!(
            "{py} has no headers ({include}/Python.h) to build the allocation sampler with: install them (python3-dev for a distribution's Python) or use memray"
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|err| RunError::new(RunErrorKind::Io, format!("{}: {err}", dir.display())))?;
    let source = dir.join("sp_allocsample.c");
    std::fs::write(&source, SAMPLER_SOURCE)
        .map_err(|err| RunError::new(RunErrorKind::Io, format!("{}: {err}", source.display())))?;
    let module = dir.join(format!("sp_allocsample{}", suffix.trim()));
    let compiled = system_profile_exec::run(
        &CommandSpec::new(vec![
            "cc".to_string(),
            "-O2".into(),
            "-shared".into(),
            "-fPIC".into(),
            format!("-I{include}"),
            source.to_string_lossy().into_owned(),
            "-o".into(),
            module.to_string_lossy().into_owned(),
            "-lm".into(),
        ])
        .cwd(dir),
        &RunOptions::with_timeout(Duration::from_secs(120)),
    )
    .await
    .map_err(|err| unavailable(format!("the C compiler (cc) did not run: {err}; install gcc, or use memray")))?;
    if !compiled.exit.success() {
        return Err(unavailable(format!(
            "the allocation sampler did not build for {py}: {}; use memray",
            compiled.stderr.text().lines().find(|l| l.contains("error")).unwrap_or("").trim()
        )));
    }
    Ok(())
}
