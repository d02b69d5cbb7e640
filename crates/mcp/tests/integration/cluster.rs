//! A real two-node Slurm cluster on this machine (`tests/cluster/slurm.sh`: munged, slurmctld,
//! one slurmd per node), a two-node torchrun training submitted with sbatch whose rank 1 (on
//! n2) does more work each step, and `system-profile profile "slurm job <id>"`: the report must
//! name rank 1 on n2 as the straggler and find the clock offset put on n2's node part.
//!
//! Both nodes are this machine: they share its CPUs and its clock. So n2's node part is told to
//! read its clock 2.5 s ahead (`SYSTEM_PROFILE_CLOCK_SKEW_NS=n2=...`), which the gatherer must
//! measure and remove, and the straggler must show against the others on shared CPUs.

use super::util::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// A free TCP port (two in a row for the two slurmd) picked by the kernel.
fn free_port_pair() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 65000 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    conf: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(workspace_root().join("tests/cluster/slurm.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn slurm(cluster: &Cluster, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .env("SLURM_CONF", &cluster.conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The job's ranks have started on their nodes: a process with the job id and a RANK.
fn ranks_running(job: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
            vars.contains(&format!("SLURM_JOB_ID={job}").as_bytes())
                && vars.iter().any(|v| v.starts_with(b"RANK="))
        })
        .count()
}

