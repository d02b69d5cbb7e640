//! The serving section: an LLM server's own figures over the window (`serving_window`), what
//! an engine step is made of (vLLM's profiler, after the window), and each of its processes'
//! CPU from the /proc sampler that watched the same window. First in the Summary when present:
//! it is what a serving engineer reads before any hotspot.

use crate::cpu_table::measured;
use crate::fmt::{bytes, pct, secs, tr};
use crate::markdown::{code, esc, heads, table};
use crate::session::Session;
use crate::tables::cite;
use system_profile_model::metrics::{LatencyQuantiles, LoadSource};
use system_profile_model::report::{Lang, Report, Serving, ServingProcess};
use system_profile_model::run::{ArtifactKind, RunTarget};

/// A percentile whose bucket is wider than this many times its value is shown as its bucket's
/// upper bound ("≤ 0.3 s"): vLLM's request-phase histograms start at 0.3 s, useless for a
/// request of 10 ms.
const COARSE_BUCKET_RATIO: f64 = 1.0;

pub fn serving(session: &Session) -> Option<Serving> {
    let runs: Vec<_> = session
        .runs
        .iter()
        .filter(|r| measured(r) && r.metrics.serving.is_some())
        .collect();
    let window_run = runs.iter().copied().max_by(|a, b| {
        let w = |r: &system_profile_model::run::RunRecord| {
            r.metrics.serving.as_ref().map_or(0.0, |s| s.window_s)
        };
        w(a).total_cmp(&w(b))
    })?;
    let window = window_run.metrics.serving.clone()?;
    let steps_run = runs.iter().rev().find(|r| {
        r.metrics
            .serving
            .as_ref()
            .is_some_and(|s| s.engine_steps.is_some())
    });
    let profiler_run = runs
        .iter()
        .rev()
        .find(|r| {
            r.metrics
                .serving
                .as_ref()
                .is_some_and(|s| s.profiler.is_some())
        })
        .copied()
        .unwrap_or(window_run);
    let pid = match window_run.target {
        RunTarget::Pid { pid } => Some(pid),
        _ => None,
    };
    let sampler = session.runs.iter().filter(|r| measured(r)).find(|r| {
        r.metrics
            .procfs
            .as_ref()
            .is_some_and(|p| Some(p.root_pid) == pid)
    });
    let processes = sampler
        .and_then(|r| r.metrics.procfs.as_ref())
        .map(|p| {
            let wall = p.wall_s.max(1e-9);
            p.processes
                .iter()
                .map(|u| ServingProcess {
                    pid: u.pid,
                    name: u.name.clone(),
                    role: (Some(u.pid) == pid).then(|| crate::rules::API_SERVER.to_string()),
                    cpu_cores: (u.cpu_user_s + u.cpu_sys_s) / wall,
                    waiting_cores: u.run_queue_s.map(|q| q / wall),
                    rss_peak_bytes: u.rss_peak_bytes,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Serving {
        source: cite(window_run, ArtifactKind::ServingMetrics),
        steps_source: steps_run.map(|r| cite(r, ArtifactKind::KinetoTrace)),
        engine_steps: steps_run.and_then(|r| r.metrics.serving.as_ref()?.engine_steps.clone()),
        profiler: profiler_run
            .metrics
            .serving
            .as_ref()
            .and_then(|s| s.profiler.clone()),
        processes_source: sampler.map(|r| cite(r, ArtifactKind::ProcfsJsonl)),
        processes,
        window,
    })
}

/// A percentile as a reader may trust it: the value, or its bucket's bound where the bucket is
/// too wide to say more.
pub(crate) fn quantile_text(value: f64, bucket: system_profile_model::metrics::Bucket) -> String {
    match bucket.upper {
        Some(u)
            if u > bucket.lower && (u - bucket.lower) > COARSE_BUCKET_RATIO * value.max(1e-12) =>
        {
            format!("≤ {}", secs(u))
        }
        None => format!("> {}", secs(bucket.lower)),
        _ => secs(value),
    }
}

fn three(q: &LatencyQuantiles) -> String {
    format!(
        "{} / {} / {}",
        quantile_text(q.p50_s, q.p50_bucket_s),
        quantile_text(q.p90_s, q.p90_bucket_s),
        quantile_text(q.p99_s, q.p99_bucket_s)
    )
}

/// The lines the Summary opens with.
pub fn summary_lines(report: &Report) -> Vec<String> {
    let lang = report.lang;
    let Some(s) = &report.serving else {
        return Vec::new();
    };
    let w = &s.window;
    let load = match w.load {
        Some(LoadSource::User) => tr(lang, "the user's own load", "ユーザー自身の負荷"),
        Some(LoadSource::Ours) => tr(lang, "a load of ours", "こちらで掛けた負荷"),
        None => tr(lang, "its load", "その負荷"),
    };
    let mut out = vec![tr(
        lang,
        format!(
            "Serving ({} over {}, {}): {:.1} requests/s, {:.0} generated tokens/s, {:.0} prompt tokens/s.",
            s.source.run_id, secs(w.window_s), load, w.requests_per_s, w.generation_tokens_per_s, w.prompt_tokens_per_s
        ),
        format!(
            "サービング（{}、{}、{}）: {:.1} リクエスト/s、生成 {:.0} トークン/s、プロンプト {:.0} トークン/s。",
            s.source.run_id, secs(w.window_s), load, w.requests_per_s, w.generation_tokens_per_s, w.prompt_tokens_per_s
        ),
    )];
    let mut lat = Vec::new();
    for (name, q) in [("TTFT", &w.ttft), ("ITL", &w.itl), ("end to end", &w.e2e)] {
        if let Some(q) = q {
            lat.push(format!("{name} {} (mean {})", three(q), secs(q.mean_s)));
        }
    }
    if !lat.is_empty() {
        out.push(tr(
            lang,
            format!(
                "Latency at the engine, p50 / p90 / p99: {}.",
                lat.join("; ")
            ),
            format!(
                "エンジンでのレイテンシ p50 / p90 / p99: {}。",
                lat.join("; ")
            ),
        ));
    }
    if let Some(split) = phase_split(w) {
        out.push(tr(
            lang,
            format!("A request's time: {split}."),
            format!("リクエストの時間の内訳: {split}。"),
        ));
    }
    if let Some(c) = &w.client {
        if let (Some(ttft), Some(e2e)) = (&c.ttft, &c.e2e) {
            out.push(tr(
                lang,
                format!(
                    "At our client ({} requests): TTFT {} / {} / {}, end to end mean {}.",
                    c.completed, secs(ttft.p50_s), secs(ttft.p90_s), secs(ttft.p99_s), secs(e2e.mean_s)
                ),
                format!(
                    "こちらのクライアント（{} リクエスト）: TTFT {} / {} / {}、エンドツーエンド平均 {}。",
                    c.completed, secs(ttft.p50_s), secs(ttft.p90_s), secs(ttft.p99_s), secs(e2e.mean_s)
                ),
            ));
        }
    }
    if !report
        .recommendations
        .iter()
        .any(|r| r.rule.starts_with("serving_"))
    {
        let kv = w
            .kv_cache_percent
            .as_ref()
            .map_or("—".into(), |g| format!("{:.1} %", g.max));
        out.push(tr(
            lang,
            format!("Nothing to change in the serving figures: no request queued long, {} preemptions, KV cache at most {kv}, prefill a small part of TTFT, the API server not saturated.", w.preemptions),
            format!("サービングの指標に変えるべき点はない: 長い待ち行列なし、プリエンプション {}、KV キャッシュ最大 {kv}、プリフィルは TTFT の小部分、API サーバは飽和していない。", w.preemptions),
        ));
    }
    if let Some(e) = &s.engine_steps {
        out.push(tr(
            lang,
            format!(
                "An engine step: {} on average ({} steps, {:.1} requests decoded a step); operators {}, the Python around them {}.",
                secs(e.mean_step_us / 1e6), e.steps, e.mean_decode_batch, pct(e.operator_percent), pct(e.python_percent)
            ),
            format!(
                "エンジンの 1 ステップ: 平均 {}（{} ステップ、1 ステップのデコード {:.1} リクエスト）。演算子 {}、その周りの Python {}。",
                secs(e.mean_step_us / 1e6), e.steps, e.mean_decode_batch, pct(e.operator_percent), pct(e.python_percent)
            ),
        ));
    }
    out
}

/// Queue, prefill and decode as shares of the mean request (exact means: sums over counts).
fn phase_split(w: &system_profile_model::metrics::ServingWindow) -> Option<String> {
    let (q, p, d) = (w.queue.as_ref()?, w.prefill.as_ref()?, w.decode.as_ref()?);
    let total = q.mean_s + p.mean_s + d.mean_s;
    (total > 0.0).then(|| {
        format!(
            "queue {} ({}), prefill {} ({}), decode {} ({})",
            secs(q.mean_s),
            pct(100.0 * q.mean_s / total),
            secs(p.mean_s),
            pct(100.0 * p.mean_s / total),
            secs(d.mean_s),
            pct(100.0 * d.mean_s / total)
        )
    })
}

pub fn render(md: &mut String, report: &Report) {
    let lang = report.lang;
    let Some(s) = &report.serving else { return };
    let w = &s.window;
    md.push_str(&format!("### {}\n\n", tr(lang, "Serving", "サービング")));
    md.push_str(&tr(
        lang,
        format!(
            "The server at `{}` over {} ({} scrapes of its /metrics; {}: {}):\n\n",
            esc(&w.url),
            secs(w.window_s),
            w.scrapes,
            s.source.run_id,
            s.source.artifact.as_deref().unwrap_or("")
        ),
        format!(
            "`{}` のサーバ、{}（/metrics を {} 回取得; {}: {}）:\n\n",
            esc(&w.url),
            secs(w.window_s),
            w.scrapes,
            s.source.run_id,
            s.source.artifact.as_deref().unwrap_or("")
        ),
    ));
    let row = |name: &str,
               q: &Option<LatencyQuantiles>,
               client: Option<&LatencyQuantiles>|
     -> Option<Vec<String>> {
        let q = q.as_ref()?;
        Some(vec![
            name.to_string(),
            q.count.to_string(),
            secs(q.mean_s),
            quantile_text(q.p50_s, q.p50_bucket_s),
            quantile_text(q.p90_s, q.p90_bucket_s),
            quantile_text(q.p99_s, q.p99_bucket_s),
            client.map_or("—".into(), |c| {
                format!("{} / {} / {}", secs(c.p50_s), secs(c.p90_s), secs(c.p99_s))
            }),
        ])
    };
    let c = w.client.as_ref();
    let rows: Vec<Vec<String>> = [
        row("TTFT", &w.ttft, c.and_then(|c| c.ttft.as_ref())),
        row("ITL", &w.itl, c.and_then(|c| c.itl.as_ref())),
        row(
            &tr(lang, "end to end", "エンドツーエンド"),
            &w.e2e,
            c.and_then(|c| c.e2e.as_ref()),
        ),
        row(&tr(lang, "queue", "待ち行列"), &w.queue, None),
        row(&tr(lang, "prefill", "プリフィル"), &w.prefill, None),
        row(&tr(lang, "decode", "デコード"), &w.decode, None),
    ]
    .into_iter()
    .flatten()
    .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("Latency", "レイテンシ"),
                ("Count", "件数"),
                ("Mean", "平均"),
                ("p50", "p50"),
                ("p90", "p90"),
                ("p99", "p99"),
                (
                    "Our client p50 / p90 / p99",
                    "こちらのクライアント p50 / p90 / p99",
                ),
            ],
        ),
        &rows,
    );
    md.push_str(&tr(
        lang,
        "Percentiles are interpolated within the server's histogram buckets: a percentile is at most its bucket's width off, and `≤ x` marks one whose bucket is wider than the value itself. Means are exact (sums over counts). The client's figures are every request it started and finished inside the window, on its own clock: they include the API server and the connection, which the engine's do not.\n\n",
        "パーセンタイルはサーバのヒストグラムのバケット内で補間する: 誤差は最大でバケット幅。`≤ x` はバケットが値より広いもの。平均は正確（合計 / 件数）。クライアントの値は窓の中で始まり終わったリクエストを自身の時計で測ったもので、API サーバと接続の時間を含む。\n\n",
    ));
    gauges(md, lang, w);
    steps(md, lang, s);
    processes(md, lang, s);
}

