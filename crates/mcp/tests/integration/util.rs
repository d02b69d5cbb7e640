//! Helpers: a spawned server with a line reader, `cmd_exists`, and `require` for tools a test
//! needs (missing: the test says so and passes here, but fails under CI=true).

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_system-profile");

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn cmd_exists(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// True when `what` is here. When it is not: false, with a note, or a failure under CI=true.
pub fn require(what: &str, present: bool) -> bool {
    if !present {
        let msg = format!("{what} is not installed here; .ci/run installs it");
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        // The test harness shows a passing test's stderr only with --nocapture; this is for it.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("SKIPPED (not under CI): {msg}");
        }
    }
    present
}

/// A TCP port on loopback that nothing listens on now, picked by the kernel.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// PATH with the project's venv first, as `.ci/run` sets it up.
pub fn path_with_venv() -> String {
    let venv = workspace_root().join(".venv/bin");
    format!(
        "{}:{}",
        venv.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

pub struct Server {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub root: tempfile::TempDir,
}

impl Server {
    pub fn spawn(extra: &[&str]) -> Server {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().to_path_buf();
        Server::spawn_in(root, &path, extra, &[])
    }

    /// A server on `root_path` (kept across servers, for restarts) with extra environment.
    pub fn spawn_in(
        root: tempfile::TempDir,
        root_path: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--root")
            .arg(root_path)
            .args(extra)
            .env("PATH", path_with_venv())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn system-profile serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            root,
        }
    }

    pub fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// One line of raw bytes (for input that is not UTF-8).
    pub fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the server writes, within `timeout`.
    pub fn recv_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next answer. The deadline is for a server that hangs, not a speed target: a busy
    /// machine (`stress-ng --cpu 4` beside the suite) makes ordinary calls take seconds.
    pub fn recv(&self) -> Value {
        self.recv_within(Duration::from_secs(120))
    }

    pub fn recv_within(&self, deadline: Duration) -> Value {
        let line = self
            .recv_line(deadline)
            .unwrap_or_else(|| panic!("an answer within {deadline:?}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Send one request and read the next line as its answer.
    pub fn ask(&mut self, line: &str) -> Value {
        self.send(line);
        self.recv()
    }

    /// `ask` for a call that is long by design (gigabytes through a pipe).
    pub fn ask_within(&mut self, line: &str, deadline: Duration) -> Value {
        self.send(line);
        self.recv_within(deadline)
    }

    /// The whole record of the run a `run_profiler` answer names: `run_profiler` answers with
    /// the run in brief, `get_run` with its record.
    pub fn record_of(&mut self, run_answer: &Value) -> Value {
        let run_id = run_answer["result"]["structuredContent"]["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a run id in {run_answer}"))
            .to_string();
        let r = self.ask(
            &serde_json::json!({"jsonrpc": "2.0", "id": 9_000, "method": "tools/call",
                "params": {"name": "get_run", "arguments": {"run_id": run_id}}})
            .to_string(),
        );
        r["result"]["structuredContent"].clone()
    }

    /// The server's stdin, for a writer of its own (this `Server` then sends nothing).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin open")
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `initialize` params for a handshake-era client.
pub fn initialize(id: u64, version: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "integration-test", "version": "0"}}
    })
    .to_string()
}

pub fn modern_meta() -> Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "integration-test", "version": "0"}
    })
}

/// A stand-in "python" that records its pid in `pidfile` and sleeps: a probe that hangs.
pub fn slow_python(dir: &Path, pidfile: &Path) -> PathBuf {
    let script = dir.join("slow-python");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> {}\nexec sleep 60\n",
            pidfile.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

pub fn pids_in(pidfile: &Path) -> Vec<i32> {
    std::fs::read_to_string(pidfile)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Alive and not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    cond()
}

/// Every tool, in the order tools/list gives them.
pub const TOOL_NAMES: [&str; 13] = [
    "identify_target",
    "detect_tools",
    "plan_profile",
    "run_profiler",
    "get_run",
    "list_runs",
    "cancel_run",
    "analyze_trace",
    "instrument_file",
    "list_changes",
    "revert_changes",
    "summarize",
    "compare",
];

/// The tool named `name` in a tools/list result.
pub fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

/// The names of a tools/list result, in order.
pub fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `system-profile profile --root <root> <args>` run in `root` with the venv on PATH.
pub fn profile_output(root: &Path, args: &[impl AsRef<std::ffi::OsStr>]) -> std::process::Output {
    Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(root)
        .args(args)
        .current_dir(root)
        .env("PATH", path_with_venv())
        .output()
        .unwrap()
}

/// Run `system-profile profile --root <root> <args>` with the venv on PATH, assert it
/// succeeded, and return report.json (parsed), its path relative to the root, and the output.
pub fn profile_report(root: &Path, args: &[String]) -> (Value, String, std::process::Output) {
    let out = profile_output(root, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "profile {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no `data:` line in {stdout}"))
        .to_string();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(&json)).unwrap()).unwrap();
    (report, json, out)
}

/// The report's JSON, from the `data: ` line the CLI prints.
pub fn report_of(dir: &std::path::Path, stdout: &str) -> serde_json::Value {
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no `data:` line in {stdout}"));
    serde_json::from_str(&std::fs::read_to_string(dir.join(json)).unwrap()).unwrap()
}
