//! Rules on host and device memory: duplicated tensors, allocation sites.

use super::*;
use crate::fmt::{bytes, num, pct, tr};
use system_profile_model::report::Confidence;
use system_profile_model::run::ArtifactKind;

pub(super) fn duplicated_tensors(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    // The run that saw the most held twice (the first of equals: the later runs are under
    // heavier profilers and see the same tensors).
    let Some((run_id, d)) = inputs
        .session
        .instrument
        .iter()
        .rev()
        .filter_map(|i| Some((&i.run_id, i.summary.duplicates.as_ref()?)))
        .filter(|(_, d)| d.bytes_duplicated >= DUPLICATED_MIN_BYTES)
        .max_by_key(|(_, d)| d.bytes_duplicated)
    else {
        return Vec::new();
    };
    let rows = &inputs.report.memory;
    let rss = rows
        .iter()
        .filter(|r| r.place == "cpu")
        .filter_map(|r| r.rss_peak_bytes)
        .max();
    let cross = d.groups.iter().any(|g| g.cross_device);
    let groups = d
        .groups
        .iter()
        .take(3)
        .map(|g| {
            format!(
                "{:?} {} x{} on {}",
                g.shape,
                g.dtype,
                g.copies,
                g.devices.join("+")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let site = &d.site;
    let (title, action) = if cross {
        (
            tr(lang, format!("Free {} of tensors held on both CPU and GPU", bytes(d.bytes_duplicated)), format!("CPU と GPU の両方にあるテンソル {} を解放", bytes(d.bytes_duplicated))),
            tr(
                lang,
                format!("At {site} the same data sat in host memory after it was copied to the GPU ({groups}). Drop the host copy once it is on the device (`del` the CPU tensor, load straight to the GPU with `map_location`/`device=`), or keep one pinned staging buffer instead."),
                format!("{site} で、GPU にコピー済みのデータがホストメモリにも残っていた（{groups}）。デバイスに移したらホスト側を手放す（CPU テンソルを `del`、`map_location`/`device=` で直接 GPU に読み込む）か、ピン留めした受け渡し用バッファ 1 つにする。"),
            ),
        )
    } else {
        (
            tr(lang, format!("Free {} of tensors held twice", bytes(d.bytes_duplicated)), format!("二重に保持されたテンソル {} を解放", bytes(d.bytes_duplicated))),
            tr(
                lang,
                format!("At {site} the same data was held more than once ({groups}). Keep one copy: drop the `clone()`/`copy()` or the second load, use views (`view`, slicing) or in-place operations, and `del` the original once the copy is made."),
                format!("{site} で同じデータが複数回保持されていた（{groups}）。コピーは 1 つにする: `clone()`/`copy()` や二度目の読み込みをやめ、ビュー（`view`、スライス）やインプレース演算を使い、コピー後は元を `del` する。"),
            ),
        )
    };
    let evidence_row = format!(
        "memory {} cpu duplicated",
        crate::tables::instrument_label(run_id)
    );
    vec![Draft {
        title,
        action,
        evidence: vec![evidence_row],
        sources: vec![crate::tables::instrument_source(run_id)],
        confidence: Confidence::High,
        ..Draft::saves_memory(d.bytes_duplicated, rss)
    }]
}

pub(super) fn python_allocation_site(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(p) = &run.metrics.python_memory else {
            continue;
        };
        let Some(site) = p.peak_sites_by_size.first() else {
            continue;
        };
        if site.size_bytes < ALLOC_SITE_MIN_BYTES
            || (site.size_bytes as f64) < ALLOC_SITE_SHARE * p.peak_bytes as f64
        {
            continue;
        }
        let gain = site.size_bytes / 2;
        out.push(Draft {
            title: tr(
                lang,
                format!("{}:{} holds {} at the peak", site.file, site.line, bytes(site.size_bytes)),
                format!("{}:{} がピーク時に {} を保持", site.file, site.line, bytes(site.size_bytes)),
            ),
            action: tr(
                lang,
                format!(
                    "{} live blocks allocated at {}:{} make {} of the Python heap's {} peak. Stream it (a generator, chunks), use a compact type (NumPy arrays, `array`, `__slots__`), or free it before the next large allocation; halving it saves about {}.",
                    num(site.count), site.file, site.line, pct(site.size_bytes as f64 / p.peak_bytes.max(1) as f64 * 100.0), bytes(p.peak_bytes), bytes(gain)
                ),
                format!(
                    "{}:{} で確保された {} 個のブロックが Python ヒープのピーク {} の {} を占める。逐次処理（ジェネレータ、分割）にする、小さな型（NumPy 配列、`array`、`__slots__`）にする、次の大きな確保の前に解放する。半減で約 {} 削減。",
                    site.file, site.line, num(site.count), bytes(p.peak_bytes), pct(site.size_bytes as f64 / p.peak_bytes.max(1) as f64 * 100.0), bytes(gain)
                ),
            ),
            evidence: vec![format!("memory {} cpu heap", run.run_id)],
            sources: vec![crate::tables::cite(run, ArtifactKind::TracemallocJson)],
            confidence: Confidence::Medium,
            ..Draft::saves_memory(gain, Some(p.peak_bytes))
        });
    }
    for run in &inputs.session.runs {
        let Some(a) = &run.metrics.allocations else {
            continue;
        };
        // Sites that did not count every allocation (pymalloc's arenas only, or Scalene's
        // sampled net growth) say where memory grew, not where the program makes its objects:
        // no claim of allocation rests on them (they stay in the allocation sites table).
        if !a.traces_python_allocators {
            continue;
        }
        let cwd = std::path::Path::new(&run.cwd);
        // What was live at the peak, by the program's line that made it, says what holding
        // memory costs; where memray gave it, it decides (bytes allocated over the run would
        // count churn as memory).
        if !a.at_peak.is_empty() {
            out.extend(peak_site(lang, run, a, cwd));
            continue;
        }
        // memray ranks every place, the interpreter's imports included (Scalene only the
        // program's files); the user can change
        // only their own code: the first site under the run's directory, outside packages.
        // (A script run by a relative path has relative file names.)
        let own = a
            .top_by_size
            .iter()
            .find(|s| system_profile_model::metrics::is_program_file(&s.file, cwd));
        let Some((site, size)) = own.and_then(|s| Some((s, s.size_bytes?))) else {
            continue;
        };
        if size < ALLOC_SITE_MIN_BYTES || (size as f64) < ALLOC_SITE_SHARE * a.peak_bytes as f64 {
            continue;
        }
        // More bytes made there over the run than the heap ever held at once were freed and
        // made again: churn, which costs time, not memory (fannkuch: 410.9 MiB of short lists
        // against a peak of a few MiB). A memory saving is claimed only where all of it could
        // have been live.
        if size > a.peak_bytes {
            continue;
        }
        let file = std::path::Path::new(&site.file)
            .strip_prefix(cwd)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| site.file.clone());
        let line = site.line.map(|l| format!(":{l}")).unwrap_or_default();
        // Allocated over the run, not all live at once: a quarter of it is a safe saving.
        let gain = size.min(a.peak_bytes) / 4;
        let tool = run.profiler.id();
        let (over_en, over_ja) = match crate::tables::tracked_steps(run) {
            Some([first, last]) => (
                format!("over steps {first}-{last}"),
                format!("ステップ {first}-{last} で"),
            ),
            None => ("over the run".to_string(), "実行中に".to_string()),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("{file}{line} ({}) allocates {} {over_en}", site.function, bytes(size)),
                format!("{file}{line}（{}）が{over_ja} {} を確保", site.function, bytes(size)),
            ),
            action: tr(
                lang,
                format!(
                    "{tool} ranks {file}{line} first among the program's own allocation sites: {} allocated there, against a heap peak of {}. Allocate once and reuse, stream instead of building whole lists, or use a compact type (NumPy arrays, `array`, `__slots__`); a quarter less is about {}.",
                    bytes(size), bytes(a.peak_bytes), bytes(gain)
                ),
                format!(
                    "{tool} の集計で、プログラム自身の確保箇所の首位は {file}{line}：{} を確保（ヒープのピークは {}）。一度確保して再利用する、リスト全体を作らず逐次処理にする、小さな型（NumPy 配列、`array`、`__slots__`）にする。4 分の 1 減で約 {}。",
                    bytes(size), bytes(a.peak_bytes), bytes(gain)
                ),
            ),
            evidence: vec![format!("memory {} cpu heap", run.run_id)],
            sources: vec![crate::tables::cite_allocations(run)],
            confidence: Confidence::Medium,
            ..Draft::saves_memory(gain, Some(a.peak_bytes))
        });
    }
    out
}

