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

fn scratch_with_examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("examples");
    std::fs::create_dir_all(&ex).unwrap();
    for f in ["cpu_hotspot.py", "memory_hog.py"] {
        std::fs::copy(workspace_root().join("examples").join(f), ex.join(f)).unwrap();
    }
    dir
}

#[test]
fn profile_refuses_a_blank_target_and_a_folder_with_exit_2_and_runs_nothing() {
    let dir = scratch_with_examples();
    for (args, needle) in [
        (vec![""], "name a target"),
        (vec!["  ", ""], "name a target"),
        // Two quote characters typed as the target are a word, and no target.
        (vec!["''"], "What should I profile"),
        (vec!["examples"], "is a directory. Which script should run"),
        (vec!["examples", "memory"], "is a directory"),
    ] {
        let out = profile_output(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
    // Nothing ran: no session folder was made.
    let sessions = std::fs::read_dir(dir.path().join("profile_output"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("manifest.json").exists())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(sessions, 0);
    // As the slash command passes them, `''` is a quoted empty word: it names nothing (as a
    // name it would match every process on the machine).
    let out = Command::new(BIN)
        .args(["call", "identify_target", r#"{"arguments": "''"}"#])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["needs_clarification"], true, "{t}");
    assert!(
        t["processes"].as_array().is_none_or(|p| p.is_empty()),
        "{t}"
    );
    assert!(t["questions"][0]
        .as_str()
        .unwrap()
        .starts_with("What should I profile?"));
}

#[test]
fn one_quoted_argument_is_the_same_target_as_the_words_apart() {
    let dir = scratch_with_examples();
    let out = profile_output(
        dir.path(),
        &["--budget", "30", "examples/cpu_hotspot.py 20 cpu"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The script with its argument, not a file called `cpu_hotspot.py 20 cpu`.
    assert!(stdout.contains("target: "), "{stdout}");
    assert!(stdout.contains("cpu_hotspot.py"), "{stdout}");
    let completed = stdout
        .lines()
        .find(|l| l.starts_with("runs: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(!completed.starts_with("runs: 0 of"), "{stdout}");
}

#[test]
fn a_profile_where_no_run_completed_exits_1_with_the_first_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.py"),
        "import sys\nraise SystemExit('broken.py cannot start: no config given')\n",
    )
    .unwrap();
    let out = profile_output(dir.path(), &["--budget", "60", "broken.py", "cpu"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("no run completed"), "{stderr}");
    // The program's own words reach the user, not only stderr.txt.
    assert!(stderr.contains("cannot start: no config given"), "{stderr}");
    // The report is still written and says why each run failed.
    let md = stdout
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let text = std::fs::read_to_string(dir.path().join(md)).unwrap();
    assert!(text.contains("cannot start: no config given"), "{text}");
}

#[test]
fn a_tool_found_in_the_venv_runs_from_there_without_the_venv_on_path() {
    let venv = workspace_root().join(".venv/bin");
    if !require(
        "the project's .venv with py-spy",
        venv.join("py-spy").is_file(),
    ) {
        return;
    }
    // PATH as a user's shell has it when the venv is not activated: no folder holding py-spy.
    let path = path_without("py-spy");
    let dir = scratch_with_examples();
    let out = Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(dir.path())
        .args(["--budget", "60", "--python"])
        .arg(venv.join("python"))
        .args(["examples/cpu_hotspot.py", "100", "cpu"])
        .current_dir(dir.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("was not found"), "{stdout}");
    let report = report_of(dir.path(), &stdout);
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap();
    let top = &report["hotspots"]["rows"][0];
    assert_eq!(top["function"], "busy", "{:#}", report["hotspots"]);
    // The run says where py-spy came from: its recorded PATH starts with the venv's bin.
    let manifest = std::fs::read_to_string(
        dir.path()
            .join(json)
            .parent()
            .unwrap()
            .join("manifest.json"),
    )
    .unwrap();
    let manifest: Value = serde_json::from_str(&manifest).unwrap();
    let py_spy = manifest["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["profiler"] == "py_spy_record"
                || r["observers"]
                    .as_array()
                    .is_some_and(|o| o.contains(&serde_json::json!("py_spy_record")))
        })
        .unwrap();
    assert!(
        py_spy["env"]["PATH"]
            .as_str()
            .is_some_and(|p| p.starts_with(venv.to_str().unwrap())),
        "{:#}",
        py_spy["env"]
    );
}

/// `PATH` without the folders that hold `program`.
fn path_without(program: &str) -> std::ffi::OsString {
    let kept: Vec<std::path::PathBuf> = std::env::split_paths(&std::env::var("PATH").unwrap())
        .filter(|d| !d.join(program).exists())
        .collect();
    std::env::join_paths(kept).unwrap()
}

/// A fresh machine before `.venv` exists: the base interpreter, no py-spy anywhere. The main
/// job still runs, with cProfile, and still finds the hotspot.
#[test]
fn without_the_venv_the_main_job_still_finds_the_hotspot() {
    let base = Command::new("python3")
        .args(["-c", "import sys; print(sys._base_executable)"])
        .output()
        .unwrap();
    let base = String::from_utf8_lossy(&base.stdout).trim().to_string();
    let dir = scratch_with_examples();
    let out = Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(dir.path())
        .args(["--budget", "120", "--python", &base])
        .args(["examples/cpu_hotspot.py", "100", "cpu"])
        .current_dir(dir.path())
        .env("PATH", path_without("py-spy"))
        .env_remove("VIRTUAL_ENV")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "expected exit 0, came {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(dir.path(), &stdout);
    let methods: Vec<&str> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["profiler"].as_str())
        .collect();
    assert!(
        methods.contains(&"cprofile") && !methods.contains(&"py_spy_record"),
        "expected cProfile in py-spy's place, came {methods:?}"
    );
    let top = &report["hotspots"]["rows"][0];
    assert_eq!(top["function"], "busy", "{:#}", report["hotspots"]);
}

#[test]
fn lang_ja_reaches_the_progress_lines_run_labels_statuses_and_part_b() {
    let dir = scratch_with_examples();
    let out = profile_output(
        dir.path(),
        &[
            "--lang",
            "ja",
            "--budget",
            "60",
            "--instrument",
            "examples/cpu_hotspot.py:busy",
            "cpu",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for word in ["特定", "検出", "計画", "要約"] {
        assert!(stderr.contains(word), "`{word}` in the progress: {stderr}");
    }
    assert!(!stderr.contains("identify "), "{stderr}");
    let md = stdout
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let text = std::fs::read_to_string(dir.path().join(md)).unwrap();
    assert!(text.contains("| 完了 |"), "{text}");
    assert!(!text.contains("| completed |"), "{text}");
    // The runs' labels are the recipe steps' Japanese names (py-spy observes the first run).
    assert!(
        text.contains("| 全体のコスト |"),
        "`全体のコスト` in {text}"
    );
    assert!(!text.contains("| overall cost |"), "{text}");
    // Part B says what was added in Japanese, and that it was undone.
    assert!(
        text.contains("busy に timing デコレータ（毎回の呼び出し）"),
        "{text}"
    );
    assert!(text.contains("変更（元に戻し済み）"), "{text}");
    assert!(!text.contains("decorator on"), "{text}");
}

/// `pid` followed by anything but a positive integer is a usage error: nothing is identified
/// as a module (`abc` is the standard library's) or a service (`-5` matched a shell).
#[test]
fn profile_pid_without_a_pid_is_a_usage_error_and_runs_nothing() {
    let root = tempfile::tempdir().unwrap();
    for bad in [&["pid", "abc"][..], &["pid", "-5"], &["pid", "0"]] {
        let out = Command::new(BIN)
            .arg("profile")
            .arg("--root")
            .arg(root.path())
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("positive integer"), "{bad:?}: {stderr}");
        assert!(
            !root.path().join("profile_output").exists(),
            "{bad:?} ran something"
        );
    }
}
