//! A serving window's files into [`ServingWindow`]: vLLM's `/metrics` scrapes (the first and
//! the last bound the window), the runner's account of the window (`serving-window.json`: whose
//! load, the profiler), our load's requests (`serving-requests.jsonl`, each timed on the
//! client's clock), and what an engine step is made of, from the worker's operator table.

use crate::prometheus::{self, counter_delta, exact_quantiles, histogram_delta, Scrape};
use serde::Deserialize;
use system_profile_model::metrics::{
    ClientFigures, CpuOp, EngineSteps, GaugeReadings, LoadSource, ServerProfiler, ServingWindow,
};
use system_profile_model::{Diag, Parsed};

/// vLLM's metric names (V1 engine), stated once.
pub mod vllm {
    pub const TTFT: &str = "vllm:time_to_first_token_seconds";
    pub const TTFT_COUNT: &str = "vllm:time_to_first_token_seconds_count";
    pub const ITL: &str = "vllm:inter_token_latency_seconds";
    pub const E2E: &str = "vllm:e2e_request_latency_seconds";
    pub const QUEUE: &str = "vllm:request_queue_time_seconds";
    pub const PREFILL: &str = "vllm:request_prefill_time_seconds";
    pub const DECODE: &str = "vllm:request_decode_time_seconds";
    pub const RUNNING: &str = "vllm:num_requests_running";
    pub const WAITING: &str = "vllm:num_requests_waiting";
    pub const KV_CACHE: &str = "vllm:kv_cache_usage_perc";
    pub const PREEMPTIONS: &str = "vllm:num_preemptions_total";
    pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens_total";
    pub const GENERATION_TOKENS: &str = "vllm:generation_tokens_total";
    pub const SUCCESS: &str = "vllm:request_success_total";
    pub const PREFIX_QUERIES: &str = "vllm:prefix_cache_queries_total";
    pub const PREFIX_HITS: &str = "vllm:prefix_cache_hits_total";
}

