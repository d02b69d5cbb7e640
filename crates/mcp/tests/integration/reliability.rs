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
        .unwrap_or(400);
    let server = std::cell::RefCell::new(Server::spawn(&[]));
    let sentinel = std::cell::Cell::new(0u64);
    let started = Instant::now();
    let mut config = ProptestConfig::with_cases(cases);
    config.failure_persistence = None;
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&line(), |bytes| {
        let mut s = server.borrow_mut();
        s.send_bytes(&bytes);
        // A ping after each message: when its answer comes, everything before it has been
        // answered (or was a notification); each line on the way must be a response.
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
    // Still alive and answering.
    let r = s.ask(&initialize(1, "2025-11-25"));
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
    assert!(worst < 50.0, "ping took {worst:.1} ms while 64 calls ran");
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
                "target": {"command": ["sh", "-c", "echo \"$HF_TOKEN $OPENAI_API_KEY $MODE\""]},
                "env": {"HF_TOKEN": "hf_s3cr3t", "OPENAI_API_KEY": "sk-s3cr3t", "MODE": "fast"}}}})
        .to_string(),
    );
    let rec = &r["result"]["structuredContent"];
    assert_eq!(rec["status"], "completed", "{r}");
    // The child got the real values (its own output file says so); the record's tail is
    // scrubbed of them.
    let stdout = std::path::Path::new(rec["dir"].as_str().unwrap()).join("stdout.txt");
    let stdout = s.root.path().join(stdout);
    assert_eq!(
        std::fs::read_to_string(&stdout).unwrap(),
        "hf_s3cr3t sk-s3cr3t fast\n"
    );
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
            if p.file_name().is_some_and(|n| n == "stdout.txt") {
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
