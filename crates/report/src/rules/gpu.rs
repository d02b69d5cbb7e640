//! Rules on GPUs and their links: copies, idle devices, launches, communication, memory balance, NCCL transport.

use super::*;
use crate::fmt::{bytes, bytes_f, num, pct, secs, tr};
use system_profile_model::report::{Confidence, Source};
use system_profile_model::run::ArtifactKind;

/// The longest wall time in the session: what a GPU-side saving is a share of.
pub(super) fn session_wall(inputs: &Inputs) -> Option<f64> {
    inputs
        .report
        .cpu
        .iter()
        .filter_map(|r| r.wall_s)
        .chain(inputs.session.runs.iter().filter_map(|r| r.wall_s))
        .fold(None, |a: Option<f64>, w| Some(a.map_or(w, |a| a.max(w))))
}

pub(super) fn pageable_or_small_copies(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.interconnect else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in table
        .rows
        .iter()
        .filter(|r| r.kind == "H2D" || r.kind == "D2H")
    {
        let (Some(total), Some(time_s)) = (r.bytes_total, r.time_s) else {
            continue;
        };
        let pageable = r.pageable_count.unwrap_or(0);
        let mean = r.bytes_mean.unwrap_or(0.0);
        let pageable_heavy = r.count >= COPIES_MIN_PAGEABLE
            && pageable as f64 >= COPIES_PAGEABLE_SHARE * r.count as f64;
        let small = r.count >= COPIES_MIN_SMALL && mean < COPIES_SMALL_BYTES;
        let peak_gbps = r
            .link_peak_percent
            .zip(r.bandwidth_gbps)
            .and_then(|(p, bw)| (p > 0.0).then(|| bw / (p / 100.0)));
        let target_gbps = peak_gbps
            .map(|p| p * PINNED_SHARE_OF_PCIE_PEAK)
            .unwrap_or(PINNED_FALLBACK_GBPS);
        // Large copies far below what pinned memory reaches: pageable in all likelihood (the
        // driver stages them through a bounce buffer), even where the source cannot say.
        let slow = r.pageable_count.is_none()
            && r.count >= COPIES_MIN_PAGEABLE
            && r.bandwidth_gbps
                .is_some_and(|bw| bw < COPIES_SLOW_SHARE * target_gbps);
        if !pageable_heavy && !small && !slow {
            continue;
        }
        let after_s = total as f64 / (target_gbps * 1e9);
        let gain = (time_s - after_s).max(0.0);
        if gain <= 0.0 {
            continue;
        }
        let wall = session_wall(inputs).or(Some(time_s));
        let pageable_text = match r.pageable_count {
            Some(n) => num(n),
            None => tr(lang, "unknown", "不明"),
        };
        let at = r
            .sources
            .first()
            .map(|s| s.run_id.clone())
            .unwrap_or_default();
        let what = match (pageable_heavy || slow, small) {
            (true, true) => tr(
                lang,
                "Pin the host buffer and batch",
                "ホスト側バッファをピン留めしてまとめる",
            ),
            (true, false) => tr(
                lang,
                "Pin the host buffer",
                "ホスト側バッファをピン留めする",
            ),
            _ => tr(lang, "Batch", "まとめる"),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("{} copies: {}", r.kind, what.to_lowercase()),
                format!("{} コピー: {what}", r.kind),
            ),
            action: tr(
                lang,
                format!(
                    "{what} for the {} {} copies of {} on average ({} pageable; {} in {}, {}): at {:.0} GB/s they would take {}, saving about {} (`pin_memory=True` on the DataLoader or `tensor.pin_memory()`, `non_blocking=True`, one copy of a stacked batch instead of many).",
                    num(r.count), r.kind, bytes_f(mean), pageable_text, bytes(total), secs(time_s),
                    r.bandwidth_gbps.map(crate::fmt::gbps).unwrap_or_default(), target_gbps, secs(after_s), secs(gain)
                ),
                format!(
                    "{} 回の {} コピー（平均 {}、ページング可能 {}、計 {} を {}、{}）: {what}。{:.0} GB/s なら {} で済み、約 {} 短縮（DataLoader の `pin_memory=True` か `tensor.pin_memory()`、`non_blocking=True`、細かいコピーをまとめて 1 回に）。",
                    num(r.count), r.kind, bytes_f(mean), pageable_text, bytes(total), secs(time_s),
                    r.bandwidth_gbps.map(crate::fmt::gbps).unwrap_or_default(), target_gbps, secs(after_s), secs(gain)
                ),
            ),
            evidence: vec![format!("interconnect {} {at}", r.kind)],
            sources: r.sources.clone(),
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain, wall)
        });
    }
    out
}

