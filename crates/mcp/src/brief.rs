//! The text a model reads of a tool's result, made from the whole result (`structuredContent`
//! is what the tool's output schema says: see `ToolDef::structured`); the text block is the same JSON when it is small, and otherwise a brief of it
//! that fits `TEXT_BUDGET_BYTES` (about 2,000 tokens): the same keys, long lists cut to their
//! first items and long strings to their start, each cut said where it is, and a `_brief` line
//! that says where the whole is. Our own helper's diff is named, never shown (the user's file
//! diffs are, whole: the agent must review them), and the target's output tails are short and
//! printable (a program that prints NUL bytes would otherwise cost six bytes of escape each).

use serde_json::{json, Map, Value};

/// Most bytes of a result's text (JSON is about 3.3 bytes a token).
/// 4 KiB keeps a six-step session's results within 10,000 tokens (BENCHMARKS.md, "Context
/// size"): a run record's key figures and top rows fit, its long lists are cut.
pub const TEXT_BUDGET_BYTES: usize = 4 * 1024;

/// Most bytes of a report's Markdown in the text (Markdown is about 3.2 bytes a token).
pub const MARKDOWN_BUDGET_BYTES: usize = 7 * 1024;

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
    // A brief says it is one, so its figures may be read to four places.
    round_floats(&mut v);
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

/// A plan's text: whole when it fits; else what the agent acts on, every step kept with its
/// `run_profiler` arguments whole (they are passed on as they are), and the prose about each
/// step (why, overhead note, families, artifacts, metrics) left to the whole plan. A fallback
/// whose arguments are its step's with another `profiler` (and its own `options`) is given by
/// its method and options. A plan of many steps may pass the budget rather than lose one.
pub fn plan_brief(plan: &Value) -> String {
    let whole = plan.to_string();
    if whole.len() <= TEXT_BUDGET_BYTES {
        return whole;
    }
    let mut b = keys_of(plan, &["target", "focus", "focus_source"]);
    if let Some(id) = plan.pointer("/recipe/id") {
        b.insert("recipe".into(), id.clone());
    }
    if let Some(Value::Array(coverage)) = plan.get("coverage") {
        let by_family: Map<String, Value> = coverage
            .iter()
            .filter_map(|c| Some((c["family"].as_str()?.to_string(), c["status"].clone())))
            .collect();
        b.insert("coverage".into(), Value::Object(by_family));
    }
    let steps: Vec<Value> = plan["steps"]
        .as_array()
        .map(|s| s.iter().map(step_brief).collect())
        .unwrap_or_default();
    b.insert("steps".into(), Value::Array(steps));
    if let Some(Value::Array(skipped)) = plan.get("skipped") {
        let kept = skipped
            .iter()
            .map(|s| {
                let mut k = Map::new();
                for key in ["method", "reason", "fix"] {
                    match &s[key] {
                        Value::String(t) if t.chars().count() > 160 => {
                            k.insert(key.into(), json!(cut(t, 160)));
                        }
                        Value::Null => {}
                        x => {
                            k.insert(key.into(), x.clone());
                        }
                    }
                }
                Value::Object(k)
            })
            .collect();
        b.insert("skipped".into(), Value::Array(kept));
    }
    b.extend(keys_of(
        plan,
        &[
            "instrumentation",
            "estimated_wall_s",
            "time_budget_s",
            "needs_clarification",
            "questions",
            "notes",
        ],
    ));
    let mut v = Value::Object(b);
    round_floats(&mut v);
    let Value::Object(m) = &mut v else {
        unreachable!()
    };
    m.insert(
        "_brief".into(),
        json!(format!(
            "{} bytes in brief (each step's why, overhead note, families, artifacts and metrics left out; \
             a fallback given by method is its step's arguments with that `profiler` and its `options`, if any); \
             the whole plan: plan_profile again with \"detail\": \"full\"",
            whole.len()
        )),
    );
    v.to_string()
}

/// `detect_tools`' text: whole when it fits; else every tool kept, by its id, whether it is
/// usable here, its version, and why not with the fix (what a plan needs), with the machine
/// as detected; paths and probe timings are left to the whole.
pub fn detect_brief(report: &Value) -> String {
    let whole = report.to_string();
    if whole.len() <= TEXT_BUDGET_BYTES {
        return whole;
    }
    // Tool lines as long as the budget allows: a machine with longer notes (a container's
    // kernel, perf's counters) shortens every line rather than spill over it.
    let mut brief = String::new();
    for chars in [100, 70, 50, 35, 20] {
        brief = detect_brief_with(report, whole.len(), chars);
        if brief.len() <= TEXT_BUDGET_BYTES {
            break;
        }
    }
    brief
}

