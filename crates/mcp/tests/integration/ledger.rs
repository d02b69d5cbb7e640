//! Step 4 over stdio: instrument_file, list_changes and revert_changes driven through the
//! real server; the server SIGKILLed between every pair of writes and restarted; and a real
//! git tree whose `git status` is the same after a full revert as before.

use crate::util::*;
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

const APP: &str = "\"\"\"An app.\"\"\"\nimport time\n\n\nclass Model:\n    def step(self, n):\n        total = 0\n        for i in range(n):\n            total += i\n        return total\n\n\ndef main():\n    m = Model()\n    for _ in range(20):\n        m.step(1000)\n    time.sleep(0.001)\n\n\nif __name__ == \"__main__\":\n    main()\n";

fn call(s: &mut Server, id: u64, name: &str, arguments: Value) -> Value {
    s.ask(
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})
            .to_string(),
    )
}

fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn server(root: &Path, env: &[(&str, &str)]) -> Server {
    let py = python();
    Server::spawn_in(tempfile::tempdir().unwrap(), root, &["--python", &py], env)
}

/// Files under the root outside profile_output/, with their bytes.
fn user_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == "profile_output" || rel == ".git" {
                continue;
            }
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn structured(answer: &Value) -> &Value {
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    &answer["result"]["structuredContent"]
}

/// `revert_changes` with these arguments; its structured result.
fn revert(s: &mut Server, id: u64, arguments: Value) -> Value {
    structured(&call(s, id, "revert_changes", arguments)).clone()
}

/// The reverted change of `r` whose `key` is `value`.
fn reverted<'a>(r: &'a Value, key: &str, value: &Value) -> &'a Value {
    r["reverted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| &c[key] == value)
        .unwrap_or_else(|| panic!("no change with {key} {value} in {r}"))
}

const STEP: &str = r#"{"path":"app.py","measure":"timing","function":"Model.step","strategy":"decorator","sample_every":2}"#;

#[test]
fn a_crash_between_any_two_writes_leaves_old_or_new_and_revert_restores_all() {
    // Instrumenting one function is three changes (helper, import line, decorator), each
    // backups → ledger (applying) → temp file → rename → ledger (active); a revert is three
    // more. The server is killed at each point of each, restarted, and must revert to the
    // original bytes.
    // (point, how many times one call passes it): the revert of the created helper is a
    // delete, with no temp file to rename.
    let points = [
        ("apply:after_ledger", true, 3),
        ("apply:before_rename", true, 3),
        ("apply:after_file", true, 3),
        ("revert:after_ledger", false, 3),
        ("revert:before_rename", false, 2),
        ("revert:after_file", false, 3),
    ];
    let mut killed = 0;
    for (point, during_apply, passes) in points {
        for nth in 1..=passes {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            std::fs::write(root.join("app.py"), APP).unwrap();
            let original = user_tree(&root);
            let failpoint = format!("{point}#{nth}");
            let instrumented;
            if during_apply {
                let mut s = server(&root, &[("SYSTEM_PROFILE_FAILPOINT", &failpoint)]);
                s.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"instrument_file","arguments":serde_json::from_str::<Value>(STEP).unwrap()}}).to_string());
                let status = s
                    .wait(Duration::from_secs(30))
                    .expect("the server dies at the failpoint");
                assert_eq!(status.signal(), Some(9), "{failpoint}: {status:?}");
                instrumented = None;
            } else {
                let mut s = server(&root, &[]);
                let r = call(
                    &mut s,
                    1,
                    "instrument_file",
                    serde_json::from_str(STEP).unwrap(),
                );
                assert_eq!(
                    structured(&r)["change_ids"].as_array().unwrap().len(),
                    3,
                    "{r}"
                );
                drop(s);
                instrumented = Some(std::fs::read(root.join("app.py")).unwrap());
                let mut s = server(&root, &[("SYSTEM_PROFILE_FAILPOINT", &failpoint)]);
                s.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"revert_changes","arguments":{"all":true}}}).to_string());
                let status = s
                    .wait(Duration::from_secs(30))
                    .expect("the server dies at the failpoint");
                assert_eq!(status.signal(), Some(9), "{failpoint}: {status:?}");
            }
            killed += 1;
            // Whatever the moment, the file is whole: the original or a version we wrote.
            let now = std::fs::read(root.join("app.py")).unwrap();
            let is_original = now == APP.as_bytes();
            let python_ok = std::process::Command::new(python())
                .args([
                    "-c",
                    "import ast,sys; ast.parse(open(sys.argv[1],'rb').read())",
                ])
                .arg(root.join("app.py"))
                .status()
                .unwrap()
                .success();
            assert!(
                python_ok,
                "{failpoint}: app.py does not parse:\n{}",
                String::from_utf8_lossy(&now)
            );
            assert!(
                is_original || String::from_utf8_lossy(&now).contains("# [PROFILE]"),
                "{failpoint}"
            );
            if let Some(inst) = &instrumented {
                assert!(
                    is_original || &now == inst || now.len() < inst.len(),
                    "{failpoint}"
                );
            }
            // Restart: the ledger settles, says what is there, and undoes all of it.
            let mut s = server(&root, &[]);
            let listed = call(&mut s, 3, "list_changes", json!({}));
            let listed = structured(&listed);
            let has_decorator = String::from_utf8_lossy(&now).contains("@_sp_profile.profile");
            let rows = listed["changes"].as_array().unwrap();
            assert_eq!(
                rows.iter()
                    .any(|r| r["what"].as_str().unwrap().contains("decorator")),
                has_decorator,
                "{failpoint}: the ledger and the file disagree: {listed}"
            );
            assert_eq!(listed["drifted"], json!([]), "{failpoint}: {listed}");
            let r = call(&mut s, 4, "revert_changes", json!({"all": true}));
            let r = structured(&r);
            assert_eq!(r["complete"], json!(true), "{failpoint}: {r}");
            assert_eq!(r["active"], json!(0), "{failpoint}: {r}");
            assert_eq!(
                user_tree(&root),
                original,
                "{failpoint}: the tree is not as it was"
            );
            assert!(
                !root
                    .join("profile_output/instrument/_sp_profile.py")
                    .exists(),
                "{failpoint}"
            );
            let after = call(&mut s, 5, "list_changes", json!({}));
            assert_eq!(structured(&after)["active"], json!(0), "{failpoint}");
        }
    }
    assert_eq!(killed, 17);
}

fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_strategy_then_a_full_revert_leaves_git_status_as_it_was() {
    if !require("git", cmd_exists("git")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("app.py"), APP).unwrap();
    std::fs::write(
        root.join("lib.py"),
        "def helper(x):\r\n    y = x + 1\r\n    return y\r\n",
    )
    .unwrap();
    std::fs::write(root.join("notes.txt"), "untracked\n").unwrap();
    std::fs::set_permissions(
        root.join("app.py"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&root, &["init", "-q"]);
    git(&root, &["add", "app.py", "lib.py"]);
    git(&root, &["commit", "-qm", "init"]);
    let before = git(&root, &["status", "--porcelain", "--untracked-files=all"]);
    let mut s = server(&root, &[]);
    let calls = [
        json!({"path":"app.py","measure":"timing","function":"Model.step","strategy":"decorator"}),
        json!({"path":"app.py","measure":"memory","lines":{"start":7,"end":9},"strategy":"context"}),
        json!({"path":"app.py","measure":"timing","function":"main","strategy":"inline"}),
        json!({"path":"app.py","measure":"timing","function":"Model.step, main","strategy":"runner","sample_every":3}),
        json!({"path":"lib.py","measure":"timing","function":"helper","strategy":"context"}),
        json!({"path":"lib.py","measure":"custom","lines":{"start":3,"end":3},"strategy":"inline","snippet":"print('x', y)"}),
    ];
    for (i, c) in calls.iter().enumerate() {
        let r = call(&mut s, i as u64 + 1, "instrument_file", c.clone());
        structured(&r);
    }
    let during = git(&root, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(
        during.contains(" M app.py") && during.contains(" M lib.py"),
        "{during}"
    );
    assert!(
        !during.contains("profile_output"),
        "profile_output/ shows in git status: {during}"
    );
    // The instrumented app runs and logs through the helper.
    let run = std::process::Command::new(python())
        .arg("app.py")
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(run.success());
    let log =
        std::fs::read_to_string(root.join("profile_output/instrument/measure.jsonl")).unwrap();
    assert!(log.lines().count() > 10, "{log}");
    let list = call(&mut s, 20, "list_changes", json!({}));
    let md = structured(&list)["markdown"].as_str().unwrap().to_string();
    assert!(
        md.starts_with("| File | Change type | What was added or changed | Lines |"),
        "{md}"
    );
    assert!(
        md.contains("| `app.py` | modified |") && md.contains("| created |"),
        "{md}"
    );
    let r = call(&mut s, 21, "revert_changes", json!({"all": true}));
    let r = structured(&r);
    assert_eq!(r["complete"], json!(true), "{r}");
    assert_eq!(
        git(&root, &["status", "--porcelain", "--untracked-files=all"]),
        before
    );
    assert_eq!(git(&root, &["diff"]), "");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(root.join("app.py"))
                .unwrap()
                .permissions()
        ) & 0o777,
        0o755
    );
}

