//! torch's operators on the CPU from a torch.profiler run's trace, timed as torch.profiler's
//! own table times them: what a CPU training spends its time in, with the input shapes that
//! took it (the output layer over a large vocabulary shows as `[700,13578]`).

use crate::cpu_table::measured;
use crate::fmt::{pct, secs, tr, us};
use crate::markdown::{code, esc, heads, table};
use crate::session::Session;
use crate::tables::cite;
use system_profile_model::metrics::StepWindow;
use system_profile_model::report::{Report, TorchOps};
use system_profile_model::run::ArtifactKind;

/// Operators shown per run.
const SHOWN: usize = 10;

pub fn torch_ops(session: &Session) -> Vec<TorchOps> {
    session
        .runs
        .iter()
        .filter(|r| measured(r))
        .filter_map(|run| {
            let ops = &run.metrics.trace.as_ref()?.cpu_ops;
            (!ops.is_empty()).then(|| TorchOps {
                source: cite(run, ArtifactKind::KinetoTrace),
                ops: ops.iter().take(SHOWN).cloned().collect(),
                slowdown: crate::rules::slowdown(session, run),
                window: run.metrics.step_window.clone(),
            })
        })
        .collect()
}

pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    for t in &report.torch_ops {
        // A paragraph of its own whatever the section before ended with.
        if !md.ends_with("\n\n") {
            md.push('\n');
        }
        md.push_str(&tr(
            lang,
            format!(
                "torch operators on the CPU ({}), by self time:\n\n",
                t.source.run_id
            ),
            format!(
                "CPU 上の torch 演算子（{}）、自己時間順:\n\n",
                t.source.run_id
            ),
        ));
        let rows: Vec<Vec<String>> = t
            .ops
            .iter()
            .map(|o| {
                vec![
                    code(&o.name),
                    o.calls.to_string(),
                    us(o.self_us),
                    pct(o.self_percent),
                    us(o.total_us),
                    if o.shapes.is_empty() {
                        "—".into()
                    } else {
                        let shown: Vec<String> = o
                            .shapes
                            .iter()
                            .enumerate()
                            .map(|(i, s)| match o.shape_self_percent.get(i) {
                                Some(p) => format!("{s} ({})", pct(*p)),
                                None => s.clone(),
                            })
                            .collect();
                        esc(&shown.join(" · "))
                    },
                ]
            })
            .collect();
        table(
            md,
            &heads(
                lang,
                &[
                    ("Operator", "演算子"),
                    ("Calls", "呼び出し"),
                    ("Self", "自己時間"),
                    ("Self %", "自己 %"),
                    ("Total", "合計"),
                    (
                        "Input shapes (most self time)",
                        "入力の形（自己時間の多い順）",
                    ),
                ],
            ),
            &rows,
        );
        md.push_str(&tr(
            lang,
            format!(
                "Self: the operator's time less its children's, as torch.profiler's own table counts it; a shape's share is its part of all operators' self time (the table by input shape). Source: {}.\n\n",
                crate::markdown::cite(std::slice::from_ref(&t.source))
            ),
            format!(
                "自己時間: 子の時間を除いた演算子の時間（torch.profiler 自身の表と同じ数え方）。形の割合は全演算子の自己時間に対するその形の分（入力の形ごとの表）。出典: {}。\n\n",
                crate::markdown::cite(std::slice::from_ref(&t.source))
            ),
        ));
        if let Some(w) = &t.window {
            md.push_str(&window_words(lang, w));
        }
        if let Some(x) = t
            .slowdown
            .filter(|x| *x > crate::rules::TORCH_DISTURBED_RATIO)
        {
            let per_step = t.window.as_ref().is_some_and(|w| w.slowdown().is_some());
            let (what, what_ja, against, against_ja) = if per_step {
                (
                    "A traced step took",
                    "トレースしたステップは",
                    "an unprofiled step of the same run",
                    "同じ実行のプロファイラなしのステップ",
                )
            } else {
                (
                    "This traced run took",
                    "このトレースの実行は",
                    "the run without a profiler",
                    "プロファイラなしの実行",
                )
            };
            md.push_str(&tr(
                lang,
                format!(
                    "_{what} {x:.1}× {against} (torch.profiler alone costs about 1.1×): the machine or the profiler disturbed it, so these shares are not the program's, and no advice rests on them._\n\n"
                ),
                format!(
                    "_{what_ja}{against_ja}の {x:.1} 倍かかった（torch.profiler 自体は約 1.1 倍）: マシンかプロファイラが乱したため、この割合はプログラム本来のものではなく、助言の根拠にしていない。_\n\n"
                ),
            ));
        }
    }
}

/// What a window of steps covered, said once under its table.
fn window_words(lang: system_profile_model::report::Lang, w: &StepWindow) -> String {
    let unprofiled = match (w.unprofiled_step_s, w.traced_step_s) {
        (Some(u), Some(t)) => tr(
            lang,
            format!(
                " A traced step took {} against {} unprofiled ({:.2}×: the median step the profiler did not watch, after the window where there are some).",
                secs(t),
                secs(u),
                t / u.max(1e-9)
            ),
            format!(
                " トレースしたステップは {}、プロファイラなしのステップは {}（{:.2} 倍。プロファイラが見ていないステップの中央値で、区間の後にあればそれを使う）。",
                secs(t),
                secs(u),
                t / u.max(1e-9)
            ),
        ),
        _ => String::new(),
    };
    let ended = if w.after_trace.is_run_on() {
        String::new()
    } else {
        tr(
            lang,
            format!(
                " The program was ended after step {} (`after_trace: end_program`): this run's wall is its start-up with step 1 ({}) and {} more steps, not the program's.",
                w.steps_seen,
                secs(w.start_s),
                w.steps_seen.saturating_sub(1)
            ),
            format!(
                " プログラムはステップ {} の後で終了させた（`after_trace: end_program`）: この実行の時間は起動とステップ 1（{}）と残り {} ステップで、プログラム全体のものではない。",
                w.steps_seen,
                secs(w.start_s),
                w.steps_seen.saturating_sub(1)
            ),
        )
    };
    tr(
        lang,
        format!(
            "The trace holds steps {}-{}, a window after warm-up (a step: an optimizer step, else a backward, else a model's forward).{unprofiled}{ended}\n\n",
            w.first_traced_step, w.last_traced_step
        ),
        format!(
            "トレースはステップ {}-{}（ウォームアップ後の区間。ステップはオプティマイザの step、なければ backward、なければモデルの forward）。{unprofiled}{ended}\n\n",
            w.first_traced_step, w.last_traced_step
        ),
    )
}
