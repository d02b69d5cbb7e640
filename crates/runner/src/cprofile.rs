//! `cprofile`: the target under `python -m cProfile`, its pstats turned into JSON.

use super::*;

/// Reads a pstats file and prints its rows as JSON (see `parse::cprofile_json`).
pub(crate) const PSTATS_TO_JSON: &str = "import json, pstats, sys\nst = pstats.Stats(sys.argv[1])\nrows = [[f, l, n, cc, nc, tt, ct] for (f, l, n), (cc, nc, tt, ct, _) in st.stats.items()]\nwith open(sys.argv[2], 'w') as out:\n    json.dump(rows, out)\n";

pub(crate) async fn cprofile(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (mut argv, rest) = split_python(input)?;
    let python = argv[0].clone();
    let pstats = place.dir.join("cprofile.pstats");
    // The interpreter's own options stay before `-m cProfile`; the script or `-m module` after.
    argv.extend([
        "-m".into(),
        "cProfile".into(),
        "-o".into(),
        pstats.to_string_lossy().into_owned(),
    ]);
    argv.extend(rest);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let rows = place.dir.join("cprofile.json");
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
            "the profile could not be read back (cProfile writes it only when the program exits normally): {}",
            o.stderr.text().lines().last().unwrap_or("").trim()
        )),
        Err(err) => e.warnings.push(format!("the profile could not be read back: {err}")),
    }
    e.artifacts.extend(file_artifact(pstats, "pstats"));
    e.artifacts.extend(file_artifact(rows, "cprofile_json"));
    explain_exit(&mut e);
    Ok(e)
}
