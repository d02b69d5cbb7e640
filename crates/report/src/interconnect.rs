//! The interconnect table: copies and collectives per source (and per rank of a distributed
//! run), communication against computation, and how evenly the ranks worked.

use crate::fmt::{cell, signed_us, tr, us};
use crate::markdown::{cite as cite_sources, heads, table};
use crate::session::{RunInstrument, Session};
use crate::tables::{cite, direction, instrument_source, links, topology_line, Links};
use std::collections::BTreeMap;
use system_profile_model::collectives::Collectives;
use system_profile_model::metrics::{TraceAnalysis, TraceCopies};
use system_profile_model::report::{
    CommComputeRow, InterconnectRow, InterconnectTable, RankRow, RanksBalance, Source,
};
use system_profile_model::report::{Lang, Report};
use system_profile_model::run::ArtifactKind;
use system_profile_model::trace::TraceReport;

fn copy_row(kind: String, c: &TraceCopies, source: Source, links: &Links) -> InterconnectRow {
    let link = match kind.as_str() {
        "H2D" | "D2H" => links.pcie.clone().map(|p| p.0).or(Some("PCIe".into())),
        "D2D" => Some("device memory".into()),
        "P2P" if links.all_nvlink => Some("NVLink".into()),
        _ => None,
    };
    InterconnectRow {
        rank: None,
        sources: vec![source],
        count: c.count,
        bytes_p50: c.bytes_p50,
        bytes_p95: c.bytes_p95,
        bytes_mean: (c.count > 0).then(|| c.bytes as f64 / c.count as f64),
        bytes_total: Some(c.bytes),
        latency_us_p50: c.duration_us_p50,
        latency_us_p95: c.duration_us_p95,
        latency_us_mean: (c.count > 0).then(|| c.total_us / c.count as f64),
        bandwidth_gbps: Some(c.bandwidth_gbps),
        time_s: Some(c.total_us * 1e-6),
        link,
        link_peak_percent: c.vs_peak.as_ref().map(|p| p.percent).or_else(|| {
            // No peak in the source (nsys): the session's GPU model gives one.
            let peak = match kind.as_str() {
                "H2D" | "D2H" => links.pcie.as_ref().map(|p| p.1),
                "P2P" if links.all_nvlink => links.nvlink.as_ref().map(|n| n.1),
                _ => None,
            };
            peak.map(|p| c.bandwidth_gbps / p * 100.0)
        }),
        pageable_count: c.pageable_count,
        kind,
    }
}

/// The op of an NCCL kernel name: `ncclDevKernel_AllReduce_Sum_f32_RING_LL` → `AllReduce`.
fn nccl_op(kernel: &str) -> String {
    for op in [
        "AllReduce",
        "AllGather",
        "ReduceScatter",
        "Broadcast",
        "Reduce",
        "SendRecv",
        "Send",
        "Recv",
        "AllToAll",
    ] {
        if kernel.contains(op) {
            return op.to_string();
        }
    }
    "NCCL kernel".into()
}

fn percentile_of_counts(sizes: &[(u64, u64)], q: f64) -> Option<u64> {
    let total: u64 = sizes.iter().map(|s| s.1).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (bytes, calls) in sizes {
        seen += calls;
        if seen >= rank {
            return Some(*bytes);
        }
    }
    sizes.last().map(|s| s.0)
}

const KIND_ORDER: [&str; 5] = ["H2D", "D2H", "D2D", "P2P", "H2H"];