/// Each trace's GPUs with their span, idle time and launch figures.
pub(super) fn traced_devices(
    session: &Session,
) -> Vec<(Source, &system_profile_model::metrics::TraceAnalysis)> {
    let mut out = Vec::new();
    for run in &session.runs {
        if let Some(t) = &run.metrics.trace {
            out.push((crate::tables::cite(run, ArtifactKind::KinetoTrace), t));
        }
    }
    for s in &session.traces {
        for f in &s.report.traces {
            out.push((
                Source {
                    run_id: s.id.clone(),
                    artifact: Some(f.path.clone()),
                },
                &f.analysis,
            ));
        }
    }
    out
}

pub(super) fn gpu_idle(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = sampled_gpu_idle(inputs);
    for (source, a) in traced_devices(inputs.session) {
        for d in &a.devices {
            if d.idle_percent < GPU_IDLE_PERCENT || d.span_us <= 0.0 {
                continue;
            }
            let idle_s = d.idle_us * 1e-6;
            let span_s = d.span_us * 1e-6;
            // Overlapping the host work with the GPU's hides part of the gap, not all of it:
            // the estimate is half.
            let gain = idle_s * 0.5;
            let device = match a.rank {
                Some(r) => format!("rank {r} cuda:{}", d.device),
                None => format!("cuda:{}", d.device),
            };
            out.push(Draft {
                title: tr(
                    lang,
                    format!("Keep {device} busy: idle {} of the trace", pct(d.idle_percent)),
                    format!("{device} の空き時間を減らす: トレースの {} がアイドル", pct(d.idle_percent)),
                ),
                action: tr(
                    lang,
                    format!(
                        "The GPU waited {} of {} for the host. Prepare the next batch while this one computes (DataLoader `num_workers`, `pin_memory`, `non_blocking=True` copies, prefetching), move host-side work out of the step, and remove syncs (`.item()`, `.cpu()`) in the loop; hiding half of the gap saves about {}.",
                        secs(idle_s), secs(span_s), secs(gain)
                    ),
                    format!(
                        "GPU は {} 中 {} ホストを待っていた。計算中に次のバッチを用意し（DataLoader の `num_workers`、`pin_memory`、`non_blocking=True`、プリフェッチ）、ステップ内のホスト処理と同期（`.item()`、`.cpu()`）を減らす。空きの半分を隠せば約 {} 短縮。",
                        secs(span_s), secs(idle_s), secs(gain)
                    ),
                ),
                evidence: vec![format!("gpu {device} {}", source.run_id)],
                sources: vec![source.clone()],
                confidence: Confidence::Medium,
                ..Draft::saves_time(gain, Some(span_s))
            });
        }
    }
    out
}

