//! torch's operators on the CPU: a training on the CPU spends its time in them, where a Python
//! sampler sees only the library call that reached them. Operators that share one large
//! dimension in their input shapes are one layer's work (an output layer over a vocabulary
//! shows as `addmm` `[700,200], [200,15001]`, `_log_softmax` `[700,15001]` and their
//! gradients): the finding is that dimension, since every operator it enters grows with it.

use super::cpu::unprofiled_wall;
use super::*;
use crate::cpu_table::measured;
use crate::fmt::{pct, secs, tr};
use crate::tables::cite;
use system_profile_model::metrics::CpuOp;
use system_profile_model::report::Confidence;
use system_profile_model::run::ArtifactKind;

/// A dimension this large in an operator's input shapes can be a layer's width, a vocabulary
/// or a class count: sizes below it are batch, sequence and hidden sizes of every model.
pub const TORCH_DIM_MIN: u64 = 4096;
/// Operators over one such dimension holding at least this share of the operators' self time.
pub const TORCH_DIM_SHARE: f64 = 40.0;
/// Without a shared dimension, one operator holding at least this share.
pub const TORCH_OP_SHARE: f64 = 30.0;
/// Nor when the operators' time is under this share of the run: start-up dominates.
pub const TORCH_OPS_WALL_SHARE: f64 = 0.3;
/// Nor when the traced run took more than this many times the run without a profiler: the
/// shares are then the disturbance's. torch.profiler costs a CPU training about 1.1× (10.1 s
/// against 9.1 s on word_language_model); beside other work the same trace took 3.3× with
/// oneDNN's LSTM kernels at 35% instead of 6% (their OpenMP threads spin for busy CPUs).
pub const TORCH_DISTURBED_RATIO: f64 = 2.0;

/// How many times an unprofiled step a traced step took, read within the run where its
/// schedule left steps before the profiler woke; else how many times the run without a
/// profiler the traced run took, when the session has one and the traced run was not ended
/// after its window (its wall is then start-up and a few steps).
pub(crate) fn slowdown(
    session: &Session,
    run: &system_profile_model::run::RunRecord,
) -> Option<f64> {
    if let Some(w) = &run.metrics.step_window {
        if let Some(x) = w.slowdown() {
            return Some(x);
        }
        if !w.after_trace.is_run_on() {
            return None;
        }
    }
    let (unprofiled_s, _) = super::cpu::unprofiled_wall_in(session, run)?;
    Some(run.wall_s? / unprofiled_s.max(1e-9))
}

/// "over steps 5-7 " when the trace holds a window of steps, else nothing.
fn over_steps(lang: Lang, run: &system_profile_model::run::RunRecord) -> String {
    match &run.metrics.step_window {
        Some(w) => tr(
            lang,
            format!("steps {}-{}, ", w.first_traced_step, w.last_traced_step),
            format!("ステップ {}-{}、", w.first_traced_step, w.last_traced_step),
        ),
        None => String::new(),
    }
}

/// The dimensions of an operator's input shapes, as shown (`[700,200], [200,15001]`).
fn dims(shapes: &str) -> Vec<u64> {
    shapes
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|d| d.parse().ok())
        .collect()
}

