//! Step 6 of `/system-profile`: the report. This crate owns turning a session on disk (its
//! manifest, stored trace analyses, the instrumentation log and the change ledger) into Part A
//! (CPU, memory with the duplication column, interconnect, GPU compute, hotspots merged across
//! profilers, recommendations ranked by the impact their rules estimate), Part B (the ledger),
//! SVG charts, and `report.md` / `report.json`; and `compare`, two sessions side by side with
//! each delta judged against the run-to-run noise of repeats. It does no profiling itself.

mod baseline;
mod call_paths;
mod charts;
mod compare;
mod cpu_table;
mod fmt;
mod interconnect;
mod lines;
mod markdown;
mod nodes;
mod rank_processes;
pub mod rules;
mod series;
mod serving;
pub mod session;
mod sites;
mod tables;
mod torch_ops;
pub mod waits;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use system_profile_model::instrument::{ChangeState, ListChangesInput};
use system_profile_model::report::{
    ChangeLog, Lang, Omitted, Report, RunRef, SummarizeInput, SummarizeOutput,
};
use system_profile_model::run::{RunStatus, RunTarget};

pub use compare::compare;
pub use session::TRACES_DIR;

/// A Python heap peak under this is too small to be worth a memory finding.
const SMALL_HEAP_BYTES: u64 = 16 << 20;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ReportError {
    kind: ReportErrorKind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportErrorKind {
    /// An argument names something that is not there or is malformed.
    InvalidInput { field: &'static str },
    /// The session has nothing to report.
    NoData,
    /// A file could not be read or written.
    Io,
}

impl ReportError {
    fn new(kind: ReportErrorKind, message: impl Into<String>) -> Self {
        ReportError {
            kind,
            message: message.into(),
        }
    }

    fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        ReportError::new(ReportErrorKind::InvalidInput { field }, message)
    }

    pub fn kind(&self) -> ReportErrorKind {
        self.kind
    }
}

/// Where reports are made.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// The server's root, absolute.
    pub root: PathBuf,
    /// The session a call that names none means.
    pub current_session: String,
}

/// Write a file under the root whole or not at all (the project's one atomic write).
/// Resolved beneath the root, so a session folder that is a symlink out is written nowhere.
pub(crate) fn write_file(root: &Path, rel: &str, bytes: &[u8]) -> std::io::Result<()> {
    let fs = system_profile_confine::Confined::open(root)?;
    let path = Path::new(rel);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs.create_dir_all(dir)?;
    }
    let mut temp = path.as_os_str().to_os_string();
    temp.push(".tmp");
    system_profile_instrument::ledger::write_atomic(&fs, path, Path::new(&temp), bytes, 0o644, None)
        .map_err(std::io::Error::other)
}

fn target_text(t: &RunTarget) -> String {
    match t {
        RunTarget::Command { command, .. } => command.join(" "),
        RunTarget::Pid { pid } => format!("pid {pid}"),
        RunTarget::System { .. } => "system".into(),
        RunTarget::Identified { target_id } => format!("target {target_id}"),
        RunTarget::SlurmJob { slurm_job } => format!("Slurm job {slurm_job}"),
        RunTarget::RayJob { ray_job } if ray_job.is_empty() => "the Ray cluster".into(),
        RunTarget::RayJob { ray_job } => format!("Ray job {ray_job}"),
    }
}

fn status_text(s: RunStatus) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn omitted_reason(lang: Lang, table: &str) -> String {
    use fmt::tr;
    match table {
        "cpu" => tr(lang, "Left out: no run measured CPU time (run `measure`, `time_v` or `perf_stat`).", "省略: CPU 時間を測った実行がない（`measure`、`time_v`、`perf_stat` を実行）。"),
        "memory" => tr(lang, "Left out: no run measured memory (run `measure`, `alloc_sample`, `tracemalloc` or `memray`; `instrument_file` with measure `memory` or `duplicates` for GPU memory and copies).", "省略: メモリを測った実行がない（`measure`、`alloc_sample`、`tracemalloc`、`memray` を実行。GPU メモリと重複は `instrument_file` の measure `memory`/`duplicates`）。"),
        "interconnect" => tr(lang, "Left out: no transfer was measured (needs a GPU: `torch_profiler` or `analyze_trace`, `nccl_debug`, `nvidia_smi_topo`, or `instrument_file` with measure `transfers` / `collectives`).", "省略: 転送を測っていない（GPU が必要: `torch_profiler` か `analyze_trace`、`nccl_debug`、`nvidia_smi_topo`、または `instrument_file` の measure `transfers`/`collectives`）。"),
        "gpu" => tr(lang, "Left out: no GPU was measured (`nvml_sampler`, `nvidia_smi_dmon` or `torch_profiler` on a machine with an NVIDIA GPU, or `analyze_trace` on a trace).", "省略: GPU を測っていない（NVIDIA GPU のあるマシンで `nvml_sampler`、`nvidia_smi_dmon`、`torch_profiler`、またはトレースに `analyze_trace`）。"),
        _ => tr(lang, "Left out: no profiler sampled stacks or calls (run `py_spy_record`, `cprofile`, `perf_record` or `line_profiler`).", "省略: スタックや呼び出しを採取したプロファイラがない（`py_spy_record`、`cprofile`、`perf_record`、`line_profiler` を実行）。"),
    }
}

