//! Rules on CPU time: hot functions, waiting, contention for CPUs, syscalls.

use super::*;
use crate::fmt::{num, pct, secs, tr};
use system_profile_model::metrics::CallVia;
use system_profile_model::report::{Confidence, CoverageScope, CpuRow, Hotspot, ProgramCall};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::{RunRecord, RunTarget};

pub(super) use crate::call_paths::user_code;

/// cProfile's own time of a function at least this share of the sampled self time: the time
/// is the function's Python, not C functions it calls (cProfile times those apart).
const CPROFILE_AGREES_SHARE: f64 = 0.7;

pub(super) fn hot_python_function(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.hotspots else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for h in table.rows.iter().filter(|h| h.kind == "python") {
        let Some(file) = h.file.as_deref().filter(|f| user_code(f)) else {
            continue;
        };
        if h.self_percent < HOT_FUNCTION_SELF_PERCENT {
            continue;
        }
        let Some(self_s) = h.self_s else {
            continue;
        };
        let run = h.self_s_run.as_deref().and_then(|id| run_of(inputs, id));
        let wall = h.self_s_run.as_deref().and_then(|run| wall_of(inputs, run));
        if self_s < HOT_FUNCTION_MIN_SELF_S
            || wall.is_some_and(|w| self_s < HOT_FUNCTION_WALL_SHARE * w)
        {
            continue;
        }
        // A process attached to for a window (a service): seconds of a window mean nothing,
        // the share of the CPU it used does.
        let attached = run.is_some_and(|r| matches!(r.target, RunTarget::Pid { .. }));
        // A started command: its own time scaled to the run without the profiler, when the
        // session has one (a deterministic profiler inflates both the time and the wall).
        let basis = run.and_then(|r| unprofiled_wall(inputs, r));
        let (self_s, wall) = match (basis, wall) {
            (Some((b, _)), Some(w)) if w > 0.0 && b < w => (self_s * b / w, Some(b)),
            _ => (self_s, wall),
        };
        let agreeing: Vec<String> = h
            .evidence
            .iter()
            .filter_map(|e| e.self_percent.map(|p| format!("{} {}", e.tool, pct(p))))
            .collect();
        let line = h.line.map(|l| format!(":{l}")).unwrap_or_default();
        let hot_line = h
            .evidence
            .iter()
            .find_map(|e| Some((e.tool.clone(), e.hot_line?, e.hot_line_percent?)));
        // Halving a function's own time is what a rewrite of its inner loop (vectorising,
        // caching, a better algorithm) typically gives; the estimate says so.
        let gain_s = self_s * 0.5;
        let saving = match wall.filter(|_| !attached) {
            Some(w) => tr(
                lang,
                format!(
                    "; halving its own time saves about {} of {}",
                    secs(gain_s),
                    secs(w)
                ),
                format!(
                    "。自身の時間を半減すれば {} 中 約 {} の短縮",
                    secs(w),
                    secs(gain_s)
                ),
            ),
            None => tr(
                lang,
                format!("; halving its own time saves about {}", secs(gain_s)),
                format!("。自身の時間を半減すれば約 {} の短縮", secs(gain_s)),
            ),
        };
        let saving = if attached {
            tr(
                lang,
                format!(
                    "; halving its own time frees about {} of the CPU the process used in the window",
                    pct(h.self_percent * 0.5)
                ),
                format!(
                    "。自身の時間を半減すれば観測中のプロセスの CPU 時間の約 {} が空く",
                    pct(h.self_percent * 0.5)
                ),
            )
        } else {
            saving
        };
        // cProfile's exact call count says which change fits: many short calls cost by their
        // number, a few long ones by their body.
        let calls = h.evidence.iter().find_map(|e| e.calls).filter(|n| *n > 0);
        let how = match calls {
            Some(n) if n >= MANY_CALLS && self_s / (n as f64) < SHORT_CALL_S => tr(
                lang,
                format!(
                    ". cProfile counted {} calls, about {} of its own time each: the cost is how often it runs. Call it less: hoist it out of the loop, cache its results (`functools.cache`), or hand it the work in fewer, larger calls.",
                    num(n),
                    secs(self_s / n as f64)
                ),
                format!(
                    "。cProfile の計数で {} 回、1 回あたり自身の時間は約 {}: コストは呼び出し回数。呼び出しを減らす（ループの外へ出す、結果をキャッシュする（`functools.cache`）、まとめて少ない回数で渡す）。",
                    num(n),
                    secs(self_s / n as f64)
                ),
            ),
            Some(n) if self_s / (n as f64) >= LONG_CALL_S => tr(
                lang,
                format!(
                    ". cProfile counted {} call(s), about {} each: the time is in its body. Vectorise or cache the work of its inner loop, or use a better algorithm.",
                    num(n),
                    secs(self_s / n as f64)
                ),
                format!(
                    "。cProfile の計数で {} 回、1 回あたり約 {}: 時間は本体の中。内側のループをベクトル化・キャッシュするか、より良いアルゴリズムにする。",
                    num(n),
                    secs(self_s / n as f64)
                ),
            ),
            _ => tr(
                lang,
                ": vectorise or cache the work of its inner loop, or call it less.".to_string(),
                "。内側のループをベクトル化・キャッシュするか、呼び出しを減らす。".to_string(),
            ),
        };
        let line_note = match hot_line {
            Some((tool, line, p)) => tr(
                lang,
                format!(" Start at line {line}: {} of its time ({tool}).", pct(p)),
                format!(" まず {line} 行目から（関数時間の {}、{tool}）。", pct(p)),
            ),
            None => String::new(),
        };
        // Sampled without native frames, a C call's time (a database driver, compression)
        // is the line's own: the advice may be about Python that barely runs. cProfile times
        // each C function apart, so its own time agreeing settles it.
        let cprofile_agrees = h.evidence.iter().any(|e| {
            e.tool == "cprofile"
                && e.self_percent
                    .is_some_and(|p| p >= CPROFILE_AGREES_SHARE * h.self_percent)
        });
        let without_native = !cprofile_agrees
            && run
                .filter(|r| r.stacks_method() == system_profile_model::run::Method::PySpyRecord)
                .and_then(|r| r.metrics.stacks.as_ref())
                .is_some_and(|s| !s.has_native_frames());
        let line_note = if without_native {
            line_note
                + &tr(
                    lang,
                    " The samples had no native frames: time in a C extension this code calls (a database driver, compression, a parser) counts as its own here; name `native` in the target to tell them apart.",
                    " サンプルにネイティブフレームがない: このコードが呼ぶ C 拡張（データベースドライバ、圧縮、パーサ）の時間もここでは自身の時間に数えられる。区別するにはターゲットに `native` を付ける。",
                )
        } else {
            line_note
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("Speed up `{}` in {file}{line}", h.function),
                format!("{file}{line} の `{}` を高速化", h.function),
            ),
            action: tr(
                lang,
                format!(
                    "Its own code holds {} of the CPU samples ({}){saving}{how}{line_note}",
                    pct(h.self_percent),
                    agreeing.join(", ")
                ),
                format!(
                    "この関数自身のコードが CPU サンプルの {} を占める（{}）{saving}{how}{line_note}",
                    pct(h.self_percent),
                    agreeing.join(", ")
                ),
            ),
            evidence: vec![format!("hotspots {file}{line} {}", h.function)],
            sources: h.evidence.iter().map(|e| e.source.clone()).collect(),
            confidence: if agreeing.len() >= 2 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            ..if attached {
                Draft::saves_cpu(h.self_percent * 0.5)
            } else {
                Draft::saves_time(gain_s, wall)
            }
        });
    }
    out
}

