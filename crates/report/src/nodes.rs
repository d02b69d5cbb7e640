//! "Across nodes": a cluster job seen on every node it holds (`cluster_nodes`): each node's
//! clock against the gatherer's and its window, its processes' CPU and memory, and the ranks
//! side by side with their hottest functions and the straggler named with its node.

use crate::fmt::{bytes, pct, secs, tr};
use crate::markdown::{code, esc, heads, table};
use crate::session::Session;
use crate::tables::{cite, measured};
use system_profile_model::report::{AcrossNodes, Report};
use system_profile_model::run::ArtifactKind;

pub fn across_nodes(session: &Session) -> Vec<AcrossNodes> {
    session
        .runs
        .iter()
        .filter(|r| measured(r))
        .filter_map(|run| {
            Some(AcrossNodes {
                source: cite(run, ArtifactKind::NodesJson),
                profile: run.metrics.nodes.clone()?,
            })
        })
        .collect()
}

/// A node's GPUs in one cell: each one's mean SM use and its memory at its highest.
fn gpus(n: &system_profile_model::metrics::cluster::NodeObservation) -> String {
    let Some(g) = &n.gpu else {
        return "—".into();
    };
    g.devices
        .iter()
        .map(|d| {
            let sm = d.series.get("sm_util_percent").map(|s| pct(s.mean));
            let mem = d.series.get("mem_used_bytes").map(|s| bytes(s.max as u64));
            format!(
                "{}: {}, {}",
                d.gpu,
                sm.unwrap_or_else(|| "—".into()),
                mem.unwrap_or_else(|| "—".into())
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    for a in &report.across_nodes {
        let p = &a.profile;
        md.push_str(&format!(
            "### {} ({}, {})\n\n",
            tr(lang, "Across nodes", "ノード横断"),
            system_profile_model::target::job_phrase(&p.engine, &p.job_id),
            a.source.run_id
        ));
        let rows: Vec<Vec<String>> = p
            .nodes
            .iter()
            .map(|n| {
                vec![
                    esc(&n.node),
                    match (n.clock_offset_s, n.clock_uncertainty_s) {
                        (Some(o), Some(u)) => format!("{:+.3} s ± {:.3} s", o, u),
                        _ => "—".into(),
                    },
                    n.processes.to_string(),
                    secs(n.cpu_s),
                    bytes(n.rss_peak_bytes),
                    n.ranks.len().to_string(),
                    gpus(n),
                    esc(n.error.as_deref().unwrap_or("")),
                ]
            })
            .collect();
        table(
            md,
            &heads(
                lang,
                &[
                    ("Node", "ノード"),
                    ("Clock offset", "時計のずれ"),
                    ("Processes", "プロセス"),
                    ("CPU", "CPU"),
                    ("RSS peak (sum)", "RSS ピーク（合計）"),
                    ("Ranks", "ランク"),
                    (
                        "GPUs (SM mean, memory peak)",
                        "GPU（SM 平均、メモリピーク）",
                    ),
                    ("Problem", "問題"),
                ],
            ),
            &rows,
        );
        let mut ranks: Vec<(
            &str,
            &system_profile_model::metrics::cluster::RankObservation,
        )> = p
            .nodes
            .iter()
            .flat_map(|n| n.ranks.iter().map(move |r| (n.node.as_str(), r)))
            .collect();
        ranks.sort_by_key(|(_, r)| r.rank);
        if !ranks.is_empty() {
            let rows: Vec<Vec<String>> = ranks
                .iter()
                .map(|(node, r)| {
                    vec![
                        format!(
                            "{}{}{}",
                            r.rank,
                            r.label
                                .as_deref()
                                .map(|l| format!(" `{}`", esc(l)))
                                .unwrap_or_default(),
                            if p.stragglers.contains(&r.rank) {
                                format!(" ({})", tr(lang, "straggler", "遅いランク"))
                            } else {
                                String::new()
                            }
                        ),
                        esc(node),
                        r.pid.to_string(),
                        format!(
                            "{} ({})",
                            secs(r.cpu_s),
                            pct(r.cpu_s / p.window_s.max(1e-9) * 100.0)
                        ),
                        bytes(r.rss_peak_bytes),
                        r.comm_percent.map(pct).unwrap_or_else(|| "—".into()),
                        r.top_functions
                            .first()
                            .map(|f| format!("{} {}", code(&f.function), pct(f.percent)))
                            .unwrap_or_else(|| "—".into()),
                    ]
                })
                .collect();
            table(
                md,
                &heads(
                    lang,
                    &[
                        ("Rank", "ランク"),
                        ("Node", "ノード"),
                        ("PID", "PID"),
                        ("CPU (of the window)", "CPU（窓に対する割合）"),
                        ("RSS peak", "RSS ピーク"),
                        ("In collectives", "集団通信中"),
                        ("Hottest function", "最も重い関数"),
                    ],
                ),
                &rows,
            );
        }
        md.push_str(&tr(
            lang,
            format!(
                "Every node observed for the same {} window, placed there by the job's engine (srun beside a Slurm job's steps, an actor pinned to each Ray node); a node's clock offset is its clock minus this machine's, measured over the exchange with the shortest round trip (± half of it), and removed from its times. CPU is the rank's own, over the window: a rank far above the others while they wait is the one they wait for.\n\n",
                secs(p.window_s)
            ),
            format!(
                "各ノードを同じ {} の窓で観測（ジョブのエンジンが配置: Slurm ならステップの横に srun、Ray なら各ノードに固定したアクター）。時計のずれはそのノードの時計とこのマシンの時計の差で、往復が最短だったやり取りで測り（± はその半分）、時刻から取り除いた。CPU は窓の間のそのランク自身のもの: 他が待つ間に突出して多いランクが、待たれているランク。\n\n",
                secs(p.window_s)
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use system_profile_model::metrics::cluster::NodeObservation;
    use system_profile_model::metrics::{GpuDeviceSummary, GpuSummary, SeriesStats};

    fn stats(mean: f64, max: f64) -> SeriesStats {
        SeriesStats {
            samples: 10,
            mean,
            p50: mean,
            p95: max,
            min: 0.0,
            max,
        }
    }

    #[test]
    fn a_nodes_gpus_are_one_cell_and_none_is_a_dash() {
        let device = |gpu: u32, sm: f64, mem_gib: f64| GpuDeviceSummary {
            gpu,
            name: None,
            uuid: None,
            mem_total_bytes: None,
            series: [
                ("sm_util_percent".to_string(), stats(sm, 100.0)),
                (
                    "mem_used_bytes".to_string(),
                    stats(0.0, mem_gib * 1024.0 * 1024.0 * 1024.0),
                ),
            ]
            .into(),
            processes: Vec::new(),
            vs_peak: Vec::new(),
        };
        let node = NodeObservation {
            gpu: Some(GpuSummary {
                devices: vec![device(0, 87.5, 40.0), device(1, 12.0, 2.0)],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(gpus(&node), "0: 87.5%, 40.0 GiB; 1: 12.0%, 2.0 GiB");
        assert_eq!(gpus(&NodeObservation::default()), "—");
    }
}
