//! A session read back from disk: `profile_output/<session>/manifest.json` (the runs),
//! `traces/*.json` (stored `analyze_trace` results), and the lines of the instrumentation log
//! written while the session's runs ran.

use crate::{ReportError, ReportErrorKind};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use system_profile_confine::{ConfineErrorKind, Confined};
use system_profile_model::instrument::InstrumentSummary;
use system_profile_model::run::{RunList, RunRecord};
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
    /// The instrumentation log's lines from the session's time window, summed.
    pub instrument: Option<InstrumentSummary>,
    /// What could not be read.
    pub notes: Vec<String>,
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

/// The log's lines written between the first run's start and the last run's end (a second
/// either side): what this session's runs measured, not another session's.
fn load_instrument(
    root: &Path,
    runs: &[RunRecord],
    notes: &mut Vec<String>,
) -> Option<InstrumentSummary> {
    let text = Confined::open(root)
        .ok()?
        .read_to_string(Path::new(system_profile_instrument::LOG_FILE))
        .ok()?;
    let start = runs
        .iter()
        .map(|r| r.started_at_unix_s)
        .fold(f64::INFINITY, f64::min);
    let end = runs
        .iter()
        .map(|r| r.ended_at_unix_s.unwrap_or(f64::INFINITY))
        .fold(f64::NEG_INFINITY, f64::max);
    if !start.is_finite() {
        return None;
    }
    let (start, end) = (start - 1.0, end + 1.0);
    let mut kept = String::new();
    for line in text.lines() {
        let t = serde_json::from_str::<LineTime>(line)
            .ok()
            .and_then(|l| l.t);
        if t.is_some_and(|t| t >= start && t <= end) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    if kept.is_empty() {
        return None;
    }
    let parsed = system_profile_parse::instrument_log::parse(&kept);
    for d in parsed.diagnostics.iter().take(3) {
        notes.push(format!(
            "{}: {}",
            system_profile_instrument::LOG_FILE,
            d.message
        ));
    }
    let s = parsed.value;
    let empty = s.sites.is_empty()
        && s.transfers.is_empty()
        && s.collectives.is_empty()
        && s.duplicates.is_none()
        && s.memory.is_none();
    (!empty).then_some(s)
}
