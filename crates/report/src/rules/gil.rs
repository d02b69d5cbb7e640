//! Threads taking turns with the GIL: py-spy's `--gil` samples (asked for with the word `gil`)
//! are the thread holding the GIL at each tick, named by `--threads`. When it was held nearly
//! all the time, split among several threads, on a machine with CPUs to spare and a run that
//! kept about one core busy, Python ran on one core at a time however many threads there
//! were: threads do not make such work faster, processes (or code that releases the GIL) do.

use super::*;
use crate::fmt::{pct, secs, tr};
use system_profile_model::report::Confidence;

pub(super) fn gil_bound_threads(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let cpus = inputs.report.logical_cpus.unwrap_or(1);
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let (Some(stacks), Some(wall_s)) = (&run.metrics.stacks, run.wall_s) else {
            continue;
        };
        let Some(period_s) = stacks.sample_period_s else {
            continue;
        };
        if !stacks.gil_holders_only || wall_s <= 0.0 || cpus < 2 {
            continue;
        }
        // Each process has a GIL of its own: the one whose threads held theirs most is read.
        let mut by_process: Vec<(Option<u32>, u64)> = Vec::new();
        for t in &stacks.threads {
            match by_process.iter_mut().find(|(pid, _)| *pid == t.pid) {
                Some((_, n)) => *n += t.samples,
                None => by_process.push((t.pid, t.samples)),
            }
        }
        let Some(&(pid, held_samples)) = by_process.iter().max_by_key(|(_, n)| *n) else {
            continue;
        };
        let held_share = held_samples as f64 * period_s / wall_s;
        if held_share < GIL_HELD_SHARE {
            continue;
        }
        let turns: Vec<(&str, f64)> = stacks
            .threads
            .iter()
            .filter(|t| t.pid == pid)
            .map(|t| (t.thread.as_str(), t.samples as f64 / held_samples as f64))
            .filter(|(_, share)| *share >= GIL_THREAD_SHARE)
            .collect();
        if turns.len() < 2 {
            continue;
        }
        // The run's own CPU figure, where it has one: threads in code that releases the GIL
        // (NumPy, compression, I/O) keep more than one core busy, and then the GIL is not
        // what holds them back.
        let cores = inputs
            .report
            .cpu
            .iter()
            .find(|r| r.run_id == run.run_id)
            .and_then(|r| r.cpu_utilization_cores);
        if cores.is_some_and(|c| c > GIL_BOUND_MAX_CORES) {
            continue;
        }
        let parallel = turns.len().min(cpus as usize) as f64;
        // Half of what running the GIL-held work on `parallel` cores would save: processes
        // pay for starting and for moving data between them.
        let gain_s = wall_s * held_share * (1.0 - 1.0 / parallel) * 0.5;
        let split: Vec<String> = turns
            .iter()
            .take(4)
            .map(|(t, share)| format!("`{}` {}", thread_name(t), pct(share * 100.0)))
            .collect();
        let cores_note = cores
            .map(|c| {
                tr(
                    lang,
                    format!(", and the run kept {c:.2} cores busy"),
                    format!("、実行中の使用コアは {c:.2}"),
                )
            })
            .unwrap_or_default();
        out.push(Draft {
            title: tr(
                lang,
                format!("{} threads took turns with the GIL in {}: Python ran on one core at a time", turns.len(), run.run_id),
                format!("{} で {} 本のスレッドが GIL を交代で使った: Python は一度に 1 コアでしか動いていない", run.run_id, turns.len()),
            ),
            action: tr(
                lang,
                format!(
                    "py-spy's GIL samples (`--gil`) found the GIL held {} of {} by {} threads ({}){cores_note}, on a machine with {cpus} CPUs. Threads do not run Python code in parallel: run this work in processes (ProcessPoolExecutor, multiprocessing) or move its loop into code that releases the GIL (NumPy, a C extension). On {parallel:.0} cores, half the ideal gain is about {}.",
                    pct(held_share * 100.0), secs(wall_s), turns.len(), split.join(", "), secs(gain_s)
                ),
                format!(
                    "py-spy の GIL サンプル（`--gil`）では {} の {} の間 GIL が保持され、{} 本のスレッドが分け合っていた（{}）{cores_note}。マシンの CPU は {cpus} 個。スレッドでは Python コードは並列に動かない: この処理をプロセスで動かす（ProcessPoolExecutor、multiprocessing）か、ループを GIL を解放するコード（NumPy、C 拡張）に移す。{parallel:.0} コアなら理想の半分で約 {} の短縮。",
                    secs(wall_s), pct(held_share * 100.0), turns.len(), split.join("、"), secs(gain_s)
                ),
            ),
            evidence: vec![format!("stacks {}", run.run_id)],
            sources: vec![crate::tables::cite(run, system_profile_model::run::ArtifactKind::Folded)],
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain_s, Some(wall_s))
        });
    }
    out
}

/// py-spy's `thread (3365): ThreadPoolExecutor-0_0` as `ThreadPoolExecutor-0_0 (3365)`; a
/// thread without a name as py-spy wrote it.
fn thread_name(frame: &str) -> String {
    frame
        .strip_prefix("thread (")
        .and_then(|r| r.split_once("): "))
        .map_or_else(
            || frame.to_string(),
            |(tid, name)| format!("{name} ({tid})"),
        )
}