/// One row per transfer type of each source, then the communication/compute ratio per GPU.
pub fn interconnect(session: &Session) -> Option<InterconnectTable> {
    let links = links(session);
    let mut rows = Vec::new();
    for RunInstrument { run_id, summary: s } in &session.instrument {
        let source = instrument_source(run_id);
        for t in &s.transfers {
            let kind = direction(&t.direction);
            let bandwidth = t.bandwidth_gbps;
            let pcie = matches!(kind.as_str(), "H2D" | "D2H");
            rows.push(InterconnectRow {
                link: if pcie {
                    links.pcie.clone().map(|p| p.0).or(Some("PCIe".into()))
                } else {
                    Some("device memory".into())
                },
                link_peak_percent: if pcie {
                    links.pcie.as_ref().map(|p| bandwidth / p.1 * 100.0)
                } else {
                    links.memory_gbps.map(|m| bandwidth / m * 100.0)
                },
                kind,
                sources: vec![source.clone()],
                count: t.count,
                bytes_mean: Some(t.bytes_per_copy_mean),
                bytes_total: Some(t.bytes),
                latency_us_mean: (t.count > 0).then(|| t.time_s / t.count as f64 * 1e6),
                bandwidth_gbps: Some(bandwidth),
                time_s: Some(t.time_s),
                pageable_count: Some(t.count.saturating_sub(t.pinned_count)),
                ..InterconnectRow::default()
            });
        }
        for c in &s.collectives {
            rows.push(InterconnectRow {
                kind: format!("{} ({}, {} ranks)", c.op, c.backend, c.world_size),
                sources: vec![source.clone()],
                count: c.count,
                bytes_p50: Some(c.bytes_p50),
                bytes_total: Some(c.bytes_total),
                latency_us_p50: Some(c.latency_s_p50 * 1e6),
                latency_us_p95: Some(c.latency_s_p95 * 1e6),
                bandwidth_gbps: Some(c.busbw_gbps_p50),
                link: links
                    .all_nvlink
                    .then(|| "NVLink".to_string())
                    .or((c.backend == "gloo").then(|| "host (gloo)".to_string())),
                ..InterconnectRow::default()
            });
        }
    }
    for run in &session.runs {
        if let Some(n) = &run.metrics.nsys {
            for c in &n.copies {
                rows.push(copy_row(
                    direction(&c.direction),
                    c,
                    cite(run, ArtifactKind::NsysStats),
                    &links,
                ));
            }
        }
        // A distributed run's copies are read per rank below.
        if let Some(t) = run
            .metrics
            .trace
            .as_ref()
            .filter(|_| run.metrics.ranks.is_none())
        {
            for c in &t.copies {
                rows.push(copy_row(
                    direction(&c.direction),
                    c,
                    cite(run, ArtifactKind::KinetoTrace),
                    &links,
                ));
            }
        }
        if let Some(n) = &run.metrics.nccl {
            let transport = n.transports.first().map(|t| t.transport.clone());
            for c in &n.collectives {
                let sizes: Vec<(u64, u64)> = c.sizes.iter().map(|s| (s.bytes, s.calls)).collect();
                rows.push(InterconnectRow {
                    kind: c.op.clone(),
                    sources: vec![cite(run, ArtifactKind::NcclLog)],
                    count: c.calls,
                    bytes_p50: percentile_of_counts(&sizes, 0.5),
                    bytes_p95: percentile_of_counts(&sizes, 0.95),
                    bytes_total: Some(c.total_bytes),
                    link: match (&transport, links.all_nvlink) {
                        (Some(t), true) if t.starts_with("P2P") => Some(format!("NVLink ({t})")),
                        (Some(t), _) => Some(t.clone()),
                        (None, _) => None,
                    },
                    ..InterconnectRow::default()
                });
            }
        }
    }
    let mut comm_compute = Vec::new();
    let mut balance = Vec::new();
    let mut sets = TraceSets {
        rows: &mut rows,
        comm_compute: &mut comm_compute,
        balance: &mut balance,
        links: &links,
    };
    for run in &session.runs {
        if let Some(ranks) = &run.metrics.ranks {
            sets.add(ranks, |path| Source {
                run_id: run.run_id.clone(),
                artifact: Some(path.to_string()),
            });
        } else if let Some(t) = run
            .metrics
            .trace
            .as_ref()
            .filter(|t| t.collectives.is_some())
        {
            // One process's trace: its collectives, without a balance to draw.
            sets.collectives(t, cite(run, ArtifactKind::KinetoTrace));
        }
    }
    for stored in &session.traces {
        sets.add(&stored.report, |path| Source {
            run_id: stored.id.clone(),
            artifact: Some(path.to_string()),
        });
    }
    // Copy directions first in their usual order, then collectives; stable within a kind.
    rows.sort_by_key(|r| {
        KIND_ORDER
            .iter()
            .position(|k| *k == r.kind)
            .unwrap_or(KIND_ORDER.len())
    });
    let topology = topology_line(session).map(|t| t.0);
    (!rows.is_empty() || !comm_compute.is_empty() || topology.is_some() || !balance.is_empty())
        .then_some(InterconnectTable {
            rows,
            comm_compute,
            topology,
            balance,
        })
}

/// Where the rows read from traces go.
struct TraceSets<'a> {
    rows: &'a mut Vec<InterconnectRow>,
    comm_compute: &'a mut Vec<CommComputeRow>,
    balance: &'a mut Vec<RanksBalance>,
    links: &'a Links,
}

