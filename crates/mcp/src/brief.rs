//! The text a model reads of a tool's result. `structuredContent` carries the whole result
//! for programs; the text block is the same JSON when it is small, and otherwise a brief of it
//! that fits `TEXT_BUDGET_BYTES` (about 2,000 tokens): the same keys, long lists cut to their
//! first items and long strings to their start, each cut said where it is, and a `_brief` line
//! that says where the whole is. Our own helper's diff is named, never shown (the user's file
//! diffs are, whole: the agent must review them), and the target's output tails are short and
//! printable (a program that prints NUL bytes would otherwise cost six bytes of escape each).

use serde_json::{json, Map, Value};

/// Most bytes of a result's text (JSON is about 3.3 bytes a token).
pub const TEXT_BUDGET_BYTES: usize = 6 * 1024;

/// Most bytes of a report's Markdown in the text (Markdown is about 3.2 bytes a token).
pub const MARKDOWN_BUDGET_BYTES: usize = 8 * 1024;

/// Characters of an output tail the text keeps (its end, where the error usually is).
const TAIL_CHARS: usize = 1000;

/// Keys whose strings are never cut: a diff of the user's file is reviewed whole.
const WHOLE_KEYS: [&str; 1] = ["diff"];

/// The whole of a result, as `detail: "full"` asks: a report's Markdown whole, else the JSON
/// uncut (output tails whole and printable); only our own helper's diff stays named, not shown.
pub fn full_text(result: &Value) -> String {
    if result["format"] != "json" {
        if let Some(md) = result["markdown"].as_str() {
            return md.to_string();
        }
    }
    let mut v = result
        .get("report")
        .cloned()
        .unwrap_or_else(|| result.clone());
    own_files_named_not_shown(&mut v);
    printable_tails(&mut v, None);
    v.to_string()
}

/// The text of a JSON result.
pub fn json_brief(result: &Value) -> String {
    let mut v = result.clone();
    own_files_named_not_shown(&mut v);
    printable_tails(&mut v, Some(TAIL_CHARS));
    let whole = v.to_string();
    if whole.len() <= TEXT_BUDGET_BYTES {
        return whole;
    }
    let mut smallest = String::new();
    for (items, chars) in [(20, 2000), (10, 600), (5, 240), (3, 120), (1, 60)] {
        let mut b = v.clone();
        shrink(&mut b, items, chars);
        note(
            &mut b,
            result,
            &format!("lists cut to {items} items, strings to {chars} characters"),
        );
        smallest = b.to_string();
        if smallest.len() <= TEXT_BUDGET_BYTES {
            return smallest;
        }
    }
    // Over only by what is shown whole (a long diff of the user's file): shown all the same.
    if smallest.len().saturating_sub(whole_bytes(&v)) <= TEXT_BUDGET_BYTES {
        return smallest;
    }
    // Still too long (a result of many keys): its scalar fields and the size of each other.
    let mut top = Map::new();
    if let Value::Object(m) = &v {
        for (k, x) in m {
            let kept = match x {
                Value::Array(a) => json!(format!("[{} items]", a.len())),
                Value::Object(o) => json!(format!("{{{} keys}}", o.len())),
                Value::String(s) if s.chars().count() > 60 => json!(cut(s, 60)),
                other => other.clone(),
            };
            top.insert(k.clone(), kept);
        }
    }
    let mut b = Value::Object(top);
    note(&mut b, result, "only the top-level fields");
    b.to_string()
}