/// Part B from the ledger, with the offer to undo.
/// `YYYYMMDD-HHMMSS-…` (a session's name, UTC) as the RFC 3339 prefix the ledger's
/// `created_at` starts with, for ordering; `None` for a name in another form.
fn session_start_rfc3339(session: &str) -> Option<String> {
    let (date, rest) = session.split_once('-')?;
    let time = rest.get(..6)?;
    (date.len() == 8 && date.bytes().chain(time.bytes()).all(|b| b.is_ascii_digit())).then(|| {
        format!(
            "{}-{}-{}T{}:{}:{}",
            &date[..4],
            &date[4..6],
            &date[6..],
            &time[..2],
            &time[2..4],
            &time[4..]
        )
    })
}

/// Whether a change belongs to `session`: made from its start to the start of the next one.
fn made_in(created_at: &str, session: &str, sessions: &[String]) -> bool {
    let Some(start) = session_start_rfc3339(session) else {
        return true;
    };
    let next = sessions
        .iter()
        .filter_map(|s| session_start_rfc3339(s))
        .filter(|s| *s > start)
        .min();
    let stamp = created_at.get(..19).unwrap_or(created_at);
    stamp >= start.as_str() && next.is_none_or(|n| stamp < n.as_str())
}

fn change_log(root: &Path, session: &str, lang: Lang, notes: &mut Vec<String>) -> ChangeLog {
    let list = system_profile_instrument::list_changes(
        root,
        &ListChangesInput {
            include_reverted: true,
        },
    );
    let (all, drifted) = match list {
        Ok(l) => (l.changes, l.drifted),
        Err(e) => {
            notes.push(format!("Part B: the ledger could not be read: {e}"));
            (Vec::new(), Vec::new())
        }
    };
    let sessions = session::sessions(root);
    let (rows, others): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| {
        r.state == ChangeState::Active || made_in(&r.created_at, session, &sessions)
    });
    let active = rows
        .iter()
        .filter(|r| r.state == ChangeState::Active)
        .count();
    let offer = if active > 0 {
        fmt::tr(
            lang,
            format!("{active} instrumentation change(s) are still in place. Shall I remove them all? `revert_changes {{\"all\": true}}` restores every modified file byte for byte and deletes every created one."),
            format!("計測用の変更が {active} 件残っている。すべて取り除きますか？ `revert_changes {{\"all\": true}}` で変更したファイルはバイト単位で元に戻り、作成したファイルは削除される。"),
        )
    } else {
        fmt::tr(
            lang,
            "No instrumentation change is in place: there is nothing to remove.",
            "計測用の変更は残っていない。取り除くものはない。",
        )
    };
    ChangeLog {
        rows,
        drifted,
        offer,
        other_sessions_changes: others.len() as u32,
    }
}