/// The program's own line holding the most at memray's high-water mark, when it holds enough
/// of the peak to matter. Memory a library call made counts at the program's line that
/// called it, and the advice is about that call.
/// A line's peak memory counts as kept to the end when this share of it was still allocated
/// at exit.
const KEPT_TO_EXIT_SHARE: f64 = 0.9;

/// Of a line's memory live at the peak, what was still allocated at exit, when nearly all of
/// it was (memray's leak view, with `leaks`).
fn kept_to_exit(
    a: &system_profile_model::metrics::AllocationProfile,
    site: &system_profile_model::metrics::PeakSite,
) -> Option<u64> {
    a.not_freed
        .iter()
        .find(|n| n.file == site.file && n.line == site.line)
        .map(|n| n.live_bytes)
        .filter(|kept| *kept as f64 >= KEPT_TO_EXIT_SHARE * site.live_bytes as f64)
}

fn peak_site(
    lang: system_profile_model::report::Lang,
    run: &system_profile_model::run::RunRecord,
    a: &system_profile_model::metrics::AllocationProfile,
    cwd: &std::path::Path,
) -> Option<Draft> {
    // What a line's imports hold is the modules' cost (the baseline says it), not data the
    // program could stream or free.
    let site = a
        .at_peak
        .iter()
        .filter(|s| system_profile_model::metrics::is_program_file(&s.file, cwd))
        .max_by_key(|s| {
            (
                s.live_bytes - s.imported_bytes,
                std::cmp::Reverse((&s.file, s.line)),
            )
        })?;
    let size = site.live_bytes - site.imported_bytes;
    if size < ALLOC_SITE_MIN_BYTES || (size as f64) < ALLOC_SITE_SHARE * a.peak_bytes as f64 {
        return None;
    }
    let file = std::path::Path::new(&site.file)
        .strip_prefix(cwd)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| site.file.clone());
    let line = site.line.map(|l| format!(":{l}")).unwrap_or_default();
    let share = pct(size as f64 / a.peak_bytes.max(1) as f64 * 100.0);
    let gain = size / 2;
    let (in_steps_en, in_steps_ja) = match crate::tables::tracked_steps(run) {
        Some([first, last]) => (
            format!(" in steps {first}-{last} (the window tracked)"),
            format!("（追跡したステップ {first}-{last} の範囲）"),
        ),
        None => (String::new(), String::new()),
    };
    let tool = run.profiler.id();
    // With memray's leak view (`leaks`): the same line's memory still allocated when the
    // program ended. Kept to the end, it was never a transient peak: what holds it is the
    // thing to change.
    let kept = kept_to_exit(a, site);
    let (how_en, how_ja) = match (&site.via, kept) {
        (_, Some(kept)) => (
            format!(" {} of it was still allocated when the program ended (the leak view): something keeps it for the whole run (a global, a cache, a list that only grows). If it is not needed to the end, drop it once used (`del`, a narrower scope); if it grows with the work, bound it (`functools.lru_cache(maxsize=...)`, `collections.deque(maxlen=...)`) or keep a summary instead of every item.", bytes(kept)),
            format!(" そのうち {} はプログラム終了時にもまだ確保されていた（リーク表示）: 何か（グローバル変数、キャッシュ、増え続けるリスト）が実行中ずっと保持している。最後まで要らないなら使い終えたら手放す（`del`、より狭いスコープ）。処理量とともに増えるなら上限を設ける（`functools.lru_cache(maxsize=...)`、`collections.deque(maxlen=...)`）か、全要素でなく要約を残す。", bytes(kept)),
        ),
        (Some(via), None) => (
            format!(" The library call on that line made them (most in {via}): the call is what to change, not the library: give it less at once (chunks, a streaming reader, smaller batches), keep only what is used of its result, or drop its input and result as soon as they are used."),
            format!(" その行のライブラリ呼び出しが確保した（大半は {via}）。変えるのはライブラリではなく呼び出し: 一度に渡す量を減らす（分割、ストリーミング読み込み、小さなバッチ）、結果は使う部分だけ残す、入力と結果は使い終えたらすぐ手放す。"),
        ),
        (None, None) => (
            " Stream it (a generator, chunks), use a compact type (NumPy arrays, `array`, `__slots__`), or free it before the next large allocation.".to_string(),
            " 逐次処理（ジェネレータ、分割）にする、小さな型（NumPy 配列、`array`、`__slots__`）にする、次の大きな確保の前に解放する。".to_string(),
        ),
    };
    Some(Draft {
        title: tr(
            lang,
            format!("{file}{line} ({}) holds {} at the peak", site.function, bytes(size)),
            format!("{file}{line}（{}）がピーク時に {} を保持", site.function, bytes(size)),
        ),
        action: tr(
            lang,
            format!(
                "{tool}: {} allocations made at {file}{line} were still live when memory peaked{in_steps_en}: {} of the {} peak ({share}).{how_en} Halving it saves about {}.",
                num(site.allocations), bytes(size), bytes(a.peak_bytes), bytes(gain)
            ),
            format!(
                "{tool}: {file}{line} で確保された {} 個がメモリのピーク時{in_steps_ja}にまだ生存していた: ピーク {} のうち {}（{share}）。{how_ja} 半減で約 {} 削減。",
                num(site.allocations), bytes(a.peak_bytes), bytes(size), bytes(gain)
            ),
        ),
        evidence: vec![format!("memory {} cpu heap", run.run_id)],
        sources: vec![crate::tables::cite_allocation_view(run, ArtifactKind::MemrayPeakCsv)],
        confidence: Confidence::High,
        ..Draft::saves_memory(gain, Some(a.peak_bytes))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use system_profile_model::metrics::{AllocationProfile, PeakSite};

    fn site(line: u32, live_bytes: u64) -> PeakSite {
        PeakSite {
            function: "handle".into(),
            file: "leaky.py".into(),
            line: Some(line),
            live_bytes,
            allocations: 20_000,
            imported_bytes: 0,
            via: None,
        }
    }

    /// A list that keeps every result (43.6 MiB at the peak, 43.6 MiB at exit) against a
    /// buffer freed before the end: only the first is "kept to the end"; without the leak
    /// view, nothing is.
    #[test]
    fn memory_still_allocated_at_exit_is_told_apart_from_a_transient_peak() {
        let kept = site(5, 45_700_000);
        let transient = site(9, 30_000_000);
        let a = AllocationProfile {
            at_peak: vec![kept.clone(), transient.clone()],
            not_freed: vec![site(5, 45_690_000), site(9, 1_000_000)],
            ..AllocationProfile::default()
        };
        assert_eq!(kept_to_exit(&a, &kept), Some(45_690_000));
        assert_eq!(kept_to_exit(&a, &transient), None);
        let without = AllocationProfile {
            not_freed: Vec::new(),
            ..a
        };
        assert_eq!(kept_to_exit(&without, &kept), None);
    }
}
