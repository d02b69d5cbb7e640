//! A session read back from disk: `profile_output/<session>/manifest.json` (the runs),
//! `traces/*.json` (stored `analyze_trace` results), and the lines of the instrumentation log
//! written by the session's runs, split by run.

use crate::{ReportError, ReportErrorKind};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use system_profile_confine::{ConfineErrorKind, Confined};
use system_profile_model::instrument::InstrumentSummary;
use system_profile_model::run::{RunList, RunRecord, StepNotRun};
use system_profile_model::trace::TraceReport;

/// The folder every session lives in, relative to the root.
pub const OUTPUT_DIR: &str = "profile_output";
/// Where `analyze_trace` keeps its results inside a session.
pub const TRACES_DIR: &str = "traces";

/// A stored `analyze_trace` result.
#[derive(Debug, Clone)]
pub struct StoredTrace {
    /// `t001`, ...
    pub id: String,
    /// The stored JSON, relative to the root.
    pub path: String,
    pub report: TraceReport,
}

/// What the instrumentation helper measured in the processes of one run.
#[derive(Debug, Clone)]
pub struct RunInstrument {
    pub run_id: String,
    pub summary: InstrumentSummary,
}

/// Everything the report reads of one session.
#[derive(Debug, Clone)]
pub struct Session {
    pub name: String,
    /// The session's folder, relative to the root.
    pub dir: String,
    pub logical_cpus: Option<u32>,
    /// The runs asked for, in the manifest's order.
    pub runs: Vec<RunRecord>,
    pub traces: Vec<StoredTrace>,
    /// The instrumentation log's lines of each run of the session, summed per run, in the
    /// runs' order; runs that wrote none are left out.
    pub instrument: Vec<RunInstrument>,
    /// What could not be read.
    pub notes: Vec<String>,
    /// Planned steps `profile` left out (the manifest's `not_run`): for the whole session
    /// only.
    pub not_run: Vec<StepNotRun>,
}

/// A session name is one folder name: letters, digits, `-`, `_`, `.`, not starting with `.`.
pub fn check_name(field: &'static str, name: &str) -> Result<(), ReportError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ReportError::invalid(
            field,
            format!("`{name}` is not a session name: give the folder name under {OUTPUT_DIR}/ (letters, digits, - _ .), as list_runs shows it"),
        ))
    }
}

/// Sessions under the root that have a manifest, newest first.
pub fn sessions(root: &Path) -> Vec<String> {
    // Beneath the root only: a session folder that is a symlink out is not one of ours.
    let Ok(fs) = Confined::open(root) else {
        return Vec::new();
    };
    let out = Path::new(OUTPUT_DIR);
    let mut names: Vec<String> = fs
        .read_dir_names(out)
        .unwrap_or_default()
        .into_iter()
        .filter(|name| fs.exists(&out.join(name).join("manifest.json")))
        .collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names
}

#[derive(Deserialize)]
struct LineTime {
    #[serde(default)]
    t: Option<f64>,
    /// The run that started the writing process (`SP_RUN_ID`), when one did.
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    pid: Option<u32>,
}

