//! The hotspots section: functions by self time with the user's call that reaches library
//! code, then the user's functions by inclusive time and the native code their lines ran.

use super::*;
use system_profile_model::metrics::CallVia;
use system_profile_model::report::{InclusiveRow, NativeCall};

pub(super) fn hotspots(md: &mut String, report: &Report) {
    let lang = report.lang;
    if !open_section(md, report, "hotspots") {
        return;
    }
    let Some(t) = &report.hotspots else {
        return;
    };
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|h| {
            let place = match &h.file {
                Some(f) => code(&crate::fmt::at(f, h.line)),
                None => "—".into(),
            };
            let tools = h
                .evidence
                .iter()
                .map(|e| match (e.self_percent, e.hot_line, e.hot_line_percent) {
                    (Some(s), _, _) => format!("{} {} ({})", e.tool, pct(s), e.source.run_id),
                    (None, Some(line), Some(l)) => format!(
                        "{} {} {line}: {} ({})",
                        e.tool,
                        tr(lang, "line", "行"),
                        pct(l),
                        e.source.run_id
                    ),
                    _ => format!("{} ({})", e.tool, e.source.run_id),
                })
                .collect::<Vec<_>>()
                .join(", ");
            let caller = match &h.called_from {
                Some(c) => format!(
                    "{} {}{} ({})",
                    code(&c.function),
                    code(&crate::fmt::at(&c.file, c.line)),
                    match c.via {
                        CallVia::Import => tr(lang, ", an import", "、import"),
                        CallVia::Call => String::new(),
                    },
                    pct(c.share_percent)
                ),
                None => "—".into(),
            };
            vec![
                code(&h.function),
                place,
                h.kind.clone(),
                pct(h.self_percent),
                pct(h.total_percent),
                caller,
                tools,
            ]
        })
        .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("Function", "関数"),
                ("Where", "場所"),
                ("Kind", "種類"),
                ("Self", "自身"),
                ("Total", "合計"),
                ("Reached from your code", "呼び出し元（あなたのコード）"),
                ("Seen by (self share)", "検出したツール（自身の割合）"),
            ],
        ),
        &rows,
    );
    md.push_str(&tr(
        lang,
        "Self: samples with the function on top of the stack; total: anywhere on it. GPU kernels: share of GPU kernel time. Reached from your code: for library code, the deepest frame of your own code on its stacks (the call to change) and the share of the function's own samples that came through it.\n\n",
        "自身: 関数がスタックの先頭にあったサンプルの割合。合計: スタックのどこかにあった割合。GPU カーネル: カーネル時間に占める割合。呼び出し元: ライブラリのコードについて、そのスタック上で最も深いあなたのコードのフレーム（変更すべき呼び出し）と、関数自身のサンプルのうちそこを経由した割合。\n\n",
    ));
    inclusive(md, lang, &t.inclusive);
    native_calls(md, lang, &t.native_calls);
    for f in &t.flame_graphs {
        md.push_str(&format!(
            "- {} ({}): [{}]({})\n",
            tr(lang, "Flame graph", "フレームグラフ"),
            f.run_id,
            f.path.rsplit('/').next().unwrap_or(&f.path),
            relative_link(&report.session, &f.path)
        ));
    }
    if !t.flame_graphs.is_empty() {
        md.push('\n');
    }
}

/// The user's functions by inclusive time: the phases self time never shows.
fn inclusive(md: &mut String, lang: Lang, rows: &[InclusiveRow]) {
    let Some(first) = rows.first() else {
        return;
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                code(&r.function),
                code(&crate::fmt::at(&r.file, r.line)),
                pct(r.self_percent),
                pct(r.total_percent),
                r.total_s.map(secs).unwrap_or_else(|| "—".into()),
            ]
        })
        .collect();
    from_one_run(
        md,
        lang,
        (
            "Your functions by inclusive time (their own code and all they call)",
            "あなたの関数の包含時間（自身のコードと呼び出し先すべて）",
        ),
        &first.source.run_id,
        &[
            ("Function", "関数"),
            ("Where", "場所"),
            ("Self", "自身"),
            ("Total", "合計"),
            ("Total time", "合計時間"),
        ],
        &body,
    );
}

/// The user's lines whose calls ran native code: the time a run without native frames counts
/// as the line's own.
fn native_calls(md: &mut String, lang: Lang, rows: &[NativeCall]) {
    let Some(first) = rows.first() else {
        return;
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let functions: Vec<String> = r
                .functions
                .iter()
                .map(|f| format!("{} ({}) {}", code(&f.function), f.library, pct(f.percent)))
                .collect();
            vec![
                code(&r.function),
                code(&crate::fmt::at(&r.file, r.line)),
                pct(r.percent),
                functions.join(", "),
            ]
        })
        .collect();
    from_one_run(
        md,
        lang,
        (
            "Native code your lines ran (C and C++ under the call, sampled with native frames)",
            "あなたの行が呼び出したネイティブコード（呼び出しの下の C/C++、ネイティブフレーム付きのサンプリング）",
        ),
        &first.source.run_id,
        &[
            ("Function", "関数"),
            ("Where", "場所"),
            ("Native", "ネイティブ"),
            ("Heaviest native functions", "重いネイティブ関数"),
        ],
        &body,
    );
}

/// A table whose rows all come from one run: a sentence saying what it lists and from which
/// run, then the table.
fn from_one_run(
    md: &mut String,
    lang: Lang,
    (what_en, what_ja): (&str, &str),
    run_id: &str,
    head: &[(&str, &str)],
    body: &[Vec<String>],
) {
    md.push_str(&tr(
        lang,
        format!("{what_en}, from {run_id}:\n\n"),
        format!("{what_ja}、{run_id} より:\n\n"),
    ));
    table(md, &heads(lang, head), body);
}