impl TraceSets<'_> {
    /// The traces of one run or one `analyze_trace` call: copies, NCCL kernels, collectives
    /// and communication against computation per trace, then the ranks side by side.
    fn add(&mut self, report: &TraceReport, source_of: impl Fn(&str) -> Source) {
        for f in &report.traces {
            let source = source_of(&f.path);
            let a = &f.analysis;
            for c in &a.copies {
                self.rows.push(copy_row(
                    direction(&c.direction),
                    c,
                    source.clone(),
                    self.links,
                ));
            }
            // NCCL kernels are read per op by the collectives when the trace named them.
            let named = a
                .collectives
                .as_ref()
                .is_some_and(|c| c.ops.iter().any(|o| o.source == "nccl kernels"));
            if !named {
                self.nccl_kernels(a, &source);
            }
            self.collectives(a, source.clone());
            for d in &a.devices {
                if d.comm_us > 0.0 {
                    self.comm_compute.push(CommComputeRow {
                        sources: vec![source.clone()],
                        device: match a.rank {
                            Some(r) => format!("rank {r} cuda:{}", d.device),
                            None => format!("cuda:{}", d.device),
                        },
                        comm_us: d.comm_us,
                        compute_us: d.compute_us,
                        ratio: ratio(d.comm_us, d.compute_us),
                        overlapped_percent: d.comm_overlapped_percent,
                    });
                }
            }
            if let Some(c) = a.collectives.as_ref().filter(|_| a.devices.is_empty()) {
                if c.cpu_comm_us > 0.0 {
                    self.comm_compute
                        .push(cpu_comm_row(a.rank, c, source.clone()));
                }
            }
        }
        if let Some(b) = &report.balance {
            let gpu = report.traces.iter().any(|t| !t.analysis.devices.is_empty());
            self.balance.push(RanksBalance {
                sources: report.traces.iter().map(|t| source_of(&t.path)).collect(),
                measured_on: if gpu { "GPU" } else { "CPU" }.into(),
                rows: b
                    .ranks
                    .iter()
                    .map(|r| {
                        let clock = report.alignment.as_ref().and_then(|a| {
                            a.ranks
                                .iter()
                                .find(|c| c.rank == r.rank && c.rank != a.reference_rank)
                        });
                        RankRow {
                            rank: r.rank,
                            node_rank: r.node_rank,
                            compute_us: r.compute_us,
                            comm_us: r.comm_us,
                            idle_us: gpu.then_some(r.idle_us),
                            step_mean_us: r.step_mean_us,
                            clock_offset_us: clock.and_then(|c| c.offset_us),
                            clock_uncertainty_us: clock.and_then(|c| c.uncertainty_us),
                        }
                    })
                    .collect(),
                compute_imbalance: b.compute_imbalance,
                stragglers: b.stragglers.clone(),
                clock_reference: report.alignment.as_ref().map(|a| a.reference_rank),
                merged_trace: report
                    .alignment
                    .as_ref()
                    .and_then(|a| a.merged_trace.clone()),
            });
        }
    }

    /// One row per NCCL op of a trace whose collectives were not named (summed kernels).
    fn nccl_kernels(&mut self, a: &TraceAnalysis, source: &Source) {
        let mut nccl: BTreeMap<String, (u64, f64)> = BTreeMap::new();
        for k in a.kernels.iter().filter(|k| k.category == "nccl") {
            let e = nccl.entry(nccl_op(&k.name)).or_default();
            e.0 += k.count;
            e.1 += k.total_us;
        }
        for (op, (count, us)) in nccl {
            self.rows.push(InterconnectRow {
                kind: format!("{op} (NCCL kernels)"),
                rank: a.rank,
                sources: vec![source.clone()],
                count,
                latency_us_mean: (count > 0).then(|| us / count as f64),
                time_s: Some(us * 1e-6),
                link: self.links.all_nvlink.then(|| "NVLink".into()),
                ..InterconnectRow::default()
            });
        }
    }

    /// One row per collective op of a trace: count, sizes, latency and bandwidth.
    fn collectives(&mut self, a: &TraceAnalysis, source: Source) {
        let Some(c) = &a.collectives else {
            return;
        };
        for o in &c.ops {
            let link = match o.backend.as_str() {
                "gloo" => Some("host (gloo)".to_string()),
                _ if self.links.all_nvlink => Some("NVLink".to_string()),
                _ => None,
            };
            self.rows.push(InterconnectRow {
                kind: match o.group_size {
                    Some(g) => format!("{} ({}, {g} ranks)", o.op, o.backend),
                    None => format!("{} ({})", o.op, o.backend),
                },
                rank: a.rank,
                sources: vec![source.clone()],
                count: o.calls,
                bytes_p50: o.bytes_p50,
                bytes_p95: o.bytes_p95,
                bytes_total: (o.sized_calls > 0).then_some(o.bytes_total),
                latency_us_p50: o.latency_p50_us,
                latency_us_p95: o.latency_p95_us,
                bandwidth_gbps: o.algbw_gbps,
                time_s: o.latency_total_us.map(|us| us * 1e-6),
                link,
                ..InterconnectRow::default()
            });
        }
    }
}

