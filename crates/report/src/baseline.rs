//! What a Python process held before its own code ran, against what it held at its peak, and
//! the memory at the points `instrument_file` marked. A program that imports a framework often
//! spends most of its memory on the import (torch alone is hundreds of MiB): that is the
//! largest memory fact about it, and no allocation site of its own code will show it.
//!
//! The start figures come from the tracemalloc runner (it imports the script's leading imports
//! untraced, one by one, reading the resident set after each); the peak from a run of the same
//! command that traced nothing (measure, time_v, the /proc sampler).

use crate::cpu_table::measured;
use crate::fmt::{bytes, pct, secs, tr};
use crate::markdown::esc;
use crate::session::Session;
use crate::tables::cite;
use system_profile_model::report::{
    ImportRow, MemoryBaseline, MemoryMarkRow, MemoryRow, Report, Source,
};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::{Method, RunRecord, RunTarget};

/// Imports listed by name; the rest are summed into the last line.
const IMPORTS_SHOWN: usize = 6;
/// From this share of the peak on, the baseline is the summary's memory verdict.
pub const BASELINE_DOMINATES_PERCENT: f64 = 50.0;

fn command(run: &RunRecord) -> Option<&[String]> {
    match &run.target {
        RunTarget::Command { command, .. } => Some(command),
        _ => None,
    }
}

/// The process's resident peak in a run that traced nothing, with the row's source: the
/// program's own process (a `time -v` run is `time` and the program), never a tree's sum.
fn untraced_peak<'a>(
    session: &'a Session,
    memory: &'a [MemoryRow],
    same_command: &[String],
) -> Option<(u64, Source)> {
    session
        .runs
        .iter()
        .filter(|r| measured(r))
        .filter(|r| {
            matches!(
                r.profiler,
                Method::Measure | Method::TimeV | Method::ProcfsSampler
            )
        })
        .filter(|r| command(r) == Some(same_command))
        .filter_map(|r| {
            let row = memory
                .iter()
                .find(|m| m.run_id == r.run_id && m.place == "cpu")?;
            let peak = match row.processes {
                Some(n) if n > 2 => return None,
                Some(2) => row.largest_process_rss_peak_bytes?,
                _ => row.rss_peak_bytes?,
            };
            Some((
                peak,
                row.sources.first().cloned().unwrap_or_else(|| Source {
                    run_id: r.run_id.clone(),
                    artifact: None,
                }),
            ))
        })
        .max_by_key(|(peak, _)| *peak)
}

pub fn memory_baseline(session: &Session, memory: &[MemoryRow]) -> Option<MemoryBaseline> {
    let (run, p) = session.runs.iter().filter(|r| measured(r)).find_map(|r| {
        let p = r.metrics.python_memory.as_ref()?;
        p.rss_before_imports_bytes?;
        Some((r, p))
    })?;
    let interpreter = p.rss_before_imports_bytes?;
    let mut before = interpreter;
    let mut imports: Vec<ImportRow> = p
        .imports
        .iter()
        .map(|i| {
            let added = i.rss_after_bytes.saturating_sub(before);
            before = before.max(i.rss_after_bytes);
            ImportRow {
                module: i.module.clone(),
                rss_added_bytes: added,
                wall_s: i.wall_s,
                error: i.error.clone(),
            }
        })
        .collect();
    let after_imports = before;
    imports.sort_by_key(|i| std::cmp::Reverse(i.rss_added_bytes));
    let peak = command(run).and_then(|c| untraced_peak(session, memory, c));
    let peak_rss = peak.as_ref().map(|(b, _)| *b);
    Some(MemoryBaseline {
        source: cite(run, ArtifactKind::TracemallocJson),
        interpreter_rss_bytes: interpreter,
        after_imports_rss_bytes: after_imports,
        imports,
        peak_source: peak.map(|(_, s)| s),
        peak_rss_bytes: peak_rss,
        program_added_bytes: peak_rss.map(|b| b.saturating_sub(after_imports)),
        baseline_share_percent: peak_rss
            .filter(|b| *b > 0)
            .map(|b| (after_imports.min(b)) as f64 / b as f64 * 100.0),
    })
}

