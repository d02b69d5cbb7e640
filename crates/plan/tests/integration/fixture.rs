//! What the tests identify and plan for: files in a temporary directory and process trees
//! started once for the whole binary. Every process watches its parent and exits when it goes,
//! so nothing outlives the test binary.

use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use system_profile_detect::{detect, DetectOptions};
use system_profile_model::detect::{DetectReport, GpuInfo, TorchInfo};
use system_profile_plan::identify::{identify, IdentifyOptions};
use system_profile_plan::Recipes;

/// Waits for its stdin to close: the test binary holds the other end, so the process ends
/// when the binary does, whatever its parent is.
pub const WATCH_STDIN: &str = "import sys\nsys.stdin.read()\n";

/// Starts argv (with its own argv[0]) as a grandchild and prints its PID: the fixture's
/// processes must not be descendants of the test binary, which identification leaves out as
/// its own tree.
const LAUNCH: &str = "import subprocess, sys\np = subprocess.Popen(sys.argv[2:], executable=sys.argv[1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nprint(p.pid)\n";

const TRAIN_PY: &str = r#"import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model):
        self.model = model

    def step(self, batch):
        x = batch.to("cuda", non_blocking=True)
        loss = self.model(x).sum()
        loss.backward()
        return loss


def main():
    trainer = Trainer(torch.nn.Linear(4, 4))
    for batch in DataLoader(range(8)):
        trainer.step(batch)


if __name__ == "__main__":
    main()
"#;

const DDP_PY: &str = r#"import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def setup():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


def train(model):
    ddp = DistributedDataParallel(model.cuda())
    for _ in range(10):
        loss = ddp(torch.randn(8, 4).cuda()).sum()
        loss.backward()
        dist.all_reduce(loss)


if __name__ == "__main__":
    setup()
    train(torch.nn.Linear(4, 4))
"#;

const APP_PY: &str = r#"import asyncio


def load(path):
    with open(path) as f:
        return f.read()


class Trainer:
    def step(self, x):
        total = 0
        for i in range(x):
            total += i
        return total

    class Inner:
        def helper(self):
            return 1


async def fetch(url):
    await asyncio.sleep(0)
    return url


def compute():
    return Trainer().step(10)


if __name__ == "__main__":
    compute()
"#;

const AGENTS_PY: &str = r#"from autogen_agentchat.agents import AssistantAgent


async def main():
    agent = AssistantAgent("helper")
    await agent.run(task="hello")
"#;

const FAKE_VLLM_SERVER: &str = r#"# Stand-in for vLLM's OpenAI server: the same process tree and titles, no model.
import subprocess, sys
WATCH = "import sys\nsys.stdin.read()\n"
titles = ["VLLM::EngineCore", "VLLM::Worker_TP0", "VLLM::Worker_TP1"]
kids = [subprocess.Popen([t, "-c", WATCH], executable=sys.executable) for t in titles]
sys.stdin.read()
for k in kids:
    k.kill()
"#;

const SERVICE_PY: &str = r#"# A pre-fork service: a master and its workers, titled like gunicorn's.
import subprocess, sys
WATCH = "import sys\nsys.stdin.read()\n"
# argv[0] is the service's name, so sys.executable is unknown: the interpreter is argv[3].
name, workers, python = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kids = [subprocess.Popen([f"{name}: worker {i}", "-c", WATCH], executable=python) for i in range(workers)]
sys.stdin.read()
for k in kids:
    k.kill()
"#;

pub struct Fixture {
    pub dir: PathBuf,
    pub python: String,
    /// A plain Python process (`python -c <sleep>`).
    pub python_pid: u32,
    /// A service: a master and two workers.
    pub service: String,
    pub service_master: u32,
    /// Two independent processes of one name.
    pub dup: String,
    pub dup_pids: Vec<u32>,
    /// The fake vLLM API server (its children are found through /proc).
    pub vllm_api_pid: u32,
    /// A Python process listening on `listener_port` (127.0.0.1).
    pub listener_pid: u32,
    pub listener_port: u16,
    /// Held until the binary exits; closing them ends the processes.
    _pipes: Vec<ChildStdin>,
    _tmp: tempfile::TempDir,
}