/// Build the report of a session (no files written).
pub fn build(config: &ReportConfig, input: &SummarizeInput) -> Result<Report, ReportError> {
    let name = input
        .session
        .clone()
        .unwrap_or_else(|| config.current_session.clone());
    let mut session = session::load(&config.root, &name, &input.runs)?;
    // Lines as the files stand after revert, not as instrumentation had shifted them.
    lines::restore(&config.root, &mut session.runs);
    if session.runs.is_empty() && session.traces.is_empty() && session.instrument.is_empty() {
        return Err(ReportError::new(
            ReportErrorKind::NoData,
            format!(
                "session {name} has nothing to report yet: no run, no stored trace analysis, no instrumentation log. Run run_profiler (or analyze_trace) first{}",
                match session::sessions(&config.root).iter().find(|s| **s != name) {
                    Some(other) => format!(", or summarize another session ({other})"),
                    None => String::new(),
                }
            ),
        ));
    }
    let lang = input.lang;
    let series: BTreeMap<String, series::RunSeries> = session
        .runs
        .iter()
        .map(|r| (r.run_id.clone(), series::read(&config.root, r)))
        .collect();
    let mut report = Report {
        session: name,
        lang,
        logical_cpus: session.logical_cpus,
        runs: session
            .runs
            .iter()
            .map(|r| RunRef {
                run_id: r.run_id.clone(),
                profiler: r.profiler,
                observers: r.observers.clone(),
                label: r.label.clone(),
                status: status_text(r.status),
                target: target_text(&r.target),
                wall_s: r.wall_s,
                ended_after_step: r
                    .metrics
                    .step_window
                    .as_ref()
                    .filter(|w| !w.after_trace.is_run_on())
                    .map(|w| w.steps_seen),
            })
            .chain(session.traces.iter().map(|t| {
                RunRef {
                    run_id: t.id.clone(),
                    profiler: system_profile_model::run::Method::TorchProfiler,
                    observers: Vec::new(),
                    label: Some("analyze_trace".into()),
                    status: "completed".into(),
                    target: t
                        .report
                        .traces
                        .iter()
                        .map(|f| f.path.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                    wall_s: None,
                    ended_after_step: None,
                }
            }))
            .collect(),
        cpu: tables::cpu_rows(&session),
        rank_processes: rank_processes::rank_process_rows(&session),
        memory: tables::memory_rows(&session, &series),
        allocation_sites: sites::allocation_sites(&config.root, &session),
        memory_marks: baseline::memory_marks(&session),
        interconnect: tables::interconnect(&session),
        across_nodes: nodes::across_nodes(&session),
        gpu: tables::gpu_rows(&session),
        torch_ops: torch_ops::torch_ops(&session),
        serving: serving::serving(&session),
        hotspots: tables::hotspots(&config.root, &session).map(|mut t| {
            // Each file read once, however many rows and lines name it.
            let texts = std::cell::RefCell::new(BTreeMap::<String, Option<String>>::new());
            waits::classify(&mut t, &|file, line| {
                let mut texts = texts.borrow_mut();
                let text = texts
                    .entry(file.to_string())
                    .or_insert_with(|| source_text(&config.root, file));
                let index = (line as usize).checked_sub(1)?;
                text.as_deref()?.lines().nth(index).map(str::to_string)
            });
            t
        }),
        notes: session.notes.clone(),
        not_run: session.not_run.clone(),
        ..Report::default()
    };
    report.memory_baseline = baseline::memory_baseline(&session, &report.memory);
    let empty = [
        ("cpu", report.cpu.is_empty()),
        ("memory", report.memory.is_empty()),
        ("interconnect", report.interconnect.is_none()),
        ("gpu", report.gpu.is_empty()),
        ("hotspots", report.hotspots.is_none()),
    ];
    // A distributed run that traced its ranks and saw no collective says so: the table is
    // empty because of the window, not for want of a GPU.
    let quiet_ranks = session.runs.iter().find_map(|r| {
        let ranks = r.metrics.ranks.as_ref()?;
        ranks
            .traces
            .iter()
            .all(|t| t.analysis.collectives.is_none())
            .then(|| (r.run_id.clone(), ranks.traces.len()))
    });
    for (table, is_empty) in empty {
        if is_empty {
            let reason = match (&quiet_ranks, table) {
                (Some((run, n)), "interconnect") => fmt::tr(
                    lang,
                    format!("Left out: {run} traced {n} ranks and none made a collective in its traced window (the program communicated outside the traced steps, or not at all): trace a longer window (`options.schedule` with more active steps, or none for the whole run)."),
                    format!("省略: {run} は {n} ランクをトレースしたが、トレースした区間に集団通信はなかった（トレース外で通信したか、通信していない）: 区間を長くする（`options.schedule` の active を増やす、または省略して全体）。"),
                ),
                _ => omitted_reason(lang, table),
            };
            report.omitted.push(Omitted {
                table: table.into(),
                reason,
            });
        }
    }
    for r in &session.runs {
        if let Some(p) = &r.metrics.python_memory {
            // The sites come from the snapshot nearest the peak; one taken far below it (a
            // peak reached and left between two checks) names the ramp, not the peak.
            if p.peak_bytes < SMALL_HEAP_BYTES {
                // A heap this small is the finding: nothing to chase, and where its peak
                // sites were taken says nothing.
                report.notes.push(fmt::tr(
                    lang,
                    format!("{}: the Python heap peaked at {}: this program allocates little in Python, and memory is not where its time or space goes.", r.run_id, fmt::bytes(p.peak_bytes)),
                    format!("{}: Python ヒープのピークは {} と小さく、このプログラムのメモリは問題ではない。", r.run_id, fmt::bytes(p.peak_bytes)),
                ));
            } else if (p.peak_sites_at_bytes as f64) < 0.8 * p.peak_bytes as f64 {
                report.notes.push(fmt::tr(
                    lang,
                    format!("{}: tracemalloc's peak sites were taken at {} of the {} peak, so they may miss what made the peak; rerun with a smaller options.interval_s.", r.run_id, fmt::bytes(p.peak_sites_at_bytes), fmt::bytes(p.peak_bytes)),
                    format!("{}: tracemalloc のピーク時の確保箇所は {}（ピーク {}）の時点のもので、ピークの原因を取り逃している可能性がある。options.interval_s を小さくして再実行する。", r.run_id, fmt::bytes(p.peak_sites_at_bytes), fmt::bytes(p.peak_bytes)),
                ));
            }
        }
        if let Some(i) = &r.instead_of {
            // A figure from the stand-in must not pass for the method the plan chose.
            report.notes.push(fmt::tr(
                lang,
                format!(
                    "{} ran {} instead of {} ({}), which measured nothing: {}",
                    r.run_id,
                    r.profiler.id(),
                    i.method.id(),
                    i.run_id,
                    i.why
                ),
                format!(
                    "{} は {} が何も測定できなかったため（{}、{}）代わりに {} で実行した",
                    r.run_id,
                    i.method.id(),
                    i.run_id,
                    i.why,
                    r.profiler.id()
                ),
            ));
        }
        if matches!(
            r.status,
            RunStatus::Failed | RunStatus::TimedOut | RunStatus::Cancelled
        ) {
            report.notes.push(format!(
                "{} {}: {}",
                r.run_id,
                fmt::status_word(lang, &status_text(r.status)),
                r.error.as_deref().unwrap_or("no error recorded")
            ));
        }
    }
    report.recommendations = rules::recommend(&rules::Inputs {
        session: &session,
        report: &report,
        lang,
    });
    let mut notes = Vec::new();
    report.changes = change_log(&config.root, &report.session, lang, &mut notes);
    report.notes.extend(notes);
    let (charts, chart_notes) = charts::draw_all(&config.root, &session.dir, lang, &series);
    report.charts = charts;
    report.notes.extend(chart_notes);
    Ok(report)
}

/// A Python source a hotspot names, to see whether the sampled line blocks. Only a `.py`
/// file under the root (read beneath it) or in a Python installation's library is read, at
/// most 8 MiB of it; nothing of its text reaches the report but the name of a blocking call
/// from a fixed list.
fn source_text(root: &Path, file: &str) -> Option<String> {
    const MAX_SOURCE_BYTES: u64 = 8 << 20;
    if !file.ends_with(".py") {
        return None;
    }
    if Path::new(file).is_absolute() {
        if !file.contains("/lib/python") {
            return None;
        }
        let f = std::fs::File::open(file).ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_SOURCE_BYTES), &mut text)
            .ok()?;
        Some(text)
    } else {
        let fs = system_profile_confine::Confined::open(root).ok()?;
        let (bytes, _) = fs.read_capped(Path::new(file), MAX_SOURCE_BYTES).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The Markdown of a report.
pub fn render(report: &Report) -> String {
    markdown::render(report)
}

/// `summarize`: build, render, and write `report.md` and `report.json` in the session folder.
pub fn summarize(
    config: &ReportConfig,
    input: &SummarizeInput,
) -> Result<SummarizeOutput, ReportError> {
    let report = build(config, input)?;
    let markdown = render(&report);
    let dir = format!("{}/{}", session::OUTPUT_DIR, report.session);
    let markdown_path = format!("{dir}/report.md");
    let json_path = format!("{dir}/report.json");
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| ReportError::new(ReportErrorKind::Io, e.to_string()))?;
    for (path, bytes) in [
        (&json_path, json.as_slice()),
        (&markdown_path, markdown.as_bytes()),
    ] {
        write_file(&config.root, path, bytes).map_err(|e| {
            ReportError::new(ReportErrorKind::Io, format!("cannot write {path}: {e}"))
        })?;
    }
    Ok(SummarizeOutput {
        report,
        markdown,
        markdown_path,
        json_path,
        format: input.format,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_change_belongs_to_the_session_it_was_made_in() {
        let sessions = vec![
            "20261203-100000-1".to_string(),
            "20261203-110000-2".to_string(),
        ];
        assert!(super::made_in(
            "2026-12-03T10:30:00Z",
            "20261203-100000-1",
            &sessions
        ));
        assert!(!super::made_in(
            "2026-12-03T11:30:00Z",
            "20261203-100000-1",
            &sessions
        ));
        assert!(super::made_in(
            "2026-12-03T11:30:00Z",
            "20261203-110000-2",
            &sessions
        ));
        assert!(!super::made_in(
            "2026-12-03T09:59:59Z",
            "20261203-100000-1",
            &sessions
        ));
        // A session named otherwise (by the user) keeps every change.
        assert!(super::made_in("2026-12-03T09:00:00Z", "mine", &sessions));
    }
}
