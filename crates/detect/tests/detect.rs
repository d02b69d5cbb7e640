//! `detect` on this machine, checked against independent evidence gathered by the test itself.

use std::process::Command;
use system_profile_detect::{detect, DetectOptions};

fn cmd_exists(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

#[tokio::test]
async fn reports_the_tools_that_are_really_here() {
    let report = detect(&DetectOptions::default()).await;
    let tool = |id: &str| report.tools.iter().find(|t| t.id == id).unwrap().clone();
    for (id, program) in [
        ("strace", "strace"),
        ("py_spy", "py-spy"),
        ("iostat", "iostat"),
        ("perf", "perf"),
    ] {
        let here = cmd_exists(program);
        if in_ci() {
            assert!(here, "{program} must be installed by .ci/run");
        }
        assert_eq!(tool(id).available, here, "{id}: {:?}", tool(id));
    }
    let time = tool("time");
    assert_eq!(
        time.available,
        std::path::Path::new("/usr/bin/time").exists()
    );
    // No GPU on CI machines: NVML is data, not an error.
    let nvml = tool("nvml");
    if !nvml.available {
        assert!(report.hardware.gpu.gpus.is_empty());
        assert!(nvml.reason.unwrap().contains("NVML"));
    }
    // Python modules imported by the interpreter itself.
    assert!(tool("cprofile").usable);
    assert!(tool("tracemalloc").usable);
    assert!(report.python.available && report.python.executable.is_some());
    assert!(report.hardware.cpu.logical_cpus >= 1);
    assert!(report.hardware.memory.total_bytes > 0);
    assert_eq!(report.summary.checked, report.tools.len());
}

#[tokio::test]
async fn perf_hardware_counters_reported_truthfully() {
    if !cmd_exists("perf") {
        assert!(!in_ci(), "perf must be installed by .ci/run");
        return;
    }
    // Ask perf the same question detect asks: are the hardware counters there?
    let independent = Command::new("perf")
        .args(["stat", "-x,", "-e", "cycles,instructions", "true"])
        .output()
        .unwrap();
    let unsupported = String::from_utf8_lossy(&independent.stderr).contains("<not supported>");
    let report = detect(&DetectOptions::default()).await;
    let perf = report.tools.iter().find(|t| t.id == "perf").unwrap();
    let noted = perf
        .notes
        .iter()
        .any(|n| n.contains("hardware counters not supported"));
    assert_eq!(noted, unsupported, "{perf:?}");
}

/// Without an NVIDIA device the torch probe reads torch's files instead of importing it
/// (seconds): what it reports must be what importing torch says, checked here by importing it.
#[tokio::test]
async fn torch_read_from_its_files_is_what_importing_it_says() {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
    let python = if std::path::Path::new(venv).exists() {
        venv.to_string()
    } else {
        "python3".to_string()
    };
    let imported = Command::new(&python)
        .args([
            "-c",
            "import json, torch; nccl = torch.cuda.nccl.version() if torch.version.cuda else None; \
             print(json.dumps([torch.__version__, torch.cuda.is_available(), torch.version.cuda, \
             torch.cuda.device_count(), '.'.join(map(str, nccl)) if nccl else None, \
             torch.distributed.is_available()]))",
        ])
        .output()
        .unwrap();
    if !imported.status.success() {
        // No torch in this interpreter: the probe must say so.
        let report = detect(&DetectOptions {
            python: python.clone(),
            ..DetectOptions::default()
        })
        .await;
        assert!(report.python.torch.is_none(), "{:?}", report.python.torch);
        return;
    }
    let truth: serde_json::Value =
        serde_json::from_slice(imported.stdout.trim_ascii_end()).unwrap();
    let report = detect(&DetectOptions {
        python,
        ..DetectOptions::default()
    })
    .await;
    let t = report.python.torch.expect("torch");
    assert_eq!(
        serde_json::json!([
            t.version,
            t.cuda_available,
            t.cuda_version,
            t.device_count,
            t.nccl_version,
            t.distributed_available
        ]),
        truth
    );
}
