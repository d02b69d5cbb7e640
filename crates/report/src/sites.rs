//! The allocation-sites table beside the memory table (built from the tracing runs, rendered
//! under it), and the sentence that splits a resident peak into the Python heap and the rest
//! (the interpreter, imported native libraries such as torch, native allocations): the
//! largest memory fact of a program that imports a framework is often that the import, not
//! the program's own code, holds most of it.

use crate::fmt::{bytes, num, pct, tr};
use crate::session::Session;
use crate::tables::{cite, measured, shown_file};
use system_profile_model::report::{AllocationSiteRow, Lang, Report, SiteMeasure};
use system_profile_model::run::ArtifactKind;

/// Sites per run: enough to see the shape, few enough to read.
const SITES_PER_RUN: usize = 5;

/// The instrumentation helper's own lines: what measuring cost, not what the program holds.
fn ours(file: &str) -> bool {
    file.ends_with("/_sp_profile.py")
}

pub fn allocation_sites(root: &std::path::Path, session: &Session) -> Vec<AllocationSiteRow> {
    let mut rows = Vec::new();
    for run in session.runs.iter().filter(|r| measured(r)) {
        let over_steps = crate::tables::tracked_steps(run);
        if let Some(p) = &run.metrics.python_memory {
            for s in p
                .peak_sites_by_size
                .iter()
                .filter(|s| !ours(&s.file))
                .take(SITES_PER_RUN)
            {
                rows.push(AllocationSiteRow {
                    run_id: run.run_id.clone(),
                    source: cite(run, ArtifactKind::TracemallocJson),
                    tool: "tracemalloc".into(),
                    function: None,
                    file: shown_file(root, &s.file),
                    line: Some(s.line),
                    bytes: s.size_bytes,
                    count: Some(s.count),
                    share_percent: (p.peak_bytes > 0)
                        .then(|| s.size_bytes as f64 / p.peak_bytes as f64 * 100.0),
                    measure: SiteMeasure::LiveAtPeak,
                    via: None,
                    sampled_every_bytes: None,
                    over_steps,
                });
            }
        }
        if let Some(a) = &run.metrics.allocations {
            for t in a
                .at_peak
                .iter()
                .filter(|t| !ours(&t.file))
                .take(SITES_PER_RUN)
            {
                rows.push(AllocationSiteRow {
                    run_id: run.run_id.clone(),
                    source: crate::tables::cite_allocations(run),
                    tool: run.profiler.id(),
                    function: Some(t.function.clone()),
                    file: shown_file(root, &t.file),
                    line: t.line,
                    bytes: t.live_bytes,
                    count: Some(t.allocations),
                    share_percent: (a.peak_bytes > 0)
                        .then(|| t.live_bytes as f64 / a.peak_bytes as f64 * 100.0),
                    measure: SiteMeasure::LiveAtPeak,
                    via: t.via.clone(),
                    sampled_every_bytes: a.sampled_every_bytes,
                    over_steps,
                });
            }
            for t in a
                .top_by_size
                .iter()
                .filter(|t| !ours(&t.file))
                .take(SITES_PER_RUN)
            {
                let Some(size) = t.size_bytes else {
                    continue;
                };
                rows.push(AllocationSiteRow {
                    run_id: run.run_id.clone(),
                    source: crate::tables::cite_allocations(run),
                    tool: run.profiler.id(),
                    function: Some(t.function.clone()),
                    file: shown_file(root, &t.file),
                    line: t.line,
                    bytes: size,
                    count: t.count,
                    share_percent: (a.total_bytes_allocated > 0)
                        .then(|| size as f64 / a.total_bytes_allocated as f64 * 100.0),
                    measure: SiteMeasure::AllocatedOverRun,
                    via: None,
                    sampled_every_bytes: a.sampled_every_bytes,
                    over_steps,
                });
            }
            // The program's lines that made large short-lived buffers (of all bytes allocated)
            // and that still held memory at exit (of the peak).
            let program_lines = [
                (
                    SiteMeasure::ShortLivedLarge,
                    ArtifactKind::MemrayShortLivedCsv,
                    a.total_bytes_allocated,
                    a.short_lived_large
                        .iter()
                        .map(|t| (&t.function, &t.file, t.line, t.bytes, t.allocations, &t.via))
                        .collect::<Vec<_>>(),
                ),
                (
                    SiteMeasure::NotFreedAtExit,
                    ArtifactKind::MemrayLeaksCsv,
                    a.peak_bytes,
                    a.not_freed
                        .iter()
                        .map(|t| {
                            (
                                &t.function,
                                &t.file,
                                t.line,
                                t.live_bytes,
                                t.allocations,
                                &t.via,
                            )
                        })
                        .collect(),
                ),
            ];
            for (measure, artifact, of_bytes, sites) in program_lines {
                for (function, file, line, bytes, allocations, via) in
                    sites.into_iter().filter(|t| !ours(t.1)).take(SITES_PER_RUN)
                {
                    rows.push(AllocationSiteRow {
                        run_id: run.run_id.clone(),
                        source: crate::tables::cite_allocation_view(run, artifact),
                        tool: run.profiler.id(),
                        function: Some(function.clone()),
                        file: shown_file(root, file),
                        line,
                        bytes,
                        count: Some(allocations),
                        share_percent: (of_bytes > 0)
                            .then(|| bytes as f64 / of_bytes as f64 * 100.0),
                        measure,
                        via: via.clone(),
                        sampled_every_bytes: a.sampled_every_bytes,
                        over_steps,
                    });
                }
            }
        }
    }
    rows
}