fn detect_brief_with(report: &Value, whole_bytes: usize, line_chars: usize) -> String {
    let Value::Object(all) = report else {
        return json_brief(report);
    };
    let mut b = Map::new();
    for (key, x) in all {
        match key.as_str() {
            "tools" => {
                let tools: Map<String, Value> = x
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| {
                        Some((
                            t["id"].as_str()?.to_string(),
                            json!(tool_line(t, line_chars)),
                        ))
                    })
                    .collect();
                b.insert(key.clone(), Value::Object(tools));
            }
            "probe_wall_ms" | "detected_at_unix_s" => {}
            "hardware" => {
                let mut h = x.clone();
                if let Some(Value::String(r)) = h.pointer_mut("/gpu/reason") {
                    *r = short_text(r, 120);
                }
                b.insert(key.clone(), h);
            }
            _ => {
                b.insert(key.clone(), x.clone());
            }
        }
    }
    let mut v = Value::Object(b);
    round_floats(&mut v);
    if let Value::Object(m) = &mut v {
        m.insert(
            "_brief".into(),
            json!(format!(
                "{} bytes in brief (a tool a line: usable and its version, or why not and the fix); \
                 the whole: \"detail\": \"full\"",
                whole_bytes
            )),
        );
    }
    v.to_string()
}

/// One tool in a line: `usable 0.4.3; <notes>` or `not usable: <reason>; fix: <hint>`.
fn tool_line(tool: &Value, chars: usize) -> String {
    let short = |v: &Value| v.as_str().map(|t| short_text(t, chars));
    let mut line = if tool["usable"] == true {
        match tool["version"].as_str() {
            Some(v) => format!("usable {v}"),
            None => "usable".to_string(),
        }
    } else {
        let mut l = format!(
            "not usable: {}",
            short(&tool["reason"]).unwrap_or_else(|| "no reason given".into())
        );
        if let Some(hint) = short(&tool["install_hint"]) {
            l.push_str(&format!("; fix: {hint}"));
        }
        l
    };
    for note in tool["notes"].as_array().into_iter().flatten() {
        if let Some(n) = short(note) {
            line.push_str(&format!("; {n}"));
        }
    }
    line
}

fn short_text(t: &str, chars: usize) -> String {
    if t.chars().count() > chars {
        cut(t, chars)
    } else {
        t.to_string()
    }
}

/// These keys of an object, those it has, in this order.
fn keys_of(from: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| Some((k.to_string(), from.get(*k)?.clone())))
        .collect()
}

fn step_brief(step: &Value) -> Value {
    let mut k = keys_of(
        step,
        &[
            "id",
            "method",
            "title",
            "overhead",
            "estimated_s",
            "alongside",
            "instead_of",
            "run_profiler",
        ],
    );
    let args = &step["run_profiler"];
    if let Some(Value::Array(fallbacks)) = step.get("fallbacks") {
        let kept = fallbacks
            .iter()
            .map(|f| {
                let theirs = &f["run_profiler"];
                let mut same = args.clone();
                if let Value::Object(s) = &mut same {
                    s.insert("profiler".into(), theirs["profiler"].clone());
                    match theirs.get("options") {
                        Some(o) => s.insert("options".into(), o.clone()),
                        None => s.remove("options"),
                    };
                }
                if &same == theirs {
                    let mut by_method = json!({"method": f["method"]});
                    if let Some(o) = theirs.get("options") {
                        by_method["options"] = o.clone();
                    }
                    by_method
                } else {
                    json!({"method": f["method"], "run_profiler": theirs})
                }
            })
            .collect();
        k.insert("fallbacks".into(), Value::Array(kept));
    }
    Value::Object(k)
}

/// Fractions as a reader uses them: three decimals from 1 up (a Unix time keeps its
/// milliseconds), three significant digits below. Integers (bytes, counts) stay exact.
fn round_floats(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let Some(x) = n.as_f64() else { return };
            let places = if x.abs() >= 1.0 || x == 0.0 {
                3
            } else {
                // 0.0123 → 2 leading zeros → 4 places for 3 significant digits.
                (2 - x.abs().log10().floor() as i32).clamp(3, 12)
            };
            let scale = 10f64.powi(places);
            if let Some(r) = serde_json::Number::from_f64((x * scale).round() / scale) {
                *n = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(round_floats),
        Value::Object(m) => m.values_mut().for_each(round_floats),
        _ => {}
    }
}

