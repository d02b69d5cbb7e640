//! An LLM server's own figures, read as a vLLM engineer reads them: where a request's time goes
//! (queue, prefill, decode, and what happens before the engine sees it), whether the KV cache
//! held, and which process is saturated. Each rule states its figure; the gain is a share of
//! the mean request's latency (sums over counts: exact, not the histograms' buckets).

use super::*;
use crate::fmt::{pct, secs, tr};
use system_profile_model::metrics::ServingWindow;
use system_profile_model::report::{Confidence, Serving};

/// Requests finished in the window below which a serving figure is only indicative.
const SERVING_MIN_REQUESTS: u64 = 50;

fn confidence(w: &ServingWindow) -> Confidence {
    if w.requests_finished >= SERVING_MIN_REQUESTS {
        Confidence::High
    } else {
        Confidence::Medium
    }
}

fn window_of<'a>(inputs: &Inputs<'a>) -> Option<(&'a Serving, f64)> {
    let s = inputs.report.serving.as_ref()?;
    let e2e = s.window.e2e.as_ref()?.mean_s;
    (e2e > 0.0 && s.window.requests_finished > 0).then_some((s, e2e))
}

fn evidence(s: &Serving) -> Vec<String> {
    vec![format!("serving {}", s.source.run_id)]
}

/// Requests wait in the scheduler's queue for a large part of their time.
pub(super) fn serving_queue_bound(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some((s, e2e)) = window_of(inputs) else {
        return Vec::new();
    };
    let w = &s.window;
    let Some(queue) = &w.queue else {
        return Vec::new();
    };
    if queue.mean_s < SERVING_QUEUE_SHARE * e2e {
        return Vec::new();
    }
    let waiting = w.waiting.as_ref().map_or(0.0, |g| g.max);
    let running = w.running.as_ref().map_or(0.0, |g| g.max);
    vec![Draft {
        title: tr(
            lang,
            format!("Requests wait in vLLM's queue for {} of their time", pct(100.0 * queue.mean_s / e2e)),
            format!("リクエストは時間の {} を vLLM の待ち行列で過ごす", pct(100.0 * queue.mean_s / e2e)),
        ),
        action: tr(
            lang,
            format!(
                "Over {} the mean request spent {} queued of {} end to end, with up to {waiting:.0} waiting while {running:.0} ran: the engine admits too few at once. Raise `--max-num-seqs` (requests batched together) and `--max-num-batched-tokens` (tokens a step may take) while the KV cache allows (it peaked at {}), or add replicas.",
                secs(w.window_s), secs(queue.mean_s), secs(e2e), w.kv_cache_percent.as_ref().map_or("—".into(), |g| format!("{:.1} %", g.max))
            ),
            format!(
                "{} の間、平均的なリクエストはエンドツーエンド {} のうち {} を待ち行列で過ごし、実行中 {running:.0} に対し待機は最大 {waiting:.0}: エンジンが同時に受け入れる数が少ない。KV キャッシュが許す範囲で（最大 {}）`--max-num-seqs` と `--max-num-batched-tokens` を上げるか、レプリカを増やす。",
                secs(w.window_s), secs(e2e), secs(queue.mean_s), w.kv_cache_percent.as_ref().map_or("—".into(), |g| format!("{:.1} %", g.max))
            ),
        ),
        evidence: evidence(s),
        sources: vec![s.source.clone()],
        confidence: confidence(w),
        ..Draft::saves_time(queue.mean_s, Some(e2e))
    }]
}