/// Library code the user cannot edit, reached mostly through one call of theirs: the advice
/// is about that call (call it less, batch it, another API), with the library's frames as
/// evidence. Grouped by call, so a call leading to several library hotspots is one finding.
pub(super) fn hot_library_call(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.hotspots else {
        return Vec::new();
    };
    // (call, its rows' self percent reached through it, each row's share).
    let mut calls: Vec<(&ProgramCall, Vec<(&Hotspot, f64)>)> = Vec::new();
    // Native rows reached from the program are `hot_native_call`'s: summed by the call, as
    // one C call spreads over many C functions.
    for h in table.rows.iter().filter(|h| h.kind == "python") {
        let Some(c) = h.called_from.as_ref().filter(|c| c.via == CallVia::Call) else {
            continue;
        };
        let through = h.self_percent * c.share_percent / 100.0;
        match calls
            .iter_mut()
            .find(|(k, _)| (&k.file, k.line, &k.function) == (&c.file, c.line, &c.function))
        {
            Some((_, rows)) => rows.push((h, through)),
            None => calls.push((c, vec![(h, through)])),
        }
    }
    let mut out = Vec::new();
    for (call, rows) in calls {
        // One library function must carry the finding: a driver call (`trainer.fit`,
        // `app.run`) spreads its time over many small ones, and "call it less" says nothing.
        let Some(&(lead, lead_percent)) = rows.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            continue;
        };
        if lead_percent < HOT_FUNCTION_SELF_PERCENT {
            continue;
        }
        let percent: f64 = rows.iter().map(|(_, p)| p).sum();
        let run = run_of(inputs, &call.run_id);
        let attached = run.is_some_and(|r| matches!(r.target, RunTarget::Pid { .. }));
        let wall = run.and_then(|r| unprofiled_wall(inputs, r).map(|(w, _)| w).or(r.wall_s));
        let spent_s = wall.map(|w| w * percent / 100.0);
        if spent_s.is_some_and(|s| s < HOT_FUNCTION_MIN_SELF_S) {
            continue;
        }
        let place = crate::fmt::at(&call.file, call.line);
        let libs: Vec<String> = rows
            .iter()
            .map(|(h, p)| {
                format!(
                    "`{}` ({}) {}",
                    h.function,
                    h.file.as_deref().unwrap_or("native"),
                    pct(*p)
                )
            })
            .collect();
        // Halving the calls (or their size) halves the library time they cause.
        let gain_percent = percent * 0.5;
        let saving = match (spent_s.filter(|_| !attached), wall) {
            (Some(s), Some(w)) => tr(
                lang,
                format!(
                    "; halving that work saves about {} of {}",
                    secs(s * 0.5),
                    secs(w)
                ),
                format!(
                    "。その処理を半減すれば {} 中 約 {} の短縮",
                    secs(w),
                    secs(s * 0.5)
                ),
            ),
            _ => String::new(),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!(
                    "Make fewer or cheaper calls to `{}` from `{}` ({place})",
                    lead.function, call.function
                ),
                format!(
                    "{place} の `{}` から `{}` への呼び出しを減らすか軽くする",
                    call.function, lead.function
                ),
            ),
            action: tr(
                lang,
                format!(
                    "{} of the CPU samples are library code reached through this call of yours{saving}. The library is not yours to edit; the call is: make it less often, on larger batches, or through a faster API. Library frames: {}.",
                    pct(percent),
                    libs.join(", ")
                ),
                format!(
                    "CPU サンプルの {} は、この呼び出しから到達したライブラリのコード{saving}。ライブラリは編集できないが呼び出しは変えられる: 回数を減らす、まとめて呼ぶ、より速い API を使う。ライブラリのフレーム: {}。",
                    pct(percent),
                    libs.join(", ")
                ),
            ),
            evidence: std::iter::once(format!("hotspots {place} {}", call.function))
                .chain(rows.iter().map(|(h, _)| {
                    format!(
                        "hotspots {} {}",
                        h.file.as_deref().unwrap_or("native"),
                        h.function
                    )
                }))
                .collect(),
            sources: {
                let all = rows
                    .iter()
                    .flat_map(|(h, _)| h.evidence.iter().map(|e| e.source.clone()));
                let same_run: Vec<Source> =
                    all.clone().filter(|s| s.run_id == call.run_id).collect();
                if same_run.is_empty() {
                    all.collect()
                } else {
                    same_run
                }
            },
            confidence: Confidence::Medium,
            ..match (attached, spent_s) {
                (false, Some(s)) => Draft::saves_time(s * 0.5, wall),
                _ => Draft::saves_cpu(gain_percent),
            }
        });
    }
    out
}

