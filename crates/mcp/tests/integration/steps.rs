//! Steps 1 and 2 over stdio: identify_target and plan_profile as MCP tools and as plain
//! methods, with the target handed from one to the other as a client would.

use crate::util::*;
use serde_json::{json, Value};

/// Busy for a second of CPU, however fast the machine: samplers need it alive while they attach.
const APP: &str = "import time\n\n\ndef busy(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n\n\nif __name__ == \"__main__\":\n    while time.process_time() < 1.0:\n        busy(10**5)\n";

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

    // The id stands for the target: the server keeps what it identified.
    assert_eq!(target["target_id"], "t1", "{target}");
    let r = call(
        &mut s,
        2,
        "plan_profile",
        json!({"target_id": "t1", "time_budget_s": 120}),
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
    // And from the whole object, as a scripted client passes it.
    let r = call(
        &mut s,
        4,
        "plan_profile",
        json!({"target": target, "time_budget_s": 120}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["steps"]
            .as_array()
            .map(Vec::len),
        Some(steps.len()),
        "{r}"
    );
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
        (7, "plan_profile", json!({}), "target_id"),
        (13, "plan_profile", json!({"target_id": "t99"}), "target_id"),
        (
            14,
            "plan_profile",
            json!({"target_id": "t1", "target": "x"}),
            "target",
        ),
        (
            9,
            "identify_target",
            json!({"arguments": "x".repeat(20_000)}),
            "arguments",
        ),
        (
            10,
            "identify_target",
            json!({"arguments": "x", "cwd": ".."}),
            "cwd",
        ),
        (
            11,
            "run_profiler",
            json!({"profiler": "custom", "target": {"command": ["true"]}, "cwd": "/"}),
            "cwd",
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

fn real_python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn runs_in_the_foreground_and_the_background_with_a_manifest() {
    let mut s = Server::spawn(&[]);
    let py = real_python();
    // Foreground, with progress: measure a short program.
    let r = s.ask(
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_profiler",
            "arguments":{"profiler":"measure","target":{"command":[py, "-c", "import time; x = bytearray(20 << 20); time.sleep(1.5)"]},"label":"first"},
            "_meta":{"progressToken":"run-1"}}})
        .to_string(),
    );
    assert_eq!(r["method"], "notifications/progress", "{r}");
    assert_eq!(r["params"]["progressToken"], "run-1");
    let message = r["params"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("measure running for") && message.ends_with("samples"),
        "{message}"
    );
    let r = loop {
        let m = s.recv();
        if m.get("id").is_some() {
            break m;
        }
    };
    assert_eq!(r["result"]["isError"], false, "{r}");
    let run = &s.record_of(&r);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["label"], "first");
    assert!(run["metrics"]["time_v"]["max_rss_bytes"].as_u64().unwrap() > 20 << 20);
    assert!(run["metrics"]["procfs"]["samples"].as_u64().unwrap() > 10);
    for a in run["artifacts"].as_array().unwrap() {
        let path = s.root.path().join(a["path"].as_str().unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            a["bytes"].as_u64().unwrap(),
            "{a}"
        );
    }
    let manifest_path = s
        .root
        .path()
        .join(run["dir"].as_str().unwrap())
        .parent()
        .unwrap()
        .join("manifest.json");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    assert_eq!(manifest["runs"][0]["run_id"], run["run_id"]);
    assert_eq!(manifest["runs"][0]["status"], "completed");

    // Background: a run that writes its PID and sleeps; cancel kills it.
    let pidfile = s.root.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let r = call(
        &mut s,
        2,
        "run_profiler",
        json!({"profiler":"custom","target":{"command":["/bin/sh","-c",script]},"background":true}),
    );
    let bg = &r["result"]["structuredContent"];
    assert_eq!(bg["status"], "running", "{r}");
    let id = bg["run_id"].as_str().unwrap().to_string();
    assert!(wait_until(std::time::Duration::from_secs(10), || pidfile.exists()));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let r = call(&mut s, 3, "list_runs", json!({"status":"running"}));
    assert_eq!(
        r["result"]["structuredContent"]["runs"][0]["run_id"],
        id.as_str(),
        "{r}"
    );
    let r = call(&mut s, 4, "cancel_run", json!({"run_id": id}));
    assert_eq!(
        r["result"]["structuredContent"]["status"], "cancelled",
        "{r}"
    );
    assert!(
        wait_until(std::time::Duration::from_secs(5), || !alive(pid)),
        "the cancelled run's process lives on"
    );

    // get_run waits for a short background run.
    let r = call(
        &mut s,
        5,
        "run_profiler",
        json!({"profiler":"time_v","target":{"command":["/bin/sh","-c","exit 4"]},"background":true}),
    );
    let id = r["result"]["structuredContent"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(&mut s, 6, "get_run", json!({"run_id": id, "wait_s": 10}));
    let done = &r["result"]["structuredContent"];
    assert_eq!(done["status"], "failed", "{r}");
    assert_eq!(done["exit_code"], 4);
    assert!(done["error"].as_str().unwrap().contains("status 4"));
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let statuses: Vec<&str> = manifest["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "cancelled", "failed"]);
}

#[test]
fn run_errors_say_what_to_do() {
    let mut s = Server::spawn(&[]);
    let r = call(
        &mut s,
        1,
        "run_profiler",
        json!({"profiler":"torch_profiler","target":{"command":["true"]}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("torch_profiler runs Python code"),
        "{r}"
    );
    let r = call(
        &mut s,
        2,
        "run_profiler",
        json!({"profiler":"custom","target":{"command":["/no/such/program"]}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = call(
        &mut s,
        3,
        "run_profiler",
        json!({"profiler":"time_v","target":{"pid":1}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("give target.command"),
        "{r}"
    );
    for (id, params, field) in [
        (
            4,
            json!({"profiler":"custom","target":{"command":["true"]},"duration_s":0}),
            "duration_s",
        ),
        (
            5,
            json!({"profiler":"no_such","target":{"command":["true"]}}),
            "profiler",
        ),
        (
            6,
            json!({"profiler":"custom","target":{"command":["true"]},"cwd":"nowhere"}),
            "cwd",
        ),
    ] {
        let r = s.ask(
            &json!({"jsonrpc":"2.0","id":id,"method":"run_profiler","params":params}).to_string(),
        );
        assert_eq!(r["error"]["data"]["field"], field, "{r}");
    }
    let r = s.ask(r#"{"jsonrpc":"2.0","id":7,"method":"get_run","params":{"run_id":"r999-x"}}"#);
    assert_eq!(r["error"]["data"]["field"], "run_id", "{r}");
}

/// The contract between steps 2 and 5: every step a plan gives runs as given.
#[test]
fn every_step_of_a_plan_runs_as_planned() {
    let mut s = Server::spawn(&[]);
    std::fs::write(s.root.path().join("app.py"), APP).unwrap();
    let r = call(
        &mut s,
        1,
        "plan_profile",
        json!({"target": "app.py cpu memory io", "time_budget_s": 60}),
    );
    let plan = r["result"]["structuredContent"].clone();
    let steps = plan["steps"].as_array().unwrap().clone();
    assert!(steps.len() >= 4, "{plan}");
    let mut ran = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let mut args = step["run_profiler"].clone();
        // Steps meant to run alongside another run here one after the other.
        args["background"] = json!(false);
        if args["duration_s"].is_number() {
            args["duration_s"] = json!(1);
        }
        let r = call(&mut s, 10 + i as u64, "run_profiler", args);
        let method = step["method"].as_str().unwrap().to_string();
        assert_eq!(r["result"]["isError"], false, "{method}: {r}");
        let run = &s.record_of(&r);
        assert_eq!(run["status"], "completed", "{method}: {run}");
        assert!(
            run["metrics"].as_object().is_some_and(|m| !m.is_empty()),
            "{method} measured nothing: {run}"
        );
        ran.push(method);
        // Methods that observed the run (py-spy, perf stat on measure's) ran too.
        for o in run["observers"].as_array().into_iter().flatten() {
            ran.push(o.as_str().unwrap().to_string());
        }
    }
    for needed in ["measure", "perf_stat", "strace_c"] {
        assert!(ran.iter().any(|m| m == needed), "{needed} not in {ran:?}");
    }
}

/// analyze_trace over stdio on real Kineto traces copied under the server's root: one rank
/// alone, two ranks compared, and paths it must refuse.
#[test]
fn analyze_trace_reads_real_traces_and_compares_ranks() {
    let mut s = Server::spawn(&[]);
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../parse/tests/data/kineto");
    let traces = s.root.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for name in [
        "hta-a100-2rank-nccl-allreduce.json.gz",
        "hta-128rank-sampled-rank0.json.gz",
    ] {
        std::fs::copy(data.join(name), traces.join(name)).unwrap();
    }
    // The same trace uncompressed: told apart by its first bytes, not its name.
    let mut text = String::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(
        std::fs::File::open(data.join("hta-a100-alexnet-single.json.gz")).unwrap(),
    )
    .read_to_string(&mut text)
    .unwrap();
    std::fs::write(traces.join("alexnet.json"), text).unwrap();

    let r = call(
        &mut s,
        1,
        "analyze_trace",
        json!({"paths": ["traces/alexnet.json"]}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let one = &r["result"]["structuredContent"];
    assert_eq!(one["traces"][0]["analysis"]["launches"]["kernels"], 79);
    assert!(one["balance"].is_null());

    let r = call(
        &mut s,
        2,
        "analyze_trace",
        json!({"paths": ["traces/hta-a100-2rank-nccl-allreduce.json.gz", "traces/hta-128rank-sampled-rank0.json.gz"]}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let two = &r["result"]["structuredContent"];
    let ranks = two["balance"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    // Both files say rank 0 (each is rank 0 of its own job): numbered by position instead.
    let numbers: Vec<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1]);
    let compute: Vec<f64> = ranks
        .iter()
        .map(|r| r["compute_us"].as_f64().unwrap())
        .collect();
    assert!(compute.iter().all(|c| *c > 0.0), "{ranks:?}");
    // The second computes 38% longer than the first, but it also sits eight times longer in
    // collectives: by the waiting signature the first is the rank waited for, and compute time
    // alone names nobody. (The two are ranks of different jobs: the figures, not the pairing,
    // are what is checked.)
    assert!(compute[1] > compute[0] * 1.1, "{compute:?}");
    let comm: Vec<f64> = ranks
        .iter()
        .map(|r| r["comm_us"].as_f64().unwrap())
        .collect();
    assert!(comm[1] > 4.0 * comm[0], "{comm:?}");
    assert_eq!(two["balance"]["stragglers"], json!([0]));
    assert!(two["balance"]["compute_imbalance"].as_f64().unwrap() > 1.1);
    // Ranks of different jobs share no profiler step: no clock is made up, nothing merged.
    let clock = &two["alignment"]["ranks"][1];
    assert!(clock["offset_us"].is_null(), "{clock}");
    assert!(
        clock["note"]
            .as_str()
            .unwrap()
            .contains("0 collectives in common"),
        "{clock}"
    );
    assert!(two["alignment"]["merged_trace"].is_null());

    // The real two-rank gloo traces, rank 1's clock put 2.5 s ahead as another node's would
    // be: its offset is found, and the merged timeline has both ranks on rank 0's clock.
    let skew_us = 2.5e6;
    let gz = |rank: u32| {
        std::fs::File::open(data.join(format!("gloo-ddp-2rank-cpu-rank{rank}.json.gz"))).unwrap()
    };
    std::io::copy(
        &mut gz(0),
        &mut std::fs::File::create(traces.join("ddp0.json.gz")).unwrap(),
    )
    .unwrap();
    let mut shifted: Value = serde_json::from_reader(flate2::read::GzDecoder::new(gz(1))).unwrap();
    for e in shifted["traceEvents"].as_array_mut().unwrap() {
        if let Some(ts) = e["ts"].as_f64() {
            e["ts"] = json!(ts + skew_us);
        }
    }
    std::fs::write(traces.join("ddp1.json"), shifted.to_string()).unwrap();
    let r = call(
        &mut s,
        6,
        "analyze_trace",
        json!({"paths": ["traces/ddp0.json.gz", "traces/ddp1.json"]}),
    );
    let ddp = &r["result"]["structuredContent"];
    let clock = &ddp["alignment"]["ranks"][1];
    let (offset, unc) = (
        clock["offset_us"].as_f64().unwrap(),
        clock["uncertainty_us"].as_f64().unwrap(),
    );
    assert!((offset - skew_us).abs() <= unc && unc < 1000.0, "{clock}");
    let merged = ddp["alignment"]["merged_trace"].as_str().unwrap();
    let merged: Value = serde_json::from_reader(flate2::read::GzDecoder::new(
        std::fs::File::open(s.root.path().join(merged)).unwrap(),
    ))
    .unwrap();
    let starts = |label: &str| {
        let events = merged["traceEvents"].as_array().unwrap();
        let pids: Vec<&Value> = events
            .iter()
            .filter(|e| e["args"]["labels"] == label)
            .map(|e| &e["pid"])
            .collect();
        events
            .iter()
            .filter(|e| pids.contains(&&e["pid"]) && e["name"] == "gloo:all_gather")
            .map(|e| e["ts"].as_f64().unwrap())
            .next()
            .unwrap()
    };
    // DDP's first collective begins within milliseconds on both ranks once merged.
    assert!((starts("rank 0") - starts("rank 1")).abs() < 10_000.0);

    for (id, paths, needle) in [
        (3, json!(["../outside.json"]), "paths"),
        (4, json!(["traces/none.json"]), "paths"),
        (5, json!([]), "paths"),
    ] {
        let r = s.ask(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"analyze_trace","arguments":{"paths":paths}}}).to_string());
        let text = r.to_string();
        assert!(
            text.contains(needle) && (r["error"].is_object() || r["result"]["isError"] == true),
            "{r}"
        );
    }
}
