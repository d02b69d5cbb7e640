//! Part B: the instrumentation's change log, what is still in the files, and the offer to
//! revert it all.

use super::*;

pub(super) fn part_b(md: &mut String, report: &Report) {
    let lang = report.lang;
    md.push_str(&format!(
        "## {}\n\n",
        tr(
            lang,
            "Part B: instrumentation change log",
            "パート B: 計測コードの変更履歴"
        )
    ));
    let c = &report.changes;
    if c.rows.is_empty() {
        md.push_str(&tr(
            lang,
            "No file was created or modified for this profile.\n\n",
            "このプロファイルのために作成・変更したファイルはない。\n\n",
        ));
    } else {
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                let kind = match (r.change_type, lang) {
                    (ChangeType::Created, Lang::En) => "created",
                    (ChangeType::Modified, Lang::En) => "modified",
                    (ChangeType::Created, Lang::Ja) => "作成",
                    (ChangeType::Modified, Lang::Ja) => "変更",
                };
                let state = if r.state == ChangeState::Reverted {
                    tr(lang, " (reverted)", "（元に戻し済み）")
                } else {
                    String::new()
                };
                vec![
                    code(&r.file),
                    format!("{kind}{state}"),
                    format!(
                        "{} ({})",
                        prose(match (lang, &r.what_ja) {
                            (Lang::Ja, Some(ja)) => ja,
                            _ => &r.what,
                        }),
                        r.id
                    ),
                    r.lines.clone(),
                ]
            })
            .collect();
        table(
            md,
            &heads(
                lang,
                &[
                    ("File", "ファイル"),
                    ("Change type", "変更種別"),
                    ("What was added or changed", "追加・変更内容"),
                    ("Lines", "行"),
                ],
            ),
            &rows,
        );
    }
    if c.other_sessions_changes > 0 {
        md.push_str(&tr(
            lang,
            format!(
                "{} change(s) of earlier sessions, all reverted, are left out: `list_changes` with `include_reverted` lists them, and `profile_output/ledger.json` holds them.\n\n",
                c.other_sessions_changes
            ),
            format!(
                "以前のセッションの変更 {} 件（すべて元に戻し済み）は省略。`list_changes`（`include_reverted`）で一覧でき、`profile_output/ledger.json` にある。\n\n",
                c.other_sessions_changes
            ),
        ));
    }
    if !c.drifted.is_empty() {
        md.push_str(&tr(
            lang,
            format!(
                "Edited by someone else since: {}.\n\n",
                c.drifted.join(", ")
            ),
            format!(
                "その後ほかの人が編集したファイル: {}。\n\n",
                c.drifted.join(", ")
            ),
        ));
    }
    md.push_str(&format!("{}\n", c.offer));
}