/// The run a row or hotspot comes from.
pub(super) fn run_of<'a>(inputs: &'a Inputs, run_id: &str) -> Option<&'a RunRecord> {
    inputs.session.runs.iter().find(|r| r.run_id == run_id)
}

/// The wall time of the same command run without a profiler that slows it (`time -v`, the
/// /proc sampler), the shortest if several, and its run.
pub(super) fn unprofiled_wall<'a>(inputs: &'a Inputs, run: &RunRecord) -> Option<(f64, &'a str)> {
    unprofiled_wall_in(inputs.session, run)
}

/// `unprofiled_wall` from the session alone (the tables have no report yet).
pub(crate) fn unprofiled_wall_in<'a>(
    session: &'a Session,
    run: &RunRecord,
) -> Option<(f64, &'a str)> {
    use system_profile_model::run::Method;
    if !matches!(run.target, RunTarget::Command { .. }) {
        return None;
    }
    session
        .runs
        .iter()
        .filter(|r| {
            r.target == run.target && r.status == system_profile_model::run::RunStatus::Completed
        })
        .filter(|r| {
            matches!(
                r.profiler,
                Method::Measure | Method::TimeV | Method::ProcfsSampler
            )
        })
        .filter_map(|r| Some((r.wall_s?, r.run_id.as_str())))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// Whether a row's figures cover what a rule about "the program" needs: the whole tree, or a
/// set of processes that the session shows has no other process beside it.
fn covers_the_program(inputs: &Inputs, row: &CpuRow) -> bool {
    match row.covers.scope {
        CoverageScope::Tree => true,
        CoverageScope::Machine => false,
        CoverageScope::Processes => {
            let counted = row.covers.processes.unwrap_or(1);
            !inputs.report.cpu.iter().any(|other| {
                other.covers.scope == CoverageScope::Tree
                    && other.covers.processes.is_some_and(|n| n > counted)
            })
        }
    }
}

pub(super) fn waiting_process(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for r in &inputs.report.cpu {
        let (Some(wall), Some(cores)) = (r.wall_s, r.cpu_utilization_cores) else {
            continue;
        };
        // Only a started command's wall time is a duration the user waits for; a service
        // attached to waits for its clients by design.
        let started = run_of(inputs, &r.run_id)
            .is_some_and(|run| matches!(run.target, RunTarget::Command { .. }));
        if !started || wall < WAITING_MIN_WALL_S || !covers_the_program(inputs, r) {
            continue;
        }
        // What it wanted to run: on a CPU, plus runnable on a run queue. Only the rest is
        // waiting (blocked: I/O, sleeps, locks).
        let wanted = cores + r.run_queue_cores.unwrap_or(0.0);
        if wanted >= WAITING_CORES {
            continue;
        }
        // Without the run queue's figure, the switches must say it blocked: a program that
        // was preempted more often than it gave the CPU up was not waiting.
        if r.run_queue_cores.is_none()
            && !matches!(
                (r.voluntary_ctx_switches, r.involuntary_ctx_switches),
                (Some(v), Some(i)) if v >= i
            )
        {
            continue;
        }
        let blocked_share = (1.0 - wanted).max(0.0);
        let waiting_s = wall * blocked_share;
        // What it waited on: strace's top syscall, and the hotspots sampled while blocking.
        let top = inputs
            .session
            .runs
            .iter()
            .filter_map(|run| run.metrics.syscalls.as_ref())
            .find_map(|s| s.rows.first().map(|row| (row.syscall.clone(), row.calls)));
        let waits_in = waits_sampled(inputs, 3);
        let on = match (&top, waits_in.is_empty()) {
            (Some((call, n)), _) => tr(
                lang,
                format!(
                    " strace's top syscall by time is `{call}` ({} calls).",
                    num(*n)
                ),
                format!(
                    " strace で時間最大のシステムコールは `{call}`（{} 回）。",
                    num(*n)
                ),
            ),
            (None, false) => tr(
                lang,
                format!(" Sampled while blocked: {}.", waits_in.join(", ")),
                format!(" 待機中のサンプル: {}。", waits_in.join("、")),
            ),
            (None, true) => tr(
                lang,
                " Run strace_c or py_spy_record with idle: true to see on what.",
                " 何を待っているかは strace_c か idle: true の py_spy_record で確認。",
            ),
        };
        let queue_note = match r.run_queue_s {
            Some(q) => tr(
                lang,
                format!(", {} runnable but not running", secs(q)),
                format!("、実行可能だが CPU 待ち {}", secs(q)),
            ),
            None => String::new(),
        };
        let gain = waiting_s * 0.5;
        out.push(Draft {
            title: tr(
                lang,
                format!("Run {} is blocked {} of its wall time", r.run_id, pct(blocked_share * 100.0)),
                format!("{} は実時間の {} をブロック（待機）している", r.run_id, pct(blocked_share * 100.0)),
            ),
            action: tr(
                lang,
                format!(
                    "Only {cores:.2} cores were busy over {} ({}{queue_note}; {} voluntary, {} involuntary context switches): the program blocks on I/O, sleeps, locks or a remote service. Overlap the waits (threads, asyncio, prefetching) or batch the I/O; overlapping half of the {} saves about {}.{on}",
                    secs(wall), r.covers.text, num(r.voluntary_ctx_switches.unwrap_or(0)), num(r.involuntary_ctx_switches.unwrap_or(0)), secs(waiting_s), secs(gain)
                ),
                format!(
                    "{} の間、使われたのは平均 {cores:.2} コアのみ（{}{queue_note}、自発的コンテキストスイッチ {} 回、非自発的 {} 回）: I/O、sleep、ロック、外部サービスで止まっている。待ちを重ねる（スレッド、asyncio、プリフェッチ）か I/O をまとめる。{} の半分を重ねれば約 {} 短縮。{on}",
                    secs(wall), r.covers.text, num(r.voluntary_ctx_switches.unwrap_or(0)), num(r.involuntary_ctx_switches.unwrap_or(0)), secs(waiting_s), secs(gain)
                ),
            ),
            evidence: vec![format!("cpu {}", r.run_id)],
            sources: r.sources.clone(),
            confidence: if top.is_some() || !waits_in.is_empty() {
                Confidence::Medium
            } else {
                Confidence::Low
            },
            ..Draft::saves_time(gain, Some(wall))
        });
    }
    out
}

/// The first `n` hotspots sampled while blocked, in words: the call waited in, the function
/// that made it and its share.
pub(super) fn waits_sampled(inputs: &Inputs, n: usize) -> Vec<String> {
    inputs
        .report
        .hotspots
        .iter()
        .flat_map(|t| t.rows.iter())
        .filter_map(|h| {
            Some(format!(
                "`{}` in `{}` {}",
                h.waits_in.as_deref()?,
                h.function,
                pct(h.self_percent)
            ))
        })
        .take(n)
        .collect()
}

/// A function of the user's code sampled mostly inside one blocking call (a commit, a lock,
/// a socket read, a sleep) of a started command: the call is the cost, and the advice is
/// to make fewer of them or take them off the path, never to speed up the function.
pub(super) fn waiting_call(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.hotspots else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for h in table.rows.iter().filter(|h| h.kind == "waiting") {
        let (Some(call), Some(file)) = (h.waits_in.as_deref(), h.file.as_deref()) else {
            continue;
        };
        if !user_code(file) || h.self_percent < WAITING_CALL_PERCENT {
            continue;
        }
        let Some(run) = h.self_s_run.as_deref().and_then(|id| run_of(inputs, id)) else {
            continue;
        };
        // A service waits for its clients by design.
        if !matches!(run.target, RunTarget::Command { .. }) {
            continue;
        }
        let wall = unprofiled_wall(inputs, run).map(|(w, _)| w).or(run.wall_s);
        let Some(wall) = wall else {
            continue;
        };
        let blocked_s = wall * h.self_percent / 100.0;
        let gain = blocked_s * 0.5;
        let line = h.line.map(|l| format!(":{l}")).unwrap_or_default();
        let how = match call {
            "commit" => tr(
                lang,
                "commit once per batch of rows, not once per row (each commit waits for the disk)",
                "行ごとではなくまとめてコミットする（コミットごとにディスクを待つ）",
            ),
            "acquire" => tr(
                lang,
                "hold the lock for less (move the slow call out of it) or shard it",
                "ロックの保持を短くする（遅い処理をロックの外へ）か分割する",
            ),
            "sleep" => tr(
                lang,
                "sleep less, or wait on an event instead of polling",
                "sleep を減らすか、ポーリングをやめてイベントで待つ",
            ),
            _ => tr(
                lang,
                "make fewer such calls (batch, buffer) or overlap them (threads, asyncio)",
                "呼び出しを減らす（まとめる、バッファリング）か重ねる（スレッド、asyncio）",
            ),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("`{}` waits in `{call}` {} of the samples ({file}{line})", h.function, pct(h.self_percent)),
                format!("`{}` は `{call}` で待機: サンプルの {}（{file}{line}）", h.function, pct(h.self_percent)),
            ),
            action: tr(
                lang,
                format!(
                    "Its samples are inside a blocking `{call}`, not its own code: about {} of the {} run. Speeding the function up would change nothing; {how}. Halving the time blocked saves about {}.",
                    secs(blocked_s), secs(wall), secs(gain)
                ),
                format!(
                    "サンプルはこの関数自身のコードではなく、ブロックする `{call}` の中にある（{} の実行のうち約 {}）。関数を速くしても変わらない。{how}。待ち時間を半減すれば約 {} 短縮。",
                    secs(wall), secs(blocked_s), secs(gain)
                ),
            ),
            evidence: vec![format!("hotspots {file}{line} {}", h.function)],
            sources: h.evidence.iter().map(|e| e.source.clone()).collect(),
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain, Some(wall))
        });
    }
    out
}

