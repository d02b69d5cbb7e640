//! What the program's own code spends through the calls it makes: the call of the user's
//! that leads to a library hotspot, the user's functions by inclusive time, and the user's
//! lines that run native code. Each comes from one sampling run's stacks, which the rows cite.

use crate::session::Session;
use crate::tables::{cite_stacks, sampling_hz, shown_file};
use system_profile_model::metrics::StackProfile;
use system_profile_model::report::{Hotspot, InclusiveRow, NativeCall, ProgramCall};
use system_profile_model::run::RunRecord;

/// Inclusive rows shown: the program's functions holding at least this share of samples.
const INCLUSIVE_ROWS: usize = 8;
const INCLUSIVE_MIN_PERCENT: f64 = 5.0;

/// Native calls shown: the program's lines whose native code holds at least this share of
/// samples.
const NATIVE_CALL_ROWS: usize = 5;
const NATIVE_CALL_MIN_PERCENT: f64 = 5.0;

/// Code of the user's, as the report shows a file (relative to the root when under it): not
/// a path outside the root, and not a library's (a package, the standard library, an
/// installed command's wrapper) even when a virtual environment sits under the root.
pub(crate) fn user_code(shown: &str) -> bool {
    !shown.starts_with('/') && !system_profile_model::metrics::library_file(Some(shown))
}

/// Sampling tools first: they barely slow the program, so their shares are truest.
pub(crate) fn tool_rank(tool: &str) -> u8 {
    match tool {
        "py_spy_record" => 0,
        "perf_record" => 1,
        "cprofile" => 2,
        _ => 3,
    }
}

/// A run and the stacks it sampled.
pub(crate) type StackRun<'a> = (&'a RunRecord, &'a StackProfile);

/// The runs with stacks that name files, the truest first.
pub(crate) fn stack_runs(session: &Session) -> Vec<StackRun<'_>> {
    let mut runs: Vec<StackRun> = session
        .runs
        .iter()
        .filter_map(|r| Some((r, r.metrics.stacks.as_ref()?)))
        .filter(|(_, s)| s.by_total.iter().any(|f| f.file.is_some()))
        .collect();
    runs.sort_by_key(|(r, s)| {
        (
            tool_rank(&r.stacks_method().id()),
            std::cmp::Reverse(s.total_samples),
        )
    });
    runs
}

/// The user's call that most of a library row's own samples came through, from the truest
/// run that saw the row (`runs`: `stack_runs`); none for the user's own code or where no user
/// frame was beneath.
pub(crate) fn called_from(
    root: &std::path::Path,
    runs: &[StackRun],
    row: &Hotspot,
) -> Option<ProgramCall> {
    let file = row.file.as_deref();
    if file.is_some_and(user_code) {
        return None;
    }
    let same = |function: &str, lib_file: Option<&str>| {
        crate::tables::same_function(function, &row.function)
            && lib_file.map(|f| shown_file(root, f)).as_deref() == file
    };
    for &(run, stacks) in runs {
        let through: Vec<_> = stacks
            .call_sites
            .iter()
            .filter(|c| same(&c.library_function, c.library_file.as_deref()))
            .collect();
        let Some(top) = through.first() else {
            continue;
        };
        // The row's own samples in this run: the share's denominator, samples no user
        // frame led to (a library's thread) included.
        let own = stacks
            .by_self
            .iter()
            .find(|f| same(&f.function, f.file.as_deref()))
            .map(|f| f.self_samples)
            .unwrap_or_else(|| through.iter().map(|c| c.samples).sum());
        let shown = shown_file(root, &top.file);
        if !user_code(&shown) || own == 0 {
            return None;
        }
        return Some(ProgramCall {
            function: top.function.clone(),
            file: shown,
            line: top.line,
            via: top.via,
            share_percent: top.samples as f64 * 100.0 / own as f64,
            run_id: run.run_id.clone(),
        });
    }
    None
}

/// The user's functions by inclusive time from the truest sampling run (module bodies left
/// out: they hold the whole run).
pub(crate) fn inclusive(root: &std::path::Path, runs: &[StackRun]) -> Vec<InclusiveRow> {
    let Some(&(run, stacks)) = runs.first() else {
        return Vec::new();
    };
    let hz = sampling_hz(run, stacks);
    let source = cite_stacks(run);
    stacks
        .by_total
        .iter()
        .filter(|f| f.function != "<module>" && f.total_percent >= INCLUSIVE_MIN_PERCENT)
        .filter_map(|f| {
            let file = shown_file(root, f.file.as_deref()?);
            user_code(&file).then(|| InclusiveRow {
                function: f.function.clone(),
                file,
                line: f.line,
                self_percent: f.self_percent,
                total_percent: f.total_percent,
                total_s: hz.map(|hz| f.total_samples as f64 / hz),
                source: source.clone(),
            })
        })
        .take(INCLUSIVE_ROWS)
        .collect()
}

/// The user's lines whose calls ran native code, from the truest run that sampled native
/// frames (a run without them has none: C time counts as the line's own there).
pub(crate) fn native_calls(root: &std::path::Path, runs: &[StackRun]) -> Vec<NativeCall> {
    let Some(&(run, stacks)) = runs.iter().find(|(_, s)| !s.native_calls.is_empty()) else {
        return Vec::new();
    };
    stacks
        .native_calls
        .iter()
        .filter(|c| c.percent >= NATIVE_CALL_MIN_PERCENT)
        .filter_map(|c| {
            let file = shown_file(root, &c.file);
            user_code(&file).then(|| NativeCall {
                function: c.function.clone(),
                file,
                line: c.line,
                percent: c.percent,
                functions: c.functions.clone(),
                source: cite_stacks(run),
            })
        })
        .take(NATIVE_CALL_ROWS)
        .collect()
}
