//! Steps 1 and 2 over stdio: identify_target and plan_profile as MCP tools and as plain
//! methods, with the target handed from one to the other as a client would.

use crate::util::*;
use serde_json::{json, Value};

const APP: &str = "import time\n\n\ndef busy(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n\n\nif __name__ == \"__main__\":\n    busy(10**6)\n";

fn call(s: &mut Server, id: u64, name: &str, arguments: Value) -> Value {
    s.ask(
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})
            .to_string(),
    )
}

#[test]
fn a_target_identified_over_mcp_plans_into_run_profiler_calls() {
    let mut s = Server::spawn(&[]);
    std::fs::create_dir(s.root.path().join("src")).unwrap();
    std::fs::write(s.root.path().join("src/app.py"), APP).unwrap();
    let r = call(
        &mut s,
        1,
        "identify_target",
        json!({"arguments": "app.py:busy cpu", "cwd": "src"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let target = r["result"]["structuredContent"].clone();
    assert_eq!(target["kind"], "function");
    assert_eq!(target["focus"], json!(["cpu"]));
    assert_eq!(target["function"]["qualname"], "busy");
    assert_eq!(
        (
            target["function"]["start_line"].as_u64(),
            target["function"]["end_line"].as_u64()
        ),
        (Some(4), Some(8))
    );

    let r = call(
        &mut s,
        2,
        "plan_profile",
        json!({"target": target, "time_budget_s": 120}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let plan = &r["result"]["structuredContent"];
    assert_eq!(plan["recipe"]["id"], "python_program");
    assert_eq!(plan["needs_clarification"], false);
    let steps = plan["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    for step in steps {
        let run = &step["run_profiler"];
        assert!(run["profiler"].is_string(), "{step}");
        assert!(
            run["target"]["command"][1]
                .as_str()
                .unwrap()
                .ends_with("src/app.py"),
            "{step}"
        );
    }
    let timing = plan["instrumentation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["measure"] == "timing")
        .expect("a timing suggestion for the named function");
    assert_eq!(timing["instrument_file"]["function"], "busy");
    // The same plan from the raw words, through the plain method.
    let r = s.ask(
        &json!({"jsonrpc":"2.0","id":3,"method":"plan_profile","params":{"target":"app.py:busy cpu","cwd":"src"}})
            .to_string(),
    );
    assert_eq!(r["result"]["target"]["function"]["qualname"], "busy", "{r}");
    assert_eq!(r["result"]["steps"].as_array().unwrap().len(), steps.len());
}

#[test]
fn unclear_words_are_questions_and_bad_arguments_name_their_field() {
    let mut s = Server::spawn(&[]);
    let r = call(&mut s, 1, "identify_target", json!({"arguments": ""}));
    let t = &r["result"]["structuredContent"];
    assert_eq!(t["needs_clarification"], true, "{r}");
    assert!(t["questions"][0]
        .as_str()
        .unwrap()
        .contains("What should I profile"));
    let r = call(
        &mut s,
        2,
        "plan_profile",
        json!({"target": "no_such_file.py"}),
    );
    let p = &r["result"]["structuredContent"];
    assert_eq!(p["needs_clarification"], true, "{r}");
    assert_eq!(p["steps"], json!([]));
    assert!(
        p["questions"][0]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{p}"
    );

    for (id, method, params, field) in [
        (3, "identify_target", json!({"arguments": 5}), "arguments"),
        (
            4,
            "identify_target",
            json!({"arguments": "x", "cwd": "nowhere"}),
            "cwd",
        ),
        (
            5,
            "plan_profile",
            json!({"target": "x", "time_budget_s": 0}),
            "time_budget_s",
        ),
        (
            6,
            "plan_profile",
            json!({"target": "x", "focus": ["gpus"]}),
            "focus[0]",
        ),
        (7, "plan_profile", json!({}), "target"),
        (
            9,
            "identify_target",
            json!({"arguments": "x".repeat(20_000)}),
            "arguments",
        ),
    ] {
        let r =
            s.ask(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string());
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["data"]["field"], field, "{r}");
    }
    let r = call(&mut s, 8, "identify_target", json!({"cwd": "nowhere"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not a directory"),
        "{r}"
    );
}