/// Every kept memory mark of each run, with seconds since the run started.
pub fn memory_marks(session: &Session) -> Vec<MemoryMarkRow> {
    let mut rows = Vec::new();
    for i in &session.instrument {
        let started = session
            .runs
            .iter()
            .find(|r| r.run_id == i.run_id)
            .map(|r| r.started_at_unix_s);
        for m in &i.summary.memory_marks {
            rows.push(MemoryMarkRow {
                run_id: i.run_id.clone(),
                pid: m.pid,
                site: m.site.clone(),
                call: m.call,
                point: m.point.clone(),
                at_s: started.map_or(0.0, |s| (m.t - s).max(0.0)),
                rss_bytes: m.rss_bytes,
                rss_at_load_bytes: i.summary.rss_at_load_bytes,
                gpu_allocated_bytes: m.gpu_allocated_bytes,
            });
        }
    }
    rows
}

/// The summary's line when what the process held before its code ran is most of its peak.
pub fn summary_line(report: &Report) -> Option<String> {
    let b = report.memory_baseline.as_ref()?;
    let share = b.baseline_share_percent?;
    if share < BASELINE_DOMINATES_PERCENT {
        return None;
    }
    let top = b
        .imports
        .first()
        .map(|i| format!(" (`import {}` {})", i.module, bytes(i.rss_added_bytes)))
        .unwrap_or_default();
    Some(tr(
        report.lang,
        format!(
            "- Memory: {} of the {} peak ({}) was held before the program's own code ran: the interpreter and the script's imports{top}. The program's code added {}.\n",
            bytes(b.after_imports_rss_bytes.min(b.peak_rss_bytes.unwrap_or(u64::MAX))),
            bytes(b.peak_rss_bytes.unwrap_or_default()),
            pct(share),
            bytes(b.program_added_bytes.unwrap_or_default())
        ),
        format!(
            "- メモリ: ピーク {} のうち {}（{}）はプログラム自身のコードが動く前から保持されていた: インタプリタとスクリプトの import{top}。プログラムのコードが加えたのは {}。\n",
            bytes(b.peak_rss_bytes.unwrap_or_default()),
            bytes(b.after_imports_rss_bytes.min(b.peak_rss_bytes.unwrap_or(u64::MAX))),
            pct(share),
            bytes(b.program_added_bytes.unwrap_or_default())
        ),
    ))
}

