//! Hostile input and load against the real server over stdio: random and mutated messages
//! (proptest), 64 concurrent calls with `ping` answered meanwhile, secrets kept out of what is
//! written down.

use crate::util::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Requests a client may send, none of which runs a program or edits a file: mutations of
/// these explore the parser and the router, never the user's machine.
const CORPUS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"0"}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"system-profile","arguments":{"target":"x"}}}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{"cursor":"0"}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"list_runs","arguments":{}}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_run","arguments":{"run_id":"r001-x"}}}"#,
    r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"identify_target","arguments":{"arguments":"no_such.py gpu"}}}"#,
    r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_changes","arguments":{}}}"#,
    r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"summarize","arguments":{"session":"../x"}}}"#,
    r#"{"jsonrpc":"2.0","id":11,"method":"list_runs","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    r#"[{"jsonrpc":"2.0","id":12,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    r#"{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}"#,
];

/// One line a fuzzed client sends: a corpus entry with bytes flipped, inserted or cut, or
/// bytes at random, or a random JSON value.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        0..CORPUS.len(),
        proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(i, edits)| {
            let mut b = CORPUS[i].as_bytes().to_vec();
            for (at, byte, op) in edits {
                if b.is_empty() {
                    break;
                }
                let at = at as usize % b.len();
                match op {
                    0 => b[at] = byte,
                    1 => b.insert(at, byte),
                    _ => b.truncate(at),
                }
            }
            b
        });
    let random = proptest::collection::vec(any::<u8>(), 0..200);
    let json_value = any::<(Option<i64>, String, bool)>().prop_map(|(id, method, batch)| {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": [method]});
        let v = if batch { json!([m, 1, null]) } else { m };
        v.to_string().into_bytes()
    });
    prop_oneof![6 => mutated, 2 => random, 2 => json_value].prop_map(|mut b| {
        // One message per line: a newline inside would be two messages.
        b.retain(|c| *c != b'\n');
        b
    })
}

