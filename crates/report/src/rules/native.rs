//! Native code a line of the program's calls: sampled with native frames (`py-spy --native`),
//! the C or C++ under a call is the library's, not the line's own Python. Without them a C
//! call's time is its Python caller's self time, and the advice "speed up this function's own
//! code" sends the user to Python that barely runs (pyperformance's sqlite_synth: 96% "own
//! code" of `bench_sqlite`, of which 12% is Python). The advice is about the call: fewer,
//! larger calls, or a cheaper setting of the library's.

use super::cpu::{run_of, unprofiled_wall, user_code};
use super::*;
use crate::fmt::{pct, secs, tr};
use system_profile_model::metrics::NativeFunction;
use system_profile_model::report::Confidence;
use system_profile_model::run::RunTarget;

/// What is known to cut a library's cost besides calling it less, by its shared object's
/// name: (the name's start, advice in English, in Japanese).
const LIBRARY_ADVICE: &[(&str, &str, &str)] = &[
    (
        "libz.",
        "zlib's deflate: a lower compression level (level 1 to 6 costs a fraction of level 9 for a slightly larger output) or a faster implementation of the same format (zlib-ng, isal's igzip)",
        "zlib の deflate: 圧縮レベルを下げる（レベル 1〜6 はレベル 9 のわずかな費用で出力が少し大きくなるだけ）か、同じ形式のより速い実装（zlib-ng、isal の igzip）を使う",
    ),
    (
        "libsqlite3.",
        "SQLite: one `executemany` for many rows inside one transaction instead of one `execute` a row, and set-based SQL instead of a Python loop over rows",
        "SQLite: 1 行ずつの `execute` ではなく、1 つのトランザクション内で `executemany` を使い、Python の行ループではなく集合指向の SQL にする",
    ),
];

pub(super) fn hot_native_call(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.hotspots else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for call in &table.native_calls {
        if call.percent < HOT_FUNCTION_SELF_PERCENT || !user_code(&call.file) {
            continue;
        }
        let Some(run) = run_of(inputs, &call.source.run_id) else {
            continue;
        };
        let attached = matches!(run.target, RunTarget::Pid { .. });
        let wall = unprofiled_wall(inputs, run).map(|(w, _)| w).or(run.wall_s);
        let spent_s = wall.map(|w| w * call.percent / 100.0);
        if spent_s.is_some_and(|s| s < HOT_FUNCTION_MIN_SELF_S) {
            continue;
        }
        let place = crate::fmt::at(&call.file, call.line);
        let functions = |f: &[NativeFunction]| {
            f.iter()
                .map(|f| format!("`{}` ({}) {}", f.function, f.library, pct(f.percent)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let known = call.functions.iter().find_map(|f| {
            LIBRARY_ADVICE
                .iter()
                .find(|(lib, _, _)| f.library.starts_with(lib))
        });
        let also = known.map_or(String::new(), |(_, en, ja)| {
            tr(lang, format!(" For {en}."), format!(" {ja}。"))
        });
        let saving = match (spent_s.filter(|_| !attached), wall) {
            (Some(s), Some(w)) => tr(
                lang,
                format!("; halving it saves about {} of {}", secs(s * 0.5), secs(w)),
                format!("。半減すれば {} 中 約 {} の短縮", secs(w), secs(s * 0.5)),
            ),
            _ => String::new(),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!(
                    "Make fewer or larger calls into native code from `{}` ({place})",
                    call.function
                ),
                format!(
                    "{place} の `{}` からのネイティブコード呼び出しを減らすかまとめる",
                    call.function
                ),
            ),
            action: tr(
                lang,
                format!(
                    "{} of the CPU samples are native code (C, C++) that this line's call runs, not its Python{saving}: speeding up the Python around it gains little. Call it less often, on larger batches (one call for many items), or at a cheaper setting.{also} Heaviest native functions: {}.",
                    pct(call.percent),
                    functions(&call.functions)
                ),
                format!(
                    "CPU サンプルの {} は、この行の呼び出しが実行するネイティブコード（C/C++）で、Python ではない{saving}。周りの Python を速くしても効果は小さい。呼び出しを減らす、まとめて呼ぶ（多数の項目を 1 回で）、より軽い設定にする。{also}重いネイティブ関数: {}。",
                    pct(call.percent),
                    functions(&call.functions)
                ),
            ),
            evidence: std::iter::once(format!("native calls {place} {}", call.function))
                .chain(call.functions.iter().map(|f| format!("native {} {}", f.library, f.function)))
                .collect(),
            sources: vec![call.source.clone()],
            confidence: Confidence::Medium,
            ..match (attached, spent_s) {
                (false, Some(s)) => Draft::saves_time(s * 0.5, wall),
                _ => Draft::saves_cpu(call.percent * 0.5),
            }
        });
    }
    out
}
