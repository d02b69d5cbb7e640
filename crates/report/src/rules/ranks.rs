//! Rules on the ranks of a distributed run side by side: the rank the others wait for.

use super::*;
use crate::fmt::{secs, tr};
use system_profile_model::report::Confidence;

/// A rank the others wait for in the collectives: what they lose waiting is what making it
/// as fast as them saves, per rank, over the traced window.
pub(super) fn straggler_rank(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.interconnect else {
        return Vec::new();
    };
    // On a busy machine a rank is also late because it was preempted: the finding stands for
    // the run, but says so and is trusted less.
    let busy = inputs
        .report
        .cpu
        .iter()
        .filter_map(|r| {
            let (cores, queued) = (r.cpu_utilization_cores?, r.run_queue_cores?);
            (cores + queued > 0.0).then(|| queued / (cores + queued))
        })
        .fold(0.0, f64::max);
    let contended = busy >= CONTENTION_SHARE;
    let mut out = Vec::new();
    for b in &table.balance {
        // The window the figures cover: the busiest rank's computing and communicating.
        let window_s = b
            .rows
            .iter()
            .map(|r| r.compute_us + r.comm_us)
            .fold(0.0, f64::max)
            * 1e-6;
        for &s in &b.stragglers {
            let Some(slow) = b.rows.iter().find(|r| r.rank == s) else {
                continue;
            };
            let mut others: Vec<&system_profile_model::report::RankRow> =
                b.rows.iter().filter(|r| r.rank != s).collect();
            if others.is_empty() {
                continue;
            }
            others.sort_by(|a, b| a.comm_us.total_cmp(&b.comm_us));
            let typical = others[(others.len() - 1) / 2];
            // The others' extra time in collectives is their wait: what it saves them.
            let waited_s = (typical.comm_us - slow.comm_us).max(0.0) * 1e-6;
            if waited_s <= 0.0 {
                continue;
            }
            // The node is named when the ranks span several.
            let nodes: std::collections::BTreeSet<Option<u32>> =
                b.rows.iter().map(|r| r.node_rank).collect();
            let node = |r: &system_profile_model::report::RankRow| match r.node_rank {
                Some(n) if nodes.len() > 1 => format!(" (node {n})"),
                _ => String::new(),
            };
            let caveat = if contended {
                tr(
                    lang,
                    format!(" The machine was busy ({:.0}% of what a run wanted to run waited for a CPU): preemption alone can make a rank late; profile again on an idle machine before changing the program.", busy * 100.0),
                    format!(" マシンが混んでいた（実行したい時間の {:.0}% が CPU 待ち）: プリエンプションだけでもランクは遅れる。プログラムを変える前に空いたマシンで測り直す。", busy * 100.0),
                )
            } else {
                String::new()
            };
            out.push(Draft {
                title: tr(
                    lang,
                    format!("Rank {s}{} is the straggler: the other ranks wait for it", node(slow)),
                    format!("rank {s}{} が遅く、他のランクはこれを待っている", node(slow)),
                ),
                action: tr(
                    lang,
                    format!(
                        "Rank {} spent {} in collectives against {} on rank {s}, and computed {} against {}: the others arrive first and wait there ({}). Find what rank {s} does that they do not: work only it does (logging, checkpointing, evaluation, code under `if rank == ...`), uneven batches or shards, a slower or busier CPU/GPU or node; its own hotspots in the per-rank profile show where. As fast as the others, each rank saves about {} of the {} traced.",
                        typical.rank,
                        secs(typical.comm_us * 1e-6),
                        secs(slow.comm_us * 1e-6),
                        secs(typical.compute_us * 1e-6),
                        secs(slow.compute_us * 1e-6),
                        b.measured_on,
                        secs(waited_s),
                        secs(window_s)
                    ) + &caveat,
                    format!(
                        "rank {} は集団通信に {}（rank {s} は {}）、計算に {}（rank {s} は {}）: 他のランクが先に着いて待っている（{}）。rank {s} だけがしていることを探す: そのランクだけの処理（ログ、チェックポイント、評価、`if rank == ...` の下のコード）、偏ったバッチやシャード、遅いか混んでいる CPU/GPU やノード。ランクごとのプロファイルのホットスポットが場所を示す。他と同じ速さになれば、計測した {} のうち各ランク約 {} 短縮。",
                        typical.rank,
                        secs(typical.comm_us * 1e-6),
                        secs(slow.comm_us * 1e-6),
                        secs(typical.compute_us * 1e-6),
                        secs(slow.compute_us * 1e-6),
                        b.measured_on,
                        secs(window_s),
                        secs(waited_s)
                    ) + &caveat,
                ),
                evidence: vec![format!("interconnect ranks rank {s} vs rank {}", typical.rank)],
                sources: b.sources.clone(),
                confidence: if contended {
                    Confidence::Low
                } else {
                    Confidence::Medium
                },
                ..Draft::saves_time(waited_s, (window_s > 0.0).then_some(window_s))
            });
        }
    }
    out
}

