//! Distributed targets: a launcher on the command line (torchrun, `python -m
//! torch.distributed.run`), a framework named by words only in a folder with DDP scripts, and
//! two torchrun agents running here as the two nodes of one job.

use crate::fixture::{options, real_python};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use system_profile_model::run::{Method, RunTarget};
use system_profile_model::target::{Focus, Target, TargetKind};
use system_profile_plan::identify::identify;
use system_profile_plan::planner::{plan, PlanOptions};
use system_profile_plan::Recipes;

/// A DDP script that starts its process group and waits: a rank that stays up while the
/// test looks at it, and ends when the agents are stopped (or after ten minutes).
const DDP_WAITS: &str = r#"import os, threading, time
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
threading.Timer(600, os._exit, [0]).start()
dist.init_process_group("gloo")
open(os.path.join(os.environ["READY_DIR"], "rank%s" % os.environ["RANK"]), "w").close()
while True:
    time.sleep(1)
"#;

fn folder() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("ddp")).unwrap();
    std::fs::write(dir.join("ddp/example.py"), DDP_WAITS).unwrap();
    std::fs::write(dir.join("plot.py"), "import json\nprint(json.dumps({}))\n").unwrap();
    (tmp, dir)
}

async fn identify_in(dir: &Path, arguments: &str) -> Target {
    let mut o = options(crate::fixture::fixture());
    o.cwd = dir.to_path_buf();
    identify(arguments, &o, Recipes::builtin()).await
}

