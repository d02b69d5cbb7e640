//! `compare`: two sessions (or two sets of runs), before and after a fix. Runs are matched by
//! method and target; repeats of a match on each side give the run-to-run noise each delta is
//! judged against.

use crate::fmt::{secs, tr};
use crate::session::{self, Session};
use crate::{write_file, ReportConfig, ReportError, ReportErrorKind};
use std::collections::BTreeMap;
use system_profile_model::report::{CompareInput, CompareOutput, CompareSide, Delta, Lang};
use system_profile_model::run::{RunRecord, RunStatus};

/// A metric's values over a group's repeats.
type Values = BTreeMap<(String, String), Vec<f64>>;

/// One run's comparable figures: (table, metric) → value.
fn facts(run: &RunRecord) -> Vec<((String, String), f64)> {
    let mut out: Vec<((String, String), f64)> = Vec::new();
    let mut put = |table: &str, metric: String, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.push(((table.into(), metric), v));
        }
    };
    let m = &run.metrics;
    if let Some(t) = &m.time_v {
        put("cpu", "wall_s".into(), Some(t.wall_s));
        put("cpu", "cpu_s".into(), Some(t.user_s + t.sys_s));
        put(
            "cpu",
            "voluntary_ctx_switches".into(),
            Some(t.voluntary_ctx_switches as f64),
        );
        put(
            "cpu",
            "involuntary_ctx_switches".into(),
            Some(t.involuntary_ctx_switches as f64),
        );
        put(
            "memory",
            "max_rss_bytes".into(),
            Some(t.max_rss_bytes as f64),
        );
    } else {
        put("cpu", "wall_s".into(), run.wall_s);
    }
    if let Some(p) = &m.procfs {
        put(
            "memory",
            "tree_rss_peak_bytes".into(),
            Some(p.rss_peak_bytes as f64),
        );
    }
    if let Some(p) = &m.python_memory {
        put(
            "memory",
            "python_heap_peak_bytes".into(),
            Some(p.peak_bytes as f64),
        );
    }
    if let Some(a) = &m.allocations {
        put(
            "memory",
            "heap_peak_bytes".into(),
            Some(a.peak_bytes as f64),
        );
        put(
            "memory",
            "allocations".into(),
            Some(a.total_allocations as f64),
        );
    }
    if let Some(s) = &m.stacks {
        for f in s.by_self.iter().take(5) {
            put(
                "hotspots",
                format!("self_percent {}", f.function),
                Some(f.self_percent),
            );
        }
    }
    if let Some(c) = &m.calls {
        put("hotspots", "profiled_time_s".into(), Some(c.total_time_s));
        for f in c.by_tottime.iter().take(5) {
            put(
                "hotspots",
                format!("tottime_s {}", f.function),
                Some(f.tottime_s),
            );
        }
    }
    if let Some(g) = &m.gpu {
        for d in &g.devices {
            if let Some(s) = d.series.get("sm_util_percent") {
                put(
                    "gpu",
                    format!("sm_util_mean_percent cuda:{}", d.gpu),
                    Some(s.mean),
                );
            }
            if let Some(s) = d.series.get("mem_used_bytes") {
                put(
                    "memory",
                    format!("gpu_used_peak_bytes cuda:{}", d.gpu),
                    Some(s.max),
                );
            }
        }
    }
    if let Some(t) = &m.trace {
        for d in &t.devices {
            put(
                "gpu",
                format!("idle_percent cuda:{}", d.device),
                Some(d.idle_percent),
            );
            put(
                "gpu",
                format!("kernel_s cuda:{}", d.device),
                Some(d.kernel_us * 1e-6),
            );
        }
        for c in &t.copies {
            put(
                "interconnect",
                format!("{} time_s", c.direction),
                Some(c.total_us * 1e-6),
            );
        }
    }
    if let Some(s) = &m.syscalls {
        put("cpu", "syscall_s".into(), Some(s.total_seconds));
    }
    out
}

/// The group a run belongs to: its method with its observers, and its target. A run watched
/// by py-spy (paused for each sample: some 90 voluntary switches a second more) or counted by
/// perf is never compared with one that was not.
fn group_of(run: &RunRecord) -> String {
    let method: Vec<String> = std::iter::once(run.profiler.id())
        .chain(run.observers.iter().map(|m| m.id()))
        .collect();
    format!("{} {}", method.join("+"), crate::target_text(&run.target))
}

fn gather(s: &Session) -> BTreeMap<String, Values> {
    let mut groups: BTreeMap<String, Values> = BTreeMap::new();
    for run in s.runs.iter().filter(|r| r.status == RunStatus::Completed) {
        let g = groups.entry(group_of(run)).or_default();
        for (k, v) in facts(run) {
            g.entry(k).or_default().push(v);
        }
    }
    groups
}