/// Every line the server wrote is one JSON-RPC response (or a batch of them).
fn assert_response(line: &str) {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let items = match &v {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    for m in items {
        assert_eq!(m["jsonrpc"], "2.0", "{line}");
        // A notification from us (progress) is fine too; else result xor error.
        if m.get("method").is_none() {
            assert!(
                m.get("result").is_some() != m.get("error").is_some(),
                "{line}"
            );
        }
    }
}

#[test]
fn random_and_mutated_messages_never_break_the_session() {
    let cases: u32 = std::env::var("SP_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(5000);
    let server = std::cell::RefCell::new(Server::spawn(&[]));
    let sentinel = std::cell::Cell::new(0u64);
    let started = Instant::now();
    let mut config = ProptestConfig::with_cases(cases);
    config.failure_persistence = None;
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&line(), |bytes| {
        let mut s = server.borrow_mut();
        s.send_bytes(&bytes);
        // A ping after each message, and every line up to its answer must be a response
        // (calls run concurrently: a slow one may answer after a later ping).
        sentinel.set(sentinel.get() + 1);
        let id = format!("sentinel-{}", sentinel.get());
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string());
        loop {
            let line = s.recv_line(Duration::from_secs(10)).unwrap_or_else(|| {
                panic!(
                    "no answer within 10 s after {:?}",
                    String::from_utf8_lossy(&bytes)
                )
            });
            assert_response(&line);
            if line.contains(&id) {
                break;
            }
        }
        Ok(())
    });
    assert!(result.is_ok(), "{result:?}");
    let mut s = server.into_inner();
    let sent = sentinel.get();
    // Still alive and answering. Calls run concurrently, so a slow fuzzed call may still
    // answer after its sentinel: read on to this request's own answer.
    s.send(
        &json!({"jsonrpc": "2.0", "id": "final", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"}}})
        .to_string(),
    );
    let r = loop {
        let line = s.recv_line(Duration::from_secs(30)).expect("an answer");
        assert_response(&line);
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == "final" {
            break v;
        }
    };
    assert_eq!(r["result"]["serverInfo"]["name"], "system-profile");
    assert!(s.child.try_wait().unwrap().is_none());
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "protocol fuzz: {sent} messages (+{sent} pings) in {:.1} s, 0 crashes",
            started.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn sixty_four_concurrent_calls_are_answered_and_ping_stays_fast() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    // 64 calls in flight at once over the one connection: each runs a child for 0.5 s.
    for id in 100..164u64 {
        s.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "run_profiler",
                "arguments": {"profiler": "custom", "target": {"command": ["sleep", "0.5"]}}}})
            .to_string(),
        );
    }
    let mut answered = std::collections::BTreeSet::new();
    let mut ping_ms: Vec<f64> = Vec::new();
    // Pings answered while calls were still running: the transport never waits on a call.
    let mut pings_while_busy = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut ping_id = 1000u64;
    while answered.len() < 64 && Instant::now() < deadline {
        ping_id += 1;
        let sent = Instant::now();
        s.send(&json!({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}).to_string());
        loop {
            let line = s.recv_line(Duration::from_secs(30)).expect("an answer");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == ping_id {
                ping_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
                if answered.len() < 64 {
                    pings_while_busy += 1;
                }
                break;
            }
            if let Some(id) = v["id"].as_u64() {
                assert_eq!(v["result"]["isError"], false, "{line}");
                assert_eq!(v["result"]["structuredContent"]["status"], "completed");
                answered.insert(id);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(answered.len(), 64, "answered {answered:?}");
    ping_ms.sort_by(f64::total_cmp);
    let worst = *ping_ms.last().unwrap();
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "64 concurrent calls: {} pings, median {:.1} ms, worst {worst:.1} ms",
            ping_ms.len(),
            ping_ms[ping_ms.len() / 2]
        );
    }
    // The 50 ms target is a benchmark (bench/load.py, RELIABILITY.md): tests share these
    // CPUs with each other, so here only that pings kept being answered mid-load.
    assert!(
        pings_while_busy >= 3,
        "{pings_while_busy} pings answered mid-load"
    );
    // Every run is in the list and in the manifest on disk, each once, with its own id.
    let runs = s.ask(&json!({"jsonrpc": "2.0", "id": 5000, "method": "list_runs"}).to_string());
    let ids: std::collections::BTreeSet<&str> = runs["result"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 64, "{ids:?}");
    let dir = runs["result"]["dir"].as_str().unwrap();
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(s.root.path().join(dir).join("manifest.json")).unwrap(),
    )
    .unwrap();
    let on_disk = manifest["runs"].as_array().unwrap();
    assert_eq!(on_disk.len(), 64);
    assert!(on_disk.iter().all(|r| r["status"] == "completed"));
}

#[test]
fn secrets_in_the_environment_reach_the_child_but_not_the_records() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom",
                "target": {"command": ["sh", "-c", "echo \"$HF_TOKEN $OPENAI_API_KEY $MODE\" | tee seen.txt"]},
                "env": {"HF_TOKEN": "hf_s3cr3t", "OPENAI_API_KEY": "sk-s3cr3t", "MODE": "fast"}}}})
        .to_string(),
    );
    let rec = &s.record_of(&r);
    assert_eq!(rec["status"], "completed", "{r}");
    // The child got the real values (a file of its own says so); the record's tail and the
    // stdout.txt we keep are scrubbed of them.
    assert_eq!(
        std::fs::read_to_string(s.root.path().join("seen.txt")).unwrap(),
        "hf_s3cr3t sk-s3cr3t fast\n"
    );
    let stdout = std::path::Path::new(rec["dir"].as_str().unwrap()).join("stdout.txt");
    let stdout = s.root.path().join(stdout);
    assert_eq!(std::fs::read_to_string(&stdout).unwrap(), "*** *** fast\n");
    assert_eq!(rec["stdout_tail"], "*** *** fast\n", "{rec}");
    assert_eq!(rec["env"]["HF_TOKEN"], "***");
    assert_eq!(rec["env"]["OPENAI_API_KEY"], "***");
    assert_eq!(rec["env"]["MODE"], "fast");
    // Nothing written down holds them but the child's own output.
    let report = s.ask(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "summarize", "arguments": {}}})
        .to_string(),
    );
    assert_eq!(report["result"]["isError"], false, "{report}");
    let out = s.root.path().join("profile_output");
    let mut stack = vec![out];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains("s3cr3t"), "{} holds a secret", p.display());
        }
    }
    assert!(files >= 3, "manifest, report.md, report.json at least");
}