/// Read a session; `runs` keeps only those run ids (each must exist).
pub fn load(root: &Path, name: &str, runs: &[String]) -> Result<Session, ReportError> {
    check_name("session", name)?;
    let dir = Path::new(OUTPUT_DIR).join(name);
    let manifest = root.join(&dir).join("manifest.json");
    let fs =
        Confined::open(root).map_err(|e| ReportError::new(ReportErrorKind::Io, e.to_string()))?;
    let text = match fs.read_to_string(&dir.join("manifest.json")) {
        Ok(t) => t,
        Err(e) if e.kind() == ConfineErrorKind::Escape => {
            return Err(ReportError::invalid("session", e.to_string()))
        }
        Err(e) if e.kind() == ConfineErrorKind::NotFound => {
            let known = sessions(root);
            let hint = if known.is_empty() {
                format!("there is no session under {OUTPUT_DIR}/ yet: run_profiler first")
            } else {
                format!(
                    "sessions with runs: {}",
                    known.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                )
            };
            return Err(ReportError::new(
                ReportErrorKind::NoData,
                format!(
                    "no session `{name}` ({} missing); {hint}",
                    manifest.display()
                ),
            ));
        }
        Err(e) => {
            return Err(ReportError::new(
                ReportErrorKind::Io,
                format!("cannot read: {e}"),
            ))
        }
    };
    let list: RunList = serde_json::from_str(&text).map_err(|e| {
        ReportError::new(
            ReportErrorKind::Io,
            format!(
                "{} is not a manifest this server can read ({e}); it was written by another version or edited",
                manifest.display()
            ),
        )
    })?;
    let mut notes = Vec::new();
    let mut selected = Vec::new();
    if runs.is_empty() {
        selected = list.runs.clone();
    } else {
        for id in runs {
            match list.runs.iter().find(|r| &r.run_id == id) {
                Some(r) => selected.push(r.clone()),
                None => {
                    return Err(ReportError::invalid(
                        "runs",
                        format!(
                            "no run `{id}` in session {name}; its runs: {}",
                            list.runs
                                .iter()
                                .map(|r| r.run_id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ))
                }
            }
        }
    }
    let traces = if runs.is_empty() {
        load_traces(root, &dir, &mut notes)
    } else {
        Vec::new()
    };
    let instrument = load_instrument(root, &selected, &mut notes);
    Ok(Session {
        name: name.to_string(),
        dir: dir.to_string_lossy().into_owned(),
        logical_cpus: list.logical_cpus,
        runs: selected,
        traces,
        instrument,
        notes,
        not_run: if runs.is_empty() {
            list.not_run
        } else {
            Vec::new()
        },
    })
}

fn load_traces(root: &Path, dir: &Path, notes: &mut Vec<String>) -> Vec<StoredTrace> {
    let Ok(fs) = Confined::open(root) else {
        return Vec::new();
    };
    let folder = dir.join(TRACES_DIR);
    let mut files: Vec<PathBuf> = fs
        .read_dir_names(&folder)
        .unwrap_or_default()
        .into_iter()
        .map(|name| folder.join(name))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("trace")
            .to_string();
        let shown = dir
            .join(TRACES_DIR)
            .join(path.file_name().unwrap_or_default())
            .to_string_lossy()
            .into_owned();
        match fs
            .read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<TraceReport>(&b).map_err(|e| e.to_string()))
        {
            Ok(report) => out.push(StoredTrace {
                id,
                path: shown,
                report,
            }),
            Err(e) => notes.push(format!("{shown} left out: {e}")),
        }
    }
    out
}

/// The log's lines of each run: a line names its run (`SP_RUN_ID`, which the runner sets and
/// children inherit); a line that names none (a helper older than that) belongs to the run
/// whose time window (a second either side) holds it, the latest started when several do.
/// Lines of no run of this session (another session's, the program run by hand) are left out.
fn load_instrument(root: &Path, runs: &[RunRecord], notes: &mut Vec<String>) -> Vec<RunInstrument> {
    let Some(text) = Confined::open(root).ok().and_then(|fs| {
        fs.read_to_string(Path::new(system_profile_instrument::LOG_FILE))
            .ok()
    }) else {
        return Vec::new();
    };
    let lines = split_by_run(&text, runs);
    let mut out = Vec::new();
    for (run, kept) in runs.iter().zip(lines) {
        if kept.is_empty() {
            continue;
        }
        let parsed = system_profile_parse::instrument_log::parse(&kept);
        for d in parsed.diagnostics.iter().take(3) {
            notes.push(format!(
                "{} ({}): {}",
                system_profile_instrument::LOG_FILE,
                run.run_id,
                d.message
            ));
        }
        let s = parsed.value;
        let empty = s.sites.is_empty()
            && s.transfers.is_empty()
            && s.collectives.is_empty()
            && s.duplicates.is_none()
            && s.memory.is_none();
        if !empty {
            out.push(RunInstrument {
                run_id: run.run_id.clone(),
                summary: s,
            });
        }
    }
    out
}