/// The resident peak of one process against the Python heap's peak of the same program: what
/// the heap does not explain is the interpreter, imported libraries and native allocations.
/// `None` without both figures, or for a tree of several processes (one process's heap says
/// nothing of a tree's resident set).
pub fn heap_share_sentence(report: &Report) -> Option<String> {
    let lang = report.lang;
    let rss = report.memory.iter().find(|r| {
        r.place == "cpu" && r.rss_peak_bytes.is_some() && !crate::tables::from_instrument(r)
    })?;
    // A started command under `time -v` is two processes, `time` and the program: the largest
    // is the program.
    let (rss_bytes, of) = match rss.processes {
        Some(n) if n > 2 => return None,
        Some(2) => (rss.largest_process_rss_peak_bytes?, "the largest process's"),
        _ => (rss.rss_peak_bytes?, "the"),
    };
    // tracemalloc's peak is the Python heap; memray's counts every allocation (native too),
    // and is used only without the former.
    let by = |artifact: &str| {
        report
            .memory
            .iter()
            .filter(|r| r.place == "cpu")
            .filter(|r| {
                r.sources
                    .iter()
                    .any(|s| s.artifact.as_deref().is_some_and(|a| a.ends_with(artifact)))
            })
            .filter_map(|r| Some((r.heap_peak_bytes?, r.run_id.clone())))
            .max_by_key(|(b, _)| *b)
    };
    let (heap, held) = if let Some(h) = by("tracemalloc.json") {
        (h, tr(lang, "the Python heap", "Python ヒープ"))
    } else if let Some(h) = by("alloc-samples.txt") {
        (
            h,
            tr(
                lang,
                "the Python heap (estimated from samples)",
                "Python ヒープ（サンプルからの推定）",
            ),
        )
    } else {
        (
            by("memray-stats.json")?,
            tr(lang, "all allocations memray saw", "memray が見た全確保"),
        )
    };
    if rss_bytes == 0 || heap.0 > rss_bytes {
        return None;
    }
    let rest = rss_bytes - heap.0;
    Some(tr(
        lang,
        format!(
            "Of {of} resident peak, {} ({}), {held} held at most {} ({}): the other {} ({}) is the interpreter, the native libraries the program imports and native allocations, not the program's own Python objects.",
            bytes(rss_bytes), rss.run_id, bytes(heap.0), heap.1, bytes(rest), pct(rest as f64 / rss_bytes as f64 * 100.0)
        ),
        format!(
            "常駐ピーク {}（{}）のうち {held} は最大 {}（{}）。残り {}（{}）はインタプリタ、import したネイティブライブラリ、ネイティブの確保で、プログラム自身の Python オブジェクトではない。",
            bytes(rss_bytes), rss.run_id, bytes(heap.0), heap.1, bytes(rest), pct(rest as f64 / rss_bytes as f64 * 100.0)
        ),
    ))
}