fn mean(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |a, x| a + x) / v.len() as f64
}

/// Sum of squared deviations from the mean.
fn ss(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().fold(0.0, |a, x| a + (x - m) * (x - m))
}

/// Judge after - before against the pooled standard deviation of the repeats: larger than
/// noise when it exceeds twice the standard error of the difference of the means.
pub fn judge(before: &[f64], after: &[f64]) -> (Option<f64>, &'static str) {
    let (n1, n2) = (before.len(), after.len());
    let df = (n1 + n2).saturating_sub(2);
    if n1 == 0 || n2 == 0 || df == 0 || (n1 < 2 && n2 < 2) {
        return (None, "unknown");
    }
    let sd = ((ss(before) + ss(after)) / df as f64).sqrt();
    let se = sd * (1.0 / n1 as f64 + 1.0 / n2 as f64).sqrt();
    let delta = (mean(after) - mean(before)).abs();
    let verdict = if delta > 2.0 * se {
        "larger_than_noise"
    } else {
        "within_noise"
    };
    (Some(sd), verdict)
}

fn side_name(side: &CompareSide) -> String {
    if side.runs.is_empty() {
        side.session.clone()
    } else {
        format!("{}[{}]", side.session, side.runs.join(","))
    }
}

fn value(metric: &str, v: f64) -> String {
    if metric.ends_with("bytes") {
        crate::fmt::bytes_f(v)
    } else if metric.ends_with("_s") || metric.starts_with("tottime_s") || metric.contains("time_s")
    {
        secs(v)
    } else if metric.contains("percent") {
        crate::fmt::pct(v)
    } else {
        format!("{v:.0}")
    }
}

fn verdict_text(lang: Lang, v: &str) -> String {
    match v {
        "larger_than_noise" => tr(lang, "**larger than noise**", "**ノイズより大きい**"),
        "within_noise" => tr(lang, "within noise", "ノイズの範囲内"),
        _ => tr(
            lang,
            "unknown (one run a side: repeat it)",
            "不明（各 1 回のみ: 繰り返して測る）",
        ),
    }
}

fn render(out: &CompareOutput) -> String {
    let lang = out.lang;
    let mut md = format!(
        "# {}: {} → {}\n\n",
        tr(lang, "Comparison", "比較"),
        out.before,
        out.after
    );
    md.push_str(&tr(
        lang,
        "Runs are matched by method, observers and target (a run watched by py-spy or perf is never compared with one that was not). Noise is the pooled standard deviation of each side's repeats; a delta is larger than noise when it exceeds twice the standard error of the difference (about 95%).\n\n",
        "実行は手法・観測者・対象で対応づける（py-spy や perf が観測した実行は、観測されていない実行と比べない）。ノイズは両側の繰り返しの合併標準偏差。差が差の標準誤差の 2 倍（約 95%）を超えるとき「ノイズより大きい」とする。\n\n",
    ));
    let mut group = String::new();
    for d in &out.deltas {
        if d.group != group {
            if !group.is_empty() {
                md.push('\n');
            }
            group = d.group.clone();
            md.push_str(&format!("## `{group}`\n\n"));
            md.push_str(&format!(
                "| {} |\n|---|---|---|---|---|---|---|---|\n",
                [
                    tr(lang, "Metric", "指標"),
                    tr(lang, "Before", "前"),
                    tr(lang, "After", "後"),
                    "Δ".into(),
                    "Δ%".into(),
                    tr(lang, "Noise (sd)", "ノイズ（標準偏差）"),
                    tr(lang, "Repeats before / after", "繰り返し 前 / 後"),
                    tr(lang, "Verdict", "判定"),
                ]
                .join(" | ")
            ));
        }
        md.push_str(&format!(
            "| {} | {} | {} | {}{} | {} | {} | {} / {} | {} |\n",
            d.metric.replace('|', "\\|"),
            value(&d.metric, d.before),
            value(&d.metric, d.after),
            if d.delta >= 0.0 { "+" } else { "-" },
            value(&d.metric, d.delta.abs()),
            d.delta_percent
                .map(|p| format!("{p:+.1}%"))
                .unwrap_or_else(|| "—".into()),
            d.noise
                .map(|n| value(&d.metric, n))
                .unwrap_or_else(|| "—".into()),
            d.repeats_before,
            d.repeats_after,
            verdict_text(lang, &d.verdict)
        ));
    }
    if !out.unmatched.is_empty() {
        md.push_str(&format!(
            "\n{}\n",
            tr(lang, "Measured on one side only:", "片側でのみ測定:")
        ));
        for u in &out.unmatched {
            md.push_str(&format!("- `{u}`\n"));
        }
    }
    md
}