/// The log's lines per run (in `runs`' order); see `load_instrument`. Pure: the tests feed it.
fn split_by_run(text: &str, runs: &[RunRecord]) -> Vec<String> {
    let mut lines: Vec<String> = vec![String::new(); runs.len()];
    // A process's lines stay with the run its first line was given to: its exit records may
    // come a moment after the run ended, inside the next run's window.
    let mut run_of_pid: std::collections::HashMap<u32, usize> = Default::default();
    for line in text.lines() {
        let Ok(l) = serde_json::from_str::<LineTime>(line) else {
            continue;
        };
        let known = l
            .pid
            .filter(|_| l.run.is_none())
            .and_then(|p| run_of_pid.get(&p).copied());
        let run = known.or_else(|| run_of_line(runs, l.run.as_deref(), l.t));
        if let (Some(i), Some(p)) = (run, l.pid) {
            run_of_pid.entry(p).or_insert(i);
        }
        if let Some(i) = run {
            lines[i].push_str(line);
            lines[i].push('\n');
        }
    }
    lines
}

/// Which of `runs` wrote a log line: the one it names, else the latest started whose window
/// (a second either side) holds its time.
fn run_of_line(runs: &[RunRecord], named: Option<&str>, t: Option<f64>) -> Option<usize> {
    if let Some(id) = named {
        return runs.iter().position(|r| r.run_id == id);
    }
    let t = t?;
    runs.iter()
        .enumerate()
        .filter(|(_, r)| {
            t >= r.started_at_unix_s - 1.0 && t <= r.ended_at_unix_s.unwrap_or(f64::INFINITY) + 1.0
        })
        .max_by(|a, b| a.1.started_at_unix_s.total_cmp(&b.1.started_at_unix_s))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, start: f64, end: f64) -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "run_id": id, "session": "s", "profiler": "measure", "status": "completed",
            "target": {"command": ["python3", "x.py"]}, "argv": [], "cwd": "/",
            "started_at_unix_s": start, "ended_at_unix_s": end, "dir": "d",
            "artifacts": [], "metrics": {}, "stdout_tail": "", "stderr_tail": ""
        }))
        .unwrap()
    }

    #[test]
    fn lines_go_to_the_run_they_name_else_to_their_process_run_else_by_time() {
        let runs = [run("r1", 100.0, 110.0), run("r2", 110.5, 120.0)];
        let log = [
            // Named: wherever its time falls.
            r#"{"kind":"note","t":115.0,"pid":7,"message":"a","run":"r1"}"#,
            // Unnamed, by time: pid 8 starts in r1...
            r#"{"kind":"meta","t":105.0,"pid":8}"#,
            // ...and its exit records, inside r2's window, stay with r1.
            r#"{"kind":"summary","t":110.8,"pid":8}"#,
            r#"{"kind":"meta","t":112.0,"pid":9}"#,
            // Another session's run, and a line of no run at all.
            r#"{"kind":"note","t":105.0,"pid":10,"run":"r9"}"#,
            r#"{"kind":"note","t":500.0,"pid":11}"#,
        ]
        .join("\n");
        let split = split_by_run(&log, &runs);
        assert_eq!(split[0].lines().count(), 3, "{split:?}");
        assert!(split[0].contains(r#""pid":8}"#) && split[0].contains(r#""t":110.8"#));
        assert!(split[0].contains(r#""run":"r1""#));
        assert_eq!(split[1].lines().count(), 1, "{split:?}");
        assert!(split[1].contains(r#""pid":9"#));
    }
}