/// The runner's account of the window.
#[derive(Debug, Default, Deserialize)]
pub struct WindowAccount {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub load: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub window_end_unix_s: Option<f64>,
    #[serde(default)]
    pub profiler: Option<ProfilerAccount>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ProfilerAccount {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub stop_s: Option<f64>,
    #[serde(default)]
    pub traces: Vec<String>,
}

/// One request of our load, as the client timed it.
#[derive(Debug, Default, Deserialize)]
struct RequestRecord {
    #[serde(default)]
    start_unix_s: Option<f64>,
    #[serde(default)]
    ttft_s: Option<f64>,
    #[serde(default)]
    itl_s: Vec<f64>,
    #[serde(default)]
    e2e_s: Option<f64>,
    #[serde(default)]
    chunks: u64,
    /// Tokens it generated (known: our load sets `ignore_eos`).
    #[serde(default)]
    tokens: Option<u64>,
    #[serde(default)]
    error: Option<String>,
}

fn gauge(scrapes: &[Scrape], name: &str, scale: f64) -> Option<GaugeReadings> {
    let values: Vec<f64> = scrapes
        .iter()
        .filter_map(|s| s.sum(name, &[]))
        .map(|v| v * scale)
        .collect();
    let last = *values.last()?;
    Some(GaugeReadings {
        mean: values.iter().sum::<f64>() / values.len() as f64,
        max: values.iter().copied().fold(f64::MIN, f64::max),
        last,
        readings: values.len() as u32,
    })
}

/// The window from the server's scrapes and the runner's account; the client's figures from our
/// requests that ended inside the window (from `from_unix_s` to `to_unix_s`).
pub fn window(
    scrapes_text: &str,
    account: &WindowAccount,
    requests_jsonl: Option<&str>,
) -> Parsed<Option<ServingWindow>> {
    let parsed = prometheus::parse(scrapes_text);
    let mut diagnostics = parsed.diagnostics;
    let scrapes = parsed.value;
    let (Some(first), Some(last)) = (scrapes.first(), scrapes.last()) else {
        diagnostics.push(Diag::general("no scrape of /metrics"));
        return Parsed {
            value: None,
            diagnostics,
        };
    };
    let start = first.at_unix_s.unwrap_or(0.0);
    let end = last.at_unix_s.unwrap_or(start);
    let window_s = (end - start).max(0.0);
    let per_s = |v: Option<f64>| match (v, window_s > 0.0) {
        (Some(v), true) => v / window_s,
        _ => 0.0,
    };
    let finished = last.by_label(vllm::SUCCESS, "finished_reason");
    let before = first.by_label(vllm::SUCCESS, "finished_reason");
    let mut finished_by_reason: Vec<(String, u64)> = finished
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - before.get(k).copied().unwrap_or(0.0)).max(0.0).round() as u64,
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    finished_by_reason.sort_by_key(|b| std::cmp::Reverse(b.1));
    let requests_finished: u64 = finished_by_reason.iter().map(|(_, n)| n).sum();
    let prefix_cache_hit_percent = match (
        counter_delta(first, last, vllm::PREFIX_QUERIES, &[]),
        counter_delta(first, last, vllm::PREFIX_HITS, &[]),
    ) {
        (Some(q), Some(h)) if q > 0.0 => Some(100.0 * h / q),
        _ => None,
    };
    let client = requests_jsonl.map(|text| client_figures(text, start, end, &mut diagnostics));
    let load = match account.load.as_deref() {
        Some("user") => Some(LoadSource::User),
        Some("ours") => Some(LoadSource::Ours),
        _ => None,
    };
    let profiler = account.profiler.as_ref().and_then(|p| {
        Some(ServerProfiler {
            state: p.state.clone()?,
            stop_s: p.stop_s,
            traces: p.traces.clone(),
            restart_hint: None,
        })
    });
    let value = ServingWindow {
        url: account.url.clone(),
        window_start_unix_s: start,
        window_s,
        scrapes: scrapes.len() as u32,
        load,
        requests_finished,
        finished_by_reason,
        requests_per_s: per_s(Some(requests_finished as f64)),
        prompt_tokens_per_s: per_s(counter_delta(first, last, vllm::PROMPT_TOKENS, &[])),
        generation_tokens_per_s: per_s(counter_delta(first, last, vllm::GENERATION_TOKENS, &[])),
        prefix_cache_hit_percent,
        ttft: histogram_delta(first, last, vllm::TTFT),
        itl: histogram_delta(first, last, vllm::ITL),
        e2e: histogram_delta(first, last, vllm::E2E),
        queue: histogram_delta(first, last, vllm::QUEUE),
        prefill: histogram_delta(first, last, vllm::PREFILL),
        decode: histogram_delta(first, last, vllm::DECODE),
        running: gauge(&scrapes, vllm::RUNNING, 1.0),
        waiting: gauge(&scrapes, vllm::WAITING, 1.0),
        // vLLM's gauge is a fraction despite its name.
        kv_cache_percent: gauge(&scrapes, vllm::KV_CACHE, 100.0),
        preemptions: counter_delta(first, last, vllm::PREEMPTIONS, &[])
            .unwrap_or(0.0)
            .round() as u64,
        client,
        profiler,
        engine_steps: None,
    };
    Parsed {
        value: Some(value),
        diagnostics,
    }
}

/// Our client's figures over the requests that ended within the window.
fn client_figures(
    text: &str,
    from_unix_s: f64,
    to_unix_s: f64,
    diagnostics: &mut Vec<Diag>,
) -> ClientFigures {
    let mut f = ClientFigures::default();
    let (mut ttft, mut itl, mut e2e) = (Vec::new(), Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let Ok(r) = serde_json::from_str::<RequestRecord>(line) else {
            if diagnostics.len() < 20 {
                diagnostics.push(Diag::at(i + 1, "not a request record: skipped"));
            }
            continue;
        };
        let Some(started) = r.start_unix_s else {
            continue;
        };
        let ended = started + r.e2e_s.unwrap_or(0.0);
        if started < from_unix_s || ended > to_unix_s {
            continue;
        }
        if let Some(e) = r.error {
            f.failed += 1;
            if f.errors.len() < 3 {
                f.errors.push(e);
            }
            continue;
        }
        f.completed += 1;
        f.chunks += r.chunks;
        ttft.extend(r.ttft_s);
        e2e.extend(r.e2e_s);
        // A request's time per output token: its span from first to last chunk over the gaps
        // between its tokens. Single gaps mean little at a client whose reads coalesce chunks
        // after a stall, and a late chunk may carry two tokens.
        let gaps = match r.tokens {
            Some(t) if t > 1 => Some((t - 1) as f64),
            _ => (!r.itl_s.is_empty()).then_some(r.itl_s.len() as f64),
        };
        if let Some(n) = gaps {
            itl.push(r.itl_s.iter().sum::<f64>() / n);
        }
    }
    f.ttft = exact_quantiles(&mut ttft);
    f.itl = exact_quantiles(&mut itl);
    f.e2e = exact_quantiles(&mut e2e);
    f
}

