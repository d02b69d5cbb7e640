//! A real vLLM server's window (vLLM 0.32.0's CPU build, a tiny Llama, our load of 8 streams):
//! its /metrics scrapes, our client's requests and the worker's own operator table.

use super::data_dir;
use system_profile_model::metrics::LoadSource;
use system_profile_parse::{prometheus, serving, torch_table};

fn read(name: &str) -> String {
    std::fs::read_to_string(data_dir("serving").join(name)).unwrap()
}

fn window() -> system_profile_model::metrics::ServingWindow {
    let account: serving::WindowAccount =
        serde_json::from_str(&read("vllm-0.32.0-cpu-window.json")).unwrap();
    let requests = read("vllm-0.32.0-cpu-window.requests.jsonl");
    let parsed = serving::window(
        &read("vllm-0.32.0-cpu-window.metrics.txt"),
        &account,
        Some(&requests),
    );
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    parsed.value.unwrap()
}

#[test]
fn every_serving_fixture_has_a_source() {
    for e in std::fs::read_dir(data_dir("serving")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".source.md") {
            let stem = name.split('.').next().unwrap().to_string();
            let sources: Vec<String> = std::fs::read_dir(data_dir("serving"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| {
                    n.ends_with(".source.md")
                        && stem.starts_with(
                            n.split('.')
                                .next()
                                .unwrap()
                                .trim_end_matches("-window")
                                .trim_end_matches("-worker"),
                        )
                })
                .collect();
            assert!(!sources.is_empty(), "{name} has no .source.md");
        }
    }
}

#[test]
fn every_scrape_of_a_real_metrics_file_is_read_whole() {
    let parsed = prometheus::parse(&read("vllm-0.32.0-cpu-window.metrics.txt"));
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(parsed.value.len(), 9);
    let first = &parsed.value[0];
    assert_eq!(first.at_unix_s, Some(1796676268.292641));
    // As the file says: 382 first tokens before the window, 2048-token counters with labels.
    assert_eq!(first.sum(serving::vllm::TTFT_COUNT, &[]), Some(382.0));
    assert_eq!(
        first
            .by_label(serving::vllm::SUCCESS, "finished_reason")
            .get("length")
            .copied(),
        Some(381.0)
    );
}

#[test]
fn the_window_agrees_with_the_client_that_made_its_load() {
    let w = window();
    assert_eq!(w.load, Some(LoadSource::Ours));
    assert_eq!(w.scrapes, 9);
    assert!((w.window_s - 10.52).abs() < 0.01, "{}", w.window_s);
    let client = w.client.as_ref().unwrap();
    assert_eq!(client.failed, 0);
    // The server counts what finished between its first and last scrape; the client what it
    // started and finished inside them: at most its 8 streams apart at each edge.
    let (server, ours) = (w.requests_finished as i64, client.completed as i64);
    assert!(
        (server - ours).abs() <= 16,
        "server {server}, client {ours}"
    );
    // Every request generated 64 tokens (ignore_eos): the tokens rate is the requests' times 64.
    let tokens_per_request = w.generation_tokens_per_s / w.requests_per_s;
    assert!(
        (tokens_per_request - 64.0).abs() < 4.0,
        "{tokens_per_request}"
    );
    // The client's end-to-end includes the API server and the wire: never below the engine's.
    let (engine, seen) = (w.e2e.as_ref().unwrap(), client.e2e.as_ref().unwrap());
    assert!(
        seen.mean_s >= engine.mean_s * 0.9,
        "client {} engine {}",
        seen.mean_s,
        engine.mean_s
    );
    // Per token, the client and the engine see the same pace (3.19 ms against 3.35 ms here).
    let (engine_itl, client_itl) = (
        w.itl.as_ref().unwrap().mean_s,
        client.itl.as_ref().unwrap().mean_s,
    );
    assert!(
        (engine_itl - client_itl).abs() <= 0.1 * engine_itl,
        "{engine_itl} {client_itl}"
    );
    // Each percentile lies in the bucket it names.
    for q in [&w.ttft, &w.itl, &w.e2e, &w.queue, &w.prefill, &w.decode] {
        let q = q.as_ref().unwrap();
        for (v, b) in [
            (q.p50_s, q.p50_bucket_s),
            (q.p90_s, q.p90_bucket_s),
            (q.p99_s, q.p99_bucket_s),
        ] {
            assert!(
                v >= b.lower && b.upper.is_none_or(|u| v <= u),
                "{v} outside {b:?}"
            );
        }
        assert!(q.p50_s <= q.p90_s && q.p90_s <= q.p99_s);
    }
    insta::assert_json_snapshot!("serving_window", w);
}

#[test]
fn the_workers_own_table_gives_what_a_step_is_made_of() {
    let table = torch_table::parse(&read("vllm-0.32.0-cpu-worker.profiler_out.txt"));
    assert!(table.diagnostics.is_empty(), "{:?}", table.diagnostics);
    let mm = table
        .value
        .iter()
        .find(|o| o.name == "_C::onednn_mm")
        .unwrap();
    assert_eq!(mm.calls, 4662);
    assert!((mm.self_us - 134_054.0).abs() < 1.0, "{}", mm.self_us);
    let steps = serving::engine_steps(&table.value).unwrap();
    // The table's nine step rows (331 steps decoding one request, 56 decoding seven, ...): 516
    // steps, against 518 calls of the sampler, one a step (two steps' rows fell below the
    // table's row limit).
    assert_eq!(steps.steps, 516);
    assert!(steps.prefill_steps > 0 && steps.decode_steps > steps.prefill_steps);
    assert!((steps.python_percent + steps.operator_percent - 100.0).abs() < 1e-6);
    assert!(
        steps.matmul_percent > 5.0 && steps.sampling_percent > 0.5 && steps.attention_percent > 1.0
    );
    insta::assert_json_snapshot!("serving_engine_steps", steps);
}