fn gauges(md: &mut String, lang: Lang, w: &system_profile_model::metrics::ServingWindow) {
    let g = |x: &Option<system_profile_model::metrics::GaugeReadings>| {
        x.as_ref()
            .map_or("—".into(), |g| format!("{:.1} / {:.1}", g.mean, g.max))
    };
    let reasons: Vec<String> = w
        .finished_by_reason
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    md.push_str(&tr(
        lang,
        format!(
            "Requests finished: {} ({}). Running requests mean / max {}; waiting {}; KV cache used {} %; preemptions {}{}.\n\n",
            w.requests_finished,
            if reasons.is_empty() { "—".into() } else { reasons.join(", ") },
            g(&w.running), g(&w.waiting), g(&w.kv_cache_percent), w.preemptions,
            w.prefix_cache_hit_percent.map(|p| format!("; prefix cache hits {}", pct(p))).unwrap_or_default()
        ),
        format!(
            "完了リクエスト: {}（{}）。実行中リクエスト 平均 / 最大 {}、待機 {}、KV キャッシュ使用 {} %、プリエンプション {}{}。\n\n",
            w.requests_finished,
            if reasons.is_empty() { "—".into() } else { reasons.join(", ") },
            g(&w.running), g(&w.waiting), g(&w.kv_cache_percent), w.preemptions,
            w.prefix_cache_hit_percent.map(|p| format!("、プレフィックスキャッシュ命中 {}", pct(p))).unwrap_or_default()
        ),
    ));
}

