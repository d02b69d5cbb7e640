//! The ranks of a distributed job by node: each rank and each launcher (agent) the /proc
//! sampler followed, with its CPU and memory, from the run that saw it. A job that runs
//! several nodes here is sampled once per agent, side by side in one window.

use crate::cpu_table::measured;
use crate::fmt::{bytes, cell, secs, tr};
use crate::markdown::{cite, heads, table};
use crate::session::Session;
use crate::tables::cite as cite_run;
use system_profile_model::metrics::ProcessUsage;
use system_profile_model::report::{RankProcessRow, Report};
use system_profile_model::run::ArtifactKind;

/// One row per rank, and per process that started ranks, of every sampler run that saw one.
pub fn rank_process_rows(session: &Session) -> Vec<RankProcessRow> {
    let mut rows = Vec::new();
    for run in session.runs.iter().filter(|r| measured(r)) {
        let Some(s) = &run.metrics.procfs else {
            continue;
        };
        let ranks: Vec<&ProcessUsage> = s
            .processes
            .iter()
            .filter(|p| p.ids.rank.is_some())
            .collect();
        let row = |p: &ProcessUsage, role: &str, node_rank: Option<u32>| {
            let seen_s = (p.last_seen_s - p.first_seen_s).max(0.0);
            let cpu_s = p.cpu_user_s + p.cpu_sys_s;
            RankProcessRow {
                run_id: run.run_id.clone(),
                sources: vec![cite_run(run, ArtifactKind::ProcfsJsonl)],
                node_rank,
                rank: p.ids.rank,
                local_rank: p.ids.local_rank,
                pid: p.pid,
                role: role.into(),
                seen_from_unix_s: run.started_at_unix_s + p.first_seen_s,
                seen_s,
                cpu_user_s: p.cpu_user_s,
                cpu_sys_s: p.cpu_sys_s,
                cpu_utilization_cores: if seen_s > 0.0 { cpu_s / seen_s } else { 0.0 },
                run_queue_s: p.run_queue_s,
                rss_peak_bytes: p.rss_peak_bytes,
                pss_peak_bytes: p.pss_peak_bytes,
            }
        };
        for p in &s.processes {
            if p.ids.rank.is_some() {
                rows.push(row(p, "rank", p.ids.node_rank));
            } else if let Some(first) = ranks.iter().find(|r| r.ppid == p.pid) {
                // An agent has no RANK of its own: its node is its ranks'.
                rows.push(row(p, "agent", first.ids.node_rank));
            }
        }
    }
    // By node, the agent before its ranks, then by rank.
    rows.sort_by_key(|r| (r.node_rank, r.rank.is_some(), r.rank, r.pid));
    rows
}

/// The table, when the runs saw ranks.
pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    let rows = &report.rank_processes;
    if rows.is_empty() {
        return;
    }
    md.push_str(&format!(
        "#### {}\n\n",
        tr(lang, "Ranks by node", "ノード別のランク")
    ));
    let opt = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_else(|| "—".into());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                opt(r.node_rank),
                match r.rank {
                    Some(n) => n.to_string(),
                    None => tr(lang, "agent", "エージェント"),
                },
                opt(r.local_rank),
                r.pid.to_string(),
                r.run_id.clone(),
                secs(r.seen_s),
                secs(r.cpu_user_s + r.cpu_sys_s),
                format!("{:.2}", r.cpu_utilization_cores),
                cell(r.run_queue_s, secs),
                bytes(r.rss_peak_bytes),
                cell(r.pss_peak_bytes, bytes),
                cite(&r.sources),
            ]
        })
        .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("Node", "ノード"),
                ("Rank", "ランク"),
                ("Local rank", "ローカルランク"),
                ("PID", "PID"),
                ("Run", "実行"),
                ("Seen", "観測時間"),
                ("CPU (user + sys)", "CPU（ユーザー + システム）"),
                ("CPU util (cores)", "CPU 使用率（コア）"),
                ("Waiting for a CPU", "CPU 待ち"),
                ("RSS peak", "RSS ピーク"),
                ("PSS peak", "PSS ピーク"),
                ("Source", "出典"),
            ],
        ),
        &cells,
    );
    // The window every node's processes were seen in together.
    let mut nodes: Vec<Option<u32>> = rows.iter().map(|r| r.node_rank).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let span = |n: Option<u32>| {
        let of_node = rows.iter().filter(|r| r.node_rank == n);
        let from = of_node
            .clone()
            .map(|r| r.seen_from_unix_s)
            .fold(f64::MAX, f64::min);
        let to = of_node
            .map(|r| r.seen_from_unix_s + r.seen_s)
            .fold(f64::MIN, f64::max);
        (from, to)
    };
    let shared_s = nodes
        .iter()
        .map(|n| span(*n))
        .fold(None, |acc: Option<(f64, f64)>, (f, t)| {
            Some(acc.map_or((f, t), |(af, at)| (af.max(f), at.min(t))))
        });
    let together = match shared_s {
        Some((from, to)) if nodes.len() > 1 && to > from => tr(
            lang,
            format!(
                "The {} nodes were observed side by side: their windows share {}.",
                nodes.len(),
                secs(to - from)
            ),
            format!(
                "{} ノードは並行して観測した（共通の窓 {}）。",
                nodes.len(),
                secs(to - from)
            ),
        ),
        _ if nodes.len() > 1 => tr(
            lang,
            "The nodes were observed one after the other: compare them with care.",
            "各ノードは別々の時間に観測した。比較には注意。",
        ),
        _ => String::new(),
    };
    md.push_str(&tr(
        lang,
        format!("Each process over the part of its run's window it was seen in; the node is the `GROUP_RANK` of the ranks' environment, an agent's that of the ranks it started. {together}\n\n"),
        format!("各プロセスは、その実行の観測窓のうち見えていた部分についての値。ノードはランクの環境変数 `GROUP_RANK`、エージェントは起動したランクのもの。{together}\n\n"),
    ));
}