/// The table under the memory table.
pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    // The baseline says more than this sentence (what the imports held, measured): one of them.
    let sentence = report
        .memory_baseline
        .is_none()
        .then(|| heap_share_sentence(report))
        .flatten();
    crate::baseline::render(md, report);
    if let Some(s) = sentence {
        md.push_str(&s);
        md.push_str("\n\n");
    }
    if report.allocation_sites.is_empty() {
        // A site profile planned and left out says so where its table would be.
        let left_out = report.not_run.iter().find(|n| {
            n.method
                .spec()
                .families
                .contains(&system_profile_model::run::MetricFamily::AllocationSites)
        });
        if let Some(n) = left_out {
            md.push_str(&format!(
                "_{} ({}): {}_\n\n",
                tr(
                    lang,
                    "Allocation sites not profiled",
                    "メモリ確保箇所は計測せず"
                ),
                n.step,
                crate::markdown::esc(&n.reason)
            ));
        }
        return;
    }
    md.push_str(&format!(
        "#### {}\n\n",
        tr(lang, "Allocation sites", "メモリ確保箇所")
    ));
    let head: Vec<String> = [
        ("Run", "実行"),
        ("Tool", "ツール"),
        ("Where", "場所"),
        ("Counts", "数えたもの"),
        ("Bytes", "バイト"),
        ("Blocks", "ブロック数"),
        ("Share", "比率"),
    ]
    .iter()
    .map(|(en, ja)| tr(lang, *en, *ja))
    .collect();
    md.push_str(&format!(
        "| {} |\n|{}\n",
        head.join(" | "),
        "---|".repeat(head.len())
    ));
    for r in &report.allocation_sites {
        let at = format!(
            "{}{}",
            r.file,
            r.line.map(|l| format!(":{l}")).unwrap_or_default()
        );
        // Code spans show their text as it is (an entity would print as `&lt;`): `code`
        // fences them; only what is outside one is escaped.
        let at = match &r.function {
            Some(f) => format!(
                "{} ({})",
                crate::markdown::code(f),
                crate::markdown::esc(&at)
            ),
            None => crate::markdown::code(&at),
        };
        let at = match &r.via {
            Some(v) => format!(
                "{at} {} {}",
                tr(lang, "via", "経由"),
                crate::markdown::code(v)
            ),
            None => at,
        };
        let counts = counts(lang, r.measure, r.over_steps);
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.run_id,
            r.tool,
            at,
            counts,
            match r.sampled_every_bytes {
                Some(_) => format!("≈ {}", bytes(r.bytes)),
                None => bytes(r.bytes),
            },
            r.count.map(num).unwrap_or_else(|| "—".into()),
            r.share_percent.map(pct).unwrap_or_else(|| "—".into()),
        ));
    }
    md.push_str(&tr(
        lang,
        "\nLive at the peak: bytes still held when memory peaked, and their share of the peak: what holding memory costs (memray and the allocation sampler count a library call's allocations at the program's line that called it, the library's frame after \"via\"; tracemalloc at the line that made them). Allocated over the run: bytes made there whether freed or not, and their share of all bytes allocated: churn, which costs time. Not freed at exit (asked for with `leaks`): still allocated when tracking stopped, and their share of the peak.\n\n",
        "\nピーク時に生存: メモリがピークに達した時点でまだ保持されていたバイトとピークに対する比率。保持のコスト（memray とアロケーション・サンプラーはライブラリ呼び出しの確保を呼び出したプログラムの行に数え、\"経由\" の後にライブラリの箇所を示す。tracemalloc は確保した行に数える）。実行中の確保量: 解放の有無にかかわらずそこで確保したバイトと全確保量に対する比率。チャーン（時間のコスト）。終了時に未解放（`leaks` 指定時）: 計測終了時にまだ確保されていたバイトとピークに対する比率。\n\n",
    ));
    if let Some([first, last]) = report.allocation_sites.iter().find_map(|r| r.over_steps) {
        md.push_str(&tr(
            lang,
            format!("Steps {first}-{last}: the allocation profiler tracked only that window of the training's steps, not its start-up or the rest of the run: the peak, the bytes allocated and the buffers made are those steps', and a training's steps repeat, so they are what each step costs.\n\n"),
            format!("ステップ {first}-{last}: メモリ確保プロファイラはトレーニングのこの範囲のステップだけを追跡し、起動や残りの実行は追跡していない。ピーク、確保量、バッファはこれらのステップのもの。ステップは繰り返すので、1 ステップあたりのコストを表す。\n\n"),
        ));
    }
    if let Some(every) = report
        .allocation_sites
        .iter()
        .find_map(|r| r.sampled_every_bytes)
    {
        md.push_str(&tr(
            lang,
            format!("≈: estimated from the allocation sampler's records, one allocation in about {} written with its stack and counted for the bytes around it (a site holding 10 MB is about {} samples, so within a few percent); the total allocated is an exact count.\n\n", bytes(every), (10_000_000 / every.max(1))),
            format!("≈: アロケーション・サンプラーの記録からの推定。約 {} ごとに 1 回の確保をスタック付きで記録し、その周辺のバイトとして数える（10 MB を保持する箇所は約 {} サンプルで、誤差は数 % 以内）。総確保量は正確な計数。\n\n", bytes(every), (10_000_000 / every.max(1))),
        ));
    }
}

