//! `serving_window`: a running LLM server (vLLM's OpenAI server) over one window. The server is
//! found by its process: its listening sockets give the URLs to try, its command line (or
//! environment) where vLLM's profiler writes. The window itself is `py/serving_window.py`, run
//! with the server's own interpreter (standard library only): /metrics every second, our load
//! only where none was arriving, vLLM's profiler after the window. Its files are parsed here.

use crate::*;
use system_profile_model::metrics::{ServerProfiler, ServingWindow};

pub(crate) const SERVING_WINDOW: &str = include_str!("py/serving_window.py");

/// The restart that gives a vLLM server its profiler endpoints: without stacks, which cost a
/// stop of minutes (305 s against 4.6 s measured on this project's CPU build).
pub const PROFILER_RESTART_FLAGS: &str = r#"--profiler-config '{"profiler": "torch", "torch_profiler_dir": "<dir>", "torch_profiler_with_stack": false}'"#;

/// Where a vLLM server's profiler writes: `--profiler-config`'s `torch_profiler_dir` (vLLM 0.13
/// and later), else `VLLM_TORCH_PROFILER_DIR` (before).
pub fn profiler_dir(argv: &[String], env: &std::collections::HashMap<String, String>) -> Option<String> {
    let config = argv.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--profiler-config=")
            .map(str::to_string)
            .or_else(|| (a == "--profiler-config").then(|| argv.get(i + 1).cloned()).flatten())
    });
    if let Some(text) = config {
        let dir = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("torch_profiler_dir")?.as_str().map(str::to_string));
        if dir.is_some() {
            return dir;
        }
    }
    env.get("VLLM_TORCH_PROFILER_DIR").cloned()
}

/// The URLs a process may answer on: every TCP address it listens on, the wildcard ones by
/// loopback.
fn candidate_urls(pid: u32) -> Vec<String> {
    system_profile_sample::proc::listening_addresses(pid)
        .into_iter()
        .map(|a| {
            let host = match a.ip() {
                ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
                ip if ip.is_unspecified() => "[::1]".to_string(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            format!("http://{host}:{}", a.port())
        })
        .collect()
}

pub(crate) async fn serving_window(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let pid = running_pid(input, "observes a running server (the API server's PID)")?;
    let urls = candidate_urls(pid);
    if urls.is_empty() {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!("PID {pid} listens on no TCP port this server can see: give the API server's PID (the `vllm serve` process)"),
        ));
    }
    let python = system_profile_sample::proc::exe(pid)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "python3".into());
    let argv_of_server = system_profile_sample::proc::cmdline(pid).unwrap_or_default();
    let dir = profiler_dir(&argv_of_server, &system_profile_sample::proc::environ(pid));
    let window_s = window(input).as_secs_f64();
    let mut argv: Vec<String> = vec![
        python,
        "-c".into(),
        SERVING_WINDOW.into(),
        "--duration".into(),
        format!("{window_s}"),
        "--out".into(),
        place.dir.to_string_lossy().into_owned(),
    ];
    for url in &urls {
        argv.extend(["--url".into(), url.clone()]);
    }
    if let Some(d) = &dir {
        argv.extend(["--profiler-dir".into(), d.clone()]);
    }
    let profile_s = input.options.engine_profile_s.unwrap_or(0.0);
    argv.extend(["--profile-s".into(), format!("{profile_s}")]);
    // The window, the profiler's 2 s and its bounded stop (60 s), and our requests' last ones;
    // within a shorter timeout the script leaves the profiler out rather than be killed.
    let limit = timeout_of(input).or(Some(Duration::from_secs_f64(window_s + 200.0)));
    if let Some(t) = limit {
        argv.extend(["--budget-s".into(), format!("{:.1}", t.as_secs_f64() - 5.0)]);
    }
    let outcome = launch(input, place, &argv, limit, |_| {}).await?;
    // The script is ours: the record shows its name, not its source.
    argv[2] = "<serving_window.py>".into();
    let mut e = finish(&outcome, argv, place);
    read_back(input, place, &mut e, dir.is_some());
    explain_exit(&mut e);
    Ok(e)
}

