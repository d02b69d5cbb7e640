//! Recommendations: each rule reads the measured rows and fires only when its thresholds
//! (the constants below) are crossed, with the rows it rests on as evidence, the gain it
//! estimates and how. The report orders them by `impact`.

use crate::fmt::{bytes, bytes_f, num, pct, secs, tr};
use crate::session::Session;
use system_profile_model::report::{Confidence, Gain, Lang, Recommendation, Report, Source};

/// A Python function of the user's code holding at least this share of samples (self), and
/// at least this share of its run's wall time.
pub const HOT_FUNCTION_SELF_PERCENT: f64 = 15.0;
pub const HOT_FUNCTION_WALL_SHARE: f64 = 0.1;
/// Nor one whose own time is under this: not worth a change, and a handful of samples.
pub const HOT_FUNCTION_MIN_SELF_S: f64 = 0.1;
/// Host↔device copies: at least `COPIES_MIN_PAGEABLE` of them pageable for at least
/// `COPIES_PAGEABLE_SHARE`, or at least `COPIES_MIN_SMALL` this small on average.
pub const COPIES_MIN_PAGEABLE: u64 = 10;
pub const COPIES_MIN_SMALL: u64 = 1000;
pub const COPIES_PAGEABLE_SHARE: f64 = 0.5;
pub const COPIES_SMALL_BYTES: f64 = 1024.0 * 1024.0;
/// Copies reaching under this share of what pinned copies reach.
pub const COPIES_SLOW_SHARE: f64 = 0.5;
/// What pinned, batched copies reach of the PCIe peak per direction (measured on H100 and
/// A100 by the nvbandwidth and CUDA bandwidthTest figures, 80-90%).
pub const PINNED_SHARE_OF_PCIE_PEAK: f64 = 0.8;
/// Without a known GPU model: PCIe Gen4 x16's 31.5 GB/s at that share.
pub const PINNED_FALLBACK_GBPS: f64 = 25.0;
/// A GPU idle for at least this share of the traced span.
pub const GPU_IDLE_PERCENT: f64 = 30.0;
/// Launch-bound: this share of kernels under 10 µs, with at least this many launches.
pub const SHORT_KERNELS_PERCENT: f64 = 50.0;
pub const LAUNCHES_MIN: u64 = 1000;
/// Communication exposed: less than this share hidden under compute, and comm at least this
/// share of compute.
pub const COMM_OVERLAP_PERCENT: f64 = 50.0;
pub const COMM_COMPUTE_RATIO: f64 = 0.1;
/// Tensors held twice (on CPU and GPU, or twice on one place): at least this many bytes.
pub const DUPLICATED_MIN_BYTES: u64 = 16 << 20;
/// A process mostly waiting: under this many cores busy over at least this wall time.
pub const WAITING_CORES: f64 = 0.5;
pub const WAITING_MIN_WALL_S: f64 = 1.0;
/// Syscalls taking at least this share of the wall time (strace -c); or, with at least
/// `SYSCALL_MIN_CALLS` calls, the kernel's share of the CPU time at least `SYS_SHARE_OF_CPU`.
pub const SYSCALL_SHARE: f64 = 0.2;
pub const SYSCALL_MIN_CALLS: u64 = 10_000;
pub const SYS_SHARE_OF_CPU: f64 = 0.5;
/// GPU memory imbalance: the fullest device over the emptiest.
pub const GPU_MEMORY_RATIO: f64 = 1.3;
/// One allocation site holding this share of the Python heap's peak, and at least this much.
pub const ALLOC_SITE_SHARE: f64 = 0.25;
pub const ALLOC_SITE_MIN_BYTES: u64 = 32 << 20;

/// A rule: its id and the check that turns rows into drafts.
pub struct Rule {
    pub id: &'static str,
    pub check: fn(&Inputs) -> Vec<Draft>,
}