/// Peak resident memory of a process (`VmHWM`, kB → bytes).
pub fn peak_rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn an_output_flood_keeps_the_server_small_and_the_disk_capped() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    // 2 GiB to stdout and 256 MiB to stderr as fast as the pipe takes them; 64 MiB kept.
    let r = s.ask_within(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom",
                "target": {"command": ["sh", "-c",
                    "head -c 2147483648 /dev/zero; head -c 268435456 /dev/zero >&2; echo done"]},
                "options": {"output_cap_bytes": 67108864},
                "timeout_s": 300}}})
        .to_string(),
        Duration::from_secs(330),
    );
    let rec = &s.record_of(&r);
    assert_eq!(rec["status"], "completed", "{r}");
    let dir = s.root.path().join(rec["dir"].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(dir.join("stdout.txt")).unwrap().len(),
        64 << 20
    );
    assert_eq!(
        std::fs::metadata(dir.join("stderr.txt")).unwrap().len(),
        64 << 20
    );
    let warnings = rec["warnings"].to_string();
    assert!(
        warnings.contains("stdout.txt keeps the first 67108864 of the 2147483653 bytes"),
        "{warnings}"
    );
    // The end of the stream is still there.
    assert!(rec["stdout_tail"].as_str().unwrap().ends_with("done\n"));
    let peak = peak_rss_bytes(s.child.id());
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "output flood: 2.25 GiB through the server, its peak RSS {} MiB",
            peak >> 20
        );
    }
    assert!(peak < 50 << 20, "peak RSS {peak} bytes under a flood");
}

#[test]
fn every_path_trick_is_refused_with_the_fix() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    let root = s.root.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().canonicalize().unwrap();
    std::fs::write(out.join("t.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(out.join("trace.json"), r#"{"traceEvents":[]}"#).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(out.join("t.py"), root.join("link.py")).unwrap();
    std::os::unix::fs::symlink(&out, root.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(out.join("trace.json"), root.join("trace-link.json")).unwrap();
    std::fs::hard_link(out.join("t.py"), root.join("hard.py")).unwrap();
    let before = std::fs::read(out.join("t.py")).unwrap();

    let mut id = 10;
    let mut refused = 0;
    let mut call = |s: &mut Server, tool: &str, args: Value, needle: &str| {
        id += 1;
        let r = s.ask(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}})
            .to_string(),
        );
        assert_eq!(r["result"]["isError"], true, "{tool} {args}: {r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains(needle),
            "{tool} {args}: `{needle}` not in {text}"
        );
        refused += 1;
    };
    let instrument = |path: &str| json!({"path": path, "measure": "timing", "function": "f", "strategy": "decorator"});
    let outside_py = out.join("t.py").display().to_string();
    for (path, needle) in [
        ("../t.py", "leaves the server's root"),
        (outside_py.as_str(), "outside the server's root"),
        ("link.py", "symbolic link"),
        ("linkdir/t.py", "symbolic link"),
        ("hard.py", "hard links"),
        ("/dev/null", "outside the server's root"),
        ("/proc/self/status", "outside the server's root"),
        ("sub", "not a regular file"),
        ("sub/../../t.py", "leaves the server's root"),
    ] {
        call(&mut s, "instrument_file", instrument(path), needle);
    }
    let outside_trace = out.join("trace.json").display().to_string();
    // The same file by `..` from the root (both are folders of the same temp dir).
    let up = format!(
        "../{}/trace.json",
        out.file_name().unwrap().to_string_lossy()
    );
    for (path, needle) in [
        (up.as_str(), "root"),
        (outside_trace.as_str(), "root"),
        ("trace-link.json", "root"),
        ("/dev/zero", "root"),
        ("/proc/self/environ", "root"),
    ] {
        call(&mut s, "analyze_trace", json!({"paths": [path]}), needle);
    }
    for session in ["../x", "/tmp", "a/b", "..", ""] {
        call(&mut s, "summarize", json!({"session": session}), "session");
    }
    for session in ["../x", "/tmp"] {
        call(
            &mut s,
            "compare",
            json!({"before": {"session": session}, "after": {"session": "x"}}),
            "session",
        );
    }
    for cwd in ["..", "/tmp", "linkdir"] {
        call(
            &mut s,
            "identify_target",
            json!({"arguments": "t.py", "cwd": cwd}),
            "cwd",
        );
    }
    for cwd in ["..", "/tmp", "linkdir"] {
        call(
            &mut s,
            "run_profiler",
            json!({"profiler": "custom", "target": {"command": ["true"]}, "cwd": cwd}),
            "cwd",
        );
    }
    // Nothing outside was touched; the root's own files still are the user's.
    assert_eq!(std::fs::read(out.join("t.py")).unwrap(), before);
    let ledger =
        std::fs::read_to_string(root.join("profile_output/ledger.json")).unwrap_or_default();
    assert!(
        !ledger.contains(".py"),
        "a refused change reached the ledger: {ledger}"
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!("path tricks refused: {refused}");
    }
    assert_eq!(refused, 27);
}