#[test]
fn a_slurm_job_on_two_nodes_names_its_straggler_and_the_skewed_clock() {
    let venv = workspace_root().join(".venv/bin");
    let have = ["munged", "slurmctld", "slurmd", "sbatch"].iter().all(|p| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .any(|d| d.join(p).is_file())
    });
    if !require("Slurm (slurm-wlm, munge)", have)
        || !require(
            "the project's .venv with torch and py-spy",
            venv.join("torchrun").is_file() && venv.join("py-spy").is_file(),
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port_pair();
    let ctld_port = free_port_pair();
    let out = Command::new(workspace_root().join("tests/cluster/slurm.sh"))
        .arg("start")
        .arg(dir.path())
        .arg(ctld_port.to_string())
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster = Cluster {
        conf: dir.path().join("slurm.conf").to_string_lossy().into_owned(),
        dir,
    };
    let work = tempfile::tempdir().unwrap();
    let rdzv_port = free_port_pair();
    let script = work.path().join("train.sbatch");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH --job-name=ddp-two-nodes\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n\
             export STEPS=1000000 SLOW_RANK_S=0 SLOW_RANK_BUSY_S=0.05\n\
             srun bash -c 'exec {torchrun} --nnodes 2 --nproc_per_node 1 --node_rank $SLURM_NODEID --master_addr 127.0.0.1 --master_port {rdzv_port} {example}'\n",
            torchrun = venv.join("torchrun").display(),
            example = workspace_root().join("examples/ddp_gloo.py").display(),
        ),
    )
    .unwrap();
    let job = slurm(
        &cluster,
        "sbatch",
        &[
            "--parsable",
            "--chdir",
            work.path().to_str().unwrap(),
            script.to_str().unwrap(),
        ],
    );
    // Generous: a busy machine starts torch slowly.
    let deadline = Instant::now() + Duration::from_secs(180);
    while ranks_running(&job) < 2 {
        assert!(
            Instant::now() < deadline,
            "the job's two ranks did not start: {}",
            slurm(&cluster, "scontrol", &["show", "job", "-o", &job])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Slurm's own list of the job's steps, read through identify: the batch script and the
    // torchrun step; a step it does not list is a question, not a guess.
    let identify = |words: String| {
        let out = Command::new(BIN)
            .args(["call", "identify_target"])
            .arg(serde_json::json!({ "arguments": words }).to_string())
            .current_dir(work.path())
            .env("SLURM_CONF", &cluster.conf)
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let whole = identify(format!("slurm job {job}"));
    let steps: Vec<&str> = whole["cluster"]["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("{whole:#}"))
        .iter()
        .map(|s| s["step_id"].as_str().unwrap())
        .collect();
    assert!(
        steps.contains(&format!("{job}.0").as_str())
            && steps.contains(&format!("{job}.batch").as_str()),
        "{whole:#}"
    );
    let unknown = identify(format!("slurm {job}.7"));
    assert!(
        unknown["questions"][0]
            .as_str()
            .unwrap()
            .contains(&format!("has no running step {job}.7")),
        "{unknown:#}"
    );
    // The torchrun step alone (not the batch script beside it) is what is profiled.
    let out = Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(work.path())
        .args(["--budget", "120"])
        .arg(format!("slurm {job}.0"))
        .current_dir(work.path())
        .env("SLURM_CONF", &cluster.conf)
        .env("PATH", path_with_venv())
        .env("SYSTEM_PROFILE_CLOCK_SKEW_NS", "n2=2500000000")
        .output()
        .unwrap();
    let _ = Command::new("scancel")
        .arg(&job)
        .env("SLURM_CONF", &cluster.conf)
        .status();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(work.path(), &stdout);
    let across = &report["across_nodes"][0]["profile"];
    let nodes = across["nodes"].as_array().unwrap();
    let node = |name: &str| nodes.iter().find(|n| n["node"] == name).unwrap();
    assert_eq!(nodes.len(), 2, "{across:#}");
    // The skew put on n2 is measured within a tenth of a second, n1's clock is ours.
    let offset = |name: &str| node(name)["clock_offset_s"].as_f64().unwrap();
    assert!((offset("n2") - 2.5).abs() < 0.1, "{across:#}");
    assert!(offset("n1").abs() < 0.1, "{across:#}");
    // Each node sees its own rank only, though both are this machine.
    let rank_of = |name: &str| node(name)["ranks"][0]["rank"].as_u64().unwrap();
    assert_eq!((rank_of("n1"), rank_of("n2")), (0, 1), "{across:#}");
    assert_eq!(node("n1")["ranks"].as_array().unwrap().len(), 1);
    assert_eq!(across["stragglers"], serde_json::json!([1]), "{across:#}");
    // Its extra work is among its hottest functions (first on an idle machine; beside other
    // work the waits inside backward can outrank it).
    let hottest = &node("n2")["ranks"][0]["top_functions"];
    assert!(
        hottest
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["function"].as_str().unwrap().contains("ddp_gloo.py:")),
        "{hottest:#}"
    );
    let titles: Vec<&str> = report["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["title"].as_str())
        .collect();
    assert!(
        titles.iter().any(|t| t.starts_with(&format!(
            "Rank 1 on node n2 is the straggler of Slurm job {job}"
        ))),
        "{titles:?}"
    );
    let md = std::fs::read_to_string(
        work.path().join(
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("report: "))
                .unwrap(),
        ),
    )
    .unwrap();
    assert!(md.contains("### Across nodes (Slurm job"), "{md}");
    // Measured per node, so not "not measured".
    assert!(!md.contains("CPU overhead, Memory overhead"), "{md}");
}

/// A two-node Ray job whose actors step in lockstep (the driver waits for both each step),
/// the one on node_b doing 50 ms more each step.
const RAY_JOB: &str = r#"import time

import ray

ray.init()


@ray.remote(num_cpus=0)
class Worker:
    def __init__(self, extra_s):
        self.extra_s = extra_s

    def step(self):
        until = time.perf_counter() + 0.02 + self.extra_s
        while time.perf_counter() < until:
            pass
        return 1


fast = Worker.options(resources={"node_a": 0.1}).remote(0.0)
slow = Worker.options(resources={"node_b": 0.1}).remote(0.05)
# Both actors have answered once, so Ray's state API lists them alive on their nodes: the
# profiler must not start before that on a busy machine.
ray.get([fast.step.remote(), slow.step.remote()])
print("started", flush=True)
while True:
    ray.get([fast.step.remote(), slow.step.remote()])
"#;

struct RayCluster {
    dir: tempfile::TempDir,
    address: String,
}

impl Drop for RayCluster {
    fn drop(&mut self) {
        let _ = Command::new(workspace_root().join("tests/cluster/ray.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

/// A real two-node Ray cluster (`tests/cluster/ray.sh`: `ray start --head` and a second
/// `ray start --address`), a job with one actor per node, the one on node_b slower, and
/// `system-profile profile "ray"` (Ray named alone is the cluster once its actors span two
/// nodes): the actors are found through Ray's state API, a
/// node part is pinned to each node (shipped in the job's runtime environment), the skew put on
/// node_b's clock is measured, and node_b's actor is named the straggler.
#[test]
fn a_ray_cluster_on_two_nodes_names_its_straggler_actor_and_the_skewed_clock() {
    let venv = workspace_root().join(".venv/bin");
    if !require(
        "Ray (pip install 'ray[default]') in the project's .venv",
        venv.join("ray").is_file() && venv.join("py-spy").is_file(),
    ) {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("rt")
        .tempdir_in("/tmp")
        .unwrap();
    let port = free_port_pair();
    let out = Command::new(workspace_root().join("tests/cluster/ray.sh"))
        .arg("start")
        .arg(dir.path())
        .arg(port.to_string())
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster = RayCluster {
        address: format!("127.0.0.1:{port}"),
        dir,
    };
    let nodes = Command::new(venv.join("ray"))
        .args(["list", "nodes", "--format", "json"])
        .env("RAY_ADDRESS", &cluster.address)
        .output()
        .unwrap();
    let nodes: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap();
    let worker_node = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["is_head_node"] == false)
        .unwrap();
    let worker_name = format!("node-{}", &worker_node["node_id"].as_str().unwrap()[..8]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("job.py"), RAY_JOB).unwrap();
    let mut job = Command::new(venv.join("python"))
        .arg("job.py")
        .current_dir(work.path())
        .env("RAY_ADDRESS", &cluster.address)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(job.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "started");
    let out = Command::new(BIN)
        .arg("profile")
        .arg("--root")
        .arg(work.path())
        .args(["--budget", "300", "ray"])
        .current_dir(work.path())
        .env("RAY_ADDRESS", &cluster.address)
        .env("PATH", path_with_venv())
        .env(
            "SYSTEM_PROFILE_CLOCK_SKEW_NS",
            format!("{worker_name}=1500000000"),
        )
        .output()
        .unwrap();
    let _ = job.kill();
    let _ = job.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(work.path(), &stdout);
    let across = &report["across_nodes"][0]["profile"];
    assert_eq!(across["engine"], "ray", "{across:#}");
    let nodes = across["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{across:#}");
    let worker = nodes
        .iter()
        .find(|n| n["node"] == worker_name.as_str())
        .unwrap();
    let head = nodes
        .iter()
        .find(|n| n["node"] != worker_name.as_str())
        .unwrap();
    assert!(
        (worker["clock_offset_s"].as_f64().unwrap() - 1.5).abs() < 0.1,
        "{across:#}"
    );
    assert!(
        head["clock_offset_s"].as_f64().unwrap().abs() < 0.1,
        "{across:#}"
    );
    // One actor on each node, found through Ray's state API.
    let label = |n: &serde_json::Value| n["ranks"][0]["label"].as_str().unwrap().to_string();
    assert!(label(worker).starts_with("Worker ") && label(head).starts_with("Worker "));
    let slow_rank = worker["ranks"][0]["rank"].clone();
    assert_eq!(
        across["stragglers"],
        serde_json::json!([slow_rank]),
        "{across:#}"
    );
    let titles: Vec<&str> = report["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["title"].as_str())
        .collect();
    assert!(
        titles.iter().any(|t| t.contains(&format!(
            "on node {worker_name} is the straggler of the Ray cluster"
        ))),
        "{titles:?}"
    );
}