/// The KV cache ran out: requests were preempted (their work redone), or it was nearly full.
pub(super) fn serving_kv_cache_pressure(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some((s, e2e)) = window_of(inputs) else {
        return Vec::new();
    };
    let w = &s.window;
    let kv_max = w.kv_cache_percent.as_ref().map_or(0.0, |g| g.max);
    if w.preemptions == 0 && kv_max < SERVING_KV_FULL_PERCENT {
        return Vec::new();
    }
    // A preempted request recomputes its prefill: that much of the mean request, spread.
    let prefill = w.prefill.as_ref().map_or(0.0, |p| p.mean_s);
    let gain_s = prefill * w.preemptions as f64 / w.requests_finished.max(1) as f64;
    vec![Draft {
        title: tr(
            lang,
            format!("The KV cache ran short: {} preemptions, up to {:.1} % used", w.preemptions, kv_max),
            format!("KV キャッシュが不足: プリエンプション {} 回、使用率最大 {:.1} %", w.preemptions, kv_max),
        ),
        action: tr(
            lang,
            format!(
                "Over {} the engine preempted {} requests (each recomputes its prompt) and the KV cache peaked at {:.1} %. Give it more: `VLLM_CPU_KVCACHE_SPACE` (GiB) on a CPU build, `--gpu-memory-utilization` on GPUs; or lower `--max-num-seqs` so fewer requests compete for it.",
                secs(w.window_s), w.preemptions, kv_max
            ),
            format!(
                "{} の間にエンジンは {} 件をプリエンプトし（プロンプトを再計算する）、KV キャッシュは最大 {:.1} %。CPU 版では `VLLM_CPU_KVCACHE_SPACE`（GiB）、GPU では `--gpu-memory-utilization` で増やすか、`--max-num-seqs` を下げて競合を減らす。",
                secs(w.window_s), w.preemptions, kv_max
            ),
        ),
        evidence: evidence(s),
        sources: vec![s.source.clone()],
        confidence: if w.preemptions > 0 { confidence(w) } else { Confidence::Low },
        ..Draft::saves_time(gain_s, Some(e2e))
    }]
}

/// Prefill takes most of the time to first token.
pub(super) fn serving_prefill_bound(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some((s, e2e)) = window_of(inputs) else {
        return Vec::new();
    };
    let w = &s.window;
    let (Some(prefill), Some(ttft)) = (&w.prefill, &w.ttft) else {
        return Vec::new();
    };
    if prefill.mean_s < SERVING_PREFILL_SHARE_OF_TTFT * ttft.mean_s
        || prefill.mean_s < SERVING_PREFILL_MIN_S
    {
        return Vec::new();
    }
    let hits = w
        .prefix_cache_hit_percent
        .map(pct)
        .unwrap_or_else(|| "—".into());
    vec![Draft {
        title: tr(
            lang,
            format!("Prefill is {} of the time to first token", pct(100.0 * prefill.mean_s / ttft.mean_s)),
            format!("最初のトークンまでの時間の {} がプリフィル", pct(100.0 * prefill.mean_s / ttft.mean_s)),
        ),
        action: tr(
            lang,
            format!(
                "The mean prompt took {} to prefill of a {} TTFT ({:.0} prompt tokens/s). Chunked prefill (`--enable-chunked-prefill` with a `--max-num-batched-tokens` that fits a step) lets decodes run beside long prompts; prefix caching (`--enable-prefix-caching`; {hits} of prompt tokens hit it here) skips shared prefixes; shorter prompts or a system prompt shared at the front help both.",
                secs(prefill.mean_s), secs(ttft.mean_s), w.prompt_tokens_per_s
            ),
            format!(
                "平均的なプロンプトのプリフィルは TTFT {} のうち {}（プロンプト {:.0} トークン/s）。チャンク化プリフィル（`--enable-chunked-prefill` と 1 ステップに収まる `--max-num-batched-tokens`）で長いプロンプトの横でもデコードが進み、プレフィックスキャッシュ（`--enable-prefix-caching`、ここでの命中 {hits}）は共通の先頭を省く。",
                secs(ttft.mean_s), secs(prefill.mean_s), w.prompt_tokens_per_s
            ),
        ),
        evidence: evidence(s),
        sources: vec![s.source.clone()],
        confidence: confidence(w),
        ..Draft::saves_time(prefill.mean_s * 0.5, Some(e2e))
    }]
}