fn torch_here(python: &str) -> bool {
    Command::new(python)
        .args(["-c", "import torch.distributed"])
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_framework_named_by_words_points_to_the_scripts_that_start_a_process_group() {
    let (_tmp, dir) = folder();
    let t = identify_in(&dir, "torch ddp interconnect").await;
    assert!(t.needs_clarification, "{t:#?}");
    let q = t.questions.join(" ");
    assert!(q.contains("`ddp/example.py`"), "{q}");
    assert!(
        !q.contains("plot.py"),
        "a script without torch.distributed is not offered: {q}"
    );
    assert!(
        q.contains("`torchrun --nproc_per_node 2 ddp/example.py`"),
        "{q}"
    );

    // The form it proposes is understood as it stands.
    let t = identify_in(
        &dir,
        "torchrun --nproc_per_node 2 ddp/example.py interconnect",
    )
    .await;
    assert!(!t.needs_clarification, "{:?}", t.questions);
    assert_eq!(t.kind, TargetKind::PythonScript);
    let l = t.launcher.as_ref().expect("a launcher");
    assert_eq!((l.program.as_str(), l.world_size), ("torchrun", Some(2)));
    assert_eq!(
        t.framework.as_ref().map(|f| f.recipe.as_str()),
        Some("torch_ddp")
    );
    let command = t.command.clone().unwrap();
    assert!(command[0].ends_with("torchrun"), "{command:?}");
    assert!(
        command.ends_with(&[
            "--nproc_per_node".to_string(),
            "2".into(),
            dir.join("ddp/example.py").to_string_lossy().into_owned()
        ]) || command.contains(&"ddp/example.py".to_string()),
        "{command:?}"
    );
}

#[tokio::test]
async fn python_dash_m_torch_distributed_run_is_the_same_launcher() {
    let (_tmp, dir) = folder();
    let python = real_python();
    let t = identify_in(
        &dir,
        &format!("{python} -m torch.distributed.run --nproc_per_node 2 ddp/example.py"),
    )
    .await;
    assert!(!t.needs_clarification, "{:?}", t.questions);
    assert_eq!(t.kind, TargetKind::PythonScript, "{t:#?}");
    let l = t.launcher.as_ref().expect("a launcher");
    assert_eq!(l.program, "torch.distributed.run");
    assert_eq!(l.world_size, Some(2));
    assert_eq!(
        t.framework.as_ref().map(|f| f.recipe.as_str()),
        Some("torch_ddp")
    );
    assert_eq!(
        t.command.as_ref().unwrap()[..3],
        [
            python,
            "-m".to_string(),
            "torch.distributed.run".to_string()
        ]
    );
}

/// Two agents of one job (`--nnodes 2`, node ranks 0 and 1, one rank each) meeting at a
/// rendezvous on this machine: both found, each rank with its node.
#[tokio::test]
async fn two_torchrun_agents_here_are_the_two_nodes_of_one_job() {
    let python = real_python();
    if !torch_here(&python) {
        return;
    }
    let torchrun = Path::new(&python).with_file_name("torchrun");
    let (_tmp, dir) = folder();
    let ready = dir.join("ready");
    std::fs::create_dir_all(&ready).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Started through a short-lived Python parent so that they are not descendants of this
    // test binary (identification leaves its own tree out), as a user's job would not be.
    const DETACH: &str = "import subprocess, sys\np = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nprint(p.pid)\n";
    let mut agents = Vec::new();
    for node in 0..2 {
        let out = Command::new(&python)
            .args(["-c", DETACH])
            .arg(&torchrun)
            .args([
                "--nnodes",
                "2",
                "--nproc_per_node",
                "1",
                "--node_rank",
                &node.to_string(),
                "--rdzv-backend",
                "static",
                "--rdzv-endpoint",
                &format!("127.0.0.1:{port}"),
                "--max-restarts",
                "0",
                "ddp/example.py",
            ])
            .current_dir(&dir)
            .env("READY_DIR", &ready)
            .stdin(Stdio::null())
            .output()
            .expect("torchrun starts");
        let pid: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the parent prints the agent's PID");
        agents.push(pid);
    }
    /// Stops the agents (torchrun passes the signal on to its ranks), also on a failure.
    struct Stop(Vec<u32>);
    impl Drop for Stop {
        fn drop(&mut self) {
            for pid in &self.0 {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
    let agents = Stop(agents);
    // Both ranks up, however busy the machine: a generous deadline on a condition.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !(ready.join("rank0").exists() && ready.join("rank1").exists()) {
        assert!(
            Instant::now() < deadline,
            "the two ranks did not start within 300 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let t = identify_in(&dir, &format!("pid {} {}", agents.0[0], agents.0[1])).await;
    let l = t
        .launcher
        .as_ref()
        .unwrap_or_else(|| panic!("no launcher: {t:#?}"));
    let mut found = l.agents.clone();
    found.sort_unstable();
    let mut started = agents.0.clone();
    started.sort_unstable();
    assert_eq!(found, started, "{l:#?}");
    let ranks: Vec<(Option<u32>, Option<u32>)> = l
        .ranks
        .iter()
        .map(|r| (r.ids.rank, r.ids.node_rank))
        .collect();
    assert_eq!(ranks, [(Some(0), Some(0)), (Some(1), Some(1))], "{l:#?}");
    assert!(
        t.evidence
            .iter()
            .any(|e| e.contains("one per node here") && e.contains("on nodes 0, 1")),
        "{:?}",
        t.evidence
    );
    // The plan observes both nodes, side by side: each attached step once per agent, the
    // second in the first's window, never node 0 alone.
    let detect = crate::fixture::real_detect().await;
    let p = plan(
        &t,
        &detect,
        Recipes::builtin(),
        &PlanOptions {
            focus: vec![Focus::Cpu],
            time_budget_s: None,
            root: dir.clone(),
            program_exists: |_| true,
            lang: Default::default(),
        },
    );
    let sampled: Vec<(u32, String, Option<String>, bool)> = p
        .steps
        .iter()
        .filter(|s| s.method == Method::ProcfsSampler)
        .map(|s| {
            let RunTarget::Pid { pid } = s.run_profiler.target else {
                panic!("the sampler attaches: {s:#?}")
            };
            (
                pid,
                s.title.clone(),
                s.alongside.clone(),
                s.run_profiler.background,
            )
        })
        .collect();
    assert_eq!(sampled.len(), 2, "one sampler per agent: {sampled:#?}");
    let (first, second) = (&sampled[0], &sampled[1]);
    assert_eq!(
        [first.0, second.0],
        [agents.0[0], agents.0[1]],
        "{sampled:#?}"
    );
    assert!(first.1.contains("node 0: pid"), "{sampled:#?}");
    assert!(second.1.contains("node 1: pid"), "{sampled:#?}");
    let first_id = p
        .steps
        .iter()
        .find(|s| s.title == first.1)
        .map(|s| s.id.clone());
    assert_eq!(
        (second.2.clone(), second.3, first.3),
        (first_id, true, false),
        "node 1 beside node 0: {sampled:#?}"
    );
}