/// A report's Markdown: whole when it fits. Else the sections that carry the conclusions stay
/// (the summary, the recommendations, Part B and every heading's own text) and what can be
/// read in the file goes first: the charts (image links only), then the largest tables of
/// Part A's subsections, each named in a last line with the file that has them.
pub fn markdown_brief(md: &str, path: &str) -> String {
    if md.len() <= MARKDOWN_BUDGET_BYTES {
        return md.to_string();
    }
    // Sections: each starts at a heading line; the first holds the title.
    let mut sections: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, _) in md.match_indices("\n#") {
        sections.push(&md[start..=i]);
        start = i + 1;
    }
    sections.push(&md[start..]);
    let heading = |s: &str| s.lines().next().unwrap_or("").to_string();
    let is_charts = |s: &str| {
        let body: Vec<&str> = s.lines().skip(1).filter(|l| !l.trim().is_empty()).collect();
        !body.is_empty() && body.iter().all(|l| l.starts_with("!["))
    };
    let is_droppable_table = |s: &str| s.starts_with("### ") && s.contains("|---");
    let mut keep = vec![true; sections.len()];
    let mut dropped: Vec<String> = Vec::new();
    let size = |keep: &[bool]| -> usize {
        sections
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(s, _)| s.len())
            .sum()
    };
    for (i, s) in sections.iter().enumerate() {
        if s.starts_with('#') && i > 0 && is_charts(s) {
            keep[i] = false;
            dropped.push(heading(s));
        }
    }
    let mut tables: Vec<usize> = (0..sections.len())
        .filter(|i| keep[*i] && is_droppable_table(sections[*i]))
        .collect();
    tables.sort_by_key(|i| std::cmp::Reverse(sections[*i].len()));
    for i in tables {
        if size(&keep) + 300 <= MARKDOWN_BUDGET_BYTES {
            break;
        }
        keep[i] = false;
        dropped.push(heading(sections[i]));
    }
    let mut out: String = sections
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(s, _)| *s)
        .collect();
    let names: Vec<String> = dropped
        .iter()
        .map(|h| format!("“{}”", h.trim_start_matches('#').trim()))
        .collect();
    out.push_str(&format!(
        "\n_Left out here to keep this short: {}; the whole report is `{path}` (and structuredContent.markdown)._\n",
        names.join(", ")
    ));
    out
}

/// Where the whole result is, as the last key of the brief.
fn note(brief: &mut Value, whole: &Value, what: &str) {
    let Value::Object(m) = brief else { return };
    let where_whole = match whole.get("run_id").and_then(Value::as_str) {
        Some(id) if whole.get("metrics").is_some() => format!(
            "the whole record: structuredContent, or get_run {{\"run_id\": \"{id}\", \"detail\": \"full\"}}"
        ),
        _ => "the whole result: structuredContent, or a read-only tool called again with \"detail\": \"full\"".to_string(),
    };
    m.insert(
        "_brief".into(),
        json!(format!(
            "{} bytes in brief ({what}); {where_whole}",
            whole.to_string().len()
        )),
    );
}

/// Bytes of the strings that are never cut.
fn whole_bytes(v: &Value) -> usize {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| match x {
                Value::String(s) if WHOLE_KEYS.contains(&k.as_str()) => s.len(),
                other => whole_bytes(other),
            })
            .sum(),
        Value::Array(a) => a.iter().map(whole_bytes).sum(),
        _ => 0,
    }
}

fn cut(s: &str, chars: usize) -> String {
    let kept: String = s.chars().take(chars).collect();
    format!("{kept}… ({} more characters)", s.chars().count() - chars)
}

fn shrink(v: &mut Value, items: usize, chars: usize) {
    match v {
        Value::Array(a) => {
            // A list of diffs to review is kept whole, as its diffs are.
            if a.len() > items && a.iter().map(whole_bytes).sum::<usize>() == 0 {
                let more = a.len() - items;
                a.truncate(items);
                a.push(json!(format!("… {more} more")));
            }
            a.iter_mut().for_each(|x| shrink(x, items, chars));
        }
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if let Value::String(s) = x {
                    if !WHOLE_KEYS.contains(&k.as_str()) && s.chars().count() > chars {
                        *s = cut(s, chars);
                    }
                } else {
                    shrink(x, items, chars);
                }
            }
        }
        Value::String(s) if s.chars().count() > chars => *s = cut(s, chars),
        _ => {}
    }
}

/// A change to a file under `profile_output/` (the runner script, our runtime helper) is
/// ours: its diff is named with its size, not shown.
fn own_files_named_not_shown(v: &mut Value) {
    let Some(Value::Array(changes)) = v.get_mut("changes") else {
        return;
    };
    for c in changes {
        let ours = c
            .get("file")
            .and_then(Value::as_str)
            .is_some_and(|f| f.starts_with("profile_output/"));
        if let (true, Some(Value::String(diff))) = (ours, c.get_mut("diff")) {
            let lines = diff.lines().count();
            *diff = format!("({lines} lines of system-profile's own code, not shown; the file is listed in resources)");
        }
    }
}