/// `execute_context_<n>(<tokens>)_generation_<n>(<tokens>)`: vLLM's name for one executed step,
/// by its batch: prompts prefilled (and their tokens), requests decoded (and theirs).
fn step_batch(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("execute_context_")?;
    let (context, rest) = rest.split_once('(')?;
    let generation = rest.split_once("_generation_")?.1;
    let (decoded, _) = generation.split_once('(')?;
    Some((context.parse().ok()?, decoded.parse().ok()?))
}

/// What the worker's steps were made of, from its operator table (the trace's or vLLM's own
/// `profiler_out.txt`): the step annotations' own time is the Python around the operators.
pub fn engine_steps(ops: &[CpuOp]) -> Option<EngineSteps> {
    let mut e = EngineSteps::default();
    let (mut step_total_us, mut step_self_us) = (0.0, 0.0);
    let (mut prefill_us, mut decode_us, mut decoded) = (0.0, 0.0, 0u64);
    for op in ops {
        let Some((context, generation)) = step_batch(&op.name) else {
            continue;
        };
        e.steps += op.calls;
        step_total_us += op.total_us;
        step_self_us += op.self_us;
        if context > 0 {
            e.prefill_steps += op.calls;
            prefill_us += op.total_us;
        } else {
            e.decode_steps += op.calls;
            decode_us += op.total_us;
            decoded += generation * op.calls;
        }
    }
    if e.steps == 0 || step_total_us <= 0.0 {
        return None;
    }
    e.mean_step_us = step_total_us / e.steps as f64;
    e.mean_prefill_step_us = (e.prefill_steps > 0).then(|| prefill_us / e.prefill_steps as f64);
    e.mean_decode_step_us = (e.decode_steps > 0).then(|| decode_us / e.decode_steps as f64);
    e.mean_decode_batch = if e.decode_steps > 0 {
        decoded as f64 / e.decode_steps as f64
    } else {
        0.0
    };
    e.python_percent = 100.0 * step_self_us / step_total_us;
    e.operator_percent = 100.0 - e.python_percent;
    let share = |op: &CpuOp| 100.0 * op.self_us / step_total_us;
    let mut operators: Vec<&CpuOp> = ops
        .iter()
        .filter(|o| step_batch(&o.name).is_none())
        .collect();
    operators.sort_by(|a, b| b.self_us.total_cmp(&a.self_us));
    e.top_operators = operators
        .iter()
        .take(8)
        .map(|o| (o.name.clone(), share(o)))
        .collect();
    let sum_where = |test: &dyn Fn(&str) -> bool| -> f64 {
        operators
            .iter()
            .filter(|o| test(&o.name.to_ascii_lowercase()))
            .map(|o| share(o))
            .sum()
    };
    e.sampling_percent = sum_where(&|n| {
        [
            "sampl",
            "argmax",
            "gumbel",
            "topk",
            "top_k",
            "softmax",
            "multinomial",
        ]
        .iter()
        .any(|w| n.contains(w))
    });
    e.attention_percent =
        sum_where(&|n| n.contains("attention") || n.contains("attn") || n.contains("kv_cache"));
    e.matmul_percent = sum_where(&|n| {
        ["mm", "matmul", "linear", "gemm"]
            .iter()
            .any(|w| n.rsplit("::").next().is_some_and(|last| last.contains(w)))
    });
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_name_gives_its_batch() {
        assert_eq!(
            step_batch("execute_context_0(0)_generation_8(8)"),
            Some((0, 8))
        );
        assert_eq!(
            step_batch("execute_context_7(111)_generation_1(1)"),
            Some((7, 1))
        );
        assert_eq!(step_batch("aten::mm"), None);
    }
}