/// The baseline sentence and its imports, then the marks, under the memory table.
pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    if let Some(b) = &report.memory_baseline {
        let peak = match (b.peak_rss_bytes, &b.peak_source) {
            (Some(p), Some(s)) => tr(
                lang,
                format!(
                    " Its resident peak in {} was {}: the program's own code added {} ({} of the peak was there before it ran).",
                    s.run_id,
                    bytes(p),
                    bytes(b.program_added_bytes.unwrap_or_default()),
                    pct(b.baseline_share_percent.unwrap_or_default())
                ),
                format!(
                    " {} での常駐ピークは {}: プログラム自身のコードが加えたのは {}（ピークの {} はコードが動く前からあった）。",
                    s.run_id,
                    bytes(p),
                    bytes(b.program_added_bytes.unwrap_or_default()),
                    pct(b.baseline_share_percent.unwrap_or_default())
                ),
            ),
            _ => tr(
                lang,
                " No run of the same command without a tracing profiler measured its peak.",
                " 同じコマンドをトレースなしで測った実行がないため、ピークとは比べていない。",
            ),
        };
        md.push_str(&tr(
            lang,
            format!(
                "At start ({}): the interpreter held {}; after the script's leading imports, before its own code ran, {}.{peak}\n\n",
                b.source.run_id,
                bytes(b.interpreter_rss_bytes),
                bytes(b.after_imports_rss_bytes)
            ),
            format!(
                "開始時（{}）: インタプリタだけで {}、スクリプト冒頭の import の後（自身のコードが動く前）で {}。{peak}\n\n",
                b.source.run_id,
                bytes(b.interpreter_rss_bytes),
                bytes(b.after_imports_rss_bytes)
            ),
        ));
        if !b.imports.is_empty() {
            md.push_str(&format!(
                "| {} | {} | {} |\n|---|---:|---:|\n",
                tr(lang, "Import", "import"),
                tr(lang, "Resident memory added", "増えた常駐メモリ"),
                tr(lang, "Time", "時間"),
            ));
            for i in b.imports.iter().take(IMPORTS_SHOWN) {
                let note = i
                    .error
                    .as_ref()
                    .map(|e| {
                        tr(
                            lang,
                            format!(" (not imported ahead: {})", esc(e)),
                            format!("（先に import できず: {}）", esc(e)),
                        )
                    })
                    .unwrap_or_default();
                md.push_str(&format!(
                    "| `{}`{note} | {} | {} |\n",
                    esc(&i.module),
                    bytes(i.rss_added_bytes),
                    secs(i.wall_s)
                ));
            }
            let rest = &b.imports[b.imports.len().min(IMPORTS_SHOWN)..];
            if !rest.is_empty() {
                md.push_str(&format!(
                    "| {} | {} | {} |\n",
                    tr(
                        lang,
                        format!("{} more", rest.len()),
                        format!("ほか {} 件", rest.len())
                    ),
                    bytes(rest.iter().map(|i| i.rss_added_bytes).sum()),
                    secs(rest.iter().map(|i| i.wall_s).sum())
                ));
            }
            md.push('\n');
        }
    }
    marks(md, report);
}

fn marks(md: &mut String, report: &Report) {
    let lang = report.lang;
    if report.memory_marks.is_empty() {
        return;
    }
    md.push_str(&format!(
        "#### {}\n\n",
        tr(lang, "Memory at marked points", "マークした地点のメモリ")
    ));
    let gpu = report
        .memory_marks
        .iter()
        .any(|m| m.gpu_allocated_bytes.is_some());
    md.push_str(&format!(
        "| {} | pid | {} | {} | {} | {} |{}\n|---|---:|---|---:|---:|---:|{}\n",
        tr(lang, "Run", "実行"),
        tr(lang, "Site", "箇所"),
        tr(lang, "Point", "地点"),
        tr(lang, "At", "時刻"),
        tr(lang, "Resident", "常駐"),
        if gpu {
            tr(lang, " GPU allocated |", " GPU 確保 |")
        } else {
            String::new()
        },
        if gpu { "---:|" } else { "" },
    ));
    for m in &report.memory_marks {
        md.push_str(&format!(
            "| {} | {} | `{}` #{} | {} | {} | {} |{}\n",
            m.run_id,
            m.pid,
            esc(&m.site),
            m.call,
            m.point,
            secs(m.at_s),
            bytes(m.rss_bytes),
            if gpu {
                format!(
                    " {} |",
                    m.gpu_allocated_bytes
                        .map(bytes)
                        .unwrap_or_else(|| "—".into())
                )
            } else {
                String::new()
            }
        ));
    }
    if let Some(load) = report.memory_marks.iter().find_map(|m| m.rss_at_load_bytes) {
        md.push_str(&tr(
            lang,
            format!(
                "\nWhen the helper loaded, before the program's imports, the process held {}.\n",
                bytes(load)
            ),
            format!(
                "\nヘルパー読み込み時（プログラムの import 前）のプロセスの常駐メモリは {}。\n",
                bytes(load)
            ),
        ));
    }
    md.push('\n');
}