#[test]
fn foreign_edits_merge_or_conflict_and_force_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("app.py"), APP).unwrap();
    let mut s = server(&root, &[]);
    let r = call(
        &mut s,
        1,
        "instrument_file",
        serde_json::from_str(STEP).unwrap(),
    );
    let id = structured(&r)["change_ids"][2]
        .as_str()
        .unwrap()
        .to_string();
    // Someone edits elsewhere in the file: the revert keeps their edit and takes ours out.
    let text = std::fs::read_to_string(root.join("app.py")).unwrap();
    let edited = text.replace("time.sleep(0.001)", "time.sleep(0.002)  # tuned");
    std::fs::write(root.join("app.py"), &edited).unwrap();
    let listed = call(&mut s, 2, "list_changes", json!({}));
    assert_eq!(structured(&listed)["drifted"], json!(["app.py"]));
    let r = revert(&mut s, 3, json!({"all": true}));
    assert_eq!(r["complete"], json!(true), "{r}");
    assert_eq!(r["reverted"][0]["id"], json!(id));
    assert_eq!(r["reverted"][0]["outcome"], json!("merged"), "{r}");
    assert_eq!(
        std::fs::read_to_string(root.join("app.py")).unwrap(),
        APP.replace("time.sleep(0.001)", "time.sleep(0.002)  # tuned")
    );

    // Someone edits our own line: a conflict, nothing touched, the foreign diff shown.
    std::fs::write(root.join("app.py"), APP).unwrap();
    let r = call(
        &mut s,
        4,
        "instrument_file",
        serde_json::from_str(STEP).unwrap(),
    );
    let ids: Vec<String> = structured(&r)["change_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let text = std::fs::read_to_string(root.join("app.py")).unwrap();
    let clash = text.replace(
        &format!("\"timing\", 2)  # [PROFILE] {}", ids[2]),
        "\"timing\", 2)  # mine now",
    );
    std::fs::write(root.join("app.py"), &clash).unwrap();
    let r = revert(&mut s, 5, json!({"ids": [ids[2]]}));
    assert_eq!(r["complete"], json!(false), "{r}");
    assert_eq!(r["reverted"][0]["outcome"], json!("conflict"), "{r}");
    let foreign = r["reverted"][0]["foreign_diff"].as_str().unwrap();
    assert!(
        foreign.contains(&format!("-    @_sp_profile.profile(\"{}\"", ids[2])),
        "{r}"
    );
    assert!(foreign.contains("\"timing\", 2)  # mine now"), "{r}");
    assert_eq!(
        std::fs::read_to_string(root.join("app.py")).unwrap(),
        clash,
        "a conflict touches nothing"
    );
    // force: the original back, the edited bytes kept where the answer says.
    let r = revert(&mut s, 6, json!({"all": true, "force": true}));
    assert_eq!(r["complete"], json!(true), "{r}");
    let forced = reverted(&r, "outcome", &json!("forced"));
    let kept = root.join(forced["kept"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(kept).unwrap(), clash);
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);

    // A runner someone edited: a conflict with their diff; force deletes it and keeps theirs.
    let r = call(
        &mut s,
        7,
        "instrument_file",
        json!({"path":"app.py","measure":"timing","function":"main","strategy":"runner"}),
    );
    let runner = structured(&r)["run_command"][1]
        .as_str()
        .unwrap()
        .to_string();
    let mut text = std::fs::read_to_string(root.join(&runner)).unwrap();
    text.push_str("# my note\n");
    std::fs::write(root.join(&runner), &text).unwrap();
    let r = revert(&mut s, 8, json!({"all": true}));
    let c = reverted(&r, "file", &json!(runner));
    assert_eq!(c["outcome"], json!("conflict"), "{r}");
    assert!(
        c["foreign_diff"].as_str().unwrap().contains("+# my note"),
        "{c}"
    );
    assert!(root.join(&runner).exists());
    let r = revert(&mut s, 9, json!({"all": true, "force": true}));
    assert_eq!(r["complete"], json!(true), "{r}");
    assert!(!root.join(&runner).exists());
    let c = reverted(&r, "file", &json!(runner));
    assert_eq!(
        std::fs::read_to_string(root.join(c["kept"].as_str().unwrap())).unwrap(),
        text
    );
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);
}