/// What a rule reads.
pub struct Inputs<'a> {
    pub session: &'a Session,
    pub report: &'a Report,
    pub lang: Lang,
}

/// A recommendation before it is ranked.
pub struct Draft {
    pub title: String,
    pub action: String,
    pub evidence: Vec<String>,
    pub sources: Vec<Source>,
    pub gain: Gain,
    /// What the memory gain is a share of.
    pub memory_of_bytes: Option<u64>,
    /// What the time gain is a share of.
    pub wall_of_s: Option<f64>,
    pub confidence: Confidence,
}

impl Draft {
    /// The rest of a draft that saves `gain_s` of `wall_s`.
    fn saves_time(gain_s: f64, wall_s: Option<f64>) -> Draft {
        Draft {
            gain: Gain {
                time_s: Some(gain_s),
                ..Gain::default()
            },
            wall_of_s: wall_s,
            ..Draft::empty()
        }
    }

    /// The rest of a draft that frees `bytes` of `of_bytes`.
    fn saves_memory(bytes: u64, of_bytes: Option<u64>) -> Draft {
        Draft {
            gain: Gain {
                memory_bytes: Some(bytes),
                ..Gain::default()
            },
            memory_of_bytes: of_bytes,
            ..Draft::empty()
        }
    }

    fn empty() -> Draft {
        Draft {
            title: String::new(),
            action: String::new(),
            evidence: Vec::new(),
            sources: Vec::new(),
            gain: Gain::default(),
            memory_of_bytes: None,
            wall_of_s: None,
            confidence: Confidence::Low,
        }
    }
}

/// Every rule, in no particular order: the report ranks what fires.
pub const RULES: &[Rule] = &[
    Rule {
        id: "hot_python_function",
        check: hot_python_function,
    },
    Rule {
        id: "pageable_or_small_copies",
        check: pageable_or_small_copies,
    },
    Rule {
        id: "gpu_idle",
        check: gpu_idle,
    },
    Rule {
        id: "launch_bound",
        check: launch_bound,
    },
    Rule {
        id: "exposed_communication",
        check: exposed_communication,
    },
    Rule {
        id: "duplicated_tensors",
        check: duplicated_tensors,
    },
    Rule {
        id: "waiting_process",
        check: waiting_process,
    },
    Rule {
        id: "syscall_heavy",
        check: syscall_heavy,
    },
    Rule {
        id: "gpu_memory_imbalance",
        check: gpu_memory_imbalance,
    },
    Rule {
        id: "python_allocation_site",
        check: python_allocation_site,
    },
    Rule {
        id: "nccl_socket_fallback",
        check: nccl_socket_fallback,
    },
];

fn weight(c: Confidence) -> f64 {
    match c {
        Confidence::High => 1.0,
        Confidence::Medium => 0.6,
        Confidence::Low => 0.3,
    }
}

/// Run every rule, fill in the shares, and order by impact (largest first).
pub fn recommend(inputs: &Inputs) -> Vec<Recommendation> {
    let mut out = Vec::new();
    for rule in RULES {
        for mut d in (rule.check)(inputs) {
            if let (Some(t), Some(w)) = (d.gain.time_s, d.wall_of_s) {
                if w > 0.0 {
                    d.gain.wall_percent = Some(t / w * 100.0);
                }
            }
            if let (Some(m), Some(of)) = (d.gain.memory_bytes, d.memory_of_bytes) {
                if of > 0 {
                    d.gain.memory_percent = Some(m as f64 / of as f64 * 100.0);
                }
            }
            let share = d
                .gain
                .wall_percent
                .unwrap_or(0.0)
                .max(d.gain.memory_percent.unwrap_or(0.0))
                / 100.0;
            out.push(Recommendation {
                rule: rule.id.into(),
                title: d.title,
                action: d.action,
                evidence: d.evidence,
                sources: d.sources,
                impact: share * weight(d.confidence),
                gain: d.gain,
                confidence: d.confidence,
            });
        }
    }
    // Stable: equal impacts keep the rules' order.
    out.sort_by(|a, b| b.impact.total_cmp(&a.impact));
    out
}