/// The time before the engine sees a request (the API server and the connection) dominates
/// what the client waits for the first token, or the API server's process is saturated.
pub(super) fn serving_api_server_bound(inputs: &Inputs) -> Vec<Draft> {
    let lang = inputs.lang;
    let Some((s, _)) = window_of(inputs) else {
        return Vec::new();
    };
    let w = &s.window;
    let api = s
        .processes
        .iter()
        .find(|p| p.role.as_deref() == Some(API_SERVER));
    let api_cores = api.map(|p| p.cpu_cores + p.waiting_cores.unwrap_or(0.0));
    let outside = match (w.client.as_ref().and_then(|c| c.ttft.as_ref()), &w.ttft) {
        (Some(client), Some(engine)) if client.mean_s > 0.0 => {
            Some((client.mean_s - engine.mean_s, client.mean_s))
        }
        _ => None,
    };
    let by_latency = outside.is_some_and(|(gap, client)| {
        gap >= SERVING_OUTSIDE_SHARE * client && gap >= SERVING_OUTSIDE_MIN_S
    });
    let by_cpu = api_cores.is_some_and(|c| c >= SERVING_API_SERVER_CORES);
    if !(by_latency || by_cpu) {
        return Vec::new();
    }
    let batch = s
        .engine_steps
        .as_ref()
        .map(|e| {
            tr(
                lang,
                format!(
                    " The engine decoded {:.1} requests a step on average.",
                    e.mean_decode_batch
                ),
                format!(
                    " エンジンは 1 ステップ平均 {:.1} リクエストをデコードした。",
                    e.mean_decode_batch
                ),
            )
        })
        .unwrap_or_default();
    let figures = match (outside, api, api_cores) {
        (Some((gap, client)), Some(p), Some(c)) => tr(
            lang,
            format!("{} of the client's {} mean TTFT passed before the engine saw the request, and the API server (PID {}) used {:.2} cores and wanted {:.2}.", secs(gap), secs(client), p.pid, p.cpu_cores, c),
            format!("クライアントの平均 TTFT {} のうち {} はエンジンが受け取る前に過ぎ、API サーバ（PID {}）は {:.2} コアを使い {:.2} コアを求めた。", secs(client), secs(gap), p.pid, p.cpu_cores, c),
        ),
        (Some((gap, client)), _, _) => tr(
            lang,
            format!("{} of the client's {} mean TTFT passed before the engine saw the request.", secs(gap), secs(client)),
            format!("クライアントの平均 TTFT {} のうち {} はエンジンが受け取る前に過ぎた。", secs(client), secs(gap)),
        ),
        (None, Some(p), Some(c)) => tr(
            lang,
            format!("The API server (PID {}) used {:.2} cores and wanted {:.2}.", p.pid, p.cpu_cores, c),
            format!("API サーバ（PID {}）は {:.2} コアを使い {:.2} コアを求めた。", p.pid, p.cpu_cores, c),
        ),
        _ => return Vec::new(),
    };
    // The time before the engine, of the client's mean request; without a client of ours
    // there is no such figure, and the gain is not estimated rather than made up.
    let gain = match (outside, w.client.as_ref().and_then(|c| c.e2e.as_ref())) {
        (Some((gap, _)), Some(e2e)) => Draft::saves_time(gap.max(0.0), Some(e2e.mean_s)),
        _ => Draft::empty(),
    };
    vec![Draft {
        title: tr(
            lang,
            "The API server, not the engine, holds requests back".to_string(),
            "リクエストを遅らせているのはエンジンではなく API サーバ".to_string(),
        ),
        action: if by_cpu {
            tr(
                lang,
                format!("{figures}{batch} Its one process tokenises prompts, detokenises and streams every token, and it is saturated: run more of them with `--api-server-count N` (the engine takes requests from each), and keep the load's clients off the server's cores."),
                format!("{figures}{batch} 1 つのプロセスがプロンプトのトークン化、デトークン化、全トークンのストリーミングを担い、飽和している: `--api-server-count N` で増やし、負荷のクライアントはサーバのコアから離す。"),
            )
        } else {
            tr(
                lang,
                format!("{figures}{batch} It is not saturated but starved: it waits for a CPU that the engine core and the workers (which spin on their shared-memory queue while idle) and the load's clients take. Give the API server a core of its own (vLLM pins the workers with `VLLM_CPU_OMP_THREADS_BIND`; leave a core out of it), or run the clients elsewhere."),
                format!("{figures}{batch} 飽和ではなく CPU 不足: エンジンコアとワーカー（待機中も共有メモリのキューで回り続ける）と負荷のクライアントが CPU を取っている。API サーバに専用のコアを与える（ワーカーは `VLLM_CPU_OMP_THREADS_BIND` で固定される: 1 コアを外す）か、クライアントを別の場所で動かす。"),
            )
        },
        evidence: evidence(s),
        sources: [Some(s.source.clone()), s.processes_source.clone()]
            .into_iter()
            .flatten()
            .collect(),
        confidence: if by_latency && by_cpu {
            confidence(w)
        } else {
            Confidence::Medium
        },
        ..gain
    }]
}