/// A target that leaves a TERM-ignoring child in its group and another that escaped it with
/// setsid, each writing its pid to `pidfile`, then waits `wait_s`.
fn escaping_target(pidfile: &std::path::Path, wait_s: u32) -> Value {
    let p = pidfile.display();
    json!({"command": ["sh", "-c", format!(
        "(trap '' TERM; exec sleep 300) & echo $! >> {p}; setsid sh -c 'trap \"\" TERM; echo $$ >> {p}; exec sleep 300' & sleep {wait_s}"
    )]})
}

#[test]
fn children_that_ignore_sigterm_or_leave_the_group_do_not_outlive_their_run() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    let pidfile = s.root.path().join("pids");
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom", "target": escaping_target(&pidfile, 1)}}})
        .to_string(),
    );
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    let pids = pids_in(&pidfile);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|p| !alive(*p))),
        "left behind: {pids:?}"
    );
    let warnings = s.record_of(&r)["warnings"].to_string();
    assert!(warnings.contains("killed"), "{warnings}");
}

#[test]
fn sigint_ends_the_server_and_every_process_its_runs_started() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    let pidfile = s.root.path().join("pids");
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom", "background": true,
                          "target": escaping_target(&pidfile, 300)}}})
        .to_string(),
    );
    assert_eq!(r["result"]["structuredContent"]["status"], "running", "{r}");
    assert!(wait_until(Duration::from_secs(10), || pids_in(&pidfile)
        .len()
        == 2));
    let pids = pids_in(&pidfile);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(s.child.id() as i32, libc::SIGINT) }, 0);
    let status = s.wait(Duration::from_secs(10)).expect("exits on SIGINT");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|p| !alive(*p))),
        "outlived the server: {pids:?}"
    );
}

const APP: &str = "import time\n\n\ndef f(n):\n    return sum(i * i for i in range(n))\n\n\ndef g():\n    time.sleep(0.01)\n    return f(1000)\n\n\nif __name__ == \"__main__\":\n    print(f(100000) + g())\n";

/// Every manifest and the ledger parse as JSON; app.py compiles and is either the original or
/// an instrumented whole (never a half-written file).
fn assert_consistent(root: &std::path::Path, python: &str) {
    let out = root.join("profile_output");
    if let Ok(dir) = std::fs::read_dir(&out) {
        for e in dir.flatten() {
            let manifest = e.path().join("manifest.json");
            if manifest.exists() {
                let bytes = std::fs::read(&manifest).unwrap();
                serde_json::from_slice::<Value>(&bytes)
                    .unwrap_or_else(|err| panic!("{}: {err}", manifest.display()));
            }
        }
    }
    let ledger = out.join("ledger.json");
    if ledger.exists() {
        serde_json::from_slice::<Value>(&std::fs::read(&ledger).unwrap())
            .unwrap_or_else(|err| panic!("ledger: {err}"));
    }
    let app = std::fs::read_to_string(root.join("app.py")).unwrap();
    assert!(app == APP || app.contains("# [PROFILE]"), "{app}");
    let compiled = std::process::Command::new(python)
        .args([
            "-c",
            "import sys; compile(open(sys.argv[1]).read(), 'app.py', 'exec')",
        ])
        .arg(root.join("app.py"))
        .status()
        .unwrap();
    assert!(compiled.success(), "app.py does not compile:\n{app}");
}