#[test]
fn refused_paths_say_why_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.py"), APP).unwrap();
    std::fs::write(root.join("app.py"), APP).unwrap();
    std::fs::create_dir(root.join("pkg")).unwrap();
    std::os::unix::fs::symlink(root.join("app.py"), root.join("link.py")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::fs::write(
        root.join("blob.py"),
        b"def f():\n    return 1\n\x00\x01\x02",
    )
    .unwrap();
    std::fs::create_dir(root.join("profile_output")).unwrap();
    std::fs::write(root.join("profile_output/own.py"), APP).unwrap();
    let outside_abs = outside.path().join("x.py").to_string_lossy().into_owned();
    let mut s = server(&root, &[]);
    let cases = [
        (outside_abs.as_str(), "outside the server's root"),
        ("../x.py", "leaves the server's root"),
        ("link.py", "symbolic link"),
        ("out/x.py", "symbolic link"),
        ("pkg", "not a regular file"),
        ("blob.py", "NUL bytes"),
        ("missing.py", "No such file"),
        ("profile_output/own.py", "system-profile's own"),
    ];
    for (i, (path, why)) in cases.iter().enumerate() {
        let r = call(
            &mut s,
            i as u64 + 1,
            "instrument_file",
            json!({"path": path, "measure": "timing", "function": "main", "strategy": "decorator"}),
        );
        let text = r.to_string();
        assert!(text.contains(why), "{path}: expected {why:?} in {r}");
        assert!(
            r.get("error").is_some() || r["result"]["isError"] == json!(true),
            "{r}"
        );
    }
    let bad = [
        (
            json!({"path":"app.py","measure":"timing","function":"nope","strategy":"decorator"}),
            "it defines: Model.step, main",
        ),
        (
            json!({"path":"app.py","measure":"timing","function":"Model.step","strategy":"inline"}),
            "can leave early through `return`",
        ),
        (
            json!({"path":"app.py","measure":"timing","lines":{"start":1,"end":1},"strategy":"context"}),
            "docstring",
        ),
        (
            json!({"path":"app.py","measure":"custom","function":"main","strategy":"decorator","snippet":"x=1"}),
            "custom snippet goes in inline",
        ),
        (
            json!({"path":"app.py","measure":"timing","function":"main","strategy":"decorator","sample_rate":0}),
            "sample_rate",
        ),
        (
            json!({"path":"app.py","measure":"custom","lines":{"start":14,"end":14},"strategy":"inline","snippet":"if True:\nprint(1)"}),
            "would not compile",
        ),
    ];
    for (i, (args, why)) in bad.iter().enumerate() {
        let r = call(&mut s, 100 + i as u64, "instrument_file", args.clone());
        assert!(
            r.to_string().contains(why),
            "{args}: expected {why:?} in {r}"
        );
    }
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("x.py")).unwrap(),
        APP
    );
    let listed = call(
        &mut s,
        200,
        "list_changes",
        json!({"include_reverted": true}),
    );
    assert_eq!(
        structured(&listed)["changes"],
        json!([]),
        "a refused call leaves no ledger entry"
    );
    // A dry run shows the diff and writes nothing.
    let r = call(
        &mut s,
        201,
        "instrument_file",
        json!({"path":"app.py","measure":"timing","function":"main","strategy":"decorator","dry_run":true}),
    );
    let r = structured(&r).clone();
    assert_eq!(r["dry_run"], json!(true));
    assert!(
        r["changes"][2]["diff"]
            .as_str()
            .unwrap()
            .contains("+@_sp_profile.profile(\"c0003\", \"main\""),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);
    assert!(!root
        .join("profile_output/instrument/_sp_profile.py")
        .exists());
    let listed = call(&mut s, 202, "list_changes", json!({}));
    assert_eq!(structured(&listed)["changes"], json!([]));
}