/// The same from the samplers (NVML, dmon): the share of samples with no kernel running.
fn sampled_gpu_idle(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(g) = &run.metrics.gpu else {
            continue;
        };
        for d in &g.devices {
            let Some(sm) = d.series.get("sm_util_percent") else {
                continue;
            };
            let idle_percent = (100.0 - sm.mean).max(0.0);
            if idle_percent < GPU_IDLE_PERCENT || g.wall_s <= 0.0 {
                continue;
            }
            let idle_s = g.wall_s * idle_percent / 100.0;
            let gain = idle_s * 0.5;
            let device = format!("cuda:{}", d.gpu);
            out.push(Draft {
                title: tr(
                    lang,
                    format!("Keep {device} busy: no kernel in {} of {}'s samples", pct(idle_percent), run.run_id),
                    format!("{device} の空き時間を減らす: {} のサンプルの {} でカーネルなし", run.run_id, pct(idle_percent)),
                ),
                action: tr(
                    lang,
                    format!(
                        "SM utilisation averaged {} over {} (p95 {}): the GPU ran no kernel for about {}. Feed it faster (DataLoader `num_workers`, `pin_memory`, prefetching, larger batches) and take a torch_profiler trace to see the gaps; hiding half saves about {}.",
                        pct(sm.mean), secs(g.wall_s), pct(sm.p95), secs(idle_s), secs(gain)
                    ),
                    format!(
                        "{} の間の SM 使用率は平均 {}（p95 {}）: 約 {} カーネルが動いていない。供給を速くし（DataLoader の `num_workers`、`pin_memory`、プリフェッチ、大きなバッチ）、torch_profiler のトレースで隙間を確認する。半分隠せば約 {} 短縮。",
                        secs(g.wall_s), pct(sm.mean), pct(sm.p95), secs(idle_s), secs(gain)
                    ),
                ),
                evidence: vec![format!("gpu {device} {}", run.run_id)],
                sources: vec![crate::tables::cite(run, if g.source == "nvml" { ArtifactKind::NvmlJsonl } else { ArtifactKind::Dmon })],
                // NVML's utilisation is a share of time with any kernel, a coarse signal.
                confidence: Confidence::Low,
                ..Draft::saves_time(gain, Some(g.wall_s))
            });
        }
    }
    out
}

pub(super) fn launch_bound(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for (source, a) in traced_devices(inputs.session) {
        let l = &a.launches;
        if l.launches < LAUNCHES_MIN || l.short_kernels_percent < SHORT_KERNELS_PERCENT {
            continue;
        }
        let span_s = a.devices.iter().map(|d| d.span_us).fold(0.0, f64::max) * 1e-6;
        let idle_s = a.devices.iter().map(|d| d.idle_us).fold(0.0, f64::max) * 1e-6;
        let launch_s = l.launch_api_us * 1e-6;
        // CUDA graphs or fusion remove most of the launch cost; it only shows as time where
        // the GPU sat idle waiting for launches.
        let gain = launch_s.min(idle_s);
        if gain <= 0.0 {
            continue;
        }
        out.push(Draft {
            title: tr(
                lang,
                format!("Launch-bound: {} of kernels run under 10 µs", pct(l.short_kernels_percent)),
                format!("起動律速: カーネルの {} が 10 µs 未満", pct(l.short_kernels_percent)),
            ),
            action: tr(
                lang,
                format!(
                    "{} launches cost the CPU {} ({} each) for {} of kernels. Fuse them (`torch.compile`), capture the step in CUDA graphs (`torch.cuda.graphs`, `mode=\"reduce-overhead\"`), or grow the batch; up to {} of the GPU's idle time is launch gaps.",
                    num(l.launches), secs(launch_s), crate::fmt::us(l.launch_api_mean_us), secs(l.kernel_us * 1e-6), secs(gain)
                ),
                format!(
                    "{} 回の起動に CPU が {}（1 回 {}）を使い、カーネル時間は {}。`torch.compile` で融合するか、ステップを CUDA グラフに取り込む（`mode=\"reduce-overhead\"`）、またはバッチを大きくする。GPU のアイドルのうち最大 {} が起動待ち。",
                    num(l.launches), secs(launch_s), crate::fmt::us(l.launch_api_mean_us), secs(l.kernel_us * 1e-6), secs(gain)
                ),
            ),
            evidence: vec![format!("gpu launches {}", source.run_id)],
            sources: vec![source.clone()],
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain, Some(span_s))
        });
    }
    out
}

