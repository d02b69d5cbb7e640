//! Large buffers made and freed in a loop, and what they cost the kernel: glibc serves a
//! malloc above its mmap threshold with a fresh mapping that free unmaps (and trims the heap's
//! top above its trim threshold), so the first touch of every page is a page fault again. The allocation profile names the line; the run
//! without a profiler says what it cost (system time, minor faults). Neither alone is a
//! finding: churn that costs nothing is not worth a change, and system time may be I/O.

use super::cpu::{unprofiled_wall, user_code};
use super::*;
use crate::fmt::{bytes, num, pct, secs, tr};
use crate::tables::shown_file;
use system_profile_model::metrics::ShortLivedSite;
use system_profile_model::report::{Confidence, CpuRow};
use system_profile_model::run::ArtifactKind;

pub(super) fn large_buffer_churn(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(a) = &run.metrics.allocations else {
            continue;
        };
        let cwd = std::path::Path::new(&run.cwd);
        let sites: Vec<(&ShortLivedSite, String)> = a
            .short_lived_large
            .iter()
            .map(|s| (s, shown_file(cwd, &s.file)))
            .filter(|(_, f)| user_code(f))
            .collect();
        let churn_bytes: u64 = sites.iter().map(|(s, _)| s.bytes).sum();
        let Some((top, top_file)) = sites.first() else {
            continue;
        };
        // What it cost, from the same command run without a profiler.
        let Some((wall_s, cost)) = unprofiled_wall(inputs, run).and_then(|(wall_s, id)| {
            let row = inputs.report.cpu.iter().find(|r| r.run_id == id)?;
            Some((wall_s, kernel_cost(row)?))
        }) else {
            continue;
        };
        // A window of steps holds a few steps' churn: the gate is the whole run's, at the
        // window's rate per step.
        let window = run.metrics.step_window.as_ref();
        let run_steps = window.and_then(|w| w.steps_in_wall(wall_s));
        let churn_over_run_bytes = match (window, run_steps) {
            (Some(w), Some(steps)) => churn_bytes as f64 / f64::from(w.traced_steps()) * steps,
            (Some(_), None) => continue,
            (None, _) => churn_bytes as f64,
        };
        if churn_over_run_bytes < CHURN_MIN_BYTES as f64 {
            continue;
        }
        let (in_window_en, in_window_ja) = match (window, run_steps) {
            (Some(w), Some(steps)) => (
                format!(
                    " over steps {}-{}, the steps the allocation profile covers; about {} over the run's ~{} steps at that rate",
                    w.first_traced_step,
                    w.last_traced_step,
                    bytes(churn_over_run_bytes as u64),
                    num(steps.round() as u64)
                ),
                format!(
                    "、ステップ {}-{}: メモリ確保プロファイルの範囲。同じ割合なら実行全体の約 {} ステップで約 {}",
                    w.first_traced_step,
                    w.last_traced_step,
                    num(steps.round() as u64),
                    bytes(churn_over_run_bytes as u64)
                ),
            ),
            _ => (String::new(), String::new()),
        };
        if cost.sys_share < CHURN_SYS_SHARE || cost.minor_faults < CHURN_MIN_MINOR_FAULTS {
            continue;
        }
        let place = crate::fmt::at(top_file, top.line);
        let average = top.bytes / top.allocations.max(1);
        let via = top
            .via
            .as_ref()
            .map(|v| tr(lang, format!(", made in {v}"), format!("、確保は {v}")))
            .unwrap_or_default();
        // Half the kernel's time (the A/B on pytorch/examples' word_language_model removed
        // 60% of it with the threshold raised; BENCHMARKS.md), as wall time: CPU time saved
        // on a program keeping several cores busy shortens its wall by that much less.
        let gain_s = cost.sys_s * 0.5 / cost.cores.max(1.0);
        let threshold = suggested_threshold(average);
        out.push(Draft {
            title: tr(
                lang,
                format!(
                    "Reuse the large buffers `{}` ({place}) makes and frees: {} of them",
                    top.function,
                    bytes(top.bytes)
                ),
                format!(
                    "`{}`（{place}）が確保しては解放する大きなバッファを再利用する: 計 {}",
                    top.function,
                    bytes(top.bytes)
                ),
            ),
            action: tr(
                lang,
                format!(
                    "{} buffers of about {} each were made at {place}{via} and freed soon after ({} in all at the program's lines{in_window_en}). Buffers this large are served by mmap or given back to the kernel by heap trimming when freed (glibc's thresholds), so memory made and freed in a loop is faulted in again each time: run without a profiler, the program spent {} in the kernel ({} of its CPU time) with {} minor page faults. Keep them: allocate once and reuse (`out=` arguments, in-place operations, a preallocated buffer), or let glibc keep freed memory with `MALLOC_MMAP_THRESHOLD_={threshold}` in the environment (costs resident memory: freed buffers stay mapped). Halving the kernel's time saves about {} of {}.",
                    num(top.allocations),
                    bytes(average),
                    bytes(churn_bytes),
                    secs(cost.sys_s),
                    pct(cost.sys_share * 100.0),
                    num(cost.minor_faults),
                    secs(gain_s),
                    secs(wall_s)
                ),
                format!(
                    "{place} で約 {} のバッファが {} 個確保され{via}、すぐ解放された（プログラムの行で計 {}{in_window_ja}）。この大きさのバッファは mmap で確保されるか、解放時にヒープのトリムでカーネルに返される（glibc の閾値）ため、ループで確保と解放を繰り返すと毎回ページフォールトが起きる: プロファイラなしの実行でカーネル時間 {}（CPU 時間の {}）、マイナーページフォールト {} 回。バッファを保持する: 一度確保して再利用する（`out=` 引数、インプレース演算、事前確保）、または環境変数 `MALLOC_MMAP_THRESHOLD_={threshold}` で glibc に解放済みメモリを保持させる（常駐メモリが増える）。カーネル時間の半減で {} 中 約 {} の短縮。",
                    bytes(average),
                    num(top.allocations),
                    bytes(churn_bytes),
                    secs(cost.sys_s),
                    pct(cost.sys_share * 100.0),
                    num(cost.minor_faults),
                    secs(wall_s),
                    secs(gain_s)
                ),
            ),
            evidence: vec![
                format!("allocation sites {} {place}", run.run_id),
                format!("cpu {} sys minor faults", cost.run_id),
            ],
            sources: vec![
                crate::tables::cite_allocation_view(run, ArtifactKind::MemrayShortLivedCsv),
                cost.source.clone(),
            ],
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain_s, Some(wall_s))
        });
        // One finding per session: a second memray run of the command sees the same lines.
        break;
    }
    out
}