/// The window's files into `metrics.serving`, and each into the run's artifacts.
fn read_back(input: &RunProfilerInput, place: &RunPlace, e: &mut Execution, has_profiler_dir: bool) {
    let account_path = artifact_path(input, place, ArtifactKind::ServingWindowJson);
    let account: system_profile_parse::serving::WindowAccount =
        serde_json::from_str(&read(&account_path)).unwrap_or_default();
    if let Some(error) = &account.error {
        e.error = Some(format!("serving_window: {error}"));
    }
    for kind in [
        ArtifactKind::ServingMetrics,
        ArtifactKind::ServingRequests,
        ArtifactKind::ServingWindowJson,
    ] {
        e.artifacts.extend(kept(input, place, kind));
    }
    let requests = kept(input, place, ArtifactKind::ServingRequests).map(|a| read(&a.path));
    let parsed = system_profile_parse::serving::window(
        &read(&artifact_path(input, place, ArtifactKind::ServingMetrics)),
        &account,
        requests.as_deref(),
    );
    e.warnings
        .extend(parsed.diagnostics.iter().take(5).map(|d| format!("serving_window: {}", d.message)));
    let Some(mut w) = parsed.value else { return };
    traces_of(place, e, &mut w);
    let asked = input.options.engine_profile_s.is_some_and(|s| s > 0.0);
    if asked && w.profiler.as_ref().is_none_or(|p| p.state == "absent") {
        let profiler = w.profiler.get_or_insert_with(|| ServerProfiler {
            state: "absent".into(),
            ..Default::default()
        });
        profiler.restart_hint = Some(if has_profiler_dir {
            "the server names a profiler directory but did not answer /start_profile".into()
        } else {
            format!("restart the server with {PROFILER_RESTART_FLAGS} to trace an engine step")
        });
    }
    e.metrics.serving = Some(w);
}

/// The profiler's files copied into the run's folder: each trace kept, the worker's analysed
/// (the trace of the process that ran the model's operators: most events), its steps described.
fn traces_of(place: &RunPlace, e: &mut Execution, w: &mut ServingWindow) {
    let Some(profiler) = &w.profiler else { return };
    let mut best: Option<system_profile_model::metrics::TraceAnalysis> = None;
    for name in &profiler.traces {
        let path = place.dir.join(name);
        if name.ends_with("profiler_out.txt") {
            e.artifacts.extend(file_artifact(path, ArtifactKind::TorchTable));
            continue;
        }
        e.artifacts
            .extend(file_artifact(path.clone(), ArtifactKind::KinetoTrace));
        let Ok(file) = std::fs::File::open(&path) else { continue };
        let Ok(parsed) = system_profile_parse::kineto::analyze_compressed_or_not(std::io::BufReader::new(file)) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| parsed.value.events > b.events) {
            best = Some(parsed.value);
        }
    }
    if let Some(trace) = best {
        w.engine_steps = system_profile_parse::serving::engine_steps(&trace.cpu_ops);
        e.metrics.trace = Some(trace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiler_directory_is_read_from_either_form() {
        let env = std::collections::HashMap::new();
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let config = r#"{"profiler": "torch", "torch_profiler_dir": "/t/x"}"#;
        assert_eq!(
            profiler_dir(&argv(&["vllm", "serve", "m", "--profiler-config", config]), &env).as_deref(),
            Some("/t/x")
        );
        assert_eq!(
            profiler_dir(&argv(&["vllm", &format!("--profiler-config={config}")]), &env).as_deref(),
            Some("/t/x")
        );
        let old = [("VLLM_TORCH_PROFILER_DIR".to_string(), "/old".to_string())].into();
        assert_eq!(profiler_dir(&argv(&["vllm", "serve"]), &old).as_deref(), Some("/old"));
        assert_eq!(profiler_dir(&argv(&["vllm", "serve"]), &env), None);
    }
}