fn steps(md: &mut String, lang: Lang, s: &Serving) {
    match (&s.engine_steps, &s.profiler) {
        (Some(e), _) => {
            let from = s
                .steps_source
                .as_ref()
                .map(|c| c.run_id.clone())
                .unwrap_or_default();
            md.push_str(&tr(
                lang,
                format!(
                    "What an engine step is made of ({from}, vLLM's profiler after the window): {} steps, {} prefilling prompts (mean {}), {} decode-only (mean {}, {:.1} requests a step). Operators {} of the steps' time (matmuls {}, attention and KV cache {}, sampling {}); the Python around them {}. Heaviest: {}.\n\n",
                    e.steps, e.prefill_steps, e.mean_prefill_step_us.map_or("—".into(), |u| secs(u / 1e6)),
                    e.decode_steps, e.mean_decode_step_us.map_or("—".into(), |u| secs(u / 1e6)), e.mean_decode_batch,
                    pct(e.operator_percent), pct(e.matmul_percent), pct(e.attention_percent), pct(e.sampling_percent), pct(e.python_percent),
                    e.top_operators.iter().take(4).map(|(n, p)| format!("{} {}", code(n), pct(*p))).collect::<Vec<_>>().join(", ")
                ),
                format!(
                    "エンジンの 1 ステップの内訳（{from}、窓の後の vLLM プロファイラ）: {} ステップ、プリフィルあり {}（平均 {}）、デコードのみ {}（平均 {}、1 ステップ {:.1} リクエスト）。演算子がステップ時間の {}（行列積 {}、アテンションと KV キャッシュ {}、サンプリング {}）、その周りの Python {}。上位: {}。\n\n",
                    e.steps, e.prefill_steps, e.mean_prefill_step_us.map_or("—".into(), |u| secs(u / 1e6)),
                    e.decode_steps, e.mean_decode_step_us.map_or("—".into(), |u| secs(u / 1e6)), e.mean_decode_batch,
                    pct(e.operator_percent), pct(e.matmul_percent), pct(e.attention_percent), pct(e.sampling_percent), pct(e.python_percent),
                    e.top_operators.iter().take(4).map(|(n, p)| format!("{} {}", code(n), pct(*p))).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        (None, Some(p)) => {
            let hint = p.restart_hint.clone().unwrap_or_default();
            md.push_str(&tr(
                lang,
                format!("vLLM's profiler: {} {}\n\n", p.state, esc(&hint)),
                format!("vLLM のプロファイラ: {} {}\n\n", p.state, esc(&hint)),
            ));
        }
        (None, None) => {}
    }
}

fn processes(md: &mut String, lang: Lang, s: &Serving) {
    if s.processes.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = s
        .processes
        .iter()
        .map(|p| {
            vec![
                p.pid.to_string(),
                match &p.role {
                    Some(role) => format!("{} ({role})", code(&p.name)),
                    None => code(&p.name),
                },
                format!("{:.2}", p.cpu_cores),
                p.waiting_cores.map_or("—".into(), |w| format!("{w:.2}")),
                bytes(p.rss_peak_bytes),
            ]
        })
        .collect();
    md.push_str(&tr(
        lang,
        format!(
            "Each process over the same window ({}):\n\n",
            s.processes_source
                .as_ref()
                .map(|c| c.run_id.as_str())
                .unwrap_or("")
        ),
        format!(
            "同じ窓での各プロセス（{}）:\n\n",
            s.processes_source
                .as_ref()
                .map(|c| c.run_id.as_str())
                .unwrap_or("")
        ),
    ));
    table(
        md,
        &heads(
            lang,
            &[
                ("PID", "PID"),
                ("Process", "プロセス"),
                ("CPU (cores)", "CPU（コア）"),
                ("Waiting for a CPU (cores)", "CPU 待ち（コア）"),
                ("RSS peak", "RSS ピーク"),
            ],
        ),
        &rows,
    );
}
