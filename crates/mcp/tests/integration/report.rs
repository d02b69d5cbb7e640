//! Step 6 over stdio: real runs (measure, py-spy, cProfile), instrumentation, a stored trace
//! analysis, then summarize in both languages and compare across two servers' sessions.

use crate::util::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// `spin`'s loop count: seconds of own time even on a fast machine (a quarter second, which
/// 8,000,000 gave here, leaves py-spy a few samples and the hot-function rule under its floor).
const WORK_N: &str = "40000000";

const WORK: &str = "import sys\n\n\ndef spin(n):\n    total = 0\n    for i in range(n):\n        total += i % 7\n    return total\n\n\ndef main():\n    print(spin(int(sys.argv[1])))\n\n\nif __name__ == \"__main__\":\n    main()\n";

fn call(s: &mut Server, id: u64, name: &str, arguments: Value) -> Value {
    s.send(
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})
            .to_string(),
    );
    let line = s
        .recv_line(Duration::from_secs(120))
        .expect("an answer within 120 s");
    serde_json::from_str(&line).unwrap()
}

fn ok(answer: &Value) -> &Value {
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    &answer["result"]["structuredContent"]
}

/// The report a `summarize` answer names, as its `report.json` holds it.
fn report_json(root: &Path, answer: &Value) -> Value {
    let path = root.join(answer["json_path"].as_str().expect("json_path"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn python() -> String {
    let out = std::process::Command::new(workspace_root().join(".venv/bin/python"))
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn server(root: &Path) -> Server {
    Server::spawn_in(tempfile::tempdir().unwrap(), root, &[], &[])
}

fn start(s: &mut Server) {
    s.ask(&initialize(0, "2025-06-18"));
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
}

/// A started server on `root` that has run `measure` twice on `target` (ids 1 and 2): the
/// repeats `compare` measures the noise with. Returns the server and its session.
fn measured_twice(root: &Path, target: &Value) -> (Server, String) {
    let mut s = server(root);
    start(&mut s);
    let mut session = String::new();
    for id in 1..=2 {
        let r = call(
            &mut s,
            id,
            "run_profiler",
            json!({"profiler": "measure", "target": target}),
        );
        session = ok(&r)["session"].as_str().unwrap().to_string();
    }
    (s, session)
}

#[test]
fn summarize_and_compare_over_stdio_on_real_runs() {
    if !require(
        "py-spy",
        cmd_exists("py-spy") || workspace_root().join(".venv/bin/py-spy").exists(),
    ) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("work.py"), WORK).unwrap();
    std::fs::copy(
        workspace_root()
            .join("crates/parse/tests/data/kineto/hta-a100-2rank-nccl-allreduce.json.gz"),
        root.path().join("rank0.json.gz"),
    )
    .unwrap();
    let py = python();
    let cmd = |n: &str| json!({"command": [py, "work.py", n]});

    // Before: two repeats of measure, py-spy, cProfile, an instrumented function, a trace.
    let (mut s, session_before) = measured_twice(root.path(), &cmd(WORK_N));
    ok(&call(
        &mut s,
        3,
        "run_profiler",
        json!({"profiler": "py_spy_record", "target": cmd(WORK_N)}),
    ));
    ok(&call(
        &mut s,
        4,
        "run_profiler",
        json!({"profiler": "cprofile", "target": cmd(WORK_N)}),
    ));
    ok(&call(
        &mut s,
        5,
        "instrument_file",
        json!({"path": "work.py", "measure": "timing", "function": "spin", "strategy": "decorator"}),
    ));
    ok(&call(
        &mut s,
        6,
        "run_profiler",
        json!({"profiler": "time_v", "target": cmd("300000")}),
    ));
    let trace = call(
        &mut s,
        7,
        "analyze_trace",
        json!({"paths": ["rank0.json.gz"]}),
    );
    let stored = ok(&trace)["stored"].as_str().unwrap().to_string();
    assert_eq!(
        stored,
        format!("profile_output/{session_before}/traces/t001.json")
    );
    assert!(root.path().join(&stored).is_file());

    let r = call(&mut s, 8, "summarize", json!({}));
    let out = ok(&r);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("# Profile report: {session_before}")),
        "{text}"
    );
    // The text is the report, or, over its budget, the report without what the file keeps
    // (charts, the largest tables), never without its conclusions.
    let markdown = out["markdown"].as_str().unwrap();
    if text != markdown {
        assert!(text.len() <= 7 * 1024, "{} bytes of text", text.len());
        for kept in ["## Summary", "Recommendations", "## Part B"] {
            assert!(text.contains(kept), "`{kept}` is not in the text: {text}");
        }
        assert!(
            text.contains(&format!("`profile_output/{session_before}/report.md`")),
            "{text}"
        );
    }
    // The report's data is report.json, which the answer names.
    let report = &report_json(root.path(), out);
    assert_eq!(
        report["cpu"].as_array().unwrap().len(),
        3,
        "two measures and a time_v"
    );
    let hot = &report["hotspots"]["rows"][0];
    assert_eq!(hot["function"], "spin", "{hot}");
    let tools: Vec<&str> = hot["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["py_spy_record", "cprofile"],
        "merged across profilers"
    );
    assert!(
        report["interconnect"]["comm_compute"][0]["ratio"]
            .as_f64()
            .unwrap()
            > 0.3
    );
    let rules: Vec<&str> = report["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"hot_python_function") && rules.contains(&"exposed_communication"),
        "{rules:?}"
    );
    let changes = report["changes"]["rows"].as_array().unwrap();
    assert!(changes
        .iter()
        .any(|c| c["file"] == "work.py" && c["change_type"] == "modified"));
    assert!(report["changes"]["offer"]
        .as_str()
        .unwrap()
        .contains("revert_changes"));
    // The timing decorator's log lines are this session's: they are in the report.
    assert!(root
        .path()
        .join("profile_output/instrument/measure.jsonl")
        .is_file());
    let md =
        std::fs::read_to_string(root.path().join(out["markdown_path"].as_str().unwrap())).unwrap();
    assert!(md == markdown, "report.md is not the returned Markdown");
    let charts = report["charts"].as_array().unwrap();
    assert!(charts.iter().any(|c| c["kind"] == "cpu"), "{charts:?}");
    for c in charts {
        assert!(root.path().join(c["path"].as_str().unwrap()).is_file());
    }

    // format json: the text is the report itself.
    let r = call(
        &mut s,
        9,
        "summarize",
        json!({"lang": "ja", "format": "json"}),
    );
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    let as_json: Value = serde_json::from_str(text).unwrap();
    assert_eq!(as_json["lang"], "ja");
    // The whole report, or a brief of it that says so.
    assert!(
        as_json == report_json(root.path(), ok(&r)) || as_json["_brief"].is_string(),
        "{text}"
    );
    ok(&call(&mut s, 10, "revert_changes", json!({"all": true})));
    s.close_stdin();
    s.wait(Duration::from_secs(10));

    // After the fix (a tenth of the work), in a second server: a second session.
    std::fs::write(
        root.path().join("work.py"),
        WORK.replace("range(n)", "range(n // 10)"),
    )
    .unwrap();
    let (mut s, session_after) = measured_twice(root.path(), &cmd(WORK_N));
    assert_ne!(session_after, session_before);
    let r = call(
        &mut s,
        3,
        "compare",
        json!({"before": {"session": session_before}, "after": {"session": session_after}}),
    );
    let out = ok(&r);
    let wall = out["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "wall_s" && d["group"].as_str().unwrap().starts_with("measure"))
        .unwrap();
    assert_eq!(
        (
            wall["repeats_before"].as_u64(),
            wall["repeats_after"].as_u64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(wall["verdict"], "larger_than_noise", "{wall}");
    assert!(wall["delta"].as_f64().unwrap() < 0.0);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("# Comparison:"), "{text}");
    assert!(root
        .path()
        .join(out["markdown_path"].as_str().unwrap())
        .is_file());
    let r = call(&mut s, 4, "summarize", json!({"session": "../../etc"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("invalid `session`"), "{r}");
    s.close_stdin();
    s.wait(Duration::from_secs(10));
}