/// The wall time of a run, or of the longest run.
fn wall_of(inputs: &Inputs, run_id: &str) -> Option<f64> {
    inputs
        .report
        .cpu
        .iter()
        .find(|r| r.run_id == run_id)
        .and_then(|r| r.wall_s)
        .or_else(|| {
            inputs
                .session
                .runs
                .iter()
                .find(|r| r.run_id == run_id)
                .and_then(|r| r.wall_s)
        })
}

fn user_code(file: &str) -> bool {
    !file.starts_with('/')
        && !file.starts_with('<')
        && !file.contains("site-packages")
        && !file.contains("dist-packages")
}

fn hot_python_function(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.hotspots else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for h in table.rows.iter().filter(|h| h.kind == "python") {
        let Some(file) = h.file.as_deref().filter(|f| user_code(f)) else {
            continue;
        };
        if h.self_percent < HOT_FUNCTION_SELF_PERCENT {
            continue;
        }
        let Some(self_s) = h.self_s else {
            continue;
        };
        let wall = h.self_s_run.as_deref().and_then(|run| wall_of(inputs, run));
        if self_s < HOT_FUNCTION_MIN_SELF_S
            || wall.is_some_and(|w| self_s < HOT_FUNCTION_WALL_SHARE * w)
        {
            continue;
        }
        let agreeing: Vec<String> = h
            .evidence
            .iter()
            .filter_map(|e| e.self_percent.map(|p| format!("{} {}", e.tool, pct(p))))
            .collect();
        let line = h.line.map(|l| format!(":{l}")).unwrap_or_default();
        let hot_line = h
            .evidence
            .iter()
            .find_map(|e| Some((e.tool.clone(), e.hot_line?, e.hot_line_percent?)));
        // Halving a function's own time is what a rewrite of its inner loop (vectorising,
        // caching, a better algorithm) typically gives; the estimate says so.
        let gain_s = self_s * 0.5;
        let saving = match wall {
            Some(w) => tr(
                lang,
                format!(
                    "; halving its own time saves about {} of {}",
                    secs(gain_s),
                    secs(w)
                ),
                format!(
                    "。自身の時間を半減すれば {} 中 約 {} の短縮",
                    secs(w),
                    secs(gain_s)
                ),
            ),
            None => tr(
                lang,
                format!("; halving its own time saves about {}", secs(gain_s)),
                format!("。自身の時間を半減すれば約 {} の短縮", secs(gain_s)),
            ),
        };
        let line_note = match hot_line {
            Some((tool, line, p)) => tr(
                lang,
                format!(" Start at line {line}: {} of its time ({tool}).", pct(p)),
                format!(" まず {line} 行目から（関数時間の {}、{tool}）。", pct(p)),
            ),
            None => String::new(),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("Speed up `{}` in {file}{line}", h.function),
                format!("{file}{line} の `{}` を高速化", h.function),
            ),
            action: tr(
                lang,
                format!(
                    "Its own code holds {} of the CPU samples ({}){saving}: vectorise or cache the work of its inner loop, or call it less.{line_note}",
                    pct(h.self_percent),
                    agreeing.join(", ")
                ),
                format!(
                    "この関数自身のコードが CPU サンプルの {} を占める（{}）{saving}。内側のループをベクトル化・キャッシュするか、呼び出しを減らす。{line_note}",
                    pct(h.self_percent),
                    agreeing.join(", ")
                ),
            ),
            evidence: vec![format!("hotspots {file}{line} {}", h.function)],
            sources: h.evidence.iter().map(|e| e.source.clone()).collect(),
            confidence: if agreeing.len() >= 2 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            ..Draft::saves_time(gain_s, wall)
        });
    }
    out
}