/// The rank the others wait for, across the nodes of a cluster job: it computes while they
/// sit off the CPU. Named with its node and the function its time goes to.
pub(super) fn straggler_across_nodes(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for a in &inputs.report.across_nodes {
        let p = &a.profile;
        let ranks: Vec<(
            &str,
            &system_profile_model::metrics::cluster::RankObservation,
        )> = p
            .nodes
            .iter()
            .flat_map(|n| n.ranks.iter().map(move |r| (n.node.as_str(), r)))
            .collect();
        for &s in &p.stragglers {
            let Some((node, slow)) = ranks.iter().find(|(_, r)| r.rank == s) else {
                continue;
            };
            let mut others: Vec<f64> = ranks
                .iter()
                .filter(|(_, r)| r.rank != s)
                .map(|(_, r)| r.cpu_s)
                .collect();
            if others.is_empty() {
                continue;
            }
            others.sort_by(f64::total_cmp);
            let typical = others[(others.len() - 1) / 2];
            let hot = slow
                .top_functions
                .first()
                .map(|f| {
                    tr(
                        lang,
                        format!(" Its samples go to `{}` ({:.0}%).", f.function, f.percent),
                        format!(" サンプルの多くは `{}`（{:.0}%）。", f.function, f.percent),
                    )
                })
                .unwrap_or_default();
            // What the others would not wait: the straggler's extra computing, per window.
            let gain_s = (slow.cpu_s - typical).max(0.0).min(p.window_s);
            let job = system_profile_model::target::job_phrase(&p.engine, &p.job_id);
            let label = slow
                .label
                .as_deref()
                .map(|l| format!(" (`{l}`)"))
                .unwrap_or_default();
            out.push(Draft {
                title: tr(
                    lang,
                    format!("Rank {s}{label} on node {node} is the straggler of {job}"),
                    format!("{job} のノード {node} の rank {s}{label} が遅いランク"),
                ),
                action: tr(
                    lang,
                    format!(
                        "Over the same {} window on every node, rank {s} used {} of CPU against {} for the typical other rank, which sat off the CPU waiting for it in the collectives.{hot} Give it the same work as the others (even shards and batch sizes, no work under `if rank == ...`), or move that work out of the step; as fast as the others, each rank saves about {} per {}.",
                        secs(p.window_s), secs(slow.cpu_s), secs(typical), secs(gain_s), secs(p.window_s)
                    ),
                    format!(
                        "全ノードで同じ {} の窓の間に、rank {s} は CPU を {} 使い、典型的な他のランクは {}（集団通信でこれを待って CPU を離れていた）。{hot}他と同じ仕事量にする（シャードとバッチを均等に、`if rank == ...` の下の処理をなくす）か、その処理をステップの外へ出す。他と同じ速さなら各ランクが {} あたり約 {} 短縮。",
                        secs(p.window_s), secs(slow.cpu_s), secs(typical), secs(p.window_s), secs(gain_s)
                    ),
                ),
                evidence: vec![format!("across nodes {} rank {s}", a.source.run_id)],
                sources: vec![a.source.clone()],
                confidence: Confidence::Medium,
                ..Draft::saves_time(gain_s, Some(p.window_s))
            });
        }
    }
    out
}