pub(super) fn exposed_communication(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.interconnect else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &table.comm_compute {
        if c.overlapped_percent >= COMM_OVERLAP_PERCENT || c.ratio < COMM_COMPUTE_RATIO {
            continue;
        }
        // The advice is about NCCL on a GPU; and where a straggler is named, the others'
        // communication time is mostly waiting for it, which overlapping does not hide.
        let waits_for_straggler = table
            .balance
            .iter()
            .any(|b| !b.stragglers.is_empty() && c.sources.iter().any(|s| b.sources.contains(s)));
        if !c.device.contains("cuda:") || waits_for_straggler {
            continue;
        }
        let exposed_s = c.comm_us * (1.0 - c.overlapped_percent / 100.0) * 1e-6;
        let gain = exposed_s * 0.5;
        let span = traced_devices(inputs.session)
            .into_iter()
            .filter(|(s, _)| c.sources.contains(s))
            .flat_map(|(_, a)| a.devices.iter().map(|d| d.span_us))
            .fold(0.0, f64::max)
            * 1e-6;
        out.push(Draft {
            title: tr(
                lang,
                format!("Overlap communication on {}: {} hidden", c.device, pct(c.overlapped_percent)),
                format!("{} の通信を計算と重ねる: 隠れているのは {}", c.device, pct(c.overlapped_percent)),
            ),
            action: tr(
                lang,
                format!(
                    "NCCL ran {} against {} of compute (ratio {:.2}) and {} of it was exposed. Start the collectives earlier and asynchronously (DDP buckets: `bucket_cap_mb`, `gradient_as_bucket_view=True`; FSDP prefetch; `async_op=True` with the wait just before the result is needed); hiding half saves about {}.",
                    crate::fmt::us(c.comm_us), crate::fmt::us(c.compute_us), c.ratio, secs(exposed_s), secs(gain)
                ),
                format!(
                    "NCCL が {} 動き（計算 {}、比 {:.2}）、うち {} が計算に隠れていない。集団通信を早く非同期に始める（DDP の `bucket_cap_mb`、`gradient_as_bucket_view=True`、FSDP のプリフェッチ、`async_op=True` で必要な直前に wait）。半分隠せば約 {} 短縮。",
                    crate::fmt::us(c.comm_us), crate::fmt::us(c.compute_us), c.ratio, secs(exposed_s), secs(gain)
                ),
            ),
            evidence: vec![format!("interconnect comm/compute {}", c.device)],
            sources: c.sources.clone(),
            confidence: Confidence::Medium,
            ..Draft::saves_time(gain, (span > 0.0).then_some(span))
        });
    }
    out
}

/// A device's peak memory in one run, and where it was read.
type DevicePeak<'a> = (&'a str, u64, &'a Vec<Source>);