/// `stdout_tail` and `stderr_tail`: their last `max_chars` characters (all without a
/// limit), control characters as `·`.
fn printable_tails(v: &mut Value, max_chars: Option<usize>) {
    let Value::Object(m) = v else { return };
    for key in ["stdout_tail", "stderr_tail"] {
        if let Some(Value::String(s)) = m.get_mut(key) {
            let n = s.chars().count();
            let keep = max_chars.unwrap_or(n);
            let tail: String = s
                .chars()
                .skip(n.saturating_sub(keep))
                .map(|c| {
                    if c.is_control() && c != '\n' && c != '\t' {
                        '·'
                    } else {
                        c
                    }
                })
                .collect();
            *s = if n > keep { format!("…{tail}") } else { tail };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_report_keeps_its_conclusions_and_names_what_it_left_out() {
        let table = |name: &str, rows: usize| {
            format!(
                "### {name}\n\n| a | b |\n|---|---|\n{}\n",
                "| 1 | 2 |\n".repeat(rows)
            )
        };
        let md = format!(
            "# Profile report: s\n\n## Summary\n\n- the finding\n\n## Part A: results\n\n{}{}### Charts\n\n![cpu](charts/a.svg)\n\n### Recommendations\n\n1. **Do this**\n\n## Part B: instrumentation change log\n\n| File | Change |\n|---|---|\n| `work.py` | modified |\n",
            table("CPU overhead", 100),
            table("Hotspots", 900),
        );
        let brief = markdown_brief(&md, "profile_output/s/report.md");
        assert!(brief.len() <= MARKDOWN_BUDGET_BYTES, "{}", brief.len());
        for kept in [
            "## Summary",
            "### CPU overhead",
            "### Recommendations",
            "1. **Do this**",
            "## Part B",
            "| `work.py` | modified |",
        ] {
            assert!(brief.contains(kept), "{kept} left out: {brief}");
        }
        assert!(
            !brief.contains("### Hotspots") && !brief.contains("![cpu]"),
            "{brief}"
        );
        assert!(
            brief.contains("Left out here to keep this short: “Charts”, “Hotspots”; the whole report is `profile_output/s/report.md`"),
            "{brief}"
        );
    }

    #[test]
    fn a_small_result_is_its_json() {
        let v = json!({"status": "completed", "rows": [1, 2, 3]});
        assert_eq!(json_brief(&v), v.to_string());
    }

    #[test]
    fn a_large_record_is_cut_to_the_budget_and_says_where_the_whole_is() {
        let rows: Vec<Value> = (0..2000)
            .map(|i| json!({"function": format!("f{i}"), "share": i}))
            .collect();
        let v = json!({
            "run_id": "r001-py-spy-record",
            "status": "completed",
            "metrics": {"hotspots": rows},
            "stdout_tail": format!("{}end\u{0}", "x".repeat(5000)),
        });
        let text = json_brief(&v);
        assert!(text.len() <= TEXT_BUDGET_BYTES, "{} bytes", text.len());
        let b: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(b["status"], "completed");
        assert_eq!(b["metrics"]["hotspots"][0]["function"], "f0");
        let tail = b["stdout_tail"].as_str().unwrap();
        assert!(
            tail.ends_with("end·") && tail.chars().count() <= TAIL_CHARS + 1,
            "{tail}"
        );
        let note = b["_brief"].as_str().unwrap();
        assert!(
            note.contains("get_run") && note.contains("r001-py-spy-record"),
            "{note}"
        );
    }

    #[test]
    fn our_helper_is_named_the_users_diff_is_whole() {
        let user_diff = format!("--- a/train.py\n+++ b/train.py\n{}", "+x\n".repeat(3000));
        let v = json!({"changes": [
            {"file": "profile_output/instrument/_sp_profile.py", "diff": "+a\n+b\n"},
            {"file": "train.py", "diff": user_diff},
        ]});
        let b: Value = serde_json::from_str(&json_brief(&v)).unwrap();
        assert_eq!(
            b["changes"][0]["diff"],
            "(2 lines of system-profile's own code, not shown; the file is listed in resources)"
        );
        assert!(
            b["changes"][1]["diff"] == user_diff.as_str(),
            "the user's diff is not whole: {:.200}",
            b["changes"][1]
        );
    }
}
