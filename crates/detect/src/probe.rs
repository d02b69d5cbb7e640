//! Probing programs (PATH, version, a real permission check where one is cheap) and turning
//! every probe's answer into one `ToolStatus` per catalog entry.

use crate::catalog::{catalog, Locate, ToolSpec};
use crate::gpu::GpuProbe;
use crate::python::PythonProbe;
use crate::version::extract_version;
use futures::future::join_all;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use system_profile_exec::{run, which, CommandSpec, ExitKind, RunOptions};
use system_profile_model::detect::{Permissions, ToolStatus};

#[derive(Debug, Clone)]
pub struct ProgramResult {
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// The program was found but its version query failed (and how).
    pub error: Option<String>,
    pub probe_ms: f64,
}

/// `perf stat` on `true`: does it run, and which counters are `<not supported>`.
#[derive(Debug, Clone)]
pub struct PerfCheck {
    pub runs: bool,
    pub error: Option<String>,
    pub unsupported: Vec<String>,
    pub probe_ms: f64,
}

pub struct HostProbe {
    pub programs: HashMap<&'static str, ProgramResult>,
    pub perf: Option<PerfCheck>,
    /// `strace -f true` ran: ptrace of a child works here (seccomp, container caps).
    pub strace_runs: Option<Result<(), String>>,
    pub diagnostics: Vec<String>,
    /// What timed out twice.
    pub timed_out: Vec<String>,
}

/// Find a program on PATH, then beside the target's interpreter (a venv's bin/).
fn locate(program: &str, python_dir: Option<&PathBuf>) -> Option<PathBuf> {
    which(program).or_else(|| {
        let candidate = python_dir?.join(program);
        which(candidate.to_str()?)
    })
}

fn first_line(o: &system_profile_exec::Outcome) -> String {
    let out = o.stdout.text();
    let err = o.stderr.text();
    out.lines()
        .chain(err.lines())
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

async fn probe_program(
    program: &'static str,
    args: &'static [&'static str],
    python_dir: Option<PathBuf>,
    timeout: Duration,
) -> (&'static str, ProgramResult) {
    let t0 = Instant::now();
    let Some(path) = locate(program, python_dir.as_ref()) else {
        return (
            program,
            ProgramResult {
                path: None,
                version: None,
                error: None,
                probe_ms: t0.elapsed().as_secs_f64() * 1e3,
            },
        );
    };
    let mut argv = vec![path.as_os_str().to_owned()];
    argv.extend(args.iter().map(Into::into));
    let (outcome, _) = crate::run_patiently(&CommandSpec::new(argv), timeout).await;
    let (version, error) = match &outcome {
        Ok(o) if o.exit == ExitKind::TimedOut => (
            None,
            Some(crate::not_known_yet(
                &format!("`{program} {}`", args.join(" ")),
                timeout,
            )),
        ),
        Ok(o) => {
            let banner = format!("{}\n{}", o.stdout.text(), o.stderr.text());
            let version = extract_version(&banner);
            // Some tools print their version and exit non-zero (ltrace -V on old builds); a
            // failure without a version is an error worth reporting.
            let error = (version.is_none() && !o.exit.success())
                .then(|| format!("`{program} {}` failed: {}", args.join(" "), first_line(o)));
            (version, error)
        }
        Err(e) => (None, Some(e.to_string())),
    };
    (
        program,
        ProgramResult {
            path: Some(path),
            version,
            error,
            probe_ms: t0.elapsed().as_secs_f64() * 1e3,
        },
    )
}

/// Run `perf stat -x, -e cycles,instructions,task-clock -- true` and read which counters are
/// `<not supported>` or `<not counted>` (CSV field 1 of each counter line on stderr).
async fn check_perf(perf: PathBuf, timeout: Duration) -> PerfCheck {
    let t0 = Instant::now();
    let spec = CommandSpec::new([
        perf.as_os_str().to_owned(),
        "stat".into(),
        "-x,".into(),
        "-e".into(),
        "cycles,instructions,task-clock".into(),
        "--".into(),
        "true".into(),
    ]);
    let outcome = run(&spec, &RunOptions::with_timeout(timeout)).await;
    let probe_ms = t0.elapsed().as_secs_f64() * 1e3;
    match outcome {
        Ok(o) if o.exit.success() => {
            let unsupported = o
                .stderr
                .text()
                .lines()
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split(',').collect();
                    let value = fields.first()?;
                    (value.starts_with("<not")).then(|| fields.get(2).unwrap_or(&"?").to_string())
                })
                .collect();
            PerfCheck {
                runs: true,
                error: None,
                unsupported,
                probe_ms,
            }
        }
        Ok(o) => PerfCheck {
            runs: false,
            error: Some(first_line(&o)),
            unsupported: Vec::new(),
            probe_ms,
        },
        Err(e) => PerfCheck {
            runs: false,
            error: Some(e.to_string()),
            unsupported: Vec::new(),
            probe_ms,
        },
    }
}

