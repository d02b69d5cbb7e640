//! Real MCP clients: the official Python SDK (legacy and 2026-07-28 modes) and the MCP
//! Inspector CLI, both installed by `.ci/run`.

use crate::util::*;
use serde_json::Value;
use std::process::Command;

fn python_sdk() -> Option<std::path::PathBuf> {
    let python = workspace_root().join(".venv/bin/python");
    let present = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp.client.client"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    require("the MCP Python SDK (.venv, pip mcp)", present).then_some(python)
}

fn run_python_sdk(mode: &str) -> Option<Value> {
    let python = python_sdk()?;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("work.py"),
        "def work(n):\n    return [i * i for i in range(n)]\n\n\nif __name__ == \"__main__\":\n    work(10)\n",
    )
    .unwrap();
    let out = Command::new(python)
        .arg(workspace_root().join("tests/clients/python_sdk_client.py"))
        .args([mode, BIN])
        .arg(root.path())
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the SDK client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// What both eras must see the same way.
fn assert_detect_through_sdk(r: &Value) {
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOL_NAMES);
    for t in r["tools"].as_array().unwrap() {
        assert_eq!(t["has_output_schema"], true, "{t}");
        let writes = [
            "run_profiler",
            "cancel_run",
            "instrument_file",
            "revert_changes",
            "summarize",
            "compare",
        ]
        .contains(&t["name"].as_str().unwrap());
        assert_eq!(t["read_only"], !writes, "{t}");
    }
    assert_eq!(r["is_error"], false);
    // Steps 1 and 2 through the SDK: the identified target goes back in as it came out.
    let t = &r["target"];
    assert_eq!(t["is_error"], false, "{t}");
    assert_eq!(t["kind"], "python_script");
    assert_eq!(t["focus"], serde_json::json!(["memory"]));
    assert_eq!(t["argv"], serde_json::json!(["--n", "3"]));
    assert_eq!(t["needs_clarification"], false);
    let p = &r["plan"];
    assert_eq!(p["is_error"], false, "{p}");
    assert_eq!(p["text_equals_structured"], true);
    assert_eq!(p["recipe"], "python_program");
    let methods: Vec<&str> = p["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(methods.contains(&"memray"), "{methods:?}");
    // The measure step ran as planned and summarize reported it, in Japanese, as Markdown.
    assert_eq!(r["run_status"], "completed", "{r}");
    let s = &r["summary"];
    assert_eq!(s["is_error"], false, "{s}");
    let text = s["text"].as_str().unwrap();
    assert!(text.starts_with("# プロファイルレポート"), "{text}");
    assert!(text.contains("パート B: 計測コードの変更履歴"), "{text}");
    assert_eq!(s["cpu_rows"], 1, "{s}");
    assert!(s["markdown_path"].as_str().unwrap().ends_with("/report.md"));
    for run in p["run_profiler"].as_array().unwrap() {
        let command = run["target"]["command"].as_array().unwrap();
        assert!(command[1].as_str().unwrap().ends_with("/work.py"), "{run}");
        assert_eq!(
            command[2..],
            [serde_json::json!("--n"), serde_json::json!("3")]
        );
    }
    assert_eq!(r["text_equals_structured"], true);
    let ids: Vec<&str> = r["tool_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for id in [
        "cprofile",
        "py_spy",
        "perf",
        "memray",
        "nvidia_smi",
        "nsys",
        "strace",
        "iostat",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    // What the SDK sees agrees with this machine.
    assert_eq!(r["usable"]["strace"], cmd_exists("strace"));
    assert_eq!(
        r["usable"]["nvidia_smi"], false,
        "no GPU tools on this machine"
    );
    if require(
        "py-spy",
        cmd_exists(&format!(
            "{}/py-spy",
            workspace_root().join(".venv/bin").display()
        )),
    ) {
        assert_eq!(r["usable"]["py_spy"], true, "{}", r["usable"]);
    }
    let steps: Vec<f64> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(steps.first(), Some(&0.0));
    assert_eq!(steps.last(), Some(&6.0));
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    assert_eq!(r["bad_is_error"], true);
    assert!(r["bad_text"].as_str().unwrap().contains("probe_timeout_s"));
}

#[test]
fn python_sdk_legacy_mode_lists_and_calls_detect_tools() {
    let Some(r) = run_python_sdk("legacy") else {
        return;
    };
    assert_eq!(r["protocol_version"], "2025-11-25");
    assert_eq!(r["discovered"], false);
    assert_detect_through_sdk(&r);
}

#[test]
fn python_sdk_auto_mode_discovers_2026_07_28_and_calls_detect_tools() {
    let Some(r) = run_python_sdk("auto") else {
        return;
    };
    assert_eq!(r["protocol_version"], "2026-07-28");
    assert_eq!(r["discovered"], true);
    assert_detect_through_sdk(&r);
}

fn inspector(args: &[&str]) -> Option<Value> {
    let clients = workspace_root().join("tests/clients");
    let bin = clients.join("node_modules/.bin/mcp-inspector");
    if !require(
        "the MCP Inspector CLI (npm ci in tests/clients)",
        bin.exists(),
    ) {
        return None;
    }
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .arg("--cli")
        .arg(BIN)
        .args(["serve", "--root"])
        .arg(root.path())
        .args(args)
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "inspector failed: {stderr}");
    // ajv warns about schema keywords it cannot check; our schemas must give it none.
    assert!(!stderr.contains("unknown format"), "{stderr}");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn mcp_inspector_cli_lists_tools_and_calls_detect_tools() {
    let Some(list) = inspector(&["--method", "tools/list"]) else {
        return;
    };
    assert_eq!(tool_names(&list), TOOL_NAMES);
    assert_eq!(
        tool(&list, "detect_tools")["annotations"]["readOnlyHint"],
        true
    );
    assert_eq!(
        tool(&list, "plan_profile")["outputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let Some(called) = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "detect_tools",
        "--tool-arg",
        "refresh=true",
    ]) else {
        return;
    };
    assert_eq!(called["isError"], false, "{called}");
    let report = &called["structuredContent"];
    assert_eq!(report["cached"], false);
    assert!(report["hardware"]["cpu"]["logical_cpus"].as_u64().unwrap() >= 1);
    assert_eq!(report["hardware"]["gpu"]["gpus"], serde_json::json!([]));
}