/// The role the serving table gives the process it attached to.
pub(crate) const API_SERVER: &str = "api server";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Session;
    use system_profile_model::report::{Report, ServingProcess, Source};

    /// The real window the parser's fixture holds (vLLM 0.32.0's CPU build under our 8 streams).
    fn fixture_window() -> ServingWindow {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../parse/tests/data/serving");
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
        let account = serde_json::from_str(&read("vllm-0.32.0-cpu-window.json")).unwrap();
        let requests = read("vllm-0.32.0-cpu-window.requests.jsonl");
        system_profile_parse::serving::window(
            &read("vllm-0.32.0-cpu-window.metrics.txt"),
            &account,
            Some(&requests),
        )
        .value
        .unwrap()
    }

    fn fired(window: ServingWindow, processes: Vec<ServingProcess>) -> Vec<&'static str> {
        let session = Session {
            name: "s".into(),
            dir: "s".into(),
            logical_cpus: Some(2),
            runs: Vec::new(),
            traces: Vec::new(),
            instrument: Vec::new(),
            notes: Vec::new(),
            not_run: Vec::new(),
        };
        let report = Report {
            serving: Some(Serving {
                source: Source {
                    run_id: "r1".into(),
                    artifact: None,
                },
                window,
                processes,
                ..Serving::default()
            }),
            ..Report::default()
        };
        let inputs = Inputs {
            session: &session,
            report: &report,
            lang: Lang::En,
        };
        [
            (
                "serving_queue_bound",
                serving_queue_bound as fn(&Inputs) -> Vec<Draft>,
            ),
            ("serving_kv_cache_pressure", serving_kv_cache_pressure),
            ("serving_prefill_bound", serving_prefill_bound),
            ("serving_api_server_bound", serving_api_server_bound),
        ]
        .into_iter()
        .filter(|(_, rule)| !rule(&inputs).is_empty())
        .map(|(id, _)| id)
        .collect()
    }

    #[test]
    fn a_real_window_fires_what_its_figures_say_and_nothing_else() {
        // Queue 21 µs of 231 ms, no preemption, KV cache 0.2 %, prefill 10 ms of a 20 ms TTFT:
        // only the 143 ms our client waited before the engine had its request (164 ms against
        // the engine's 20 ms) is worth a change.
        let w = fixture_window();
        assert_eq!(fired(w.clone(), Vec::new()), ["serving_api_server_bound"]);
        // The same window seen through the user's load (no client of ours), the API server
        // idle: nothing fires.
        let mut users = w.clone();
        users.client = None;
        let idle = ServingProcess {
            pid: 1,
            name: "vllm".into(),
            role: Some(API_SERVER.into()),
            cpu_cores: 0.2,
            waiting_cores: Some(0.1),
            rss_peak_bytes: 0,
        };
        assert!(fired(users.clone(), vec![idle.clone()]).is_empty());
        // ... and saturated: it fires on the CPU alone.
        let busy = ServingProcess {
            cpu_cores: 0.95,
            ..idle
        };
        assert_eq!(
            fired(users.clone(), vec![busy]),
            ["serving_api_server_bound"]
        );
        // Requests queued for a third of their time, and preempted: those rules fire.
        let mut queued = users;
        let e2e = queued.e2e.as_ref().unwrap().mean_s;
        queued.queue.as_mut().unwrap().mean_s = e2e / 3.0;
        queued.preemptions = 12;
        assert_eq!(
            fired(queued, Vec::new()),
            ["serving_queue_bound", "serving_kv_cache_pressure"]
        );
    }
}
