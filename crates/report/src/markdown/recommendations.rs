//! The recommendations, in impact order: each with its action, its gain (a share of the wall,
//! the memory, a process's CPU or a request's latency), its confidence and its evidence.

use super::*;

pub(super) fn recommendations(md: &mut String, report: &Report) {
    let lang = report.lang;
    md.push_str(&format!(
        "### {}\n\n",
        tr(
            lang,
            "Recommendations, by expected impact",
            "推奨事項（期待される効果の順）"
        )
    ));
    if report.recommendations.is_empty() {
        md.push_str(&tr(
            lang,
            "_No rule fired: nothing measured crosses a threshold that would justify a change._\n\n",
            "_どのルールも該当しなかった: 変更を正当化する閾値を超えた測定値はない。_\n\n",
        ));
        return;
    }
    for (i, r) in report.recommendations.iter().enumerate() {
        let gain = match (
            r.gain.time_s,
            r.gain.wall_percent,
            r.gain.memory_bytes,
            r.gain.memory_percent,
        ) {
            // A serving rule's time is a share of the mean request, not of a run's wall.
            (Some(t), Some(w), _, _) if r.rule.starts_with("serving_") => tr(
                lang,
                format!("{} a request ({} of its mean latency)", secs(t), pct(w)),
                format!(
                    "1 リクエストあたり {}（平均レイテンシの {}）",
                    secs(t),
                    pct(w)
                ),
            ),
            (Some(t), Some(w), _, _) => tr(
                lang,
                format!("{} ({} of wall time)", secs(t), pct(w)),
                format!("{}（実時間の {}）", secs(t), pct(w)),
            ),
            (Some(t), None, _, _) => secs(t),
            (None, _, Some(m), Some(p)) => tr(
                lang,
                format!("{} ({} of the memory)", bytes(m), pct(p)),
                format!("{}（メモリの {}）", bytes(m), pct(p)),
            ),
            (None, _, Some(m), None) => bytes(m),
            _ => match r.gain.cpu_percent {
                Some(c) => tr(
                    lang,
                    format!("{} of the process's CPU time", pct(c)),
                    format!("プロセスの CPU 時間の {}", pct(c)),
                ),
                None => tr(lang, "not estimated", "見積りなし"),
            },
        };
        md.push_str(&format!("{}. **{}**\n", i + 1, prose(&r.title)));
        md.push_str(&format!("   {}\n", r.action));
        md.push_str(&format!(
            "   - {}: {gain}; {}: {}; {}: {}\n",
            tr(lang, "Expected gain", "期待効果"),
            tr(lang, "confidence", "確度"),
            confidence(lang, r.confidence),
            tr(lang, "evidence", "根拠"),
            r.evidence.join("; ")
        ));
    }
    md.push('\n');
}