#[test]
fn sigkill_at_random_points_never_loses_a_file_and_revert_restores_it() {
    let rounds: u64 = std::env::var("SP_KILL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::write(root.join("app.py"), APP).unwrap();
    let python = which_python();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut killed_after_ms = Vec::new();
    let mut instrumented_at_kill = 0;
    for round in 0..rounds {
        let keep = tempfile::tempdir().unwrap();
        let mut s = Server::spawn_in(keep, &root, &[], &[]);
        s.ask(&initialize(1, "2025-11-25"));
        let calls = [
            json!({"name": "instrument_file", "arguments": {"path": "app.py", "measure": "timing",
                   "function": "f", "strategy": "decorator"}}),
            json!({"name": "run_profiler", "arguments": {"profiler": "measure", "background": true,
                   "target": {"command": [python.as_str(), "app.py"]}}}),
            json!({"name": "instrument_file", "arguments": {"path": "app.py", "measure": "memory",
                   "function": "g", "strategy": "decorator"}}),
            json!({"name": "revert_changes", "arguments": {"all": true}}),
            json!({"name": "instrument_file", "arguments": {"path": "app.py", "measure": "timing",
                   "lines": {"start": 14, "end": 15}, "strategy": "context"}}),
        ];
        for (i, c) in calls.iter().enumerate() {
            s.send(
                &json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": c})
                    .to_string(),
            );
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after_ms = seed % 400;
        std::thread::sleep(Duration::from_millis(after_ms));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(s.child.id() as i32, libc::SIGKILL) };
        let _ = s.wait(Duration::from_secs(10));
        killed_after_ms.push(after_ms);
        assert_consistent(&root, &python);
        if std::fs::read_to_string(root.join("app.py")).unwrap() != APP {
            instrumented_at_kill += 1;
        }
        let _ = round;
    }
    // The kills landed in different states: some with the file instrumented, some not.
    assert!(
        instrumented_at_kill > 0 && instrumented_at_kill < rounds,
        "{instrumented_at_kill}"
    );
    // A fresh server settles what the kills interrupted and undoes every change.
    let keep = tempfile::tempdir().unwrap();
    let mut s = Server::spawn_in(keep, &root, &[], &[]);
    s.ask(&initialize(1, "2025-11-25"));
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "revert_changes", "arguments": {"all": true}}})
        .to_string(),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);
    // Nothing of ours outside profile_output/.
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["app.py", "profile_output"]);
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "crash safety: {rounds} SIGKILLs at 0-400 ms into a session of runs and instrumentation ({instrumented_at_kill} with app.py instrumented at the kill); 0 files lost, app.py restored byte for byte"
        );
    }
}

fn which_python() -> String {
    let venv = workspace_root().join(".venv/bin/python");
    if venv.exists() {
        venv.display().to_string()
    } else {
        "python3".into()
    }
}