/// What a row's bytes count, over the window of steps it covered where it covered one.
fn counts(lang: Lang, measure: SiteMeasure, over_steps: Option<[u32; 2]>) -> String {
    let steps = over_steps.map(|[first, last]| format!("{first}-{last}"));
    match (measure, steps) {
        (SiteMeasure::LiveAtPeak, None) => tr(lang, "live at the peak", "ピーク時に生存"),
        (SiteMeasure::LiveAtPeak, Some(s)) => tr(
            lang,
            format!("live at the peak of steps {s}"),
            format!("ステップ {s} のピーク時に生存"),
        ),
        (SiteMeasure::AllocatedOverRun, None) => {
            tr(lang, "allocated over the run", "実行中の確保量")
        }
        (SiteMeasure::AllocatedOverRun, Some(s)) => tr(
            lang,
            format!("allocated over steps {s}"),
            format!("ステップ {s} の確保量"),
        ),
        (SiteMeasure::ShortLivedLarge, None) => tr(
            lang,
            "large buffers made and freed (≥ 128 KiB each)",
            "確保してすぐ解放した大きなバッファ（各 128 KiB 以上）",
        ),
        (SiteMeasure::ShortLivedLarge, Some(s)) => tr(
            lang,
            format!("large buffers made and freed in steps {s} (≥ 128 KiB each)"),
            format!("ステップ {s} で確保してすぐ解放した大きなバッファ（各 128 KiB 以上）"),
        ),
        (SiteMeasure::NotFreedAtExit, None) => tr(lang, "not freed at exit", "終了時に未解放"),
        (SiteMeasure::NotFreedAtExit, Some(s)) => tr(
            lang,
            format!("not freed when tracking stopped (steps {s})"),
            format!("追跡終了時に未解放（ステップ {s}）"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use system_profile_model::report::MemoryRow;

    #[test]
    fn the_heap_explains_only_its_part_of_the_resident_peak_and_never_a_trees() {
        let mut report = Report {
            lang: system_profile_model::report::Lang::En,
            memory: vec![
                MemoryRow {
                    run_id: "r001".into(),
                    place: "cpu".into(),
                    processes: Some(2),
                    rss_peak_bytes: Some(700 << 20),
                    largest_process_rss_peak_bytes: Some(686 << 20),
                    ..MemoryRow::default()
                },
                MemoryRow {
                    run_id: "r002".into(),
                    place: "cpu".into(),
                    sources: vec![system_profile_model::report::Source {
                        run_id: "r002".into(),
                        artifact: Some("profile_output/s/r002/tracemalloc.json".into()),
                    }],
                    heap_peak_bytes: Some(158 << 20),
                    ..MemoryRow::default()
                },
            ],
            ..Report::default()
        };
        let s = heap_share_sentence(&report).unwrap();
        assert!(
            s.contains("686.0 MiB") && s.contains("158.0 MiB") && s.contains("528.0 MiB"),
            "{s}"
        );
        report.memory[0].processes = Some(5);
        assert_eq!(heap_share_sentence(&report), None);
    }
}