/// Communication against computation of one rank on the CPU (gloo).
fn cpu_comm_row(rank: Option<u32>, c: &Collectives, source: Source) -> CommComputeRow {
    CommComputeRow {
        sources: vec![source],
        device: match rank {
            Some(r) => format!("rank {r} CPU (gloo)"),
            None => "CPU (gloo)".into(),
        },
        comm_us: c.cpu_comm_us,
        compute_us: c.cpu_compute_us,
        ratio: ratio(c.cpu_comm_us, c.cpu_compute_us),
        overlapped_percent: if c.cpu_comm_us > 0.0 {
            c.cpu_overlap_us / c.cpu_comm_us * 100.0
        } else {
            0.0
        },
    }
}

fn ratio(comm_us: f64, compute_us: f64) -> f64 {
    if compute_us > 0.0 {
        comm_us / compute_us
    } else {
        0.0
    }
}

/// Each distributed run's ranks side by side, and the stragglers named.
pub(crate) fn render_balance(md: &mut String, report: &Report) {
    let lang = report.lang;
    let Some(t) = &report.interconnect else {
        return;
    };
    for b in &t.balance {
        md.push_str(&tr(
            lang,
            format!("Ranks side by side ({}):\n\n", b.measured_on),
            format!("ランクの比較（{}）:\n\n", b.measured_on),
        ));
        // The clocks' column only where a rank's clock was lined up with the lowest rank's.
        let clocks = b.rows.iter().any(|r| r.clock_offset_us.is_some());
        let rows: Vec<Vec<String>> = b
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.rank.to_string(),
                    r.node_rank.map(|n| n.to_string()).unwrap_or("—".into()),
                    us(r.compute_us),
                    us(r.comm_us),
                    cell(r.idle_us, us),
                    cell(r.step_mean_us, us),
                ];
                if clocks {
                    row.push(match (r.clock_offset_us, r.clock_uncertainty_us) {
                        (Some(o), Some(u)) => format!("{} ± {}", signed_us(o), us(u)),
                        (Some(o), None) => signed_us(o),
                        _ if b.clock_reference == Some(r.rank) => tr(lang, "reference", "基準"),
                        _ => "—".into(),
                    });
                }
                row.push(if b.stragglers.contains(&r.rank) {
                    tr(lang, "straggler", "遅いランク")
                } else {
                    String::new()
                });
                row
            })
            .collect();
        let mut columns = vec![
            ("Rank", "ランク"),
            ("Node", "ノード"),
            ("Compute", "計算"),
            ("Communication", "通信"),
            ("Idle", "アイドル"),
            ("Step (mean)", "ステップ（平均）"),
        ];
        if clocks {
            columns.push(("Clock offset", "時計のずれ"));
        }
        columns.push(("", ""));
        table(md, &heads(lang, &columns), &rows);
        if let Some(path) = &b.merged_trace {
            md.push_str(&tr(
                lang,
                format!(
                    "Clock offsets: each rank's trace clock minus the lowest rank's, bounded by the collectives they share (none ends before every rank has begun it). The ranks' traces on one clock: `{path}` (opens in Perfetto).\n\n"
                ),
                format!(
                    "時計のずれ: 各ランクのトレースの時計と最小ランクの時計の差（共通の集団通信で上下から抑えたもの）。全ランクを一つの時計に揃えたトレース: `{path}`（Perfetto で開けます）。\n\n"
                ),
            ));
        }
        md.push_str(&tr(
            lang,
            format!(
                "Compute imbalance (largest over smallest): {:.2}. {}. Source: {}.\n\n",
                b.compute_imbalance,
                straggler_phrase(lang, &b.stragglers),
                cite_sources(&b.sources)
            ),
            format!(
                "計算の偏り（最大/最小）: {:.2}。{}。出典: {}。\n\n",
                b.compute_imbalance,
                straggler_phrase(lang, &b.stragglers),
                cite_sources(&b.sources)
            ),
        ));
    }
}

fn straggler_phrase(lang: Lang, stragglers: &[u32]) -> String {
    let names: Vec<String> = stragglers.iter().map(|r| format!("rank {r}")).collect();
    match names.len() {
        0 => tr(lang, "No straggler", "遅いランクなし"),
        _ => tr(
            lang,
            format!(
                "Straggler: {} (the others wait for it in the collectives)",
                names.join(", ")
            ),
            format!(
                "遅いランク: {}（他のランクは集団通信でこれを待つ）",
                names.join(", ")
            ),
        ),
    }
}