/// The longest wall time in the session: what a GPU-side saving is a share of.
fn session_wall(inputs: &Inputs) -> Option<f64> {
    inputs
        .report
        .cpu
        .iter()
        .filter_map(|r| r.wall_s)
        .chain(inputs.session.runs.iter().filter_map(|r| r.wall_s))
        .fold(None, |a: Option<f64>, w| Some(a.map_or(w, |a| a.max(w))))
}

fn pageable_or_small_copies(inputs: &Inputs) -> Vec<Draft> {
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
fn traced_devices(
    session: &Session,
) -> Vec<(Source, &system_profile_model::metrics::TraceAnalysis)> {
    let mut out = Vec::new();
    for run in &session.runs {
        if let Some(t) = &run.metrics.trace {
            out.push((crate::tables::cite(run, "kineto_trace"), t));
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

fn gpu_idle(inputs: &Inputs) -> Vec<Draft> {
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
                sources: vec![crate::tables::cite(run, if g.source == "nvml" { "nvml_jsonl" } else { "dmon.txt" })],
                // NVML's utilisation is a share of time with any kernel, a coarse signal.
                confidence: Confidence::Low,
                ..Draft::saves_time(gain, Some(g.wall_s))
            });
        }
    }
    out
}

fn launch_bound(inputs: &Inputs) -> Vec<Draft> {
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

fn exposed_communication(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(table) = &inputs.report.interconnect else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &table.comm_compute {
        if c.overlapped_percent >= COMM_OVERLAP_PERCENT || c.ratio < COMM_COMPUTE_RATIO {
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

fn duplicated_tensors(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some(d) = inputs
        .session
        .instrument
        .as_ref()
        .and_then(|s| s.duplicates.as_ref())
        .filter(|d| d.bytes_duplicated >= DUPLICATED_MIN_BYTES)
    else {
        return Vec::new();
    };
    let rows = &inputs.report.memory;
    let rss = rows
        .iter()
        .filter(|r| r.place == "cpu")
        .filter_map(|r| r.rss_peak_bytes)
        .max();
    let cross = d.groups.iter().any(|g| g.cross_device);
    let groups = d
        .groups
        .iter()
        .take(3)
        .map(|g| {
            format!(
                "{:?} {} x{} on {}",
                g.shape,
                g.dtype,
                g.copies,
                g.devices.join("+")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let site = &d.site;
    let (title, action) = if cross {
        (
            tr(lang, format!("Free {} of tensors held on both CPU and GPU", bytes(d.bytes_duplicated)), format!("CPU と GPU の両方にあるテンソル {} を解放", bytes(d.bytes_duplicated))),
            tr(
                lang,
                format!("At {site} the same data sat in host memory after it was copied to the GPU ({groups}). Drop the host copy once it is on the device (`del` the CPU tensor, load straight to the GPU with `map_location`/`device=`), or keep one pinned staging buffer instead."),
                format!("{site} で、GPU にコピー済みのデータがホストメモリにも残っていた（{groups}）。デバイスに移したらホスト側を手放す（CPU テンソルを `del`、`map_location`/`device=` で直接 GPU に読み込む）か、ピン留めした受け渡し用バッファ 1 つにする。"),
            ),
        )
    } else {
        (
            tr(lang, format!("Free {} of tensors held twice", bytes(d.bytes_duplicated)), format!("二重に保持されたテンソル {} を解放", bytes(d.bytes_duplicated))),
            tr(
                lang,
                format!("At {site} the same data was held more than once ({groups}). Keep one copy: drop the `clone()`/`copy()` or the second load, use views (`view`, slicing) or in-place operations, and `del` the original once the copy is made."),
                format!("{site} で同じデータが複数回保持されていた（{groups}）。コピーは 1 つにする: `clone()`/`copy()` や二度目の読み込みをやめ、ビュー（`view`、スライス）やインプレース演算を使い、コピー後は元を `del` する。"),
            ),
        )
    };
    let evidence_row = rows
        .iter()
        .find(|r| r.run_id == "instrument" && r.place == "cpu")
        .map(|r| format!("memory {} cpu duplicated", r.run_id))
        .unwrap_or_else(|| "memory instrument duplicated".into());
    vec![Draft {
        title,
        action,
        evidence: vec![evidence_row],
        sources: vec![Source {
            run_id: "instrument".into(),
            artifact: Some(system_profile_instrument::LOG_FILE.into()),
        }],
        confidence: Confidence::High,
        ..Draft::saves_memory(d.bytes_duplicated, rss)
    }]
}

fn waiting_process(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for r in &inputs.report.cpu {
        let (Some(wall), Some(cores)) = (r.wall_s, r.cpu_utilization_cores) else {
            continue;
        };
        if wall < WAITING_MIN_WALL_S || cores >= WAITING_CORES {
            continue;
        }
        let waiting_s = wall * (1.0 - cores).max(0.0);
        // What it waited on, when strace counted the syscalls.
        let top = inputs
            .session
            .runs
            .iter()
            .filter_map(|run| run.metrics.syscalls.as_ref())
            .find_map(|s| s.rows.first().map(|row| (row.syscall.clone(), row.calls)));
        let on = match &top {
            Some((call, n)) => tr(
                lang,
                format!(
                    " strace's top syscall by time is `{call}` ({} calls).",
                    num(*n)
                ),
                format!(
                    " strace で時間最大のシステムコールは `{call}`（{} 回）。",
                    num(*n)
                ),
            ),
            None => tr(
                lang,
                " Run strace_c or py_spy_record with idle: true to see on what.",
                " 何を待っているかは strace_c か idle: true の py_spy_record で確認。",
            ),
        };
        let gain = waiting_s * 0.5;
        out.push(Draft {
            title: tr(
                lang,
                format!("Run {} waits {} of its wall time", r.run_id, pct((1.0 - cores).max(0.0) * 100.0)),
                format!("{} は実時間の {} を待機に費やしている", r.run_id, pct((1.0 - cores).max(0.0) * 100.0)),
            ),
            action: tr(
                lang,
                format!(
                    "Only {cores:.2} cores were busy over {} ({} voluntary context switches): the program blocks on I/O, sleeps, locks or a remote service. Overlap the waits (threads, asyncio, prefetching) or batch the I/O; overlapping half of the {} saves about {}.{on}",
                    secs(wall), num(r.voluntary_ctx_switches.unwrap_or(0)), secs(waiting_s), secs(gain)
                ),
                format!(
                    "{} の間、使われたのは平均 {cores:.2} コアのみ（自発的コンテキストスイッチ {} 回）: I/O、sleep、ロック、外部サービスで止まっている。待ちを重ねる（スレッド、asyncio、プリフェッチ）か I/O をまとめる。{} の半分を重ねれば約 {} 短縮。{on}",
                    secs(wall), num(r.voluntary_ctx_switches.unwrap_or(0)), secs(waiting_s), secs(gain)
                ),
            ),
            evidence: vec![format!("cpu {}", r.run_id)],
            sources: r.sources.clone(),
            confidence: if top.is_some() { Confidence::Medium } else { Confidence::Low },
            ..Draft::saves_time(gain, Some(wall))
        });
    }
    out
}

fn syscall_heavy(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(s) = &run.metrics.syscalls else {
            continue;
        };
        let Some(top) = s.rows.first() else {
            continue;
        };
        // strace stops the target at every call, so its own wall time is inflated; the same
        // target run without it (time -v) gives the real wall, user and sys times.
        let unstraced = inputs.session.runs.iter().find_map(|r| {
            let t = r.metrics.time_v.as_ref()?;
            (r.target == run.target).then_some((r.run_id.as_str(), t))
        });
        let (wall, sys_share, basis) = match unstraced {
            Some((id, t)) => (
                t.wall_s,
                (t.user_s + t.sys_s > 0.0).then(|| t.sys_s / (t.user_s + t.sys_s)),
                id.to_string(),
            ),
            None => (run.wall_s.unwrap_or(0.0), None, run.run_id.clone()),
        };
        if wall <= 0.0 {
            continue;
        }
        let by_time = s.total_seconds >= SYSCALL_SHARE * wall;
        let by_cpu = s.total_calls >= SYSCALL_MIN_CALLS
            && sys_share.is_some_and(|share| share >= SYS_SHARE_OF_CPU);
        if !by_time && !by_cpu {
            continue;
        }
        let sys_s = unstraced.map(|(_, t)| t.sys_s);
        // The kernel time the calls cost without strace (sys), else strace's own count.
        let cost = sys_s.unwrap_or(top.seconds);
        let gain = cost * 0.5;
        let why = match (sys_s, sys_share) {
            (Some(sys), Some(share)) => tr(
                lang,
                format!(
                    "{} of its CPU time is in the kernel ({} sys, {basis})",
                    pct(share * 100.0),
                    secs(sys)
                ),
                format!(
                    "CPU 時間の {} がカーネル内（sys {}、{basis}）",
                    pct(share * 100.0),
                    secs(sys)
                ),
            ),
            _ => tr(
                lang,
                format!("syscalls took {} of {}", secs(s.total_seconds), secs(wall)),
                format!(
                    "システムコールが {} 中 {}",
                    secs(wall),
                    secs(s.total_seconds)
                ),
            ),
        };
        out.push(Draft {
            title: tr(
                lang,
                format!("Fewer `{}` calls: {why}", top.syscall),
                format!("`{}` 呼び出しを減らす: {why}", top.syscall),
            ),
            action: tr(
                lang,
                format!(
                    "`{}` ran {} times ({} of the traced syscall time). Buffer or batch it (larger reads and writes, fewer flushes, no per-item stat/open); halving its cost saves about {}.",
                    top.syscall, num(top.calls), pct(top.time_percent), secs(gain)
                ),
                format!(
                    "`{}` が {} 回（トレースしたシステムコール時間の {}）。バッファリングやまとめ書きで回数を減らす（大きな read/write、flush を減らす、項目ごとの stat/open をやめる）。コストを半減すれば約 {} 短縮。",
                    top.syscall, num(top.calls), pct(top.time_percent), secs(gain)
                ),
            ),
            evidence: vec![format!("syscalls {} {}", run.run_id, top.syscall), format!("cpu {basis}")],
            sources: vec![crate::tables::cite(run, "strace_c")],
            confidence: Confidence::Low,
            ..Draft::saves_time(gain, Some(wall))
        });
    }
    out
}

/// A device's peak memory in one run, and where it was read.
type DevicePeak<'a> = (&'a str, u64, &'a Vec<Source>);

fn gpu_memory_imbalance(inputs: &Inputs) -> Vec<Draft> {
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

fn python_allocation_site(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let mut out = Vec::new();
    for run in &inputs.session.runs {
        let Some(p) = &run.metrics.python_memory else {
            continue;
        };
        let Some(site) = p.peak_sites_by_size.first() else {
            continue;
        };
        if site.size_bytes < ALLOC_SITE_MIN_BYTES
            || (site.size_bytes as f64) < ALLOC_SITE_SHARE * p.peak_bytes as f64
        {
            continue;
        }
        let gain = site.size_bytes / 2;
        out.push(Draft {
            title: tr(
                lang,
                format!("{}:{} holds {} at the peak", site.file, site.line, bytes(site.size_bytes)),
                format!("{}:{} がピーク時に {} を保持", site.file, site.line, bytes(site.size_bytes)),
            ),
            action: tr(
                lang,
                format!(
                    "{} live blocks allocated at {}:{} make {} of the Python heap's {} peak. Stream it (a generator, chunks), use a compact type (NumPy arrays, `array`, `__slots__`), or free it before the next large allocation; halving it saves about {}.",
                    num(site.count), site.file, site.line, pct(site.size_bytes as f64 / p.peak_bytes.max(1) as f64 * 100.0), bytes(p.peak_bytes), bytes(gain)
                ),
                format!(
                    "{}:{} で確保された {} 個のブロックが Python ヒープのピーク {} の {} を占める。逐次処理（ジェネレータ、分割）にする、小さな型（NumPy 配列、`array`、`__slots__`）にする、次の大きな確保の前に解放する。半減で約 {} 削減。",
                    site.file, site.line, num(site.count), bytes(p.peak_bytes), pct(site.size_bytes as f64 / p.peak_bytes.max(1) as f64 * 100.0), bytes(gain)
                ),
            ),
            evidence: vec![format!("memory {} cpu heap", run.run_id)],
            sources: vec![crate::tables::cite(run, "tracemalloc_json")],
            confidence: Confidence::Medium,
            ..Draft::saves_memory(gain, Some(p.peak_bytes))
        });
    }
    for run in &inputs.session.runs {
        let Some(a) = &run.metrics.allocations else {
            continue;
        };
        // memray ranks every place, the interpreter's imports included; the user can change
        // only their own code: the first site under the run's directory, outside packages.
        let cwd = std::path::Path::new(&run.cwd);
        // (A script run by a relative path has relative file names.)
        let own = a.top_by_size.iter().find(|s| {
            let f = std::path::Path::new(&s.file);
            (f.starts_with(cwd) || (f.is_relative() && !s.file.starts_with('<')))
                && !s.file.contains("site-packages")
        });
        let Some((site, size)) = own.and_then(|s| Some((s, s.size_bytes?))) else {
            continue;
        };
        if size < ALLOC_SITE_MIN_BYTES || (size as f64) < ALLOC_SITE_SHARE * a.peak_bytes as f64 {
            continue;
        }
        let file = std::path::Path::new(&site.file)
            .strip_prefix(cwd)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| site.file.clone());
        let line = site.line.map(|l| format!(":{l}")).unwrap_or_default();
        // Allocated over the run, not all live at once: a quarter of it is a safe saving.
        let gain = size.min(a.peak_bytes) / 4;
        out.push(Draft {
            title: tr(
                lang,
                format!("{file}{line} ({}) allocates {} over the run", site.function, bytes(size)),
                format!("{file}{line}（{}）が実行中に {} を確保", site.function, bytes(size)),
            ),
            action: tr(
                lang,
                format!(
                    "memray ranks {file}{line} first among the program's own allocation sites: {} allocated there, against a heap peak of {}. Allocate once and reuse, stream instead of building whole lists, or use a compact type (NumPy arrays, `array`, `__slots__`); a quarter less is about {}.",
                    bytes(size), bytes(a.peak_bytes), bytes(gain)
                ),
                format!(
                    "memray の集計で、プログラム自身の確保箇所の首位は {file}{line}：{} を確保（ヒープのピークは {}）。一度確保して再利用する、リスト全体を作らず逐次処理にする、小さな型（NumPy 配列、`array`、`__slots__`）にする。4 分の 1 減で約 {}。",
                    bytes(size), bytes(a.peak_bytes), bytes(gain)
                ),
            ),
            evidence: vec![format!("memory {} cpu heap", run.run_id)],
            sources: vec![crate::tables::cite(run, "memray_stats_json")],
            confidence: Confidence::Medium,
            ..Draft::saves_memory(gain, Some(a.peak_bytes))
        });
    }
    out
}

fn nccl_socket_fallback(inputs: &Inputs) -> Vec<Draft> {
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
            sources: vec![crate::tables::cite(run, "nccl_log")],
            confidence: Confidence::High,
            // The log has no timings: the gain is not estimated, so it ranks last (impact 0)
            // and says so.
            ..Draft::empty()
        });
    }
    out
}