/// `compare`: the deltas between two sessions, each judged against the repeats' noise, written
/// beside the after session's report.
pub fn compare(config: &ReportConfig, input: &CompareInput) -> Result<CompareOutput, ReportError> {
    session::check_name("before.session", &input.before.session)?;
    session::check_name("after.session", &input.after.session)?;
    let before = session::load(&config.root, &input.before.session, &input.before.runs)?;
    let after = session::load(&config.root, &input.after.session, &input.after.runs)?;
    let (b, a) = (gather(&before), gather(&after));
    if b.is_empty() || a.is_empty() {
        return Err(ReportError::new(
            ReportErrorKind::NoData,
            format!(
                "nothing to compare: {} has {} completed run(s) and {} has {}; run the same method on the same target in both",
                before.name,
                before.runs.iter().filter(|r| r.status == RunStatus::Completed).count(),
                after.name,
                after.runs.iter().filter(|r| r.status == RunStatus::Completed).count()
            ),
        ));
    }
    let mut deltas = Vec::new();
    let mut unmatched = Vec::new();
    for (group, bv) in &b {
        let Some(av) = a.get(group) else {
            unmatched.push(format!("{group} ({})", before.name));
            continue;
        };
        // A function's share is 0 where it was not sampled at all: the fix that removes a
        // hotspot shows as its share falling to 0, not as a row that vanished.
        let runs_a = av.values().map(Vec::len).max().unwrap_or(0);
        let runs_b = bv.values().map(Vec::len).max().unwrap_or(0);
        let mut keys: Vec<&(String, String)> = bv.keys().collect();
        keys.extend(av.keys().filter(|k| !bv.contains_key(*k)));
        keys.sort();
        for key in keys {
            let (table, metric) = key;
            let absent_is_zero = metric.starts_with("self_percent ");
            let pick = |values: Option<&Vec<f64>>, runs: usize| match values {
                Some(v) => Some(v.clone()),
                None if absent_is_zero => Some(vec![0.0; runs]),
                None => None,
            };
            let (Some(before_values), Some(after_values)) =
                (pick(bv.get(key), runs_b), pick(av.get(key), runs_a))
            else {
                continue;
            };
            let (before_values, after_values) = (&before_values, &after_values);
            let (mb, ma) = (mean(before_values), mean(after_values));
            let (noise, verdict) = judge(before_values, after_values);
            deltas.push(Delta {
                table: table.clone(),
                group: group.clone(),
                metric: metric.clone(),
                before: mb,
                after: ma,
                delta: ma - mb,
                delta_percent: (mb != 0.0).then(|| (ma - mb) / mb.abs() * 100.0),
                repeats_before: before_values.len() as u32,
                repeats_after: after_values.len() as u32,
                noise,
                verdict: verdict.into(),
            });
        }
    }
    for group in a.keys().filter(|g| !b.contains_key(*g)) {
        unmatched.push(format!("{group} ({})", after.name));
    }
    if deltas.is_empty() {
        return Err(ReportError::new(
            ReportErrorKind::NoData,
            format!(
                "no run of {} matches one of {} by method, observers and target; unmatched: {}",
                before.name,
                after.name,
                unmatched.join("; ")
            ),
        ));
    }
    let stem = format!(
        "{}/{}/compare-{}-vs-{}",
        session::OUTPUT_DIR,
        after.name,
        before.name,
        after.name
    );
    let mut out = CompareOutput {
        before: side_name(&input.before),
        after: side_name(&input.after),
        lang: input.lang,
        deltas,
        unmatched,
        markdown: String::new(),
        markdown_path: format!("{stem}.md"),
        json_path: format!("{stem}.json"),
        format: input.format,
    };
    out.markdown = render(&out);
    let json = serde_json::to_vec_pretty(&out)
        .map_err(|e| ReportError::new(ReportErrorKind::Io, e.to_string()))?;
    for (path, bytes) in [
        (&out.json_path, json.as_slice()),
        (&out.markdown_path, out.markdown.as_bytes()),
    ] {
        write_file(&config.root, path, bytes).map_err(|e| {
            ReportError::new(ReportErrorKind::Io, format!("cannot write {path}: {e}"))
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_decides_the_verdict() {
        // 5% faster with 1% noise: real.
        let (sd, v) = judge(&[10.0, 10.1, 9.9], &[9.5, 9.6, 9.4]);
        assert!((sd.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(v, "larger_than_noise");
        // The same shift with 10% noise: not shown.
        let (_, v) = judge(&[10.0, 11.0, 9.0], &[9.5, 10.5, 8.5]);
        assert_eq!(v, "within_noise");
        // One run a side: no noise to judge by.
        assert_eq!(judge(&[10.0], &[5.0]), (None, "unknown"));
        // One side repeated: its spread is the noise.
        let (sd, v) = judge(&[10.0], &[5.0, 5.2, 4.8]);
        assert!(sd.is_some());
        assert_eq!(v, "larger_than_noise");
    }
}
