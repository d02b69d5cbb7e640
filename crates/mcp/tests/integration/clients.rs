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
    assert_eq!(p["text_is_result_or_brief"], true, "{p}");
    assert_eq!(p["recipe"], "python_program");
    let methods: Vec<&str> = p["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    // The allocation sampler, where a C compiler is (CI installs gcc); memray is its fallback.
    assert!(methods.contains(&"alloc_sample"), "{methods:?}");
    // The measure step ran as planned and summarize reported it, in Japanese, as Markdown.
    assert_eq!(r["run_status"], "completed", "{r}");
    let record = &r["record"];
    assert_eq!(record["is_error"], false, "{record}");
    assert_eq!(record["status"], "completed", "{record}");
    assert!(
        record["metrics"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("time_v")),
        "{record}"
    );
    let s = &r["summary"];
    assert_eq!(s["is_error"], false, "{s}");
    let text = s["text"].as_str().unwrap();
    assert!(text.starts_with("# プロファイルレポート"), "{text}");
    assert!(text.contains("パート B: 計測コードの変更履歴"), "{text}");
    assert_eq!(s["cpu_rows"], 1, "{s}");
    assert!(s["markdown_path"].as_str().unwrap().ends_with("/report.md"));
    // Step 4 and Part B: the decorator's change is in the report, then reverted exactly.
    let i = &r["instrument"];
    assert_eq!(i["is_error"], false, "{i}");
    let ids = i["change_ids"].as_array().unwrap();
    assert!(!ids.is_empty(), "{i}");
    assert_eq!(i["listed"], ids.len(), "{i}");
    assert!(
        s["part_b_files"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("work.py")),
        "{s}"
    );
    assert_eq!(i["revert_complete"], true, "{i}");
    assert_eq!(i["source_restored"], true, "{i}");
    // The report's files as resource links, report.md read back through the SDK.
    let links = s["links"].as_array().unwrap();
    assert!(
        links
            .iter()
            .any(|l| l.as_str().unwrap().ends_with("/report.json")),
        "{s}"
    );
    assert_eq!(s["read_markdown_equals"], true, "{s}");
    assert!(r["resources_listed"].as_u64().unwrap() >= 4, "{r}");
    // The slash command as the prompt.
    assert_eq!(r["prompt"]["names"], serde_json::json!(["system-profile"]));
    assert!(r["prompt"]["text"]
        .as_str()
        .unwrap()
        .contains("**work.py memory**"));
    for run in p["run_profiler"].as_array().unwrap() {
        let command = run["target"]["command"].as_array().unwrap();
        assert!(command[1].as_str().unwrap().ends_with("/work.py"), "{run}");
        assert_eq!(
            command[2..],
            [serde_json::json!("--n"), serde_json::json!("3")]
        );
    }
    assert_eq!(r["text_is_result_or_brief"], true);
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
    let Some(prompt) = inspector(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "system-profile",
        "--prompt-args",
        "target=train.py gpu",
    ]) else {
        return;
    };
    let text = prompt["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("**train.py gpu**"), "{prompt}");
    let Some(resources) = inspector(&["--method", "resources/list"]) else {
        return;
    };
    assert!(resources["resources"].is_array(), "{resources}");
    let report = &called["structuredContent"];
    assert_eq!(report["cached"], false);
    assert!(report["hardware"]["cpu"]["logical_cpus"].as_u64().unwrap() >= 1);
    assert_eq!(report["hardware"]["gpu"]["gpus"], serde_json::json!([]));
}

/// One Inspector CLI call (a server of its own) on a root kept across calls: the session
/// changes with each call, the ledger and the files stay.
fn inspector_in(root: &std::path::Path, args: &[String]) -> Value {
    let bin = workspace_root().join("tests/clients/node_modules/.bin/mcp-inspector");
    let out = Command::new(bin)
        .arg("--cli")
        .arg(BIN)
        .args(["serve", "--root"])
        .arg(root)
        .args(args)
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "inspector {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn tool_call(root: &std::path::Path, tool: &str, args: &[(&str, Value)]) -> Value {
    let mut argv: Vec<String> = vec![
        "--method".into(),
        "tools/call".into(),
        "--tool-name".into(),
        tool.into(),
    ];
    for (k, v) in args {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        argv.extend(["--tool-arg".into(), format!("{k}={v}")]);
    }
    let r = inspector_in(root, &argv);
    assert_eq!(r["isError"], false, "{tool}: {r}");
    r
}

#[test]
fn mcp_inspector_cli_drives_the_six_steps() {
    if !require(
        "the MCP Inspector CLI (npm ci in tests/clients)",
        workspace_root()
            .join("tests/clients/node_modules/.bin/mcp-inspector")
            .exists(),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let source = "def work(n):\n    return [i * i for i in range(n)]\n\n\nif __name__ == \"__main__\":\n    work(200000)\n";
    std::fs::write(root.join("work.py"), source).unwrap();
    let t = tool_call(
        root,
        "identify_target",
        &[("arguments", "work.py memory".into())],
    );
    assert_eq!(t["structuredContent"]["kind"], "python_script");
    let d = tool_call(root, "detect_tools", &[]);
    assert!(d["structuredContent"]["tools"].is_array());
    let p = tool_call(root, "plan_profile", &[("target", "work.py memory".into())]);
    let steps = p["structuredContent"]["steps"].as_array().unwrap();
    let measure = steps
        .iter()
        .find(|s| s["method"] == "measure")
        .unwrap_or_else(|| panic!("{steps:#?}"));
    let i = tool_call(
        root,
        "instrument_file",
        &[
            ("path", "work.py".into()),
            ("measure", "timing".into()),
            ("function", "work".into()),
            ("strategy", "decorator".into()),
        ],
    );
    assert!(!i["structuredContent"]["change_ids"]
        .as_array()
        .unwrap()
        .is_empty());
    let run_args: Vec<(&str, Value)> = measure["run_profiler"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let run = tool_call(root, "run_profiler", &run_args);
    assert_eq!(run["structuredContent"]["status"], "completed", "{run}");
    let session = run["structuredContent"]["session"].as_str().unwrap();
    let report = tool_call(root, "summarize", &[("session", session.into())]);
    let md = report["structuredContent"]["markdown"].as_str().unwrap();
    assert!(md.contains("| `work.py` | modified |"), "{md}");
    // The report read back as a resource, through its link.
    let link = report["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["type"] == "resource_link" && c["uri"].as_str().unwrap().ends_with("/report.md")
        })
        .unwrap_or_else(|| panic!("{report}"));
    let read = inspector_in(
        root,
        &[
            "--method".into(),
            "resources/read".into(),
            "--uri".into(),
            link["uri"].as_str().unwrap().into(),
        ],
    );
    assert_eq!(read["contents"][0]["text"].as_str(), Some(md));
    let changes = tool_call(root, "list_changes", &[]);
    assert_eq!(
        changes["structuredContent"]["changes"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{changes}"
    );
    let reverted = tool_call(root, "revert_changes", &[("all", Value::Bool(true))]);
    assert_eq!(reverted["structuredContent"]["complete"], true);
    assert_eq!(
        std::fs::read_to_string(root.join("work.py")).unwrap(),
        source
    );
}