async fn check_strace(strace: PathBuf, timeout: Duration) -> Result<(), String> {
    let spec = CommandSpec::new([
        strace.as_os_str().to_owned(),
        "-f".into(),
        "-qq".into(),
        "-e".into(),
        "trace=none".into(),
        "-o".into(),
        "/dev/null".into(),
        "--".into(),
        "true".into(),
    ]);
    match run(&spec, &RunOptions::with_timeout(timeout)).await {
        Ok(o) if o.exit.success() => Ok(()),
        Ok(o) => Err(first_line(&o)),
        Err(e) => Err(e.to_string()),
    }
}

/// Probe every program of the catalog once (nvidia-smi serves four entries), in parallel.
pub async fn probe_host_tools(python: &str, timeout: Duration) -> HostProbe {
    let python_dir = which(python).and_then(|p| p.parent().map(PathBuf::from));
    let mut programs: Vec<(&'static str, &'static [&'static str])> = Vec::new();
    for spec in catalog() {
        if let Locate::Program {
            program,
            version_args,
        } = spec.locate
        {
            if !programs.iter().any(|(p, _)| *p == program) {
                programs.push((program, version_args));
            }
        }
    }
    let versions = join_all(
        programs
            .iter()
            .map(|(p, a)| probe_program(p, a, python_dir.clone(), timeout)),
    );
    let perf = async {
        match which("perf") {
            Some(p) => Some(check_perf(p, timeout).await),
            None => None,
        }
    };
    let strace = async {
        match which("strace") {
            Some(p) => Some(check_strace(p, timeout).await),
            None => None,
        }
    };
    let (versions, perf, strace_runs) = tokio::join!(versions, perf, strace);
    let diagnostics = versions
        .iter()
        .filter_map(|(_, r)| r.error.clone())
        .collect();
    let timed_out = versions
        .iter()
        .filter(|(_, r)| {
            r.error
                .as_deref()
                .is_some_and(|e| e.starts_with("not known yet"))
        })
        .map(|(p, _)| format!("the {p} probe"))
        .collect();
    HostProbe {
        programs: versions.into_iter().collect(),
        perf,
        strace_runs,
        diagnostics,
        timed_out,
    }
}

fn base(spec: &ToolSpec) -> ToolStatus {
    ToolStatus {
        id: spec.id.to_string(),
        name: spec.name.to_string(),
        category: spec.category,
        kind: spec.kind(),
        available: false,
        usable: false,
        path: None,
        version: None,
        reason: None,
        install_hint: None,
        notes: Vec::new(),
        probe_ms: 0.0,
    }
}

fn unusable(t: &mut ToolStatus, reason: impl Into<String>, hint: impl Into<String>) {
    t.usable = false;
    t.reason = Some(reason.into());
    t.install_hint = Some(hint.into());
}

/// One status per catalog entry, with usability decided from the probes.
pub fn assemble(
    host: &HostProbe,
    python: &PythonProbe,
    perms: &Permissions,
    gpu: &GpuProbe,
) -> Vec<ToolStatus> {
    let has_gpu = !gpu.env.gpus.is_empty() || gpu.nvidia_smi_works;
    let privileged = perms.is_root
        || perms
            .capabilities
            .iter()
            .any(|c| c == "CAP_PERFMON" || c == "CAP_SYS_ADMIN");
    catalog()
        .iter()
        .map(|spec| {
            let mut t = base(spec);
            match spec.locate {
                Locate::Program { program, .. } => {
                    let r = &host.programs[program];
                    t.probe_ms = r.probe_ms;
                    match &r.path {
                        None => {
                            t.reason = Some(format!("`{program}` is not on PATH"));
                            t.install_hint = Some(spec.install_hint.to_string());
                        }
                        Some(path) => {
                            t.available = true;
                            t.usable = true;
                            t.path = Some(path.display().to_string());
                            t.version = r.version.clone();
                            if let Some(e) = &r.error {
                                t.notes.push(e.clone());
                            }
                            program_usability(&mut t, host, perms, gpu, has_gpu, privileged);
                        }
                    }
                }
                Locate::PythonModule { module, .. } => {
                    t.probe_ms = python.modules_ms;
                    match python.modules.get(module) {
                        _ if !python.env.available => {
                            t.reason = python.env.reason.clone();
                            t.install_hint = Some(spec.install_hint.to_string());
                        }
                        Some(m) if m.ok => {
                            t.available = true;
                            t.usable = true;
                            t.version = m.version.clone().or_else(|| python.env.version.clone());
                            t.path = m.path.clone();
                        }
                        Some(m) => {
                            t.reason = Some(format!(
                                "`import {module}` failed in {}: {}",
                                python
                                    .env
                                    .executable
                                    .as_deref()
                                    .unwrap_or(&python.env.requested),
                                m.error.as_deref().unwrap_or("unknown error")
                            ));
                            t.install_hint = Some(format!(
                                "{} (with the target's interpreter: {} -m pip install ...)",
                                spec.install_hint,
                                python
                                    .env
                                    .executable
                                    .as_deref()
                                    .unwrap_or(&python.env.requested)
                            ));
                        }
                        None => {
                            t.reason = Some("not probed".into());
                        }
                    }
                }
                Locate::Derived => derived(&mut t, spec, python, gpu),
            }
            t
        })
        .collect()
}

fn program_usability(
    t: &mut ToolStatus,
    host: &HostProbe,
    perms: &Permissions,
    gpu: &GpuProbe,
    has_gpu: bool,
    privileged: bool,
) {
    match t.id.as_str() {
        "perf" => {
            if let Some(p) = perms.perf_event_paranoid {
                if p > 2 && !privileged {
                    unusable(
                        t,
                        format!("perf_event_paranoid is {p}: unprivileged users may not open perf events"),
                        "sudo sysctl kernel.perf_event_paranoid=1 (or run as root / grant CAP_PERFMON)",
                    );
                    return;
                }
                if p >= 2 && !privileged {
                    t.notes.push(format!(
                        "perf_event_paranoid is {p}: user-space events of your own processes only (no kernel samples)"
                    ));
                }
            }
            if let Some(check) = &host.perf {
                t.probe_ms = t.probe_ms.max(check.probe_ms);
            }
            match &host.perf {
                Some(check) if !check.runs => unusable(
                    t,
                    format!(
                        "`perf stat` does not run here: {}",
                        check.error.as_deref().unwrap_or("unknown error")
                    ),
                    "install the perf matching the running kernel: apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)",
                ),
                Some(check) if !check.unsupported.is_empty() => t.notes.push(format!(
                    "hardware counters not supported ({}): software counters only, IPC and cycles omitted (typical in VMs without a virtual PMU)",
                    check.unsupported.join(", ")
                )),
                Some(_) => t.notes.push("hardware counters available (cycles, instructions)".into()),
                None => {}
            }
        }
        "py_spy" => {
            if let Some(3) = perms.ptrace_scope {
                unusable(
                    t,
                    "ptrace_scope is 3: no process may be traced until reboot",
                    "reboot with kernel.yama.ptrace_scope below 3",
                );
                return;
            }
            t.notes
                .push("recording a command it launches works under ptrace_scope 0-2".into());
            match &perms.attach_advice {
                None => t
                    .notes
                    .push("attaching to a running PID (--pid) is permitted".into()),
                Some(advice) => t
                    .notes
                    .push(format!("attaching to a running PID is refused: {advice}")),
            }
        }
        "strace" | "ltrace" => {
            if let Some(Err(e)) = &host.strace_runs {
                unusable(
                    t,
                    format!("ptrace of a child is refused here: {e}"),
                    "in a container, add the SYS_PTRACE capability (docker run --cap-add SYS_PTRACE) or relax its seccomp profile",
                );
                return;
            }
            if t.id == "strace" && host.strace_runs.is_some() {
                t.notes
                    .push("checked: `strace -f true` traced a child".into());
            }
            if let Some(advice) = &perms.attach_advice {
                t.notes
                    .push(format!("attaching with -p is refused: {advice}"));
            }
        }
        "bpftrace" => {
            let caps = &perms.capabilities;
            let ok = perms.is_root
                || (caps.iter().any(|c| c == "CAP_BPF") && caps.iter().any(|c| c == "CAP_PERFMON"));
            if !ok {
                unusable(
                    t,
                    "bpftrace needs root (or CAP_BPF and CAP_PERFMON)",
                    "run it with sudo",
                );
                return;
            }
            let tracefs = [
                "/sys/kernel/tracing/available_events",
                "/sys/kernel/debug/tracing/available_events",
            ]
            .iter()
            .any(|p| std::path::Path::new(p).exists());
            if !tracefs {
                t.notes.push("tracefs is not mounted: kprobes and tracepoints are unavailable; uprobes and profile:hz may still work".into());
            }
        }
        "iostat" if !std::path::Path::new("/proc/diskstats").exists() => {
            unusable(t, "/proc/diskstats is not readable", "mount /proc");
        }
        "nvidia_smi" | "nvidia_smi_dmon" | "nvidia_smi_topo" | "nvidia_smi_nvlink" => {
            if !gpu.nvidia_smi_works {
                unusable(
                    t,
                    format!(
                        "nvidia-smi is installed but no driver or GPU answers: {}",
                        gpu.nvidia_smi_error.as_deref().unwrap_or("no GPU")
                    ),
                    "load the NVIDIA driver (nvidia-smi must list a GPU); in a container run with --gpus all",
                );
            } else if t.id == "nvidia_smi_nvlink"
                && gpu
                    .env
                    .gpus
                    .iter()
                    .all(|g| g.nvlinks.iter().all(|l| !l.active))
                && !gpu.env.gpus.is_empty()
            {
                t.notes
                    .push("no active NVLink on any GPU: nvlink counters will be empty".into());
            }
        }
        "nvitop" | "ncu" | "dcgmi" if !has_gpu => {
            unusable(
                t,
                "no NVIDIA GPU is visible",
                "run on a machine with an NVIDIA GPU and driver",
            );
        }
        "nsys" if !has_gpu => {
            t.notes.push(
                "no NVIDIA GPU visible: only CPU-side traces (osrt, nvtx) can be collected".into(),
            );
        }
        _ => {}
    }
}

fn derived(t: &mut ToolStatus, spec: &ToolSpec, python: &PythonProbe, gpu: &GpuProbe) {
    match spec.id {
        "nvml" => {
            t.available = gpu.env.nvml_available;
            t.usable = gpu.env.nvml_available && !gpu.env.gpus.is_empty();
            t.version = gpu.env.driver_version.clone();
            if !t.usable {
                t.reason = gpu.env.reason.clone();
                t.install_hint = Some(spec.install_hint.to_string());
            }
        }
        "torch_profiler" | "nccl" => {
            t.probe_ms = python.torch_ms;
            let Some(torch) = &python.env.torch else {
                t.reason = Some(
                    python
                        .env
                        .torch_reason
                        .clone()
                        .or_else(|| python.env.reason.clone())
                        .unwrap_or_else(|| "torch is not importable".into()),
                );
                t.install_hint = Some(spec.install_hint.to_string());
                return;
            };
            if spec.id == "torch_profiler" {
                t.available = true;
                t.usable = true;
                t.version = Some(torch.version.clone());
                if !torch.cuda_available {
                    t.notes
                        .push("CUDA is not available to torch: CPU activities only".into());
                }
            } else {
                t.available = torch.nccl_version.is_some();
                t.version = torch.nccl_version.clone();
                t.usable = t.available && torch.cuda_available && torch.distributed_available;
                if !t.available {
                    t.reason = Some(format!(
                        "torch {} carries no NCCL (a CPU build)",
                        torch.version
                    ));
                    t.install_hint = Some(spec.install_hint.to_string());
                } else if !t.usable {
                    t.reason = Some("NCCL is present but CUDA is not available".into());
                    t.install_hint = Some(
                        "run on a machine with NVIDIA GPUs; use the gloo backend on CPU".into(),
                    );
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_program_entry_has_a_probe_slot() {
        // assemble indexes host.programs by program name: each program of the catalog must be
        // probed exactly once.
        let mut programs: Vec<_> = super::catalog()
            .iter()
            .filter_map(|t| match t.locate {
                super::Locate::Program { program, .. } => Some(program),
                _ => None,
            })
            .collect();
        programs.sort();
        programs.dedup();
        assert!(programs.contains(&"nvidia-smi"));
    }
}