/// The real interpreter behind `python3` (pyenv's shim is a shell script).
pub fn real_python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn children_of(pid: u32) -> Vec<u32> {
    system_profile_sample::proc::list_processes()
        .into_iter()
        .filter(|p| p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

fn wait_for_children(pid: u32, n: usize) {
    let start = Instant::now();
    while children_of(pid).len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "pid {pid} did not start {n} children"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start `argv` (run by `python`, shown as `argv[0]`) detached from this binary: its parent
/// is a launcher that exits at once. Returns its PID and the pipe whose closing ends it.
pub fn start_detached(
    python: &str,
    argv: &[&str],
    env: &[(&str, &Path)],
    cwd: &Path,
) -> (u32, ChildStdin) {
    let mut cmd = Command::new(python);
    cmd.args(["-c", LAUNCH, python])
        .args(argv)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut launcher = cmd.spawn().expect("launcher starts");
    let stdin = launcher.stdin.take().unwrap();
    let out = launcher.wait_with_output().expect("launcher ends");
    let pid = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("launcher prints the PID");
    (pid, stdin)
}

/// The files and processes, started once for the binary.
pub fn fixture() -> &'static Fixture {
    static FX: OnceLock<Fixture> = OnceLock::new();
    FX.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let python = real_python();
        write(&dir, "train.py", TRAIN_PY);
        write(&dir, "ddp_train.py", DDP_PY);
        write(&dir, "app.py", APP_PY);
        write(&dir, "agents.py", AGENTS_PY);
        write(&dir, "学習.py", "print('学習')\n");
        write(&dir, "data.csv", "a,b\n1,2\n");
        write(&dir, "run.sh", "#!/bin/sh\necho run\n");
        make_executable(&dir.join("run.sh"));
        write(&dir, "tool", &format!("#!{python}\nprint('tool')\n"));
        make_executable(&dir.join("tool"));
        write(&dir, "pkgdir/__main__.py", "print('pkg')\n");
        write(&dir, "scripts/a.py", "print('a')\n");
        write(&dir, "scripts/b.py", "print('b')\n");
        write(&dir, "mypkg/__init__.py", "");
        write(
            &dir,
            "mypkg/cli.py",
            "def main():\n    return 0\n\n\nif __name__ == \"__main__\":\n    main()\n",
        );
        write(&dir, "svc.py", SERVICE_PY);
        write(&dir, "fakevllm/vllm/__init__.py", "");
        write(&dir, "fakevllm/vllm/entrypoints/__init__.py", "");
        write(&dir, "fakevllm/vllm/entrypoints/openai/__init__.py", "");
        write(
            &dir,
            "fakevllm/vllm/entrypoints/openai/api_server.py",
            FAKE_VLLM_SERVER,
        );

        // The fake vLLM of a test process that just ended may still be shutting down: one
        // instance at a time, or "vllm serving" becomes a question.
        let started = Instant::now();
        while system_profile_sample::proc::list_processes().iter().any(|p| {
            p.cmdline.iter().any(|a| a == "vllm.entrypoints.openai.api_server")
        }) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "another fake vLLM is still running"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let me = std::process::id();
        let service = format!("spfsvc{me}");
        let dup = format!("spfdup{me}");
        let mut pipes = Vec::new();
        let (python_pid, pipe) = start_detached(&python, &[&python, "-c", WATCH_STDIN], &[], &dir);
        pipes.push(pipe);
        let svc = dir.join("svc.py");
        let svc = svc.to_str().unwrap();
        let (service_master, pipe) =
            start_detached(&python, &[&service, svc, &service, "2", &python], &[], &dir);
        pipes.push(pipe);
        let mut dup_pids = Vec::new();
        for _ in 0..2 {
            let (pid, pipe) = start_detached(&python, &[&dup, svc, &dup, "0", &python], &[], &dir);
            dup_pids.push(pid);
            pipes.push(pipe);
        }
        // A server on a port chosen by the kernel, written where the test can read it.
        let listen = format!(
            "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nopen({:?}, 'w').write(str(s.getsockname()[1]))\nsys.stdin.read()\n",
            dir.join("port.txt")
        );
        let (listener_pid, pipe) = start_detached(&python, &[&python, "-c", &listen], &[], &dir);
        pipes.push(pipe);
        let fake = dir.join("fakevllm");
        let (vllm_api_pid, pipe) = start_detached(
            &python,
            &[
                &python,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "facebook/opt-125m",
                "--tensor-parallel-size",
                "2",
                "--port",
                "8123",
            ],
            &[("PYTHONPATH", &fake)],
            &dir,
        );
        pipes.push(pipe);
        wait_for_children(service_master, 2);
        let started = Instant::now();
        let listener_port = loop {
            if let Some(p) = std::fs::read_to_string(dir.join("port.txt"))
                .ok()
                .and_then(|t| t.trim().parse::<u16>().ok())
            {
                break p;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "the listener did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        wait_for_children(vllm_api_pid, 3);
        Fixture {
            dir,
            python,
            python_pid,
            service,
            service_master,
            dup,
            dup_pids,
            vllm_api_pid,
            listener_pid,
            listener_port,
            _pipes: pipes,
            _tmp: tmp,
        }
    })
}

pub fn options(fx: &Fixture) -> IdentifyOptions {
    IdentifyOptions {
        cwd: fx.dir.clone(),
        python: None,
        default_python: fx.python.clone(),
        helper_timeout: Duration::from_secs(20),
    }
}

pub async fn identify_here(arguments: &str) -> system_profile_model::target::Target {
    let fx = fixture();
    identify(arguments, &options(fx), Recipes::builtin()).await
}

/// This machine's real detection, for the fixture's interpreter.
pub async fn real_detect() -> DetectReport {
    detect(&DetectOptions {
        python: fixture().python.clone(),
        ..Default::default()
    })
    .await
}

/// What detect_tools reports on an 8-GPU NVLink machine. No GPU can be detected here, so this
/// is the real report of this machine with the GPU parts replaced: the topology is parsed from
/// the real DGX `nvidia-smi topo -m` fixture, the GPU tools and torch with CUDA and NCCL are
/// marked usable as they are on such a machine.
pub fn gpu_machine(real: &DetectReport) -> DetectReport {
    let mut d = real.clone();
    let topo_text =
        include_str!("../../../parse/tests/data/nvidia_smi_topo/dgx-8gpu-nv18-13nic-mlx5.txt");
    let topo = system_profile_parse::nvidia_smi_topo::parse(topo_text).value;
    d.hardware.gpu.nvml_available = true;
    d.hardware.gpu.reason = None;
    d.hardware.gpu.gpus = (0..8)
        .map(|i| GpuInfo {
            index: i,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: format!("GPU-fixture-{i}"),
            pci_bus_id: None,
            memory_total_bytes: 80 * 1024 * 1024 * 1024,
            pcie_gen_current: Some(5),
            pcie_gen_max: Some(5),
            pcie_width_current: Some(16),
            pcie_width_max: Some(16),
            compute_capability: Some("9.0".into()),
            nvlinks: Vec::new(),
        })
        .collect();
    d.hardware.gpu.topology = Some(topo);
    for t in &mut d.tools {
        if matches!(
            t.id.as_str(),
            "nvml"
                | "nvidia_smi"
                | "nvidia_smi_dmon"
                | "nvidia_smi_topo"
                | "nvidia_smi_nvlink"
                | "nccl"
                | "torch_profiler"
                | "nsys"
                | "py_spy"
                | "memray"
        ) {
            t.available = true;
            t.usable = true;
            t.reason = None;
        }
    }
    d.python.torch = Some(TorchInfo {
        version: "2.8.0+cu128".into(),
        cuda_available: true,
        cuda_version: Some("12.8".into()),
        device_count: 8,
        nccl_version: Some("2.27.3".into()),
        distributed_available: true,
    });
    d.python.torch_reason = None;
    d.permissions.can_attach_to_pid = true;
    d
}
