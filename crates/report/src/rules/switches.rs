//! A context-switch storm: threads or processes of a started command that hand work to each
//! other in pieces so small that blocking and waking is most of what they do. The signs, all
//! from the same run without a profiler that changes the program (`time -v` over the tree):
//! many switches a second, little CPU time per switch, and a large kernel share of the CPU
//! time (futex and pipe wake-ups are kernel work). A service attached to is left out: its
//! switches follow its clients' requests by design.

use super::cpu::{run_of, waits_sampled};
use super::*;
use crate::fmt::{num, pct, secs, tr};
use system_profile_model::report::Confidence;
use system_profile_model::run::{Method, RunTarget};

pub(super) fn context_switch_storm(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for r in &inputs.report.cpu {
        let Some(run) = run_of(inputs, &r.run_id) else {
            continue;
        };
        // Only the unprofiled run's switches are the program's: a tracer (strace, memray,
        // cProfile) changes how often it blocks. py-spy observing by PID adds about 90
        // voluntary switches a second (BENCHMARKS.md), far under the threshold.
        if run.profiler != Method::Measure || !matches!(run.target, RunTarget::Command { .. }) {
            continue;
        }
        let (Some(wall_s), Some(user_s), Some(sys_s), Some(voluntary), Some(involuntary)) = (
            r.wall_s,
            r.user_s,
            r.sys_s,
            r.voluntary_ctx_switches,
            r.involuntary_ctx_switches,
        ) else {
            continue;
        };
        let switches = voluntary + involuntary;
        let cpu_s = user_s + sys_s;
        if wall_s <= 0.0 || cpu_s <= 0.0 || switches < SWITCH_STORM_MIN {
            continue;
        }
        let per_s = switches as f64 / wall_s;
        let cpu_per_switch_s = cpu_s / switches as f64;
        let sys_share = sys_s / cpu_s;
        if per_s < SWITCH_STORM_PER_S
            || cpu_per_switch_s > SWITCH_STORM_MAX_CPU_PER_SWITCH_S
            || sys_share < SWITCH_STORM_SYS_SHARE
        {
            continue;
        }
        let waits = waits_sampled(inputs, 3);
        let sampled = if waits.is_empty() {
            String::new()
        } else {
            tr(
                lang,
                format!(" Sampled while blocked: {}.", waits.join(", ")),
                format!(" 待機中のサンプル: {}。", waits.join("、")),
            )
        };
        let cores = cpu_s / wall_s;
        // Half the kernel's time, as wall time: conservative, since each handoff also costs
        // user time (pickling, queue bookkeeping) and a wake-up latency that batching removes
        // too (ProcessPoolExecutor.map over 50,000 tiny tasks: 20.3 s with the default
        // chunksize of 1, 0.2 s with 500; its sys time was 5.8 s).
        let gain_s = sys_s * 0.5 / cores.max(1.0);
        let micros = cpu_per_switch_s * 1e6;
        out.push(Draft {
            title: tr(
                lang,
                format!("Hand work over in larger pieces: {} context switches a second in {}", num(per_s as u64), r.run_id),
                format!("作業をより大きな単位で受け渡す: {} で毎秒 {} 回のコンテキストスイッチ", r.run_id, num(per_s as u64)),
            ),
            action: tr(
                lang,
                format!(
                    "Over {} ({}) its threads and processes switched {} times ({} voluntary: blocking and waking each other; {} involuntary), {micros:.0} µs of CPU time per switch, {} of the CPU time in the kernel ({} sys): work is handed between them in pieces too small to pay for the handoff. Hand over batches (a chunksize for Pool.map/imap and ProcessPoolExecutor.map, whose default is 1; lists rather than items through a queue), block instead of polling (no sleep(0) or tiny timeouts), and keep busy threads no more than the CPUs. Halving the kernel's time saves about {} of {}.{sampled}",
                    secs(wall_s), r.covers.text, num(switches), num(voluntary), num(involuntary), pct(sys_share * 100.0), secs(sys_s), secs(gain_s), secs(wall_s)
                ),
                format!(
                    "{}（{}）の間にスレッドとプロセスが {} 回切り替わった（自発的 {} 回: 互いにブロックと起床を繰り返す。非自発的 {} 回）。切り替え 1 回あたりの CPU 時間 {micros:.0} µs、CPU 時間の {} がカーネル内（sys {}）: 受け渡す作業の単位が小さすぎて受け渡しの費用に見合わない。まとめて渡す（Pool.map/imap や ProcessPoolExecutor.map の chunksize。既定は 1。キューには要素でなくリストを）、ポーリングせずにブロックする（sleep(0) や極短いタイムアウトをやめる）、忙しいスレッドを CPU 数以下にする。カーネル時間の半減で {} 中 約 {} の短縮。{sampled}",
                    secs(wall_s), r.covers.text, num(switches), num(voluntary), num(involuntary), pct(sys_share * 100.0), secs(sys_s), secs(wall_s), secs(gain_s)
                ),
            ),
            evidence: vec![format!("cpu {}", r.run_id)],
            sources: r.sources.clone(),
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain_s, Some(wall_s))
        });
    }
    out
}