pub(super) fn gpu_memory_imbalance(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut by_run: std::collections::BTreeMap<&str, Vec<DevicePeak>> = Default::default();
    for r in &inputs.report.memory {
        if let Some(b) = r.gpu_peak_allocated_bytes.or(r.gpu_used_peak_bytes) {
            by_run
                .entry(r.run_id.as_str())
                .or_default()
                .push((r.place.as_str(), b, &r.sources));
        }
    }
    let mut out = Vec::new();
    for (run_id, devices) in by_run {
        if devices.len() < 2 {
            continue;
        }
        let (Some(max), Some(min)) = (
            devices.iter().max_by_key(|d| d.1),
            devices.iter().min_by_key(|d| d.1),
        ) else {
            continue;
        };
        if min.1 == 0 || (max.1 as f64 / min.1 as f64) < GPU_MEMORY_RATIO {
            continue;
        }
        let mean = devices.iter().map(|d| d.1).sum::<u64>() / devices.len() as u64;
        let gain = max.1 - mean;
        out.push(Draft {
            title: tr(
                lang,
                format!("Balance GPU memory: {} holds {:.2}x {}", max.0, max.1 as f64 / min.1 as f64, min.0),
                format!("GPU メモリを均す: {} が {} の {:.2} 倍", max.0, min.0, max.1 as f64 / min.1 as f64),
            ),
            action: tr(
                lang,
                format!(
                    "{} peaks at {} against {} on {}. Spread what rank 0 alone holds (the loss, metrics, a full state dict, the embedding) or shard it (FSDP/ZeRO); bringing it to the mean frees {} there.",
                    max.0, bytes(max.1), bytes(min.1), min.0, bytes(gain)
                ),
                format!(
                    "{} のピークは {}、{} は {}。rank 0 だけが持つもの（損失、メトリクス、完全な state dict、埋め込み）を分散するかシャーディング（FSDP/ZeRO）する。平均まで下げれば {} 空く。",
                    max.0, bytes(max.1), min.0, bytes(min.1), bytes(gain)
                ),
            ),
            evidence: vec![format!("memory {run_id} {} vs {}", max.0, min.0)],
            sources: max.2.clone(),
            confidence: Confidence::Medium,
            ..Draft::saves_memory(gain, Some(max.1))
        });
    }
    out
}

pub(super) fn nccl_socket_fallback(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(n) = &run.metrics.nccl else {
            continue;
        };
        let sockets = n.networks.iter().any(|x| x.contains("Socket"));
        let net_in_use = n.transports.iter().any(|t| t.kind == "NET");
        let plugin_failed = n
            .warnings
            .iter()
            .any(|w| w.contains("fail") || w.contains("Fail"));
        if !(sockets && (net_in_use || plugin_failed)) {
            continue;
        }
        let warning = n.warnings.first().cloned().unwrap_or_default();
        // Within one node the GPUs talk P2P/SHM and sockets carry nothing yet; across nodes
        // every byte would go over TCP.
        let now = if net_in_use {
            tr(
                lang,
                "Collectives between nodes go over it now.",
                "ノード間の集団通信は現にこれを通っている。",
            )
        } else {
            tr(
                lang,
                "This run stayed on one node (P2P), so nothing crossed it yet; a multi-node run would send every byte over TCP.",
                "この実行は 1 ノード内（P2P）で済んだため影響はまだないが、複数ノードではすべてのバイトが TCP を通る。",
            )
        };
        out.push(Draft {
            title: tr(
                lang,
                "NCCL's network fell back to TCP sockets",
                "NCCL のネットワークが TCP ソケットにフォールバックしている",
            ),
            action: tr(
                lang,
                format!(
                    "NCCL's network is `Socket` ({}). {now} Fix the fabric plugin (aws-ofi-nccl / IB: `NCCL_NET_PLUGIN`, `FI_PROVIDER`, the container's devices) so NCCL uses it; sockets carry a fraction of the fabric's bandwidth. NCCL said: {warning}",
                    n.networks.join(", ")
                ),
                format!(
                    "NCCL のネットワークが `Socket`（{}）。{now} ファブリックのプラグイン（aws-ofi-nccl / IB: `NCCL_NET_PLUGIN`、`FI_PROVIDER`、コンテナのデバイス）を直して NCCL に使わせる。ソケットの帯域はファブリックのごく一部。NCCL のメッセージ: {warning}",
                    n.networks.join(", ")
                ),
            ),
            evidence: vec![format!("interconnect {} NCCL transports", run.run_id)],
            sources: vec![crate::tables::cite(run, ArtifactKind::NcclLog)],
            confidence: Confidence::High,
            // The log has no timings: the gain is not estimated, so it ranks last (impact 0)
            // and says so.
            ..Draft::empty()
        });
    }
    out
}