#[test]
fn every_tool_failure_names_the_problem_and_the_fix() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    std::fs::write(s.root.path().join("a.py"), "def f():\n    return 1\n").unwrap();
    // (tool, arguments, what the problem is, how to fix it)
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "identify_target",
            json!({"arguments": 5}),
            "`arguments`",
            "expected a string",
        ),
        (
            "identify_target",
            json!({"arguments": "x".repeat(20000)}),
            "`arguments`",
            "give at most",
        ),
        ("detect_tools", json!({"python": ""}), "`python`", "omit it"),
        (
            "detect_tools",
            json!({"probe_timeout_s": "soon"}),
            "probe_timeout_s",
            "expected",
        ),
        (
            "plan_profile",
            json!({"target": "a.py", "time_budget_s": 0}),
            "`time_budget_s`",
            "give seconds",
        ),
        (
            "run_profiler",
            json!({"profiler": "custom", "target": {"command": ["no-such-program-x"]}}),
            "was not found",
            "install it or put it on PATH",
        ),
        (
            "run_profiler",
            json!({"profiler": "nope", "target": {"command": ["true"]}}),
            "`profiler`",
            "expected one of",
        ),
        (
            "run_profiler",
            json!({"profiler": "custom", "target": {"command": []}}),
            "command",
            "give",
        ),
        (
            "get_run",
            json!({"run_id": "r404-x"}),
            "no run `r404-x`",
            "list_runs shows them",
        ),
        ("list_runs", json!({"limit": 3}), "`limit`", "expected"),
        (
            "cancel_run",
            json!({"run_id": "r404-x"}),
            "no run `r404-x`",
            "list_runs shows them",
        ),
        (
            "analyze_trace",
            json!({"paths": ["missing.json"]}),
            "missing.json",
            "give a path relative to",
        ),
        ("analyze_trace", json!({"paths": []}), "`paths`", "give"),
        (
            "instrument_file",
            json!({"path": "a.py", "measure": "timing", "function": "nope", "strategy": "decorator"}),
            "no function `nope`",
            "it defines: f",
        ),
        (
            "instrument_file",
            json!({"path": "a.py", "measure": "timing", "strategy": "decorator"}),
            "function",
            "lines",
        ),
        (
            "list_changes",
            json!({"include_reverted": "yes"}),
            "`include_reverted`",
            "expected a boolean",
        ),
        (
            "revert_changes",
            json!({"ids": ["c9999"]}),
            "no change c9999",
            "it holds",
        ),
        ("revert_changes", json!({}), "all", "ids"),
        (
            "summarize",
            json!({"session": "nope"}),
            "no session `nope`",
            "sessions with runs",
        ),
        (
            "summarize",
            json!({"lang": "fr"}),
            "`lang`",
            "expected `en` or `ja`",
        ),
        (
            "compare",
            json!({"before": {"session": "x"}, "after": {"session": "y"}}),
            "no session `x`",
            "sessions with runs",
        ),
    ];
    let mut tools = std::collections::BTreeSet::new();
    for (i, (tool, args, problem, fix)) in cases.iter().enumerate() {
        let r = s.ask(
            &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}})
            .to_string(),
        );
        assert_eq!(r["result"]["isError"], true, "{tool} {args}: {r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains(problem),
            "{tool}: the problem `{problem}` is not named in: {text}"
        );
        assert!(
            text.contains(fix),
            "{tool}: the fix `{fix}` is not said in: {text}"
        );
        tools.insert(*tool);
    }
    // Every tool has at least one failure checked.
    assert_eq!(tools.len(), TOOL_NAMES.len(), "{tools:?}");
}

#[test]
fn arguments_are_never_a_shell_string_unless_asked() {
    let mut s = Server::spawn(&[]);
    s.ask(&initialize(1, "2025-11-25"));
    let root = s.root.path().to_path_buf();
    let hostile = "$(touch pwned-1); `touch pwned-2` | touch pwned-3 ; touch pwned-4";
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom", "target": {"command": ["echo", hostile]}}}})
        .to_string(),
    );
    let rec = &s.record_of(&r);
    assert_eq!(rec["status"], "completed", "{r}");
    // echo got the text as one argument, and nothing of it ran.
    assert_eq!(rec["stdout_tail"], format!("{hostile}\n"));
    for i in 1..=4 {
        assert!(!root.join(format!("pwned-{i}")).exists());
    }
    // The argv recorded is the one given, word for word.
    assert_eq!(rec["target"]["command"], json!(["echo", hostile]));
    // With `shell: true` the caller asked for a shell, and gets exactly `sh -c <string>`.
    let r = s.ask(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run_profiler",
            "arguments": {"profiler": "custom",
                          "target": {"command": ["touch asked-for && echo ok"], "shell": true}}}})
        .to_string(),
    );
    assert_eq!(s.record_of(&r)["stdout_tail"], "ok\n", "{r}");
    assert!(root.join("asked-for").exists());
}