struct KernelCost {
    run_id: String,
    source: Source,
    sys_s: f64,
    sys_share: f64,
    /// CPU time over wall time: cores kept busy.
    cores: f64,
    minor_faults: u64,
}

fn kernel_cost(row: &CpuRow) -> Option<KernelCost> {
    let (user_s, sys_s) = (row.user_s?, row.sys_s?);
    let cpu_s = user_s + sys_s;
    (cpu_s > 0.0).then(|| KernelCost {
        run_id: row.run_id.clone(),
        source: row.sources.first().cloned().unwrap_or(Source {
            run_id: row.run_id.clone(),
            artifact: None,
        }),
        sys_s,
        sys_share: sys_s / cpu_s,
        cores: row.wall_s.filter(|w| *w > 0.0).map_or(1.0, |w| cpu_s / w),
        minor_faults: row.minor_faults.unwrap_or(0),
    })
}

/// A threshold above the buffers (twice their average, to a power of two, at least 64 MiB):
/// glibc then serves them from its heap and keeps the pages when they are freed.
fn suggested_threshold(average_bytes: u64) -> u64 {
    (average_bytes.saturating_mul(2))
        .next_power_of_two()
        .max(64 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_sits_above_the_buffers() {
        assert_eq!(suggested_threshold(42 << 20), 128 << 20);
        assert_eq!(suggested_threshold(200 << 10), 64 << 20);
    }
}
