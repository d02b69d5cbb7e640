//! What a client sees beside the tools: the slash command file and the prompt served from it,
//! and the artifacts as resources (`resources/list`, `resources/read`, `resource_link`
//! blocks), with every way out of `profile_output/` refused.

use crate::util::*;
use serde_json::{json, Value};
use std::path::Path;

fn command_file() -> String {
    std::fs::read_to_string(workspace_root().join("commands/system-profile.md")).unwrap()
}

/// The frontmatter's `key: value` lines, parsed here independently of the server's reader.
fn frontmatter(text: &str) -> Vec<(String, String)> {
    let rest = text
        .strip_prefix("---\n")
        .expect("frontmatter opens the file");
    let end = rest.find("\n---\n").expect("frontmatter closes");
    rest[..end]
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(':').expect("key: value");
            (k.trim().to_string(), v.trim().trim_matches('"').to_string())
        })
        .collect()
}

fn start() -> Server {
    let mut s = Server::spawn(&[]);
    let r = s.ask(&initialize(1, "2025-11-25"));
    assert!(r["result"]["capabilities"]["prompts"].is_object(), "{r}");
    assert!(r["result"]["capabilities"]["resources"].is_object(), "{r}");
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    s
}

fn ask(s: &mut Server, id: u64, method: &str, params: Value) -> Value {
    s.ask(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

#[test]
fn every_tool_the_command_allows_exists_and_every_tool_is_allowed() {
    let text = command_file();
    let fields = frontmatter(&text);
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no `{k}` in the frontmatter"))
    };
    assert!(!get("description").is_empty());
    assert!(get("argument-hint").starts_with('<'));
    let allowed: Vec<String> = get("allowed-tools")
        .split(',')
        .map(|t| t.trim().to_string())
        .collect();
    let ours: Vec<&str> = allowed
        .iter()
        .filter_map(|t| t.strip_prefix("mcp__system-profile__"))
        .collect();
    let mut s = start();
    let list = ask(&mut s, 2, "tools/list", json!({}));
    let names = tool_names(&list["result"]);
    for t in &ours {
        assert!(names.iter().any(|n| n == t), "{t} is not in tools/list");
    }
    for n in &names {
        assert!(
            ours.contains(&n.as_str()),
            "tool {n} is not in allowed-tools"
        );
    }
    // What the body tells the agent to do with its tools, in the seed's order.
    let body = &text[text.find("\n---\n").unwrap()..];
    let mut at = 0;
    for step in [
        "identify_target",
        "detect_tools",
        "plan_profile",
        "instrument_file",
        "run_profiler",
        "summarize",
        "list_changes",
        "revert_changes",
    ] {
        let found = body[at..]
            .find(&format!("`{step}`"))
            .unwrap_or_else(|| panic!("`{step}` not after the previous step"));
        at += found;
    }
    for rule in [
        "# [PROFILE]",
        "./profile_output/",
        "Part B",
        "$ARGUMENTS",
        "Read",
    ] {
        assert!(body.contains(rule), "{rule}");
    }
}

#[test]
fn the_prompt_is_the_command_file_with_the_target() {
    let text = command_file();
    let body = &text[text.find("\n---\n").unwrap() + 5..];
    let mut s = start();
    let list = ask(&mut s, 2, "prompts/list", json!({}));
    let prompts = list["result"]["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["name"], "system-profile");
    assert_eq!(prompts[0]["arguments"][0]["name"], "target");
    let got = ask(
        &mut s,
        3,
        "prompts/get",
        json!({"name": "system-profile", "arguments": {"target": "vllm serving の interconnect"}}),
    );
    let msg = &got["result"]["messages"][0];
    assert_eq!(msg["role"], "user");
    assert_eq!(
        msg["content"]["text"].as_str().unwrap(),
        body.replace("$ARGUMENTS", "vllm serving の interconnect")
    );
    // Bad names and arguments are -32602 with the fix.
    let bad = ask(&mut s, 4, "prompts/get", json!({"name": "profile"}));
    assert_eq!(bad["error"]["code"], -32602);
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .contains("system-profile"));
    let bad = ask(
        &mut s,
        5,
        "prompts/get",
        json!({"name": "system-profile", "arguments": {"target": 3}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .contains("arguments.target"));
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn artifacts_are_resources_and_nothing_else_is() {
    if !require("strace", cmd_exists("strace")) {
        return;
    }
    let mut s = start();
    let root = s.root.path().canonicalize().unwrap();
    std::fs::write(root.join("secret.txt"), "not an artifact").unwrap();
    let run = ask(
        &mut s,
        2,
        "tools/call",
        json!({"name": "run_profiler", "arguments": {
            "profiler": "measure", "target": {"command": ["sh", "-c", "echo hello"]}}}),
    );
    let result = &run["result"];
    assert_eq!(result["isError"], false, "{run}");
    // The run's artifacts come back as resource_link blocks after the text.
    let content = result["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "text");
    let links: Vec<&Value> = content[1..].iter().collect();
    assert!(!links.is_empty(), "{content:#?}");
    for l in &links {
        assert_eq!(l["type"], "resource_link");
        assert!(l["uri"].as_str().unwrap().starts_with("file:///"));
    }
    let stdout_link = links
        .iter()
        .find(|l| l["name"].as_str().unwrap().ends_with("stdout.txt"))
        .unwrap_or_else(|| panic!("{links:#?}"));
    let read = ask(
        &mut s,
        3,
        "resources/read",
        json!({"uri": stdout_link["uri"]}),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "hello\n", "{read}");
    assert_eq!(read["result"]["contents"][0]["mimeType"], "text/plain");

    // resources/list names the same files, and nothing outside profile_output/.
    let list = ask(&mut s, 4, "resources/list", json!({}));
    let listed: Vec<String> = list["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_string())
        .collect();
    assert!(listed.contains(&stdout_link["uri"].as_str().unwrap().to_string()));
    assert!(listed.iter().any(|u| u.ends_with("/manifest.json")));
    assert!(listed
        .iter()
        .all(|u| u.starts_with(&uri(&root.join("profile_output")))));

    // Every way out is refused: a file beside profile_output, `..`, a symlink out, a
    // symlinked folder, /proc, a device, a relative path, another scheme, a folder.
    let out = root.join("profile_output");
    std::os::unix::fs::symlink(root.join("secret.txt"), out.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&root, out.join("up")).unwrap();
    std::fs::hard_link(root.join("secret.txt"), out.join("hard.txt")).unwrap();
    let tricks = [
        uri(&root.join("secret.txt")),
        format!("{}/../secret.txt", uri(&out)),
        uri(&out.join("link.txt")),
        uri(&out.join("up/secret.txt")),
        uri(&out.join("hard.txt")),
        "file:///proc/self/environ".to_string(),
        "file:///dev/zero".to_string(),
        "file://secret.txt".to_string(),
        "https://example.com/x".to_string(),
        uri(&out),
        format!("{}%2F..%2Fsecret.txt", uri(&out)),
    ];
    for (i, t) in tricks.iter().enumerate() {
        let r = ask(&mut s, 10 + i as u64, "resources/read", json!({"uri": t}));
        let code = r["error"]["code"].as_i64();
        assert!(
            code == Some(-32002) || code == Some(-32602),
            "{t} was not refused: {r}"
        );
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("profile_output") || msg.contains("file://"),
            "{t}: the refusal says what is served: {msg}"
        );
        assert!(!r.to_string().contains("not an artifact"), "{t} leaked");
    }
    // A link inside the folder that points out is not listed either.
    let list = ask(&mut s, 30, "resources/list", json!({}));
    assert!(!list.to_string().contains("link.txt"), "{list}");
    assert!(!list.to_string().contains("secret.txt"), "{list}");
    assert!(!list.to_string().contains("hard.txt"), "{list}");
}