/// The machine was busy: the program was runnable and not scheduled for a large share of
/// what it wanted to run. Not a defect of the program, and it must not read as waiting.
pub(super) fn cpu_contention(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for r in &inputs.report.cpu {
        let (Some(wall), Some(cores), Some(queued_s), Some(queued_cores)) = (
            r.wall_s,
            r.cpu_utilization_cores,
            r.run_queue_s,
            r.run_queue_cores,
        ) else {
            continue;
        };
        let wanted = cores + queued_cores;
        if wanted <= 0.0 || queued_s < CONTENTION_MIN_S {
            continue;
        }
        let share = queued_cores / wanted;
        if share < CONTENTION_SHARE {
            continue;
        }
        let cpus = inputs
            .report
            .logical_cpus
            .map(|n| {
                tr(
                    lang,
                    format!(" of the machine's {n} CPUs"),
                    format!("（論理 CPU {n} 個）"),
                )
            })
            .unwrap_or_default();
        // The wall time a free CPU would have given back: the queued share of it.
        let lost_s = wall * share;
        out.push(Draft {
            title: tr(
                lang,
                format!("The machine was busy: {} of what {} wanted to run waited for a CPU", pct(share * 100.0), r.run_id),
                format!("マシンが混んでいた: {} が実行したかった時間の {} は CPU 待ち", r.run_id, pct(share * 100.0)),
            ),
            action: tr(
                lang,
                format!(
                    "Over {} ({}) it ran {cores:.2} cores and was runnable but not running another {queued_cores:.2}{cpus} ({} on run queues, schedstat; {} involuntary vs {} voluntary context switches). Other work took its CPUs: the timings here are slower than the program is; profile on an idle machine, reserve CPUs (taskset, a cgroup cpuset), or run fewer processes and threads than CPUs. With the CPUs free, about {} of the wall time would go.",
                    secs(wall), r.covers.text, secs(queued_s), num(r.involuntary_ctx_switches.unwrap_or(0)), num(r.voluntary_ctx_switches.unwrap_or(0)), secs(lost_s)
                ),
                format!(
                    "{}（{}）の間、{cores:.2} コア分実行し、さらに {queued_cores:.2} コア分は実行可能なのに CPU を待っていた{cpus}（run queue 上 {}、schedstat。非自発的コンテキストスイッチ {} 回、自発的 {} 回）。他の処理に CPU を取られており、ここでの時間は実力より遅い。空いたマシンで測る、CPU を確保する（taskset、cgroup cpuset）、CPU 数より少ないプロセス・スレッドで動かす。CPU が空いていれば実時間の約 {} が減る。",
                    secs(wall), r.covers.text, secs(queued_s), num(r.involuntary_ctx_switches.unwrap_or(0)), num(r.voluntary_ctx_switches.unwrap_or(0)), secs(lost_s)
                ),
            ),
            evidence: vec![format!("cpu {}", r.run_id)],
            sources: r.sources.clone(),
            confidence: Confidence::High,
            ..Draft::saves_time(lost_s, Some(wall))
        });
    }
    out
}

