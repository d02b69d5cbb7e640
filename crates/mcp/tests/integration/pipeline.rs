//! `system-profile profile <target>` on every example target: the real pipeline (identify,
//! detect, plan, the planned runs, summarize; instrument and revert with --instrument) in a
//! scratch copy of `examples/` under git, checked on what each example is known to hold.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

static ONE_PIPELINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A scratch root holding a copy of `examples/`, committed to a fresh git repository so the
/// tree's cleanliness after a revert can be checked with `git status`.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let src = workspace_root().join("examples");
        copy_tree(&src, &dir.path().join("examples"));
        let s = Scratch { dir };
        s.git(&["init", "-q"]);
        s.git(&["add", "-A"]);
        s.git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "examples",
        ]);
        s
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `system-profile profile ARGS` run from the root; the report's JSON and the output.
    /// One pipeline at a time in this binary: each runs profilers that want the CPUs, and
    /// hotspot shares taken while two pipelines fight over two cores say little.
    fn profile(&self, args: &[&str]) -> (Value, Output) {
        let _one = ONE_PIPELINE.lock().unwrap_or_else(|p| p.into_inner());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (report, _, out) = profile_report(self.path(), &args);
        (report, out)
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn profilers_here() -> bool {
    require(
        "py-spy (the venv)",
        workspace_root().join(".venv/bin/py-spy").exists(),
    )
}

fn torch_here() -> bool {
    let py = workspace_root().join(".venv/bin/python");
    require(
        "torch in the venv",
        Command::new(py)
            .args(["-c", "import torch"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
    )
}

fn hotspot_functions(report: &Value) -> Vec<String> {
    report["hotspots"]["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| r["function"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn rules(report: &Value) -> Vec<(String, String)> {
    report["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_string(),
                r["title"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn cpu_hotspot_ranks_its_known_hotspot_first() {
    if !profilers_here() {
        return;
    }
    let s = Scratch::new();
    let (report, out) = s.profile(&["examples/cpu_hotspot.py", "100"]);
    let hot = hotspot_functions(&report);
    assert_eq!(hot.first().map(String::as_str), Some("busy"), "{hot:?}");
    let rules = rules(&report);
    assert_eq!(rules[0].0, "hot_python_function", "{rules:?}");
    assert!(rules[0].1.contains("busy"), "{rules:?}");
    // Every planned run completed; the report names them and the CPU table has real numbers.
    assert!(report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "completed"));
    let wall = report["cpu"][0]["wall_s"].as_f64().unwrap();
    assert!(wall > 0.05, "{wall}");
    // The progress went to stderr, the summary to stdout.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[1/") && stderr.contains("summarize"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1. Speed up `busy`"), "{stdout}");
    assert!(s.path().join(report_md(&stdout)).is_file());
    // Nothing was instrumented: Part B is empty and the tree untouched.
    assert!(report["changes"]["rows"].as_array().unwrap().is_empty());
    assert_eq!(s.git(&["status", "--porcelain"]), "");
    check_sample_report(&s, &s.path().join(report_md(&stdout)));
    check_sample_stdout(&s, &stdout);
}

/// What `profile` printed, as a user in the repository's root sees it: the root and the
/// repository shown as `.`.
fn shown_stdout(s: &Scratch, stdout: &str) -> String {
    let root = s.path().canonicalize().unwrap();
    stdout
        .replace(&root.to_string_lossy().into_owned(), ".")
        .replace(&s.path().to_string_lossy().into_owned(), ".")
        .replace(&workspace_root().to_string_lossy().into_owned(), ".")
}

const README_SAMPLE: (&str, &str) = ("<!-- sample-stdout: ", "<!-- /sample-stdout -->");

/// The README's sample of `profile`'s output is this test's output (the session's name and
/// timings vary; every line's kind may not). `SP_UPDATE_SAMPLE=1` writes it there.
fn check_sample_stdout(s: &Scratch, stdout: &str) {
    let readme_path = workspace_root().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let start = readme
        .find(README_SAMPLE.0)
        .expect("README.md marks its sample output");
    let body = start + readme[start..].find('\n').unwrap() + 1;
    let end = body + readme[body..].find(README_SAMPLE.1).unwrap();
    let fresh = shown_stdout(s, stdout);
    if std::env::var_os("SP_UPDATE_SAMPLE").is_some() {
        let text = format!(
            "{}{}{}",
            &readme[..body],
            format_args!("```\n{fresh}```\n"),
            &readme[end..]
        );
        std::fs::write(&readme_path, text).unwrap();
        return;
    }
    // The kinds of lines, the recommendations as one (a busy machine adds `cpu_contention`).
    let kinds = |t: &str| -> Vec<String> {
        let mut k: Vec<String> = t
            .lines()
            .filter(|l| !l.starts_with("```"))
            .map(|l| match l.split([':', ' ']).next().unwrap_or("") {
                n if n.ends_with('.') && n[..n.len() - 1].parse::<u32>().is_ok() => "n.".into(),
                other => other.to_string(),
            })
            .collect();
        k.dedup();
        k
    };
    let committed = &readme[body..end];
    assert_eq!(
        kinds(&fresh),
        kinds(committed),
        "README.md's sample output drifted from `profile`'s: review, then SP_UPDATE_SAMPLE=1 \
         cargo test -p system-profile-mcp --test integration cpu_hotspot\n{fresh}"
    );
    // The lines a reader acts on are the same words.
    for line in fresh
        .lines()
        .filter(|l| l.starts_with("target:") || l.starts_with("1."))
    {
        assert!(committed.contains(line), "README.md lacks `{line}`");
    }
}

/// The report's shape: its headings (the session name cut), table headers and left-out
/// lines. Numbers and rows vary run to run; this must not.
fn structure(md: &str) -> Vec<String> {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with('#') {
            out.push(l.split(':').next().unwrap().to_string());
        } else if lines.get(i + 1).is_some_and(|n| n.starts_with("|---"))
            || l.starts_with("_Left out:")
        {
            out.push(l.to_string());
        }
    }
    out
}

/// `examples/sample-report/` is this pipeline's report on cpu_hotspot.py; fail when the
/// fresh report's structure drifts from it. `SP_UPDATE_SAMPLE=1` rewrites it from this run
/// (the scratch root shown as `.`), with the charts and the flame graph it links.
fn check_sample_report(s: &Scratch, fresh_md: &Path) {
    let sample = workspace_root().join("examples/sample-report");
    let session_dir = fresh_md.parent().unwrap();
    let fresh = std::fs::read_to_string(fresh_md).unwrap();
    if std::env::var_os("SP_UPDATE_SAMPLE").is_some() {
        let root = s.path().canonicalize().unwrap();
        let root = root.to_string_lossy();
        let _ = std::fs::remove_dir_all(&sample);
        std::fs::create_dir_all(&sample).unwrap();
        for name in ["report.md", "report.json"] {
            let text = std::fs::read_to_string(session_dir.join(name)).unwrap();
            let repo = workspace_root().to_string_lossy().into_owned();
            std::fs::write(
                sample.join(name),
                text.replace(&format!("{root}/"), "")
                    .replace(&*root, ".")
                    .replace(&format!("{repo}/"), "")
                    .replace(&repo, "."),
            )
            .unwrap();
        }
        for line in fresh.lines() {
            for (_, rest) in line.match_indices("](").map(|(i, _)| ((), &line[i + 2..])) {
                let link = rest.split(')').next().unwrap();
                if link.ends_with(".svg") {
                    let dst = sample.join(link);
                    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
                    std::fs::copy(session_dir.join(link), dst).unwrap();
                }
            }
        }
    }
    let committed = std::fs::read_to_string(sample.join("report.md")).unwrap();
    // The shape follows the methods that ran: on a busy machine a probe that timed out twice
    // leaves its tool "not known yet" and its step out of the plan (memray's allocation
    // table then has nothing to show). The shape is compared when the same methods ran.
    let methods = |json: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(json).unwrap();
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["profiler"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let fresh_methods = methods(&std::fs::read_to_string(session_dir.join("report.json")).unwrap());
    let sample_methods = methods(&std::fs::read_to_string(sample.join("report.json")).unwrap());
    if fresh_methods != sample_methods {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "report shape not compared: this run's methods {fresh_methods:?} are not the \
                 sample's {sample_methods:?}"
            );
        }
        return;
    }
    assert_eq!(
        structure(&fresh),
        structure(&committed),
        "the report's structure drifted from examples/sample-report/report.md: review it, then \
         SP_UPDATE_SAMPLE=1 cargo test -p system-profile-mcp --test integration cpu_hotspot"
    );
    for l in committed.lines().filter(|l| l.contains(".svg)")) {
        let link = l.split("](").nth(1).unwrap().split(')').next().unwrap();
        assert!(
            sample.join(link).is_file(),
            "the sample links {link}, not committed"
        );
    }
}

fn report_md(stdout: &str) -> PathBuf {
    PathBuf::from(
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("report: "))
            .unwrap(),
    )
}

#[test]
fn memory_hog_finds_its_allocation_site_and_redundant_copy_then_reverts() {
    if !profilers_here() {
        return;
    }
    let torch = torch_here();
    let s = Scratch::new();
    let before = std::fs::read(s.path().join("examples/memory_hog.py")).unwrap();
    let (report, _) = s.profile(&["--instrument", "examples/memory_hog.py", "memory"]);
    let rules = rules(&report);
    // load_records() holds most of the heap, and the report names its line as the file
    // stands after revert (the helper import added at the top shifted it by one while the
    // runs ran): the line the source itself says allocates.
    let source = String::from_utf8_lossy(&before).into_owned();
    let allocating = source
        .lines()
        .position(|l| l.contains("bytes(160)"))
        .map(|i| i + 1)
        .unwrap();
    assert!(
        rules
            .iter()
            .any(|(rule, title)| rule == "python_allocation_site"
                && title.contains(&format!("memory_hog.py:{allocating} "))),
        "line {allocating}: {rules:?}"
    );
    let changes = report["changes"]["rows"].as_array().unwrap();
    if torch {
        // prepare() keeps a clone of a 2048x4096 float32 tensor: 32 MiB held twice, seen by
        // every run the instrumented file ran in, each on its own row.
        let dup: Vec<(String, u64)> = report["memory"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| {
                Some((
                    m["run_id"].as_str()?.to_string(),
                    m["duplicated_same_place_bytes"].as_u64()?,
                ))
            })
            .collect();
        assert!(!dup.is_empty(), "{:#}", report["memory"]);
        for (run, bytes) in &dup {
            assert!(run.ends_with(" (instrument)"), "{dup:?}");
            assert_eq!(*bytes, 32 << 20, "{dup:?}");
        }
        assert!(
            rules.iter().any(|(r, _)| r == "duplicated_tensors"),
            "{rules:?}"
        );
        // Part B lists every change made (the helper, the import, the decorator), reverted.
        assert_eq!(changes.len(), 3, "{changes:#?}");
    }
    assert!(
        changes.iter().all(|c| c["state"] == "reverted"),
        "{changes:#?}"
    );
    assert!(report["changes"]["offer"].is_string());
    assert_eq!(
        std::fs::read(s.path().join("examples/memory_hog.py")).unwrap(),
        before
    );
    assert_eq!(s.git(&["status", "--porcelain"]), "");
}

#[test]
fn multi_process_sees_the_workers() {
    if !profilers_here() {
        return;
    }
    let s = Scratch::new();
    // Work for over a second of wall even on a fast machine: py-spy finds a pool's workers by
    // polling the tree, and workers done in a fraction of a second are never seen (8,000,000
    // ran in 0.3 s here, and under CPU hogs py-spy saw only the parent's start-up).
    let (report, _) = s.profile(&["examples/multi_process.py", "48000000"]);
    // The workers' crunch() is where the time goes; py-spy follows them.
    let hot = hotspot_functions(&report);
    assert_eq!(hot.first().map(String::as_str), Some("crunch"), "{hot:?}");
    assert!(hot.iter().all(|f| !f.starts_with("process ")), "{hot:?}");
    // The workers' share dominates the samples (the parent only waits): more than all the
    // other rows together (start-up, imports and pickling grow with a busy machine's delays,
    // crunch() does not). How many cores they kept busy depends on what else the machine
    // runs, so it is read, not asserted.
    let rows = report["hotspots"]["rows"].as_array().unwrap();
    let share = |r: &Value| r["self_percent"].as_f64().unwrap_or(0.0);
    let self_share = share(&rows[0]);
    let rest: f64 = rows[1..].iter().map(share).sum();
    assert!(
        self_share > 50.0 && self_share > rest,
        "{self_share} against {rest}: {rows:#?}"
    );
    assert!(report["cpu"][0]["cpu_utilization_cores"].as_f64().unwrap() > 0.0);
}

#[test]
fn torch_copies_measures_its_collective_and_reverts() {
    if !profilers_here() || !torch_here() {
        return;
    }
    let s = Scratch::new();
    let before = std::fs::read(s.path().join("examples/torch_copies.py")).unwrap();
    let (report, _) = s.profile(&[
        "--instrument",
        "--budget",
        "240",
        "examples/torch_copies.py",
        "3",
        "interconnect",
    ]);
    // Without a GPU the collective runs over gloo between the two processes, and the nccl
    // instrumentation measures it: 256x1024 float32, 1 MiB per all_reduce.
    let rows = report["interconnect"]["rows"].as_array().unwrap();
    let all_reduce = rows
        .iter()
        .find(|r| {
            r["kind"]
                .as_str()
                .unwrap_or_default()
                .starts_with("all_reduce")
        })
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert_eq!(all_reduce["bytes_p50"].as_u64(), Some(1 << 20));
    assert!(all_reduce["count"].as_u64().unwrap() >= 6, "{all_reduce}");
    let changes = report["changes"]["rows"].as_array().unwrap();
    assert!(!changes.is_empty());
    assert!(changes.iter().all(|c| c["state"] == "reverted"));
    assert_eq!(
        std::fs::read(s.path().join("examples/torch_copies.py")).unwrap(),
        before
    );
    assert_eq!(s.git(&["status", "--porcelain"]), "");
}

/// The service started from the scratch root, with its PID, killed on drop.
struct Service {
    child: std::process::Child,
    pid: u32,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_service(s: &Scratch, port: u16) -> Service {
    let py = workspace_root().join(".venv/bin/python");
    let pidfile = s.path().join("service.pid");
    let child = Command::new(&py)
        .args(["examples/http_service.py", "--port", &port.to_string()])
        .args(["--pidfile", &pidfile.to_string_lossy()])
        .current_dir(s.path())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(20), || pidfile.exists()
        && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()));
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Service { child, pid }
}

/// Load that lasts as long as the test holds it (killed on drop), never a fixed time that a
/// busy machine can outlast while the profiles are still running.
fn load(s: &Scratch, port: u16) -> Service {
    let child = Command::new(workspace_root().join(".venv/bin/python"))
        .args(["examples/load.py", "--port", &port.to_string()])
        .args(["--seconds", "3600"])
        .current_dir(s.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    Service { child, pid }
}

#[test]
fn a_web_service_by_pid_and_by_name_finds_the_hot_handler() {
    if !profilers_here() {
        return;
    }
    let s = Scratch::new();
    let port = free_port();
    let service = start_service(&s, port);
    let _loader = load(&s, port);
    let (by_pid, _) = s.profile(&["--budget", "20", "pid", &service.pid.to_string()]);
    let hot = hotspot_functions(&by_pid);
    assert_eq!(
        hot.first().map(String::as_str),
        Some("render_page"),
        "{hot:?}"
    );
    // By name: the one process whose command line names it (this test's own name must not,
    // or the test process would match too).
    let (by_name, out) = s.profile(&["--budget", "20", "http_service"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("`http_service`: {} (main)\n", service.pid)),
        "{stdout}"
    );
    let hot = hotspot_functions(&by_name);
    assert!(hot.iter().any(|f| f == "render_page"), "{hot:?}");
}

#[test]
fn a_target_that_needs_clarifying_is_refused_with_the_questions() {
    let s = Scratch::new();
    let out = Command::new(BIN)
        .args([
            "profile",
            "--root",
            &s.path().to_string_lossy(),
            "no_such_script.py",
        ])
        .current_dir(s.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no_such_script.py"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        !s.path().join("profile_output").exists() || {
            // Nothing ran: no session folder holds a run.
            std::fs::read_dir(s.path().join("profile_output"))
                .unwrap()
                .flatten()
                .all(|e| !e.path().join("manifest.json").exists())
        }
    );
}

/// PATH with the venv and the binary under test first, as a user who installed both has it.
fn path_with_binary() -> String {
    let bin_dir = Path::new(BIN).parent().unwrap();
    format!("{}:{}", bin_dir.display(), path_with_venv())
}

fn run_client(s: &Scratch, argv: &[&str]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(s.path())
        .env("PATH", path_with_binary())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_example_clients_drive_real_sessions() {
    if !profilers_here() {
        return;
    }
    let s = Scratch::new();
    let py = workspace_root().join(".venv/bin/python");
    let py = py.to_string_lossy();
    // Plain JSON-RPC over stdio: the plan run step by step, the report's place printed.
    let out = run_client(
        &s,
        &[
            &py,
            "examples/clients/jsonrpc_stdio.py",
            "examples/cpu_hotspot.py",
            "100",
        ],
    );
    assert!(out.contains("1. Speed up `busy`"), "{out}");
    let report = out
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap();
    assert!(s.path().join(report).is_file());
    // The shell one-liner with `system-profile call`.
    let out = run_client(&s, &["bash", "examples/clients/call.sh"]);
    assert!(s.path().join(out.trim()).is_file(), "{out}");
    // The official SDK: six steps, instrumentation reverted, the tree clean.
    let sdk = Command::new(&*py)
        .args(["-c", "import mcp.client.client"])
        .status()
        .is_ok_and(|st| st.success());
    if require("the MCP Python SDK", sdk) && torch_here() {
        let out = run_client(
            &s,
            &[
                &py,
                "examples/clients/mcp_sdk.py",
                "examples/memory_hog.py",
                "memory",
            ],
        );
        assert!(out.contains("## Part B"), "{out}");
        assert!(out.contains("`examples/memory_hog.py` | modified"), "{out}");
        assert_eq!(s.git(&["status", "--porcelain"]), "");
    }
}

#[test]
fn keep_changes_leaves_the_instrumentation_for_revert_changes() {
    if !profilers_here() || !torch_here() {
        return;
    }
    let s = Scratch::new();
    let file = s.path().join("examples/memory_hog.py");
    let before = std::fs::read(&file).unwrap();
    let (report, out) = s.profile(&[
        "--instrument",
        "--keep-changes",
        "examples/memory_hog.py",
        "memory",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("applied and kept"), "{stdout}");
    let changes = report["changes"]["rows"].as_array().unwrap();
    assert!(!changes.is_empty());
    assert!(
        changes.iter().all(|c| c["state"] != "reverted"),
        "{changes:#?}"
    );
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(kept.contains("# [PROFILE]"), "{kept}");
    // The undo the summary points at.
    let undo = Command::new(BIN)
        .args(["call", "--root", &s.path().to_string_lossy()])
        .args(["revert_changes", r#"{"all": true}"#])
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(undo.status.success(), "{undo:?}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert_eq!(s.git(&["status", "--porcelain"]), "");
}

/// A torchrun agent started here, stopped on drop with SIGTERM, which it passes to its ranks.
struct Agent(std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

/// Two torchrun agents of one job running here (`--nnodes 2 --node_rank 0|1`, one rank each:
/// the two nodes of a job): `profile pid A B` samples both nodes side by side, and the report
/// puts each rank under the node it was started on, with its agent.
#[test]
fn a_running_two_node_job_is_profiled_node_by_node() {
    if !profilers_here() || !torch_here() {
        return;
    }
    let s = Scratch::new();
    let port = free_port().to_string();
    let agents: Vec<Agent> = (0..2)
        .map(|node| {
            let child = Command::new(workspace_root().join(".venv/bin/torchrun"))
                .args(["--nnodes", "2", "--nproc_per_node", "1"])
                .args(["--node_rank", &node.to_string()])
                .args(["--rdzv-backend", "static", "--rdzv-endpoint"])
                .arg(format!("127.0.0.1:{port}"))
                .args(["--max-restarts", "0", "examples/ddp_gloo.py"])
                .env("STEPS", "100000000")
                .current_dir(s.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            Agent(child)
        })
        .collect();
    let pids: Vec<u32> = agents.iter().map(|a| a.0.id()).collect();
    // Each agent has started its rank, however busy the machine.
    assert!(
        wait_until(Duration::from_secs(300), || pids
            .iter()
            .all(|p| children_of(*p).len() == 1)),
        "the agents {pids:?} did not start their ranks within 300 s"
    );
    let ranks: Vec<u32> = pids.iter().map(|p| children_of(*p)[0]).collect();
    let (report, _) = s.profile(&[
        "--budget",
        "20",
        "pid",
        &pids[0].to_string(),
        &pids[1].to_string(),
        "cpu",
    ]);
    let rows = report["rank_processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no ranks table: {report:#}"));
    let seen: Vec<(u64, Option<u64>, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["node_rank"].as_u64().unwrap(),
                r["rank"].as_u64(),
                r["pid"].as_u64().unwrap(),
            )
        })
        .collect();
    // Started with --node_rank N and one process per node: node N's rank is rank N.
    assert_eq!(
        seen,
        [
            (0, None, u64::from(pids[0])),
            (0, Some(0), u64::from(ranks[0])),
            (1, None, u64::from(pids[1])),
            (1, Some(1), u64::from(ranks[1])),
        ],
        "{rows:#?}"
    );
    // Both nodes in one window, each from its own run.
    let window = |r: &Value| {
        let from = r["seen_from_unix_s"].as_f64().unwrap();
        (from, from + r["seen_s"].as_f64().unwrap())
    };
    let (node0, node1) = (window(&rows[1]), window(&rows[3]));
    let shared = node0.1.min(node1.1) - node0.0.max(node1.0);
    assert!(
        shared > 0.5 * (node0.1 - node0.0).min(node1.1 - node1.0),
        "the nodes' windows barely overlap: {node0:?} {node1:?}"
    );
    assert_ne!(rows[1]["run_id"], rows[3]["run_id"], "{rows:#?}");
    for r in [&rows[1], &rows[3]] {
        let cpu_s = r["cpu_user_s"].as_f64().unwrap() + r["cpu_sys_s"].as_f64().unwrap();
        assert!(cpu_s > 0.0, "a training rank used no CPU: {r:#}");
    }
    let covers: Vec<&str> = report["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["covers"]["text"].as_str())
        .collect();
    for (node, pid) in pids.iter().enumerate() {
        let named = format!("node {node}: pid {pid} and 1 descendant");
        assert!(covers.iter().any(|c| c.starts_with(&named)), "{covers:?}");
    }
    let md = std::fs::read_to_string(
        s.path()
            .join("profile_output")
            .join(report["session"].as_str().unwrap())
            .join("report.md"),
    )
    .unwrap();
    assert!(
        md.contains("#### Ranks by node") && md.contains("observed side by side"),
        "{md}"
    );
}
