//! `system-profile call` and `system-profile schemas`.

use crate::util::*;
use serde_json::Value;
use std::process::Command;

#[test]
fn call_prints_the_structured_result() {
    let out = Command::new(BIN)
        .args(["call", "detect_tools", r#"{"probe_timeout_s": 10}"#])
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let strace = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "strace")
        .unwrap();
    assert_eq!(strace["available"], cmd_exists("strace"));
    assert_eq!(report["cached"], false);
}

#[test]
fn call_refuses_bad_input_with_advice() {
    for (args, code, needle) in [
        (
            vec!["call", "detect_tools", r#"{"refresh": 3}"#],
            2,
            "`refresh`",
        ),
        (vec!["call", "detect_tools", "{oops"], 2, "not JSON"),
        (vec!["call", "no_such_tool"], 2, "detect_tools"),
        (
            vec!["call", "detect_tools", "{}", "--root", "/no/such/dir"],
            1,
            "/no/such/dir",
        ),
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn committed_schemas_are_current() {
    let dir = workspace_root().join("schemas");
    let out = Command::new(BIN)
        .args(["schemas", "--check", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "schemas/ is stale: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, text) in system_profile_mcp::tools::schema_files() {
        let on_disk = std::fs::read_to_string(dir.join(&name)).unwrap();
        assert_eq!(on_disk, text, "{name}");
    }
}

#[test]
fn schemas_writes_every_file_and_check_catches_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("schemas");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("gone_tool.input.json"), "{}").unwrap();
    std::fs::write(out_dir.join("notes.txt"), "mine").unwrap();
    let status = Command::new(BIN)
        .args(["schemas", "--out"])
        .arg(&out_dir)
        .status()
        .unwrap();
    assert!(status.success());
    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "analyze_trace.input.json",
            "analyze_trace.output.json",
            "cancel_run.input.json",
            "cancel_run.output.json",
            "compare.input.json",
            "compare.output.json",
            "detect_tools.input.json",
            "detect_tools.output.json",
            "get_run.input.json",
            "get_run.output.json",
            "identify_target.input.json",
            "identify_target.output.json",
            "instrument_file.input.json",
            "instrument_file.output.json",
            "instrument_record.json",
            "ledger.json",
            "list_changes.input.json",
            "list_changes.output.json",
            "list_runs.input.json",
            "list_runs.output.json",
            "notes.txt",
            "plan_profile.input.json",
            "plan_profile.output.json",
            "recipe.json",
            "report.json",
            "revert_changes.input.json",
            "revert_changes.output.json",
            "run_profiler.input.json",
            "run_profiler.output.json",
            "summarize.input.json",
            "summarize.output.json",
        ],
        "stale schema removed, other files kept, no temporary left"
    );
    let check = |expect_ok: bool| {
        let out = Command::new(BIN)
            .args(["schemas", "--check", "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        assert_eq!(
            out.status.success(),
            expect_ok,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    check(true);
    std::fs::write(out_dir.join("detect_tools.output.json"), "{}\n").unwrap();
    assert!(check(false).contains("detect_tools.output.json"));
}