/// A brief whose whole is a file (a report's `report.json`): its note names the file.
pub fn whole_is_in(text: String, path: &str) -> String {
    let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(&text) else {
        return text;
    };
    let Some(Value::String(said)) = m.get("_brief") else {
        return text;
    };
    let what = said.split("; the whole").next().unwrap_or(said).to_string();
    m.insert(
        "_brief".into(),
        json!(format!("{what}; the whole: `{path}`")),
    );
    Value::Object(m).to_string()
}

/// Where the whole result is, as the last key of the brief.
fn note(brief: &mut Value, whole: &Value, what: &str) {
    let Value::Object(m) = brief else { return };
    let where_whole = match whole.get("run_id").and_then(Value::as_str) {
        Some(id) if whole.get("metrics").is_some() => format!(
            "the whole record: get_run {{\"run_id\": \"{id}\", \"detail\": \"full\"}} (its structuredContent is the record)"
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
    fn a_plan_brief_keeps_every_step_and_its_arguments_whole() {
        let args = |profiler: &str| {
            json!({"profiler": profiler, "target": {"command": ["python3", "work.py", "--n", "3"]},
                   "cwd": "/srv/app", "options": {"rate_hz": 100.0}, "label": "hotspots"})
        };
        let steps: Vec<Value> = (1..=8)
            .map(|i| {
                let mut other = args("cprofile");
                other["label"] = json!("another label");
                json!({"id": format!("s{i}"), "method": "py_spy_record", "title": "py-spy",
                       "why": "x".repeat(600), "overhead": "low", "families": ["cpu_hotspots"],
                       "run_profiler": args("py_spy_record"),
                       "fallbacks": [
                           {"method": "pyinstrument", "run_profiler": args("pyinstrument")},
                           {"method": "cprofile", "run_profiler": other}]})
            })
            .collect();
        let plan = json!({"target": {"target_id": "t1"}, "recipe": {"id": "python_program"},
                          "steps": steps, "questions": []});
        let text = plan_brief(&plan);
        // Eight steps with their arguments: over the budget rather than a step short, and
        // within the 8 KiB a result's text may take.
        assert!(text.len() <= 8 * 1024, "{} bytes", text.len());
        assert!(text.len() < plan.to_string().len() / 2, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["recipe"], "python_program");
        let kept = v["steps"].as_array().unwrap();
        assert_eq!(kept.len(), 8);
        for s in kept {
            assert_eq!(s["run_profiler"], args("py_spy_record"));
            assert!(s.get("why").is_none());
            // Same arguments but the profiler: by method; others: whole.
            assert_eq!(
                s["fallbacks"][0],
                json!({"method": "pyinstrument", "options": {"rate_hz": 100.0}})
            );
            assert_eq!(s["fallbacks"][1]["run_profiler"]["label"], "another label");
        }
        assert!(v["_brief"]
            .as_str()
            .unwrap()
            .contains("\"detail\": \"full\""));
        // A plan that fits is given whole.
        let small = json!({"steps": [], "questions": ["which?"]});
        assert_eq!(plan_brief(&small), small.to_string());
    }

    #[test]
    fn a_brief_rounds_fractions_and_keeps_integers() {
        let mut v = json!({"wall_s": 7.703715806, "share": 0.0123456, "at": 1796588173.17508,
                           "bytes": 2017175415u64, "none": 0.0, "neg": -2.50049});
        round_floats(&mut v);
        assert_eq!(
            v,
            json!({"wall_s": 7.704, "share": 0.0123, "at": 1796588173.175,
                   "bytes": 2017175415u64, "none": 0.0, "neg": -2.5})
        );
    }

    #[test]
    fn a_report_brief_names_its_file_as_the_whole() {
        let report = json!({"rows": (0..2000).map(|i| json!({"i": i})).collect::<Vec<_>>()});
        let text = whole_is_in(json_brief(&report), "profile_output/s/report.json");
        let v: Value = serde_json::from_str(&text).unwrap();
        let said = v["_brief"].as_str().unwrap();
        assert!(
            said.ends_with("the whole: `profile_output/s/report.json`"),
            "{said}"
        );
        assert!(said.contains("in brief"), "{said}");
        assert!(!said.contains("structuredContent"), "{said}");
        // A text that is not a brief is left as it is.
        assert_eq!(whole_is_in("{\"a\":1}".into(), "x"), "{\"a\":1}");
    }

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