pub(super) fn syscall_heavy(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(s) = &run.metrics.syscalls else {
            continue;
        };
        let Some(top) = s.rows.first() else {
            continue;
        };
        // strace stops the target at every call, so its own wall time is inflated; the same
        // target run without it (time -v) gives the real wall, user and sys times.
        let unstraced = inputs.session.runs.iter().find_map(|r| {
            let t = r.metrics.time_v.as_ref()?;
            (r.target == run.target).then_some((r.run_id.as_str(), t))
        });
        let (wall, sys_share, basis) = match unstraced {
            Some((id, t)) => (
                t.wall_s,
                (t.user_s + t.sys_s > 0.0).then(|| t.sys_s / (t.user_s + t.sys_s)),
                id.to_string(),
            ),
            None => (run.wall_s.unwrap_or(0.0), None, run.run_id.clone()),
        };
        if wall <= 0.0 {
            continue;
        }
        let by_time = s.total_seconds >= SYSCALL_SHARE * wall;
        let by_cpu = s.total_calls >= SYSCALL_MIN_CALLS
            && sys_share.is_some_and(|share| share >= SYS_SHARE_OF_CPU);
        if !by_time && !by_cpu {
            continue;
        }
        let sys_s = unstraced.map(|(_, t)| t.sys_s);
        // The kernel time the calls cost without strace (sys), else strace's own count.
        let cost = sys_s.unwrap_or(top.seconds);
        let gain = cost * 0.5;
        let why = match (sys_s, sys_share) {
            (Some(sys), Some(share)) => tr(
                lang,
                format!(
                    "{} of its CPU time is in the kernel ({} sys, {basis})",
                    pct(share * 100.0),
                    secs(sys)
                ),
                format!(
                    "CPU 時間の {} がカーネル内（sys {}、{basis}）",
                    pct(share * 100.0),
                    secs(sys)
                ),
            ),
            _ => tr(
                lang,
                format!("syscalls took {} of {}", secs(s.total_seconds), secs(wall)),
                format!(
                    "システムコールが {} 中 {}",
                    secs(wall),
                    secs(s.total_seconds)
                ),
            ),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("Fewer `{}` calls: {why}", top.syscall),
                format!("`{}` 呼び出しを減らす: {why}", top.syscall),
            ),
            action: tr(
                lang,
                format!(
                    "`{}` ran {} times ({} of the traced syscall time). Buffer or batch it (larger reads and writes, fewer flushes, no per-item stat/open); halving its cost saves about {}.",
                    top.syscall, num(top.calls), pct(top.time_percent), secs(gain)
                ),
                format!(
                    "`{}` が {} 回（トレースしたシステムコール時間の {}）。バッファリングやまとめ書きで回数を減らす（大きな read/write、flush を減らす、項目ごとの stat/open をやめる）。コストを半減すれば約 {} 短縮。",
                    top.syscall, num(top.calls), pct(top.time_percent), secs(gain)
                ),
            ),
            evidence: vec![format!("syscalls {} {}", run.run_id, top.syscall), format!("cpu {basis}")],
            sources: vec![crate::tables::cite(run, ArtifactKind::StraceC)],
            confidence: Confidence::Low,
            ..Draft::saves_time(gain, Some(wall))
        });
    }
    out
}