/// The large dimension whose operators hold the most self time: the dimension, its share (of
/// each operator, only the shapes listed that have it: torch's table by input shape) and those
/// operators, most self time first.
fn shared_dimension(ops: &[CpuOp]) -> Option<(u64, f64, Vec<&CpuOp>)> {
    let mut candidates: Vec<u64> = ops
        .iter()
        .flat_map(|o| o.shapes.iter())
        .flat_map(|s| dims(s))
        .filter(|d| *d >= TORCH_DIM_MIN)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .map(|d| {
            let share_over = |o: &CpuOp| -> f64 {
                o.shapes
                    .iter()
                    .zip(&o.shape_self_percent)
                    .filter(|(s, _)| dims(s).contains(&d))
                    .map(|(_, p)| p)
                    .sum()
            };
            let over: Vec<&CpuOp> = ops.iter().filter(|o| share_over(o) >= 1.0).collect();
            (d, over.iter().map(|o| share_over(o)).sum::<f64>(), over)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn is_matrix_product(name: &str) -> bool {
    [
        "addmm", "::mm", "bmm", "matmul", "linear", "baddbmm", "conv",
    ]
    .iter()
    .any(|k| name.contains(k))
}

fn shown(o: &CpuOp) -> String {
    match o.shapes.first() {
        Some(s) => format!("`{}` {} ({})", o.name, pct(o.self_percent), s),
        None => format!("`{}` {}", o.name, pct(o.self_percent)),
    }
}

pub(super) fn hot_torch_operators(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in inputs.session.runs.iter().filter(|r| measured(r)) {
        let Some(trace) = &run.metrics.trace else {
            continue;
        };
        // On a GPU the host's operator time is launch work: other rules read the kernels.
        if !trace.kernels.is_empty() {
            continue;
        }
        // Only torch's compute operators: a collective's time (`gloo:all_reduce`) is waiting
        // for the other ranks, and labels and autograd nodes hold their operators.
        let ops: Vec<CpuOp> = trace
            .cpu_ops
            .iter()
            .filter(|o| o.name.starts_with("aten::"))
            .cloned()
            .collect();
        let Some(first) = ops.first() else {
            continue;
        };
        let Some(run_wall_s) = run.wall_s.filter(|w| *w > 0.0) else {
            continue;
        };
        if slowdown(inputs.session, run).is_some_and(|x| x > TORCH_DISTURBED_RATIO) {
            continue;
        }
        let ops_s = first.self_us * 100.0 / first.self_percent.max(1e-9) / 1e6;
        // A window's operators ran within its steps; the rest of the run was not traced.
        let window = run.metrics.step_window.as_ref();
        let traced_wall_s = window.and_then(|w| w.traced_s()).unwrap_or(run_wall_s);
        if ops_s < TORCH_OPS_WALL_SHARE * traced_wall_s {
            continue;
        }
        let wall_s = unprofiled_wall(inputs, run).map_or(run_wall_s, |(w, _)| w);
        // The operators' share of the traced wall, carried to the program's: to its time
        // after start-up where the trace is a window of steps (the steps are alike), to its
        // whole wall where the trace is the whole run.
        let carried_s = match window {
            Some(w) if w.traced_s().is_some() => (wall_s - w.start_s).max(0.0),
            _ => wall_s,
        };
        let basis = carried_s / traced_wall_s.max(1e-9);
        let steps_words = over_steps(lang, run);
        let source = cite(run, ArtifactKind::KinetoTrace);
        let calls_line = |o: &CpuOp| {
            tr(
                lang,
                format!("{} calls, {} self", o.calls, secs(o.self_us / 1e6)),
                format!("{} 回、自己時間 {}", o.calls, secs(o.self_us / 1e6)),
            )
        };
        let draft = match shared_dimension(&ops)
            .filter(|(_, share, over)| *share >= TORCH_DIM_SHARE && over.len() >= 2)
        {
            Some((dim, share, over)) => {
                let names: Vec<String> = over
                    .iter()
                    .take(4)
                    .map(|o| format!("`{}`", o.name))
                    .collect();
                let listed: Vec<String> = over.iter().take(4).map(|o| shown(o)).collect();
                // The operators' time scales with the dimension: halving it (or computing a
                // part of it, as an adaptive softmax does) halves theirs.
                let gain_s = 0.5 * share / 100.0 * ops_s * basis;
                Draft {
                    title: tr(
                        lang,
                        format!(
                            "Operators over a dimension of {dim} take {} of torch's CPU time: {}",
                            pct(share),
                            names.join(", ")
                        ),
                        format!(
                            "大きさ {dim} の次元を持つ演算子が torch の CPU 時間の {} を占める: {}",
                            pct(share),
                            names.join(", ")
                        ),
                    ),
                    action: tr(
                        lang,
                        format!(
                            "torch.profiler's operator table ({} of operator time in {steps_words}{}): {}. Each has {dim} in its input shapes, so their cost grows with it. If it is the vocabulary or class count of an output layer, an adaptive softmax (`nn.AdaptiveLogSoftmaxWithLoss`) or a sampled loss computes a part of it, and a smaller vocabulary shrinks it outright; if it is a hidden width, a narrower layer does. Otherwise cut the rows that meet it (batch × sequence per step) or run these products in bfloat16 (`torch.autocast(\"cpu\", dtype=torch.bfloat16)`) where the CPU has bf16 instructions. Halving the dimension saves about {} of {}.",
                            secs(ops_s),
                            source.run_id,
                            listed.join("; "),
                            secs(gain_s),
                            secs(wall_s)
                        ),
                        format!(
                            "torch.profiler の演算子表（{} の演算子時間、{steps_words}{}）: {}。いずれも入力の形に {dim} を含み、その大きさに比例してコストが増える。出力層の語彙数やクラス数なら adaptive softmax（`nn.AdaptiveLogSoftmaxWithLoss`）やサンプリングした損失で一部だけを計算でき、語彙を減らせば次元そのものが小さくなる。隠れ層の幅なら層を細くする。そうでなければ、この次元に掛かる行（1 ステップのバッチ × 系列長）を減らすか、CPU に bf16 命令があれば bfloat16（`torch.autocast(\"cpu\", dtype=torch.bfloat16)`）で計算する。次元を半分にすれば {} 中 約 {} の短縮。",
                            secs(ops_s),
                            source.run_id,
                            listed.join("; "),
                            secs(wall_s),
                            secs(gain_s)
                        ),
                    ),
                    evidence: over
                        .iter()
                        .take(4)
                        .map(|o| format!("torch ops {} {} {}", source.run_id, o.name, calls_line(o)))
                        .collect(),
                    sources: vec![source],
                    confidence: Confidence::Medium,
                    ..Draft::saves_time(gain_s, Some(wall_s))
                }
            }
            None if first.self_percent >= TORCH_OP_SHARE => {
                let gain_s = 0.5 * first.self_percent / 100.0 * ops_s * basis;
                let how = if is_matrix_product(&first.name) {
                    tr(
                        lang,
                        "A matrix product: its cost is the product of its shapes' dimensions; smaller operands (fewer rows per call, a narrower layer) or bfloat16 (`torch.autocast(\"cpu\", dtype=torch.bfloat16)`) where the CPU has bf16 instructions make it cheaper.".to_string(),
                        "行列積: コストは形の各次元の積。オペランドを小さくする（1 回の行数を減らす、層を細くする）か、CPU に bf16 命令があれば bfloat16（`torch.autocast(\"cpu\", dtype=torch.bfloat16)`）で安くなる。".to_string(),
                    )
                } else {
                    tr(
                        lang,
                        "Call it less often or on smaller inputs; the Python call that reaches it is in the hotspots table (\"Reached from your code\").".to_string(),
                        "呼び出しを減らすか入力を小さくする。そこに至る Python の呼び出しはホットスポット表（「あなたのコードからの呼び出し」）にある。".to_string(),
                    )
                };
                Draft {
                    title: tr(
                        lang,
                        format!(
                            "`{}` takes {} of torch's CPU time",
                            first.name,
                            pct(first.self_percent)
                        ),
                        format!(
                            "`{}` が torch の CPU 時間の {} を占める",
                            first.name,
                            pct(first.self_percent)
                        ),
                    ),
                    action: tr(
                        lang,
                        format!(
                            "torch.profiler's operator table ({} of operator time in {steps_words}{}): {}, {}. {how} Halving it saves about {} of {}.",
                            secs(ops_s),
                            source.run_id,
                            shown(first),
                            calls_line(first),
                            secs(gain_s),
                            secs(wall_s)
                        ),
                        format!(
                            "torch.profiler の演算子表（{} の演算子時間、{steps_words}{}）: {}、{}。{how} 半減すれば {} 中 約 {} の短縮。",
                            secs(ops_s),
                            source.run_id,
                            shown(first),
                            calls_line(first),
                            secs(wall_s),
                            secs(gain_s)
                        ),
                    ),
                    evidence: vec![format!(
                        "torch ops {} {} {}",
                        source.run_id,
                        first.name,
                        calls_line(first)
                    )],
                    sources: vec![source],
                    confidence: Confidence::Medium,
                    ..Draft::saves_time(gain_s, Some(wall_s))
                }
            }
            None => continue,
        };
        out.push(draft);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operator whose listed shapes hold `shape_percent` each.
    fn op(name: &str, self_percent: f64, shapes: &[(&str, f64)]) -> CpuOp {
        CpuOp {
            name: name.into(),
            calls: 10,
            self_us: self_percent * 1e4,
            total_us: self_percent * 1e4,
            self_percent,
            shapes: shapes.iter().map(|s| s.0.to_string()).collect(),
            shape_self_percent: shapes.iter().map(|s| s.1).collect(),
        }
    }

    #[test]
    fn the_dimension_that_joins_the_top_operators_is_found() {
        // torch's own table by input shape for pytorch/examples' word_language_model
        // (tests/truth/scenarios/word_language_model, `torch_key_averages`).
        let ops = [
            op(
                "aten::addmm",
                27.0,
                &[("[15001], [700,200], [200,15001]", 22.8)],
            ),
            op(
                "aten::mm",
                27.0,
                &[
                    ("[15001,700], [700,200]", 14.6),
                    ("[700,15001], [15001,200]", 12.7),
                ],
            ),
            op("aten::_log_softmax", 7.0, &[("[700,15001]", 6.0)]),
            op(
                "aten::mkldnn_rnn_layer_backward",
                6.2,
                &[("[35,20,200], [8736768]", 6.2)],
            ),
            op("aten::fill_", 6.0, &[]),
        ];
        let (dim, share, over) = shared_dimension(&ops).unwrap();
        assert_eq!(dim, 15001);
        assert!((share - 56.1).abs() < 1e-9, "{share}");
        assert_eq!(over.len(), 3);
        // A flat weight buffer is large but one operator's: not what joins them.
        assert!(shared_dimension(&ops[3..]).is_some_and(|(_, share, _)| share < 10.0));
        // Batch, sequence and hidden sizes are not candidates.
        assert!(shared_dimension(&ops[4..]).is_none());
        assert_eq!(dims("[700,200], [200,15001]"), [700, 200, 200, 15001]);
    }
}
